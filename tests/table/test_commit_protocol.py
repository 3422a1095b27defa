"""The commit protocol: two-phase writes, idempotence, races, ambiguity, conflicts, watermarks."""

from __future__ import annotations

import datetime as dt
import pickle
import sys
import threading
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.errors import StorageError
from appendtable.storage import LocalStorage
from appendtable.table import Table
from tests.helpers.data import EVENTS, events


def test_two_phase_write_from_many_writers_is_one_snapshot(uri: str) -> None:
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 2, "bucket-key": "key"}
    )
    payloads: list[bytes] = []

    def work(index: int) -> None:
        with at.open_table(uri).writer() as writer:
            writer.write(events(index * 100, 100))
            payloads.extend(m.to_bytes() for m in writer.prepare_commit())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = [at.CommitMessage.from_bytes(p) for p in payloads]
    messages = [pickle.loads(pickle.dumps(m)) for m in messages]
    snapshot = table.committer("job-1").commit(messages, identifier=0)
    assert snapshot is not None and snapshot.id == 1
    assert snapshot.commit_user == "job-1" and snapshot.identifier == 0
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(300))


def test_commits_are_idempotent_per_user_and_identifier(uri: str) -> None:
    table = at.create_table(uri, EVENTS)

    def commit(user: str, identifier: int, start: int) -> at.Snapshot | None:
        with table.writer() as writer:
            writer.write(events(start, 10))
            messages = writer.prepare_commit()
        result = table.committer(user).commit(messages, identifier=identifier)
        if result is None:
            table.committer(user).abort(messages)
        return result

    assert commit("a", 0, 0) is not None  # identifiers start at 0, like Spark batch ids
    assert commit("a", 0, 100) is None  # replay
    assert commit("a", 1, 10) is not None
    table.append(events(20, 10))  # commits of others (without identifiers) in between
    assert commit("b", 1, 30) is not None
    assert commit("a", 1, 200) is None
    assert commit("a", 0, 300) is None  # older identifiers count as done too
    assert commit("a", 2, 40) is not None
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(50))
    fresh = at.open_table(uri)
    with fresh.writer() as writer:
        writer.write(events(500, 10))
        again = writer.prepare_commit()
    assert fresh.committer("a").commit(again, identifier=2) is None
    fresh.committer("a").abort(again)


def test_the_last_commit_of_a_user_keeps_its_owner_across_expiration(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"snapshot.num-retained.min": 1})
    assert table.last_commit("a") is None
    owners = ["query=q1;base=0", "", "query=q2;base=5"]
    for identifier, owner in enumerate(owners):
        with table.writer() as writer:
            writer.write(events(identifier * 10, 10))
            messages = writer.prepare_commit()
        landed = table.committer("a").commit(messages, identifier=identifier, owner=owner)
        assert landed is not None
        record = table.last_commit("a")
        assert record is not None
        assert (record.identifier, record.owner, record.snapshot_id) == (
            identifier,
            owner,
            landed.id,
        )
    table.append(events(100, 1))  # another writer, without an identifier
    for _ in range(3):
        table.append(events(200, 1))
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)
    assert table.earliest_snapshot().id > 3  # type: ignore[union-attr]
    record = at.open_table(uri).last_commit("a")
    assert record is not None and (record.identifier, record.owner) == (2, owners[2])
    assert at.open_table(uri).last_commit("b") is None
    # an overwrite records its owner too
    with table.writer() as writer:
        writer.write(events(300, 1))
        messages = writer.prepare_commit()
    assert table.committer("a").overwrite(messages, identifier=7, owner="o") is not None
    assert (table.last_commit("a").identifier, table.last_commit("a").owner) == (7, "o")  # type: ignore[union-attr]


