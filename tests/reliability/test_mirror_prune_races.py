"""Pruning the Iceberg mirror never leaves its newest version naming a deleted file.

Mirror files are named by their content, and a writer remembers the manifests it wrote: a
rollback to a snapshot with deletion vectors brings back a delete manifest that an older
version held. Found by a user: a rollback during a purge left the mirror naming a pruned
``-d0.avro`` (2 of 12 trials), and pyiceberg failed on it until ``--repair``; a long-lived
handle does it without any race, after another handle's maintenance pruned the file. The
protocol is in ``IcebergMirror.prune``: the prune reads the current version again after its
deletions, and a writer checks after publishing the files its new snapshots reference."""

from __future__ import annotations

import datetime as dt
import random
import time
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import appendtable as at
from appendtable import orphans as orphans_module
from appendtable._state import TableState
from appendtable.commit.metadata_cache import clear_metadata_caches
from tests.helpers.integrity import assert_mirror_intact, assert_table_intact
from tests.helpers.maintenance_loops import purging, rolling_back, run_together

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

SCHEMA = pa.schema([("n", pa.int64())])
OPTIONS = {
    "metadata.iceberg.storage": "table-location",
    "metadata.iceberg.max-snapshots": "1",
    "deletion-vectors.enabled": "true",
    "write-only": "true",
}


def _two_deletes(tmp_path: Path) -> tuple[at.Table, at.Table]:
    """Snapshot 1 appends 0-9, 2 deletes 0 (through the returned writer, which remembers
    its delete manifest), 3 deletes 1 (through the second handle): the mirror lists only 3,
    so 2's delete manifest is held by an older mirror version alone."""
    writer = at.create_table(str(tmp_path / "t"), SCHEMA, options=OPTIONS)
    writer.append(pa.table({"n": list(range(10))}, schema=SCHEMA))
    writer.delete([("n", "=", 0)])
    other = at.open_table(writer.uri)
    other.delete([("n", "=", 1)])
    return writer, other


def _agree(table: at.Table) -> None:
    """pyiceberg reads the newest mirror version and finds the table's rows."""
    location = table.iceberg_metadata_location()
    assert location is not None
    theirs = StaticTable.from_metadata(location).scan().to_arrow().column("n").to_pylist()
    assert sorted(theirs) == sorted(table.scan().to_arrow().column("n").to_pylist())


def _delete_manifests(table: at.Table) -> list[str]:
    return sorted(p.name for p in Path(table.uri, "metadata").glob("*-d0.avro"))


def test_a_handle_writes_its_delete_manifest_again_after_another_handle_pruned_it(
    tmp_path: Path,
) -> None:
    """The writer rolls back to 2 after the other handle's orphan removal pruned 2's delete
    manifest; it remembered the manifest and published a version naming it, gone (pyiceberg:
    'No such file'). It now finds the file gone when it checks after publishing, and writes
    the version again with the file."""
    writer, other = _two_deletes(tmp_path)
    before = _delete_manifests(writer)
    other.remove_orphan_files(dry_run=False)
    assert len(_delete_manifests(writer)) == len(before) - 1 == 1  # 2's went
    writer.rollback_to(2)
    assert_mirror_intact(writer._state.storage)
    _agree(writer)
    assert sorted(writer.scan().to_arrow().column("n").to_pylist()) == list(range(1, 10))


