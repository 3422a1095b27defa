"""Snapshot expiration, orphan-file removal and rollback."""

from __future__ import annotations

import collections
import datetime as dt
import os
import time
from pathlib import Path

import pytest

import appendtable as at
from appendtable.commit import manifests as manifests_module
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.commit.snapshots import SnapshotStore
from appendtable.metadata.models import ManifestEntry, Snapshot
from tests.helpers.clock import age, past_every_file_ms
from tests.helpers.data import EVENTS, events

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

FUTURE = 10**15  # an older-than cut-off after every snapshot


def _data_files(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, _, names in os.walk(root)
        for n in names
        if n.endswith(".parquet")
    }


def test_retention_min_max_time_and_limit(tmp_path: Path) -> None:
    table = at.create_table(
        str(tmp_path / "t"),
        EVENTS,
        options={"write-only": True, "snapshot.expire.limit": 3},
    )
    for i in range(12):
        table.append(events(i, 1))
    assert table.expire_snapshots(retain_min=2, older_than_ms=0).expired_snapshots == []  # young
    result = table.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    assert result.expired_snapshots == [1, 2, 3]  # at most snapshot.expire.limit per run
    assert table.expire_snapshots(retain_min=8, older_than_ms=FUTURE).expired_snapshots == [4]
    assert table.expire_snapshots(
        retain_min=1, retain_max=4, older_than_ms=0
    ).expired_snapshots == [
        5,
        6,
        7,
    ]  # beyond retain_max, age does not matter
    assert [s.id for s in table.snapshots()] == [8, 9, 10, 11, 12]
    assert table.scan().count() == 12  # appends never delete data files
    assert table.scan(snapshot_id=8).count() == 8  # time travel to retained snapshots works
    with pytest.raises(at.SnapshotExpiredError, match="expired"):
        table.scan(snapshot_id=3)


def test_defaults_keep_an_hour_and_ten_snapshots(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS)  # writers expire after commits
    for i in range(15):
        table.append(events(i, 1))
    assert len(table.snapshots()) >= 15  # all younger than snapshot.time-retained (1 h)
    short = at.create_table(str(tmp_path / "s"), EVENTS, options={"snapshot.time-retained": "1 ms"})
    for i in range(15):
        short.append(events(i, 1))
        time.sleep(0.002)
    assert short.wait_for_maintenance(timeout=60)
    assert 10 <= len(short.snapshots()) <= 12  # the newest ten (and the current commit's)
    assert short.scan().count() == 15


def test_data_files_are_deleted_only_when_no_retained_snapshot_needs_them(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(6):
        table.append(events(i * 10, 10))
    originals = _data_files(root)
    table.compact(full=True)  # snapshot 7 replaces the six files with one
    assert _data_files(root) > originals  # the old files stay while snapshots 1..6 exist
    dry = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE, dry_run=True)
    assert dry.dry_run and dry.expired_snapshots == [1, 2, 3, 4, 5, 6]
    assert set(dry.deleted_data_files) == originals
    assert len(table.snapshots()) == 7  # nothing changed
    result = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert set(result.deleted_data_files) == originals
    assert _data_files(root) == set(table.files().column("path").to_pylist())
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(60))
    manifests = set(os.listdir(root / "manifest"))
    referenced = {table.snapshot(7).base_manifest_list, table.snapshot(7).delta_manifest_list}
    assert referenced <= manifests


def test_last_identifier_survives_expiration(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    with table.writer() as writer:
        writer.write(events(0, 5))
        messages = writer.prepare_commit()
    committer = table.committer("spark-query-7")
    assert committer.commit(messages, identifier=41) is not None
    for i in range(20):
        table.append(events(100 + i, 1))
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert table.snapshots()[0].id > 1  # the snapshot that recorded identifier 41 is gone
    with table.writer() as writer:
        writer.write(events(0, 5))
        replay = writer.prepare_commit()
    assert (
        at.open_table(str(tmp_path / "t")).committer("spark-query-7").commit(replay, identifier=41)
        is None
    )
    committer.abort(replay)
    assert table.scan().count() == 25


def test_orphan_files_are_listed_then_removed_and_young_ones_kept(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, partition_by=["day"])
    table.append(events(0, 30))
    writer = table.writer()  # a writer that died before committing
    writer.write(events(100, 30))
    abandoned = writer.prepare_commit()
    (root / "snapshot" / ".snapshot-9.deadbeef.tmp").write_bytes(b"half")
    (root / "manifest" / "manifest-stray").write_bytes(b"x")
    stray = {f.path for m in abandoned for f in m.new_files} | {
        "snapshot/.snapshot-9.deadbeef.tmp",
        "manifest/manifest-stray",
    }
    default = table.remove_orphan_files()  # lists only, and everything is younger than a day
    assert default.files == [] and default.dry_run
    age([root / path for path in stray], seconds=2 * 3600)
    (root / "manifest" / "manifest-young").write_bytes(b"y")  # a commit still in flight
    listed = table.remove_orphan_files(older_than=dt.timedelta(hours=1), dry_run=True)
    assert set(listed.files) == stray and listed.dry_run
    assert all((root / path).exists() for path in stray)
    removed = table.remove_orphan_files(older_than=dt.timedelta(hours=1), dry_run=False)
    assert set(removed.files) == stray and removed.bytes > 0
    assert not any((root / path).exists() for path in stray)
    assert (root / "manifest" / "manifest-young").exists()
    everything = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=True)
    assert everything.files == ["manifest/manifest-young"]
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(30))
    assert (root / "schema" / "schema-0").exists()