def test_empty_commit_does_nothing(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    assert table.committer("u").commit([], identifier=3) is None
    assert table.latest_snapshot() is None


class _RivalStorage(LocalStorage):
    """Local storage on which another writer commits right before our first N publishes."""

    def __init__(self, root: str, rival: Table, rivals: int) -> None:
        super().__init__(root)
        self.rival = rival
        self.rivals = rivals
        self.lost = 0

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if path.startswith("snapshot/snapshot-") and self.rivals > 0:
            self.rivals -= 1
            self.rival.append(events(1000 + self.rivals, 1))
            created = super().put_if_absent(path, data)
            assert not created
            self.lost += 1
            return created
        return super().put_if_absent(path, data)


def _table_on(storage: Any, uri: str) -> Table:
    schema = at.open_table(uri)._state.schema
    return Table(TableState(storage, schema))


def test_lost_races_are_retried_with_backoff(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, EVENTS)
    storage = _RivalStorage(uri, at.open_table(uri), rivals=3)
    table = _table_on(storage, uri)
    snapshot = table.append(events(0, 5))
    assert storage.lost == 3
    assert snapshot is not None and snapshot.id == 4
    fresh = at.open_table(uri)
    assert fresh.scan().count() == 8
    assert [s.id for s in fresh.snapshots()] == [1, 2, 3, 4]
    # nothing of the failed attempts is left behind: every manifest is referenced
    referenced = set()
    for s in fresh.snapshots():
        referenced.update({s.base_manifest_list, s.delta_manifest_list})
        for m in fresh._state.manifests.all_manifests(s):
            referenced.add(m.file_name)
    on_disk = {p.name for p in (tmp_path / "t" / "manifest").iterdir()}
    assert on_disk == referenced


def test_retries_are_bounded(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, EVENTS, options={"commit.max-retries": 2, "commit.min-retry-wait": "1 ms"})
    storage = _RivalStorage(uri, at.open_table(uri), rivals=10)
    table = _table_on(storage, uri)
    with pytest.raises(
        at.CommitConflictError,
        match=r"gave up committing after 3 attempts .*: 3 lost the next snapshot id to other",
    ):
        table.append(events(0, 5))
    assert at.open_table(uri).scan().count() == 3  # only the rivals' rows


class _FlakyPublish(LocalStorage):
    """Publishing raises: either after the file landed (a lost acknowledgement) or before."""

    def __init__(self, root: str, *, land: bool, failures: int, reads_fail: bool = False) -> None:
        super().__init__(root)
        self.land = land
        self.failures = failures
        self.reads_fail = reads_fail

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if path.startswith("snapshot/snapshot-") and self.failures > 0:
            self.failures -= 1
            if self.land:
                super().put_if_absent(path, data)
            raise StorageError("connection reset", path=path, operation="publish")
        return super().put_if_absent(path, data)

    def read(self, path: str) -> bytes:
        if self.reads_fail and path.startswith("snapshot/snapshot-"):
            raise StorageError("timeout", path=path, operation="read")
        return super().read(path)


@pytest.mark.parametrize("land", [True, False])
def test_ambiguous_publish_is_settled_by_reading_back(tmp_path: Any, land: bool) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, EVENTS)
    table = _table_on(_FlakyPublish(uri, land=land, failures=1), uri)
    snapshot = table.append(events(0, 5))
    assert snapshot is not None and snapshot.id == 1
    fresh = at.open_table(uri)
    assert [s.id for s in fresh.snapshots()] == [1]  # landed exactly once
    assert fresh.scan().count() == 5


def test_unsettled_publish_raises_state_unknown_and_keeps_files(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, EVENTS)
    table = _table_on(_FlakyPublish(uri, land=True, failures=1, reads_fail=True), uri)
    with pytest.raises(at.CommitStateUnknownError, match="do not delete its files"):
        table.append(events(0, 5))
    fresh = at.open_table(uri)
    assert fresh.scan().count() == 5  # it had landed, and its data files are intact


def test_overwrite_whole_table_and_partitions(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    table.append(events(0, 300, days=3))
    snapshot = table.overwrite(events(1000, 10, days=1))
    assert snapshot is not None and snapshot.kind == at.CommitKind.OVERWRITE
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(1000, 1010))
    table.append(events(2000, 90, days=3))
    day2 = dt.date(2024, 1, 2)
    replacement = events(3000, 5, days=1).set_column(0, "day", pa.array([day2] * 5, pa.date32()))
    table.overwrite(replacement, partitions=[{"day": day2}])
    rows = table.scan().to_arrow().to_pylist()
    assert sorted(r["seq"] for r in rows if r["day"] == day2) == list(range(3000, 3005))
    others = sorted(r["seq"] for r in rows if r["day"] != day2)
    expected_others = sorted(
        r["seq"] for r in events(2000, 90, days=3).to_pylist() if r["day"] != day2
    ) + list(range(1000, 1010))
    assert others == sorted(expected_others)
    assert table.overwrite(EVENTS.empty_table()) is not None  # truncate
    assert table.scan().count() == 0


def test_overwrite_never_drops_rows_appended_after_it_started(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    table.append(events(0, 100, days=2))
    base = table.latest_snapshot()
    assert base is not None
    with table.writer() as writer:
        writer.write(events(500, 10, days=1))
        messages = writer.prepare_commit()
    at.open_table(uri).append(events(100, 50, days=2))  # lands while the overwrite is pending
    committer = table.committer("overwriter")
    with pytest.raises(at.CommitConflictError, match="after the overwrite started"):
        committer.overwrite(messages, base_snapshot_id=base.id)
    committer.abort(messages)
    assert table.scan().count() == 150  # nothing changed
    # an overwrite restricted to another partition is not affected
    day = dt.date(2024, 1, 9)
    other = events(700, 4, days=1).set_column(0, "day", pa.array([day] * 4, pa.date32()))
    with table.writer() as writer:
        writer.write(other)
        messages = writer.prepare_commit()
    assert committer.overwrite(messages, partitions=[{"day": day}], base_snapshot_id=base.id)
    assert table.scan().count() == 154


def test_a_compaction_of_what_an_overwrite_replaces_does_not_conflict_with_it(uri: str) -> None:
    """An (automatic) compaction landing while an overwrite is pending rewrote only rows the
    overwrite replaces: the overwrite lands and replaces the compaction's output too. If the
    compaction also took rows appended after the overwrite started, those still conflict."""
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i * 10, 10))
    base = table.latest_snapshot()
    assert base is not None
    with table.writer() as writer:
        writer.write(events(500, 5))
        messages = writer.prepare_commit()
    compacted = at.open_table(uri).compact(full=True)  # lands while the overwrite is pending
    assert compacted is not None and compacted.kind == "COMPACT"
    landed = table.committer("overwriter").overwrite(messages, base_snapshot_id=base.id)
    assert landed is not None
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(500, 505))
    assert len(table.files()) == 1  # the compaction's output was replaced, not kept

    base = table.latest_snapshot()
    assert base is not None
    with table.writer() as writer:
        writer.write(events(600, 5))
        messages = writer.prepare_commit()
    other = at.open_table(uri)
    other.append(events(700, 5))  # appended after the overwrite started...
    assert other.compact(full=True) is not None  # ... and compacted with the older rows
    with pytest.raises(at.CommitConflictError, match="after the overwrite started"):
        table.committer("overwriter").overwrite(messages, base_snapshot_id=base.id)
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == [
        *range(500, 505),
        *range(700, 705),
    ]


