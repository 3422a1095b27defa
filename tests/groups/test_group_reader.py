"""Consumer groups in one process: sharing, rebalancing on join and leave, leases running out,
fencing, exactly-once commits per bucket, file slots of unbucketed tables, iteration."""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import appendtable as at
from appendtable.commit.groups import GroupStore
from appendtable.storage import LocalStorage
from tests.groups.chaos import rows_by_slot
from tests.groups.ledger import Ledger, MemberLog, expected_rows, position

SCHEMA = pa.schema([("key", pa.int64()), ("seq", pa.int64())])
#: the lease of tests that let one run out (they sleep past it); the others keep a lease no slow
#: host runs out between two steps
SHORT_LEASE = "300 ms"


def _table(tmp_path: Path, buckets: int = 4, lease: str = "10 min", **options: object) -> at.Table:
    return at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={
            "bucket": buckets,
            "bucket-key": "key",
            "consumer.group.lease-time": lease,
            **options,
        },
    )


def _rows(start: int, count: int, rng: random.Random | None = None) -> pa.Table:
    rng = rng or random.Random(start)
    keys = [rng.randrange(-(2**62), 2**62) for _ in range(count)]
    return pa.table({"key": keys, "seq": list(range(start, start + count))}, schema=SCHEMA)


def _seqs(reader: at.GroupReader, unit: at.StreamUnit) -> list[int]:
    return [s for batch in reader.read(unit) for s in batch.column("seq").to_pylist()]


def _drain(reader: at.GroupReader) -> list[int]:
    seqs = []
    while (unit := reader.poll()) is not None:
        seqs.extend(_seqs(reader, unit))
    return seqs


def _buckets_of(seqs: list[int], table: at.Table) -> set[int]:
    data = table.scan().to_arrow()
    by_seq = dict(zip(data["seq"].to_pylist(), data["key"].to_pylist(), strict=True))
    keys = pa.array([by_seq[s] for s in seqs], pa.int64())
    return set(at.bucket_ids([keys], table.bucket).tolist())


def test_members_split_the_buckets_and_read_each_row_once(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 200))
    a = table.stream(group="g", member="a")
    b = table.stream(group="g", member="b")
    assert a.generation == 1 and a.assignment == {0, 1, 2, 3}  # until it polls again
    a.heartbeat()
    assert a.generation == b.generation == 2
    assert a.members == b.members == {"a": (0, 1), "b": (2, 3)}
    assert a.assignment == {0, 1} and b.assignment == {2, 3}
    got_a, got_b = _drain(a), _drain(b)
    assert sorted(got_a + got_b) == list(range(200))
    assert _buckets_of(got_a, table) <= {0, 1} and _buckets_of(got_b, table) <= {2, 3}
    a.commit()
    b.commit()
    table.append(_rows(200, 100))
    assert sorted(_drain(a) + _drain(b)) == list(range(200, 300))
    assert table.consumer_groups()["g"].members == {"a": (0, 1), "b": (2, 3)}


def test_a_join_moves_buckets_and_fences_their_uncommitted_progress(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 100))
    a = table.stream(group="g", member="a")
    assert a.assignment == {0, 1, 2, 3}
    unit = a.poll()
    assert unit is not None and set(unit.group_units) == {0, 1, 2, 3}
    first = _seqs(a, unit)
    b = table.stream(group="g", member="b")  # claims 2 and 3 at once
    assert b.assignment == {2, 3}
    with pytest.raises(at.ConsumerFencedError) as caught:
        a.commit()  # 0 and 1 land, 2 and 3 are refused
    assert caught.value.fenced == (2, 3) and caught.value.committed == (0, 1)
    assert caught.value.group == "g" and caught.value.member == "a"
    assert "bucket" in str(caught.value) and "'g'" in str(caught.value)
    assert a.poll() is None  # follows generation 2: reads 0 and 1 only now
    assert a.assignment == {0, 1}
    # b re-delivers what a read of 2 and 3: every row delivered at least once
    again = _drain(b)
    b.commit()
    assert set(again) == {s for s in first if s in set(again)}
    assert sorted(set(first) | set(again)) == list(range(100))
    assert _buckets_of(again, table) == {2, 3}
    positions = {u: position(p) for u, p in {**a.committed, **b.committed}.items()}
    assert positions == dict.fromkeys(range(4), (2, False))


