"""What the deletion paths report is what they did: a delete that fails is reported as left
(and the others still go), an expiration that only releases deleted tags reports exactly the
files it freed, in a dry run and for real, and a tag held by a snapshot older than the write
still protects its files from the discard gate."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import appendtable as at
from appendtable.commit.discard import discard_files
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.errors import StorageError
from appendtable.storage.local import LocalStorage
from tests.helpers.data import EVENTS, events
from tests.security.hostile import tree

FUTURE = 10**15

pytestmark = pytest.mark.usefixtures("tables_stay_intact")


class _FailingDeletes(LocalStorage):
    """Local storage on which deleting ``failing`` fails."""

    def __init__(self, root: str, failing: str) -> None:
        super().__init__(root)
        self._failing = failing

    def delete(self, path: str) -> None:
        if path == self._failing:
            raise StorageError("delete refused", path=path, operation="delete")
        super().delete(path)


def test_a_failed_delete_is_reported_left_and_the_others_still_go(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS)
    table.append(events(0, 5))
    with table.writer() as writer:
        for i in range(3):
            writer.write(events(100 + i * 10, 10))
        messages = writer.prepare_commit()
    paths = sorted(f.path for m in messages for f in m.new_files)
    extra = ["bucket-0/data-extra-1.parquet", "bucket-0/data-extra-2.parquet"]
    for path in extra:
        (root / path).write_bytes(b"x")
    wanted = [*paths, *extra]
    storage = _FailingDeletes(str(root), extra[0])
    result = discard_files(
        storage, SnapshotStore(storage), ManifestStore(storage, target_size=1 << 20), wanted
    )
    assert result.left == (extra[0],)
    assert set(result.deleted) == set(wanted) - {extra[0]}
    assert result.referenced == ()
    assert (root / extra[0]).exists()
    assert not any((root / p).exists() for p in wanted if p != extra[0])
    (root / extra[0]).unlink()


def test_the_discard_gate_keeps_files_of_any_tag(tmp_path: Path) -> None:
    """A write whose commit landed, was tagged, and left the log: whatever other tags there
    are (older ones first), the tag keeps its files."""
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i * 10, 10))
        table.create_tag(f"a{i}")
    with table.writer() as writer:
        writer.write(events(500, 10))
        messages = writer.prepare_commit()
    landed = table.committer().commit(messages)
    assert landed is not None
    table.create_tag("z-landed", landed.id)
    for i in range(3):
        table.append(events(600 + i, 1))
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    paths = [f.path for m in messages for f in m.new_files]
    state = table._state
    result = state.discard(paths, since_snapshot_id=landed.id - 1)
    assert set(result.referenced) == set(paths) and result.deleted == ()
    assert all((root / p).exists() for p in paths)


def _release_only_table(root: Path, *, mirror: bool) -> tuple[at.Table, set[str]]:
    options = {
        "write-only": True,
        **({"metadata.iceberg.storage": "table-location"} if mirror else {}),
    }
    table = at.create_table(str(root), EVENTS, options=options)
    for i in range(3):
        table.append(events(i * 10, 10))
    table.create_tag("old", 2)
    held = set(table.files(2).column("path").to_pylist())
    table.compact(full=True)  # 4: the tag alone keeps snapshot 2's files once 1..3 expire
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert [s.id for s in table.snapshots()] == [4]
    table.delete_tag("old")
    table.append(events(100, 1))  # 5: a newer mirror version, which the release prunes
    return table, held


@pytest.mark.parametrize("mirror", [False, True])
def test_an_expiration_that_only_releases_a_tag_reports_exactly_what_it_freed(
    tmp_path: Path, mirror: bool
) -> None:
    root = tmp_path / "t"
    table, held = _release_only_table(root, mirror=mirror)
    before = _mirror_versions(root)
    dry = table.expire_snapshots(retain_min=2, older_than_ms=FUTURE, dry_run=True)
    assert dry.dry_run is True and dry.expired_snapshots == [] and dry.earliest_snapshot == 4
    assert set(dry.deleted_data_files) == held and dry.deleted_metadata_files
    assert all((root / p).exists() for p in held)
    assert _mirror_versions(root) == before  # a dry run publishes and prunes nothing
    assert len(before) > 1 if mirror else before == []
    real = table.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    assert real.dry_run is False and real.earliest_snapshot == 4
    assert real.deleted_data_files == dry.deleted_data_files
    assert real.deleted_metadata_files == dry.deleted_metadata_files
    assert not any((root / p).exists() for p in held)
    assert not any((root / p).exists() for p in real.deleted_metadata_files)
    again = table.expire_snapshots(retain_min=2, older_than_ms=FUTURE, dry_run=True)
    assert again.deleted_data_files == [] and again.earliest_snapshot == 4 and again.dry_run
    if mirror:  # the release republished the mirror and pruned its older versions
        assert len(_mirror_versions(root)) == 1
    assert table.scan().count() == 31


def _mirror_versions(root: Path) -> list[str]:
    if not (root / "metadata").exists():
        return []
    return sorted(n for n in os.listdir(root / "metadata") if n.endswith(".metadata.json"))


def test_an_expiration_with_nothing_to_do_reports_the_earliest(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i, 1))
    for dry_run in (True, False):
        result = table.expire_snapshots(retain_min=5, older_than_ms=FUTURE, dry_run=dry_run)
        assert result.expired_snapshots == [] and result.deleted_data_files == []
        assert result.earliest_snapshot == 1 and result.dry_run is dry_run


def test_the_gate_counts_the_earliest_retained_snapshot_whole(tmp_path: Path) -> None:
    """Without ``since``, a file added by an expired snapshot and still live in the earliest
    retained one is referenced; an unreferenced one goes."""
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    table.append(events(0, 10))
    old = table.files().column("path").to_pylist()
    table.append(events(10, 10))
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert table.earliest_snapshot().id == 2
    (root / "bucket-0" / "data-stray-0.parquet").write_bytes(b"x")
    result = table._state.discard([*old, "bucket-0/data-stray-0.parquet"])
    assert result.referenced == tuple(old) and result.deleted == ("bucket-0/data-stray-0.parquet",)
    assert table.scan().to_arrow().num_rows == 20


class _FailingTree(LocalStorage):
    def delete_tree(self, directory: str) -> None:
        raise StorageError("tree refused", path=directory, operation="delete")


def test_removing_a_staging_area_reports_what_it_did(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from appendtable._state import TableState

    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS)
    table.append(events(0, 5))
    area = table.staging_area()
    with area.writer() as writer:
        writer.write(events(10, 5))
        written = sorted(f.path for m in writer.prepare_commit() for f in m.new_files)
    assert area.remove().deleted == tuple(written) and not (root / area.path).exists()

    area = table.staging_area()
    with area.writer() as writer:
        writer.write(events(20, 5))
        written = sorted(f.path for m in writer.prepare_commit() for f in m.new_files)
    failing = TableState(_FailingTree(str(root)), table._state.schema)
    result = failing.discard_directory(area.path)  # the tree fails: file by file
    assert result.deleted == tuple(written) and result.left == ()
    assert not any((root / p).exists() for p in written)

    area = table.staging_area()
    with area.writer() as writer:
        writer.write(events(30, 5))
        written = sorted(f.path for m in writer.prepare_commit() for f in m.new_files)
    snapshot = root / "snapshot" / "snapshot-1"
    saved = snapshot.read_bytes()
    snapshot.write_bytes(saved[:-3] + b"zzz")  # damaged: nothing can be told
    from appendtable.commit.metadata_cache import clear_metadata_caches

    clear_metadata_caches()
    fresh = at.open_table(str(root))
    with caplog.at_level("WARNING", logger="appendtable"):
        result = fresh._state.discard_directory(area.path, since_snapshot_id=None)
    assert result.left == tuple(written) and result.deleted == ()
    assert all((root / p).exists() for p in written)
    assert f"keeping {len(written)} data file(s) of a failed write" in caplog.text
    assert "checksum mismatch" in caplog.text
    snapshot.write_bytes(saved)
    caplog.clear()

    linked = table.staging_area()
    os.rmdir(root / linked.path)
    os.symlink(tmp_path, root / linked.path)
    with caplog.at_level("WARNING", logger="appendtable"):
        assert linked.remove().deleted == ()
    assert f"could not list {linked.path} to remove it" in caplog.text
    assert "symbolic link" in caplog.text
    os.unlink(root / linked.path)
    area.remove()


def test_discarding_a_landed_write_names_a_kept_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS)
    with table.writer() as writer:
        writer.write(events(0, 5))
        messages = writer.prepare_commit()
    table.committer().commit(messages)
    paths = sorted(f.path for m in messages for f in m.new_files)
    with caplog.at_level("WARNING", logger="appendtable"):
        assert table._state.discard(paths, since_snapshot_id=0).referenced == tuple(paths)
    assert f"keeping {len(paths)} data file(s) of a write given up on" in caplog.text
    assert f"e.g. {paths[0]}" in caplog.text


class _TagWhileExpiring(LocalStorage):
    """Local storage that, when the first snapshot file is deleted, has another handle tag
    snapshot ``tag_at`` (still in the log then): a tag created while expiration runs."""

    def __init__(self, root: str, tag_at: int) -> None:
        super().__init__(root)
        self._tag_at = tag_at

    def delete(self, path: str) -> None:
        if path == "snapshot/snapshot-1" and self._tag_at:
            at.open_table(self.root).create_tag("meanwhile", self._tag_at)
            self._tag_at = 0
        super().delete(path)


def _expiring_table(root: Path) -> at.Table:
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(4):
        table.append(events(i * 10, 10))
    table.compact(full=True)  # 5 replaces every file: expiring 1..4 deletes them
    return table


def test_a_tag_created_while_expiration_runs_keeps_its_files(tmp_path: Path) -> None:
    from appendtable._state import TableState
    from appendtable.table import Table

    root = tmp_path / "t"
    table = _expiring_table(root)
    held = set(table.files(3).column("path").to_pylist())
    everything = set(table.files(4).column("path").to_pylist())
    racing = Table(TableState(_TagWhileExpiring(str(root), 3), table._state.schema))
    result = racing.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert result.expired_snapshots == [1, 2, 3, 4]
    assert set(result.deleted_data_files) == everything - held  # what it really deleted
    assert all((root / p).exists() for p in held)
    assert at.open_table(str(root)).scan(tag="meanwhile").count() == 30


def test_an_expiration_whose_delete_fails_reports_the_rest(tmp_path: Path) -> None:
    from appendtable._state import TableState
    from appendtable.table import Table

    root = tmp_path / "t"
    table = _expiring_table(root)
    everything = sorted(table.files(4).column("path").to_pylist())
    failing = Table(TableState(_FailingDeletes(str(root), everything[0]), table._state.schema))
    result = failing.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert result.deleted_data_files == everything[1:]
    assert (root / everything[0]).exists()
    assert not any((root / p).exists() for p in everything[1:])
    assert all(not (root / p).exists() for p in result.deleted_metadata_files)
    with pytest.raises(at.SnapshotExpiredError):
        failing.snapshot(2)  # forgotten by the handle that expired it
    (root / everything[0]).unlink()  # the orphan it left


def test_release_records_are_removed_once_processed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table, _held = _release_only_table(root, mirror=False)
    assert any(n.startswith("released-") for n in os.listdir(root / "tag"))
    table.expire_snapshots(retain_min=2, older_than_ms=FUTURE, dry_run=True)
    assert any(n.startswith("released-") for n in os.listdir(root / "tag"))
    table.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    assert os.listdir(root / "tag") == []


def test_planning_skips_snapshots_a_crashed_run_already_deleted(tmp_path: Path) -> None:
    from appendtable.commit.expire import plan_expiration

    root = tmp_path / "t"
    table = _expiring_table(root)
    (root / "snapshot" / "snapshot-2").unlink()  # deleted by a run that crashed
    state = at.open_table(str(root))._state
    plan = plan_expiration(state.snapshots, state.manifests, 1, 5)
    assert plan.snapshot_ids == [1, 3, 4] and plan.new_earliest == 5
    assert set(plan.data_files) == set(table.files(4).column("path").to_pylist())


def test_a_pruned_mirror_file_is_written_again_when_needed(tmp_path: Path) -> None:
    """The mirror's prune deletes files only older versions used; a later version that needs
    the same file again (a rollback to the state they described) writes it again, so no
    mirror version ever names a missing file."""
    root = tmp_path / "t"
    table = at.create_table(
        str(root),
        EVENTS,
        options={"write-only": True, "metadata.iceberg.storage": "table-location"},
    )
    for i in range(3):
        table.append(events(i * 10, 10))
    table.create_tag("before", 3)
    table.compact(full=True)
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)  # prunes the older versions
    table.rollback_to(tag="before")
    used = table._state.mirror.referenced()
    assert used is not None
    missing = sorted(p for p in used if not (root / p).exists())
    assert missing == []


def test_a_hostile_current_mirror_version_stops_orphan_removal_naming_it(tmp_path: Path) -> None:
    import json

    root = tmp_path / "t"
    options = {"write-only": True, "metadata.iceberg.storage": "table-location"}
    empty = at.create_table(str(tmp_path / "empty"), EVENTS, options=options)
    assert empty.remove_orphan_files(older_than=FUTURE, dry_run=True).files == []  # no mirror yet
    table = at.create_table(str(root), EVENTS, options=options)
    table.append(events(0, 10))
    location = table.iceberg_metadata_location()
    assert location is not None
    current = Path(location)
    metadata = json.loads(current.read_text())
    metadata["snapshots"][0]["manifest-list"] = str(tmp_path / "elsewhere.avro")
    current.write_text(json.dumps(metadata))
    with pytest.raises(at.CorruptMetadataError) as raised:
        table.remove_orphan_files(older_than=FUTURE, dry_run=True)
    assert raised.value.path == str(current) and current.name in str(raised.value)
    assert "elsewhere.avro" in str(raised.value)
    table.publish_iceberg(rebuild=True)  # repaired
    assert table.remove_orphan_files(older_than=FUTURE, dry_run=True).files


def _mirrored(root: Path) -> tuple[at.Table, dict[str, object]]:
    import json

    table = at.create_table(
        str(root),
        EVENTS,
        options={"write-only": True, "metadata.iceberg.storage": "table-location"},
    )
    for i in range(3):
        table.append(events(i * 10, 10))
    location = table.iceberg_metadata_location()
    assert location is not None
    return table, json.loads(Path(location).read_text())


def test_a_missing_manifest_list_of_the_mirror_keeps_the_rest_of_it(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table, metadata = _mirrored(root)
    lists = [s["manifest-list"] for s in metadata["snapshots"]]  # type: ignore[index]
    used = table._state.mirror.referenced()
    assert used is not None
    Path(lists[0]).unlink()  # damaged: the first snapshot's list is gone
    listed = table.remove_orphan_files(older_than=FUTURE, dry_run=True)
    assert not set(listed.files) & used
    table.publish_iceberg(rebuild=True)  # repaired (the end-of-test check reads the mirror)


def test_a_damaged_mirror_manifest_list_is_named(tmp_path: Path) -> None:
    from appendtable.metadata.avro import read_container, write_container
    from appendtable.planning.iceberg_metadata import MANIFEST_LIST_SCHEMA

    root = tmp_path / "t"
    table, metadata = _mirrored(root)
    target = Path(metadata["snapshots"][-1]["manifest-list"])  # type: ignore[index]
    header, records = read_container(target.read_bytes(), str(target))
    outside = dict(records[0], manifest_path=str(tmp_path / "elsewhere.avro"))
    meta = {k: v.decode() for k, v in header.items() if not k.startswith("avro.")}
    target.write_bytes(write_container(MANIFEST_LIST_SCHEMA, [outside], metadata=meta))
    with pytest.raises(at.CorruptMetadataError) as raised:
        table.remove_orphan_files(older_than=FUTURE, dry_run=True)
    assert raised.value.path == str(target) and "elsewhere.avro" in str(raised.value)
    target.write_bytes(b"not avro")
    with pytest.raises(at.CorruptMetadataError) as raised:
        table.remove_orphan_files(older_than=FUTURE, dry_run=True)
    assert raised.value.path == str(target)
    table.publish_iceberg(rebuild=True)  # repaired


class _OrderedListing(LocalStorage):
    """Local storage whose listings come sorted, ascending or descending: the order in which
    expiration meets the release records is then chosen by the test."""

    def __init__(self, root: str, *, descending: bool) -> None:
        super().__init__(root)
        self._descending = descending

    def listnames(self, directory: str) -> list[str]:
        return sorted(super().listnames(directory), reverse=self._descending)


@pytest.mark.parametrize("descending", [False, True])
def test_every_release_record_is_processed_whatever_their_order(
    tmp_path: Path, descending: bool
) -> None:
    """Three deleted tags: two of expired snapshots (each alone keeping some files), one of a
    retained snapshot (which frees nothing). Whichever record comes first, the release frees
    exactly what the two old tags kept, and leaves the table holding only what its retained
    snapshots reference."""
    from appendtable._state import TableState
    from appendtable.table import Table

    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i * 10, 10))
    table.create_tag("b-old", 1)
    table.create_tag("c-old", 2)
    table.compact(full=True)  # 4
    table.append(events(100, 10))  # 5
    table.create_tag("a-retained", 5)
    table.expire_snapshots(retain_min=2, older_than_ms=FUTURE)  # 1..3 go; the tags keep theirs
    for name in ("a-retained", "b-old", "c-old"):
        table.delete_tag(name)
    before = {p for p in tree(root) if not p.startswith("tag")}
    ordered = Table(
        TableState(_OrderedListing(str(root), descending=descending), table._state.schema)
    )
    result = ordered.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    gone = {p for p in before if not (root / p).exists()}
    assert result.expired_snapshots == [] and result.deleted_data_files
    assert set(result.deleted_data_files) | set(result.deleted_metadata_files) == gone
    assert table.remove_orphan_files(older_than=FUTURE, dry_run=True).files == []
    assert os.listdir(root / "tag") == []
    assert table.scan().count() == 40


def test_expiration_deletes_the_commit_user_records_only_expired_snapshots_name(
    tmp_path: Path,
) -> None:
    """Each commit with an identifier writes a new commit-users record; a plain commit carries
    the latest one. Expiring all but the newest deletes the records of expired snapshots,
    except the one the kept snapshot names and one a tag keeps."""
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for identifier in range(4):
        with table.writer() as writer:
            writer.write(events(identifier * 10, 10))
            messages = writer.prepare_commit()
        table.committer("job").commit(messages, identifier=identifier)
    table.append(events(100, 10))  # 5: carries 4's record
    records = {s.id: f"manifest/{s.commit_users}" for s in table.snapshots()}
    assert len(set(records.values())) == 4 and records[5] == records[4]
    table.create_tag("two", 2)
    result = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert result.expired_snapshots == [1, 2, 3, 4]
    gone = {records[1], records[3]}
    assert gone <= set(result.deleted_metadata_files)
    assert not {records[2], records[4]} & set(result.deleted_metadata_files)
    assert not any((root / p).exists() for p in gone)
    assert (root / records[2]).exists() and (root / records[4]).exists()
    assert table.has_committed("job", 3)