def test_a_version_published_while_a_prune_deletes_is_written_again_by_the_prune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prune has read the current version (listing 3) and is about to delete 2's delete
    manifest and its Puffin file when the writer's rollback to 2 publishes a version naming
    them (still there, so the writer's own check passes); then the prune deletes them. The
    prune now reads the current version again after its deletions, and writes the version
    again, the delete manifest and the Puffin file with it."""
    writer, other = _two_deletes(tmp_path)
    storage = other._state.storage
    real_delete = storage.delete
    rolled: list[int] = []

    def roll_back_then_delete(path: str) -> None:
        if not rolled:  # the prune's first deletion: it has read the current version
            rolled.append(writer.rollback_to(2).id)
            assert_mirror_intact(writer._state.storage)  # (its files are still there)
        real_delete(path)

    monkeypatch.setattr(storage, "delete", roll_back_then_delete)
    other.remove_orphan_files(dry_run=False)
    assert rolled == [4]
    clear_metadata_caches()
    assert_mirror_intact(writer._state.storage)
    _agree(at.open_table(writer.uri))


def test_a_writer_that_finds_a_puffin_file_gone_writes_it_again_beside_its_manifest(
    tmp_path: Path,
) -> None:
    """A prune stopped after 2's Puffin file and before its delete manifest (it deletes in
    name order): the writer's rollback to 2 finds the Puffin file gone when it checks, and
    writes the version again. Rebuilding found the delete manifest there and trusted it: the
    Puffin file was never written again, and the writer wrote 20 versions naming it before
    giving up (so did ``--repair``). A rebuild now writes the missing Puffin files of a
    manifest."""
    writer = at.create_table(str(tmp_path / "t"), SCHEMA, options=OPTIONS)
    writer.append(pa.table({"n": list(range(10))}, schema=SCHEMA))
    writer.delete([("n", "=", 0)])
    metadata = Path(writer.uri, "metadata")
    (puffin,) = metadata.glob("*.puffin")  # 2's
    at.open_table(writer.uri).delete([("n", "=", 1)])  # the mirror lists 3 only
    puffin.unlink()  # what the prune got to
    versions = len(list(metadata.glob("v*.metadata.json")))
    writer.rollback_to(2)
    assert puffin.exists()
    assert len(list(metadata.glob("v*.metadata.json"))) == versions + 2  # checked, rebuilt
    assert_mirror_intact(writer._state.storage)
    _agree(writer)
    for lost in metadata.glob("*.puffin"):
        lost.unlink()  # every Puffin file lost, the delete manifests left: --repair mends it
    at.open_table(writer.uri).publish_iceberg(rebuild=True)
    assert_mirror_intact(writer._state.storage)
    _agree(writer)


def test_orphan_removal_deleting_a_file_a_writer_wrote_again_since_its_listing_repairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orphan removal (O) lists the table: snapshot 2's mirror manifest list, held by an
    older mirror version only, is a candidate. Another process (P) prunes the mirror, deleting
    it; O publishes and prunes (nothing of it), reads the newest version's files; a writer (W)
    tags snapshot 2, writing the list again; then O deletes it, by its listing. Every later
    version copied the tag's entry: pyiceberg failed on the tag until --repair (found by a
    review). O now reads the mirror again after deleting its files, as a prune does."""
    options = {**OPTIONS, "deletion-vectors.enabled": "false"}
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=options)
    for n in range(3):
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
    remover, pruner, writer = (at.open_table(table.uri) for _ in range(3))
    real_prune, real_files = TableState.publish_and_prune_mirror, orphans_module._mirror_files

    def pruned_by_another_first(self: TableState) -> list[str]:
        if self is remover._state:
            pruner._state.publish_and_prune_mirror()
        return real_prune(self)

    def then_a_tag(state: TableState) -> set[str]:
        found = real_files(state)
        if state is remover._state:
            writer.create_tag("t", 2)
        return found

    monkeypatch.setattr(TableState, "publish_and_prune_mirror", pruned_by_another_first)
    monkeypatch.setattr(orphans_module, "_mirror_files", then_a_tag)
    removed = remover.remove_orphan_files(older_than=2**62, dry_run=False).files
    assert [p for p in removed if "/snap-2-" in p], removed  # it did delete the list
    monkeypatch.undo()
    clear_metadata_caches()
    assert_mirror_intact(table._state.storage)
    writer.append(pa.table({"n": [9]}, schema=SCHEMA))
    assert_mirror_intact(table._state.storage)
    location = at.open_table(table.uri).iceberg_metadata_location()
    assert location is not None
    tagged = StaticTable.from_metadata(location).scan(snapshot_id=2).to_arrow()
    assert sorted(tagged.column("n").to_pylist()) == [0, 1]


def test_a_mirror_publish_checks_no_puffin_file_its_parent_listed(tmp_path: Path) -> None:
    """The check after publishing looked at every Puffin file of every data file with a
    vector, at every append: a request per such file per commit on object stores (found by a
    review: 34 existence checks per append with 20 such files, 94 with 80)."""
    counts: list[int] = []
    for files in (5, 40):
        table = at.create_table(str(tmp_path / f"t{files}"), SCHEMA, options=OPTIONS)
        for n in range(files):
            table.append(pa.table({"n": [2 * n, 2 * n + 1]}, schema=SCHEMA))
        table.delete([("n", "in", [2 * n for n in range(files)])])  # a vector on each file
        table.append(pa.table({"n": [-1]}, schema=SCHEMA))  # (the parent's state is known)
        storage = table._state.storage
        real_exists = storage.exists
        calls: list[str] = []

        def counting(path: str, real: Any = real_exists, seen: list[str] = calls) -> bool:
            seen.append(path)
            return bool(real(path))

        storage.exists = counting  # type: ignore[method-assign]
        table.append(pa.table({"n": [-2]}, schema=SCHEMA))
        storage.exists = real_exists  # type: ignore[method-assign]
        assert not [c for c in calls if c.endswith(".puffin")], calls
        counts.append(len(calls))
    assert counts[0] == counts[1]  # whatever the number of files with vectors