def test_a_member_that_stops_renewing_loses_its_buckets(tmp_path: Path) -> None:
    table = _table(tmp_path, lease=SHORT_LEASE)
    table.append(_rows(0, 100))
    a = table.stream(group="g", member="a")
    b = table.stream(group="g", member="b")
    unit = a.poll()  # a reads, then hangs without renewing
    held_by_a = a.assignment
    assert unit is not None
    _seqs(a, unit)
    deadline = time.monotonic() + 0.3 + 0.2
    while b.assignment != {0, 1, 2, 3}:
        b.poll()
        assert time.monotonic() < deadline + 2, "the expired member's buckets were not taken"
        time.sleep(0.02)
    assert b.generation == 3 and set(b.members) == {"b"}
    # a wakes up: its progress is refused, and it rejoins the group
    with pytest.raises(at.ConsumerFencedError) as caught:
        a.commit()
    assert set(caught.value.fenced) == held_by_a
    a.poll()
    assert set(a.members) == {"a", "b"} and a.generation == 4
    assert len(a.assignment) == 2


def test_a_member_left_hands_over_at_once_and_a_name_is_taken_over(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 50))
    a = table.stream(group="g", member="a")
    b = table.stream(group="g", member="b")
    b.close()
    b.close()  # idempotent
    with pytest.raises(at.InvalidArgumentError, match="closed"):
        b.poll()
    assert sorted(_drain(a)) == list(range(50))
    assert a.assignment == {0, 1, 2, 3}
    a.commit()
    # a second process with the same member name takes over at once (no lease to wait for)
    a2 = table.stream(group="g", member="a")
    assert a2.assignment == {0, 1, 2, 3}
    with pytest.raises(at.ConsumerFencedError, match="taken over"):
        a.poll()
    table.append(_rows(50, 10))
    assert sorted(_drain(a2)) == list(range(50, 60))


def test_exactly_once_commits_under_churn(tmp_path: Path) -> None:
    """Members join, leave, stall past their lease and come back, while a writer appends and
    compacts; after every member drained, each bucket's commits tile its rows exactly once,
    in write order."""
    rng = random.Random(7)
    # a short lease: leases also run out between steps, whenever the host is slow
    table = _table(
        tmp_path,
        buckets=6,
        lease="80 ms",
        **{"compaction.min.file-num": 3},
    )
    ledger = Ledger(buckets=6)
    readers: dict[str, tuple[at.GroupReader, MemberLog]] = {}
    written = 0
    names = [f"m{i}" for i in range(5)]

    def join(name: str) -> None:
        readers[name] = (table.stream(group="g", member=name), MemberLog(name))

    join("m0")
    start = position(next(iter(readers["m0"][0].committed.values())))
    for _ in range(160):
        action = rng.random()
        if action < 0.25:
            table.append(_rows(written, rng.randrange(1, 40), rng))
            written = table.scan().count()
        elif action < 0.32 and len(readers) < 4:
            join(rng.choice([n for n in names if n not in readers]))
        elif action < 0.37 and len(readers) > 1:
            name = rng.choice(sorted(readers))
            reader, log = readers.pop(name)
            if rng.random() < 0.5:
                ledger.commit(log, reader)
            reader.close()
        elif action < 0.40:
            time.sleep(0.1)  # everybody's lease runs out; the first to poll removes the rest
        else:
            name = rng.choice(sorted(readers))
            reader, log = readers[name]
            unit = reader.poll()
            if unit is not None:
                ledger.delivered(log, reader, unit)
            if rng.random() < 0.5:
                ledger.commit(log, reader)
    for _ in range(40):  # drain: everyone polls and commits until nothing is left
        for reader, log in readers.values():
            while (unit := reader.poll()) is not None:
                ledger.delivered(log, reader, unit)
            ledger.commit(log, reader)
    data = table.scan().to_arrow()
    assert sorted(data["seq"].to_pylist()) == list(range(written))
    expected = expected_rows(data["key"].to_numpy(), data["seq"].to_numpy(), 6)
    ledger.check(expected, start)
    assert ledger.fences > 0  # rebalances did move buckets with uncommitted progress
    assert len({i.member for chain in ledger.intervals.values() for i in chain}) > 2
    lag = table.consumer_lag(group="g")
    assert lag["rows_behind"].to_pylist() == [0] * 6


