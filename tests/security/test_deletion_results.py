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
    return table, held


@pytest.mark.parametrize("mirror", [False, True])
def test_an_expiration_that_only_releases_a_tag_reports_exactly_what_it_freed(
    tmp_path: Path, mirror: bool
) -> None:
    root = tmp_path / "t"
    table, held = _release_only_table(root, mirror=mirror)
    dry = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE, dry_run=True)
    assert dry.dry_run is True and dry.expired_snapshots == [] and dry.earliest_snapshot == 4
    assert set(dry.deleted_data_files) == held and dry.deleted_metadata_files
    assert all((root / p).exists() for p in held)
    real = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert real.dry_run is False and real.earliest_snapshot == 4
    assert real.deleted_data_files == dry.deleted_data_files
    assert real.deleted_metadata_files == dry.deleted_metadata_files
    assert not any((root / p).exists() for p in held)
    assert not any((root / p).exists() for p in real.deleted_metadata_files)
    again = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE, dry_run=True)
    assert again.deleted_data_files == [] and again.earliest_snapshot == 4 and again.dry_run
    if mirror:  # the release republished the mirror and pruned its older versions
        versions = [n for n in os.listdir(root / "metadata") if n.endswith(".metadata.json")]
        assert len(versions) == 1
    assert table.scan().count() == 30


def test_an_expiration_with_nothing_to_do_reports_the_earliest(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i, 1))
    for dry_run in (True, False):
        result = table.expire_snapshots(retain_min=5, older_than_ms=FUTURE, dry_run=dry_run)
        assert result.expired_snapshots == [] and result.deleted_data_files == []
        assert result.earliest_snapshot == 1 and result.dry_run is dry_run