def test_a_mirror_publish_during_which_snapshots_expire_lists_what_is_retained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish reading the retained snapshots while another process expires some of them
    raised SnapshotExpiredError (found in a stress run: orphan removal, whose first step is a
    publish, failed). It now starts again from what is retained."""
    options = {**OPTIONS, "metadata.iceberg.max-snapshots": "100"}
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=options)
    for n in range(5):
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
    fresh = at.open_table(table.uri)
    real_get = fresh._state.snapshots.get
    expired: list[list[int]] = []

    def expire_then_get(snapshot_id: int) -> Any:
        if snapshot_id < 5 and not expired:
            other = at.open_table(table.uri)
            expired.append(
                other.expire_snapshots(retain_min=2, older_than_ms=2**62).expired_snapshots
            )
        return real_get(snapshot_id)

    monkeypatch.setattr(fresh._state.snapshots, "get", expire_then_get)
    location = fresh.publish_iceberg(rebuild=True)
    assert expired == [[1, 2, 3]]
    assert location is not None
    assert [s.snapshot_id for s in StaticTable.from_metadata(location).metadata.snapshots] == [4, 5]


def test_orphan_removal_reading_a_mirror_version_pruned_meanwhile_reads_the_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orphan removal found the newest mirror version, which another process's expiration
    pruned before it was read: 'file not found' (found in a stress run)."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=OPTIONS)
    for n in range(3):
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
    remover = at.open_table(table.uri)
    mirror = remover._state.mirror
    real_current = mirror.current_version
    calls: list[int | None] = []

    def current_then_pruned() -> int | None:
        version = real_current()
        calls.append(version)
        if len(calls) == 2:  # the read of the files the newest version uses
            other = at.open_table(table.uri)
            other.append(pa.table({"n": [9]}, schema=SCHEMA))
            other.expire_snapshots(retain_min=1, older_than_ms=2**62)  # prunes that version
        return version

    monkeypatch.setattr(mirror, "current_version", current_then_pruned)
    found = remover.remove_orphan_files(older_than=2**62, dry_run=True)
    assert len(calls) >= 3 and calls[2] is not None and calls[1] is not None
    assert calls[2] > calls[1]  # read again, newer
    assert f"metadata/v{calls[2]}.metadata.json" not in found.files  # the newest: in use


def _deleter(uri: str, seconds: float) -> None:
    """Appends ten rows, deletes one of them, and so on: a delete manifest per snapshot."""
    table = at.open_table(uri)
    rng = random.Random(7)
    stop = time.time() + seconds
    n = 100
    while time.time() < stop:
        table.append(pa.table({"n": list(range(n, n + 10))}, schema=SCHEMA))
        table.delete([("n", "=", n + rng.randrange(10))])
        n += 10


@pytest.mark.slow
def test_processes_deleting_rolling_back_and_purging_keep_the_mirror_whole(
    tmp_path: Path,
) -> None:
    """The user's reproduction: rollbacks and purges beside a writer that appends and
    deletes, for 6 s; then the newest mirror version names only files that exist, and
    pyiceberg reads the table's rows from it."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options=OPTIONS)
    table.append(pa.table({"n": list(range(100))}, schema=SCHEMA))
    run_together(
        uri,
        6.0,
        _deleter,
        partial(rolling_back, position=-2, pause=0.02),
        # (not in-flight files: a purge with no age limit while writers run deletes theirs)
        partial(purging, older_than=dt.timedelta(minutes=5)),
    )
    clear_metadata_caches()
    fresh = at.open_table(uri)
    latest = fresh.latest_snapshot()
    assert latest is not None and latest.id > 10, latest  # the three ran
    assert_table_intact(uri)
    _agree(fresh)