def test_unbucketed_tables_share_their_files(tmp_path: Path) -> None:
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={"consumer.group.file-slots": 4, "write-only": True},
    )
    for i in range(12):
        table.append(_rows(i * 10, 10))
    a = table.stream(group="g", member="a")
    b = table.stream(group="g", member="b")
    got_a, got_b = _drain(a), _drain(b)
    a.commit()
    b.commit()
    assert a.members == {"a": (0, 1), "b": (2, 3)}
    by_slot = rows_by_slot(table, 4, {})  # read from the files, slots by CRC-32 of their names
    assert sorted(got_a) == sorted(by_slot[0] + by_slot[1])
    assert sorted(got_b) == sorted(by_slot[2] + by_slot[3])
    assert sorted(got_a + got_b) == list(range(120))
    b.close()
    table.append(_rows(120, 10))
    assert sorted(_drain(a)) == list(range(120, 130))  # b's slots moved to a


def test_iteration_commits_only_units_taken_whole(tmp_path: Path) -> None:
    table = _table(tmp_path, buckets=2)
    table.append(_rows(0, 100))  # one file per bucket: a unit of two batches at least
    table.append(_rows(100, 100))
    reader = table.stream(group="g", member="a", mode="from-snapshot-full", snapshot_id=1)
    batches = reader.batches(timeout=0)
    first = next(batches)  # part of the first unit
    assert first.num_rows < 100
    reader.commit()
    assert {position(p) for p in reader.committed.values()} == {(1, True)}
    batches.close()
    reader.close()
    again = table.stream(group="g", member="b")
    seqs = [s for b in again.batches(timeout=0) for s in b.column("seq").to_pylist()]
    assert sorted(seqs) == list(range(200))
    again.commit()
    assert {position(p) for p in again.committed.values()} == {(3, False)}


def test_a_commit_right_after_a_units_last_batch_saves_the_unit(tmp_path: Path) -> None:
    """``for batch in reader: process(batch); reader.commit()``: the commit after the last
    batch of a unit left its buckets before it (they moved when the next batch was asked
    for), and the next member read the unit again."""
    table = _table(tmp_path, buckets=2)
    table.append(_rows(0, 100))
    table.append(_rows(100, 100))
    reader = table.stream(group="g", member="a", mode="from-snapshot-full", snapshot_id=1)
    batches = reader.batches(timeout=0)
    taken = 0
    while taken < 100:  # exactly the first unit: the full read of snapshot 1
        taken += next(batches).num_rows
    assert taken == 100
    reader.commit()
    assert {position(p) for p in reader.committed.values()} == {(2, False)}
    batches.close()
    reader.close()
    again = table.stream(group="g", member="b")
    seqs = [s for b in again.batches(timeout=0) for s in b.column("seq").to_pylist()]
    assert sorted(seqs) == list(range(100, 200))


def test_start_mode_applies_when_the_group_is_created(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 10))
    first = table.stream(group="g", member="a", mode="latest")
    assert first.poll() is None
    table.append(_rows(10, 5))
    assert sorted(_drain(first)) == list(range(10, 15))
    first.close()  # without committing
    later = table.stream(group="g", member="b", mode="from-snapshot-full", snapshot_id=1)
    assert sorted(_drain(later)) == list(range(10, 15))  # the group's start, not this mode


def test_bounded_watermark_ends_each_bucket(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 10), watermark=1000)
    table.append(_rows(10, 10), watermark=5000)
    reader = table.stream(
        group="g", member="a", mode="from-snapshot", snapshot_id=1, bounded_watermark=2000
    )
    with reader:
        assert sorted(s for b in reader for s in b.column("seq").to_pylist()) == list(range(10))
        assert reader.finished
    assert reader.finished  # still after leaving: a script can tell an ended stream after it
    unbounded = table.stream(group="h", member="a", mode="from-snapshot", snapshot_id=1)
    unbounded.close()
    assert not unbounded.finished