def test_an_overwrite_without_a_base_is_not_failed_by_a_compaction_landing_as_it_starts(
    uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``base_snapshot_id`` the overwrite replaces what is live when it commits. A
    compaction (the table's own background one, say) landing just after the commit read the
    latest snapshot rewrote only rows the overwrite replaces: the overwrite lands. (It failed
    once: the replaced files were read from a second, newer read of the latest snapshot, so the
    attempt's own view took the compacted files for files appended after it started.)"""
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i * 10, 10))
    with table.writer() as writer:
        writer.write(events(500, 5))
        messages = writer.prepare_commit()
    store = table._state.snapshots
    read_latest = store.latest
    compactions: list[at.Snapshot | None] = []

    def latest_then_a_compaction_lands() -> at.Snapshot | None:
        snapshot = read_latest()
        # once: right after the commit loop's first attempt read the latest snapshot
        if not compactions and sys._getframe(1).f_code.co_name == "commit":
            compactions.append(at.open_table(uri).compact(full=True))
        return snapshot

    monkeypatch.setattr(store, "latest", latest_then_a_compaction_lands)
    landed = table.committer("overwriter").overwrite(messages)
    monkeypatch.undo()
    assert compactions and compactions[0] is not None and compactions[0].kind == "COMPACT"
    assert landed is not None and landed.id == compactions[0].id + 1
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(500, 505))
    assert len(table.files()) == 1  # the compaction's output was replaced too


def test_deleting_a_file_that_is_no_longer_live_conflicts(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 10))
    live = table.scan().plan()[0].files[0]
    removal = at.CommitMessage(
        partition=(), bucket=0, total_buckets=-1, schema_id=0, compact_before=(live,)
    )
    assert table.committer("c").commit([removal]) is not None
    with pytest.raises(at.CommitConflictError, match="no longer live"):
        table.committer("c").commit([removal])


def test_messages_for_another_bucket_layout_are_refused(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    message = at.CommitMessage(partition=(), bucket=0, total_buckets=-1, schema_id=0)
    with pytest.raises(at.CommitConflictError, match="bucket = -1"):
        table.committer("c").commit([message])


def test_watermarks_explicit_derived_and_never_decreasing(uri: str) -> None:
    schema = pa.schema([("event_time", pa.timestamp("ms", tz="UTC")), ("v", pa.int64())])
    table = at.create_table(
        uri, schema, options={"watermark.column": "event_time", "watermark.delay": "5 s"}
    )

    def batch(*millis: int) -> pa.Table:
        return pa.table(
            {"event_time": pa.array(millis, pa.timestamp("ms", tz="UTC")), "v": list(millis)}
        )

    first = table.append(batch(10_000, 30_000, 20_000))
    assert first is not None and first.watermark == 25_000
    second = table.append(batch(12_000))  # older events: the watermark holds
    assert second is not None and second.watermark == 25_000
    third = table.append(batch(1_000), watermark=90_000)  # explicit wins
    assert third is not None and third.watermark == 90_000
    plain = at.create_table(uri + "-plain", EVENTS)
    assert plain.append(events(0, 3)).watermark is None  # type: ignore[union-attr]
    marked = plain.append(events(3, 3), watermark=5)
    assert marked is not None and marked.watermark == 5
    assert plain.append(events(6, 3)).watermark == 5  # type: ignore[union-attr]


def test_non_atomic_backend_refuses_unless_single_writer(tmp_path: Any) -> None:
    uri = f"local://{tmp_path}/t"
    with pytest.raises(at.AtomicCreateUnsupportedError, match=r"commit\.single-writer"):
        at.create_table(uri, EVENTS)
    table = at.create_table(uri, EVENTS, options={"commit.single-writer": True})
    table.append(events(0, 4))
    assert at.open_table(uri).scan().count() == 4
