"""The Iceberg mirror turned off and on again by one handle while another, long-lived, keeps
running maintenance: the maintenance acts on the options as of the latest snapshot, and a
reader never gets a location whose files may be gone.

Found by a user: a handle that last saw the mirror off deleted every file of the mirror another
handle had turned back on (orphan removal), or expired snapshots without taking them out of it
(the mirror then listed snapshots whose data files were gone); and while the mirror was being
turned back on, ``iceberg_metadata_location()`` returned the version from before it was off,
whose data files expiration had deleted meanwhile."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import appendtable as at
from appendtable.commit.iceberg_mirror import IcebergMirror
from tests.helpers.clock import age_tree
from tests.helpers.integrity import assert_mirror_intact

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

SCHEMA = pa.schema([("n", pa.int64())])
ON = {"metadata.iceberg.storage": "table-location"}
OFF = {"metadata.iceberg.storage": "disabled"}


def _rows(n: int) -> pa.Table:
    return pa.table({"n": [n]}, schema=SCHEMA)


def _off_and_on_again(tmp_path: Path) -> tuple[at.Table, at.Table]:
    """(admin, job): the job handle appends while the mirror is on, then while admin has it
    off; admin turns it on again and appends. The job handle last saw it off."""
    admin = at.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": True, **ON})
    job = at.open_table(admin.uri)
    for n in range(3):
        job.append(_rows(n))
    admin.set_options(OFF)
    job.append(_rows(3))
    admin.set_options(ON)
    admin.append(_rows(4))
    return admin, job


def _agree(table: at.Table) -> None:
    """pyiceberg reads the table's rows at the location the table gives."""
    location = at.open_table(table.uri).iceberg_metadata_location()
    assert location is not None
    theirs = StaticTable.from_metadata(location).scan().to_arrow().column("n").to_pylist()
    assert sorted(theirs) == sorted(table.scan().to_arrow().column("n").to_pylist())


def test_orphan_removal_through_a_handle_that_saw_the_mirror_off_keeps_it(
    tmp_path: Path,
) -> None:
    """It deleted every file of the mirror (metadata versions, manifests, lists, the hint)."""
    admin, job = _off_and_on_again(tmp_path)
    age_tree(admin.uri, seconds=3 * 86400)
    removed = job.remove_orphan_files(older_than=dt.timedelta(days=1), dry_run=False).files
    assert not [p for p in removed if p.endswith("-m0.avro") or "version-hint" in p], removed
    assert_mirror_intact(admin._state.storage)
    _agree(admin)


def test_expiration_through_a_handle_that_saw_the_mirror_off_republishes_it(
    tmp_path: Path,
) -> None:
    """It expired snapshots 1-6 and deleted their files without republishing the mirror,
    which still listed them (pyiceberg failed on every one of them)."""
    admin, job = _off_and_on_again(tmp_path)
    admin.compact(full=True)
    expired = job.expire_snapshots(retain_min=1, older_than_ms=2**62)
    assert expired.deleted_data_files
    location = admin.iceberg_metadata_location()
    assert location is not None
    listed = [s.snapshot_id for s in StaticTable.from_metadata(location).metadata.snapshots]
    assert listed == [s.id for s in admin.snapshots()]
    _agree(admin)


def test_no_location_is_given_while_a_mirror_turned_back_on_is_not_written_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the mirror was off, the files its newest version lists expired. Turning it on
    again gave that version's location until the first publish (here: one that fails), and
    pyiceberg failed on it; the location is now None until the mirror is written again."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": True, **ON})
    for n in range(3):
        table.append(_rows(n))
    stale = table.iceberg_metadata_location()
    assert stale is not None
    table.set_options(OFF)
    table.compact(full=True)
    assert table.expire_snapshots(retain_min=1, older_than_ms=2**62).deleted_data_files

    def failing(self: IcebergMirror, max_snapshots: int = 100, *, rebuild: bool = False) -> None:
        raise at.StorageError("injected: the mirror is not written yet")

    with monkeypatch.context() as patch:
        patch.setattr(IcebergMirror, "publish", failing)
        table.set_options(ON)  # the table's own commit lands; the mirror's publish fails
        assert Path(stale.removeprefix("file://")).exists()  # still there, files gone
        assert table.iceberg_metadata_location() is None
    assert table.publish_iceberg() is not None
    _agree(table)


def test_a_mirror_turned_on_while_orphan_removal_deletes_its_files_is_written_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orphan removal has found the mirror off and is deleting its (old) files as orphans when
    another handle turns it on: that handle's first version reuses files orphan removal then
    deletes. Orphan removal now reads the options again after deleting mirror files, and
    writes the mirror anew if it is on."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": True, **ON})
    for n in range(3):
        table.append(_rows(n))
    table.set_options(OFF)
    age_tree(table.uri, seconds=3 * 86400)
    remover = at.open_table(table.uri)
    storage = remover._state.storage
    real_delete = storage.delete
    turned_on: list[int] = []

    def turn_on_then_delete(path: str) -> None:
        if path.startswith("metadata/") and not turned_on:
            landed = at.open_table(table.uri).set_options(ON)
            assert landed is not None
            turned_on.append(landed.id)
        real_delete(path)

    monkeypatch.setattr(storage, "delete", turn_on_then_delete)
    remover.remove_orphan_files(older_than=dt.timedelta(days=1), dry_run=False)
    assert turned_on
    assert_mirror_intact(table._state.storage)
    _agree(table)