def test_arguments_that_do_not_go_with_a_group(tmp_path: Path) -> None:
    table = _table(tmp_path)
    for kwargs in ({"consumer_id": "c"}, {"buckets": [0]}, {"position": at.StreamPosition(1)}):
        with pytest.raises(at.InvalidArgumentError, match="cannot be combined with group"):
            table.stream(group="g", **kwargs)  # type: ignore[call-overload]
    with pytest.raises(at.InvalidArgumentError, match="member= needs group="):
        table.stream(member="m")  # type: ignore[call-overload]
    with pytest.raises(at.InvalidOptionError, match=r"invalid consumer group name '\.\./g'"):
        table.stream(group="../g")
    with pytest.raises(at.InvalidOptionError, match="invalid member name 'a/b'"):
        table.stream(group="g", member="a/b")
    with pytest.raises(at.InvalidOptionError, match="invalid member name 5"):
        table.stream(group="g", member=5)  # type: ignore[call-overload]
    with pytest.raises(at.InvalidOptionError, match="invalid consumer group name 3"):
        table.consumer_lag(group=3)  # type: ignore[arg-type]
    for stalled in ("1s", -5, float("nan")):
        with pytest.raises(at.InvalidArgumentError, match="stalled_after"):
            table.consumer_lag(stalled_after=stalled)  # type: ignore[arg-type]
    member = table.stream(group="g", member="m")
    with pytest.raises(at.InvalidArgumentError, match="expected a StreamUnit"):
        list(member.read(None))  # type: ignore[arg-type]
    member.close()
    with pytest.raises(at.InvalidArgumentError, match="delete_consumer_group"):
        table.delete_consumer("g")
    table.delete_consumer_group("g")
    assert "g" not in table.consumer_groups()
    with pytest.raises(at.InvalidArgumentError, match="lease-time"):
        table.stream(group="g", options={"consumer.group.lease-time": "0 ms"})
    with pytest.raises(at.InvalidArgumentError, match="watermark-alignment"):
        table.stream(
            group="g",
            options={
                "scan.watermark.alignment.group": "w",
                "scan.watermark.alignment.max-drift": "1 s",
            },
        )
    with pytest.raises(at.InvalidOptionError, match=r"consumer\.group\.file-slots"):
        at.create_table(str(tmp_path / "u"), SCHEMA, options={"consumer.group.file-slots": 0})
    assert not table.consumer_groups()  # nothing was created by the refused calls


def test_groups_and_their_files_are_listed_and_deleted(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows(0, 10))
    with table.stream(group="g1", member="a") as reader:
        _drain(reader)
        reader.commit()
    table.stream(group="g2", member="a").close()
    assert sorted(table.consumer_groups()) == ["g1", "g2"]
    assert table.consumer_groups()["g1"].members == {}
    assert table.consumer_groups()["g1"].reason == "leave a"
    table.delete_consumer_group("g1")
    assert sorted(table.consumer_groups()) == ["g2"]
    assert table.consumers() == {}  # plain consumers are not confused with groups
    orphans = table.remove_orphan_files(older_than=0, dry_run=True)
    assert not [f for f in orphans.files if f.startswith("consumer/")]


def test_the_oracle_buckets_agree_with_the_files(tmp_path: Path) -> None:
    """The ledger's bucket of a row (``bucket_ids``) is the bucket the table wrote it to."""
    table = _table(tmp_path)
    table.append(_rows(0, 400))
    data = table.scan().to_arrow()
    expected = expected_rows(data["key"].to_numpy(), data["seq"].to_numpy(), 4)
    for split in table.scan().plan():
        rows = pa.Table.from_batches(list(table.read(split)))["seq"].to_pylist()
        assert set(rows) <= set(expected[split.bucket])
    assert sorted(s for v in expected.values() for s in v) == list(range(400))
    assert all(np.all(np.diff(v) > 0) for v in expected.values())