def test_rollback_restores_a_snapshot_as_a_new_overwrite(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(4):
        table.append(events(i * 10, 10))
    table.compact(full=True)  # snapshot 5: the files of snapshot 2 are rewritten
    table.append(events(40, 10))  # snapshot 6
    reader = table.stream(mode="latest")
    snapshot = table.rollback_to(2)
    assert snapshot.id == 7 and snapshot.kind == at.CommitKind.OVERWRITE
    assert snapshot.properties["rollback-to"] == "2"
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(20))
    assert reader.poll() is None  # streams skip it
    table.append(events(50, 5))
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(20)) + list(
        range(50, 55)
    )
    # expiring the undone history must not delete the files the rollback restored
    table.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    assert table.snapshots()[0].id == 7
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(20)) + list(
        range(50, 55)
    )
    assert table.scan(snapshot_id=7).count() == 20
    with pytest.raises(at.SnapshotExpiredError):
        table.rollback_to(1)


def test_expiring_appends_reads_each_snapshot_once_and_none_of_their_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expiration cost at scale (benchmarks "million": 10,000 snapshots in one run): each
    expired snapshot is read once (the snapshot cache holds only the newest), and the
    manifests of appends are not read at all: their list entries say they delete nothing.
    Expiring after a compaction still finds the files it removed."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(30):
        table.append(events(i, 1))
    gets: collections.Counter[int] = collections.Counter()
    manifests_read: list[str] = []
    get, read_manifest = SnapshotStore.get, ManifestStore.read_manifest

    def counted_get(self: SnapshotStore, snapshot_id: int) -> Snapshot:
        gets[snapshot_id] += 1
        return get(self, snapshot_id)

    def counted_read(self: ManifestStore, name: str, *, cache: bool = True) -> list[ManifestEntry]:
        manifests_read.append(name)
        return read_manifest(self, name, cache=cache)

    monkeypatch.setattr(SnapshotStore, "get", counted_get)
    monkeypatch.setattr(ManifestStore, "read_manifest", counted_read)
    result = at.open_table(uri).expire_snapshots(retain_min=1, retain_max=5)
    assert result.expired_snapshots == list(range(1, 26))
    assert result.deleted_data_files == []
    assert {gets[i] for i in range(1, 26)} == {1}
    assert manifests_read == []
    before = _data_files(tmp_path / "t")
    table.compact(full=True)
    for i in range(3):
        table.append(events(100 + i, 1))
    latest = table.latest_snapshot()
    assert latest is not None
    result = at.open_table(uri).expire_snapshots(retain_min=1, retain_max=1)
    assert sorted(result.deleted_data_files) == sorted(before)
    assert _data_files(tmp_path / "t") == set(table.files().column("path").to_pylist())


def test_orphan_removal_leaves_the_metadata_caches_as_it_found_them(tmp_path: Path) -> None:
    """Orphan removal reads every manifest list and the delta of every retained snapshot,
    once: none of it is kept in the process-wide caches (benchmarks "million": at a million
    files and 100,000 snapshots they grew to about 1.5 GB). Its answer is unchanged."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(12):
        table.append(events(i, 1))
    stray = tmp_path / "t" / "bucket-0" / f"data-{'e' * 32}-0.parquet"
    stray.write_bytes(b"x")
    age([stray], seconds=2 * 86_400)
    clear_metadata_caches()
    cached = (len(manifests_module._MANIFESTS), len(manifests_module._LISTS))
    result = at.open_table(uri).remove_orphan_files(dry_run=True)
    assert result.files == ["bucket-0/" + stray.name]
    assert (len(manifests_module._MANIFESTS), len(manifests_module._LISTS)) == cached == (0, 0)