def test_a_member_paused_mid_poll_past_its_lease_drops_what_expired_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member stopped inside ``poll`` (after following the group, before planning) wakes up
    after another member took its buckets over, read on, committed, and expiration removed the
    snapshots the stopped one was about to plan: it drops those buckets instead of failing."""
    table = _table(tmp_path, buckets=2, lease=SHORT_LEASE)
    table.append(_rows(0, 20))
    a = table.stream(group="g", member="a", mode="from-snapshot-full", snapshot_id=1)
    first = a.poll()
    assert first is not None
    delivered_a = _seqs(a, first)
    a.commit()  # a is at snapshot 2 for both buckets
    for i in range(1, 6):
        table.append(_rows(i * 20, 20))
    plan = a._reader.next_unit
    others: list[int] = []

    def paused(*args: object, **kwargs: object) -> object:
        if not others:  # the pause: b takes over, reads on, commits; snapshots expire
            time.sleep(0.4)
            b = table.stream(group="g", member="b")
            others.extend(_drain(b))
            b.commit()
            expired = table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)
            assert expired.expired_snapshots
        return plan(*args, **kwargs)

    monkeypatch.setattr(a._reader, "next_unit", paused)
    again = a.poll()  # before: SnapshotExpiredError / ObjectNotFoundError
    later = _drain(a) if again is None else [*_seqs(a, again), *_drain(a)]
    assert sorted(delivered_a + others) == list(range(120))
    assert later == []  # nothing new: b read everything a had not committed
    assert not a.positions or all(p.next_snapshot == 7 for p in a.committed.values())


def test_a_member_paused_between_poll_and_read_is_told_its_buckets_were_taken(
    tmp_path: Path,
) -> None:
    """A member that planned a unit and then stalled past its lease, while another member took
    its buckets over, read on, committed, and compaction plus expiration deleted the unit's
    files: reading the unit says the buckets were taken (ConsumerFencedError naming them), not
    that files are missing; its commit is refused and nothing was delivered twice."""
    table = _table(tmp_path, buckets=2, lease=SHORT_LEASE)
    for i in range(3):
        table.append(_rows(i * 20, 20))
    a = table.stream(group="g", member="a", mode="from-snapshot", snapshot_id=1)
    unit = a.poll()
    assert unit is not None and set(unit.group_units) == {0, 1}
    time.sleep(0.4)  # a's lease runs out
    b = table.stream(group="g", member="b")
    taken = _drain(b)
    b.commit()
    assert sorted(taken) == list(range(60))
    table.compact(full=True)
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)
    with pytest.raises(at.ConsumerFencedError) as caught:
        _seqs(a, unit)
    assert set(caught.value.fenced) == {0, 1}
    assert "another member claimed" in str(caught.value)
    assert a.commit() is None  # nothing of a's is pending any more
    assert sorted(_drain(a) + _drain(b)) == []


@pytest.mark.parametrize("b_commits", [True, False])
def test_a_bucket_lost_and_claimed_again_voids_what_was_read_before(
    tmp_path: Path, b_commits: bool
) -> None:
    """a reads a bucket and stalls past its lease; b takes it over (and commits, or not) and
    leaves, so the bucket comes back to a. What a read before the stall was not committed by
    a: its next commit reports the bucket fenced (its rows since its last commit will be
    delivered again) instead of committing over b's work, so that a consumer committing its
    output with the group's commit never writes a row twice."""
    table = _table(tmp_path, buckets=1, lease=SHORT_LEASE)
    table.append(_rows(0, 2))
    a = table.stream(group="g", member="a")
    first = a.poll()
    assert first is not None
    read_by_a = _seqs(a, first)  # not committed
    time.sleep(0.4)  # a's lease runs out
    b = table.stream(group="g", member="b")
    committed: list[int] = []
    read_by_b = _drain(b)
    if b_commits:
        b.commit()
        committed += read_by_b
    b.close()  # the bucket goes back to a
    table.append(_rows(2, 1))
    # a's transaction: every row it read since its last commit, committed with the group
    while (unit := a.poll()) is not None:
        read_by_a += _seqs(a, unit)
    with pytest.raises(at.ConsumerFencedError) as caught:
        a.commit()
    assert caught.value.fenced == (0,) and caught.value.committed == ()
    # the rows after the last commit are delivered again: a commits them this time
    again = _drain(a)
    a.commit()
    committed += again
    assert sorted(committed) == [0, 1, 2]  # each row committed once, by b or by a
    assert again == ([2] if b_commits else [0, 1, 2])


def test_a_process_whose_name_was_taken_does_not_renew_it(tmp_path: Path) -> None:
    table = _table(tmp_path, lease=SHORT_LEASE)
    table.append(_rows(0, 20))
    old = table.stream(group="g", member="a")
    watcher = table.stream(group="g", member="w")
    table.stream(group="g", member="a")  # takes the name over, then stops (never polled)
    store = GroupStore(LocalStorage(table.uri), "g")
    taken = store.lease("a")
    assert taken is not None
    time.sleep(0.15)  # past a third of the lease: the old process's renewal is due
    with pytest.raises(at.ConsumerFencedError, match="taken over"):
        old.poll()
    # the lease is still the one the new holder wrote: the old process did not renew the
    # name, which would keep it in the group for one more lease after its holder stopped
    assert store.lease("a") == taken
    deadline = time.monotonic() + 0.3 + 2.0
    while "a" in watcher.members:
        assert time.monotonic() < deadline, "the stopped holder of the name was not removed"
        watcher.poll()
        time.sleep(0.02)
    assert watcher.assignment == {0, 1, 2, 3}


def test_a_process_paused_mid_read_past_its_lease_does_not_renew_a_taken_name(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path, lease=SHORT_LEASE)
    table.append(_rows(0, 20))
    old = table.stream(group="g", member="a")
    unit = old.poll()
    assert unit is not None
    table.stream(group="g", member="a")  # takes the name over, then stops (never polled)
    store = GroupStore(LocalStorage(table.uri), "g")
    taken = store.lease("a")
    time.sleep(0.35)  # the old process was paused past the lease before reading on
    assert sorted(_seqs(old, unit)) == list(range(20))  # its files are still there
    assert store.lease("a") == taken
    with pytest.raises(at.ConsumerFencedError, match="taken over"):
        old.poll()
    assert store.lease("a") == taken


@pytest.mark.parametrize("removed_by", ["delete_consumer_group", "consumer.expiration-time"])
@pytest.mark.parametrize("paused", [False, True])
def test_a_member_of_a_removed_group_never_commits_rows_the_new_group_commits(
    tmp_path: Path, removed_by: str, paused: bool
) -> None:
    """Member ``a`` read and committed; its group was removed (deleted, or expired while ``a``
    was idle) and member ``b`` created it again: ``a`` kept reading the old group's buckets
    and committing, and every later row was committed by both (found by a docs-only hunt:
    150 rows delivered 290 times). Now ``a`` sees another incarnation of the group, voids
    what it read of the old one (its next commit is fenced for those buckets) and joins the
    new one: a row committed after the re-creation is committed by exactly one member."""
    table = _table(tmp_path, buckets=2, lease=SHORT_LEASE, **{"consumer.expiration-time": "1 s"})
    table.append(_rows(0, 10))
    a = table.stream(group="g", member="a", poll_interval=0.01)
    _drain(a)
    a.commit()
    for start in (50, 60, 70):
        table.append(_rows(start, 10))
    if removed_by == "delete_consumer_group":
        table.delete_consumer_group("g")
    else:
        time.sleep(1.5)  # a idle past consumer.expiration-time
        table.expire_snapshots(retain_min=3, older_than_ms=2**62)
    assert table.consumer_groups() == {}
    if paused:
        time.sleep(0.4)  # past a third of a's lease: its next poll looks at the group again
    b = table.stream(group="g", member="b", poll_interval=0.01)
    readers = {"a": a, "b": b}
    pending: dict[str, list[int]] = {"a": [], "b": []}
    committed: dict[str, list[int]] = {"a": [], "b": []}
    for round_ in range(1, 9):
        table.append(_rows(100 * round_, 10))
        for name in ("a", "b") if round_ % 2 else ("b", "a"):
            pending[name] += _drain(readers[name])
        for name, reader in readers.items():
            try:
                reader.commit()
            except at.ConsumerFencedError as exc:  # those buckets' rows are delivered again
                kept = set(exc.committed)
                committed[name] += [s for s in pending[name] if _buckets_of([s], table) <= kept]
                pending[name] = []
                continue
            committed[name] += pending[name]
            pending[name] = []
    both = set(committed["a"]) & set(committed["b"])
    assert sorted(s for s in both if s >= 100) == []  # (0..79 restart: a new group)
    later = [s for s in table.scan().to_arrow()["seq"].to_pylist() if s >= 100]
    assert sorted({*committed["a"], *committed["b"]} & set(later)) == sorted(later)
    assert sorted(a.assignment | b.assignment) == [0, 1] and not (a.assignment & b.assignment)
    a.close()
    b.close()


@pytest.mark.parametrize("removed_by", ["delete_consumer_group", "consumer.expiration-time"])
def test_a_running_member_of_a_forgotten_group_starts_it_again_from_its_start_mode(
    tmp_path: Path, removed_by: str
) -> None:
    """queue.md: members still running when their group is forgotten start it again from
    their start mode. A member whose position had expired meanwhile raised
    SnapshotExpiredError (found by a docs-only hunt)."""
    options = {"snapshot.num-retained.min": "1", "consumer.expiration-time": "1 s"}
    table = _table(tmp_path, buckets=2, **options)
    table.append(_rows(0, 10))
    a = table.stream(group="g", member="a", poll_interval=0.01)  # latest-full
    assert sorted(_drain(a)) == list(range(10))
    a.commit()
    table.append(_rows(100, 10))
    table.append(_rows(200, 10))
    if removed_by == "delete_consumer_group":
        table.delete_consumer_group("g")
    else:
        time.sleep(1.5)
    table.expire_snapshots(retain_min=1, older_than_ms=2**62)
    assert [s.id for s in table.snapshots()] == [3]
    got = sorted(_drain(a))  # the latest snapshot in full, again
    assert got == [*range(10), *range(100, 110), *range(200, 210)]
    a.commit()
    assert list(table.consumer_groups()) == ["g"]
    a.close()
