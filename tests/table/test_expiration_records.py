"""Expiration records (``snapshot/expired/``): written before any snapshot is deleted, naming
each expired snapshot's nonce; pruned once old; left alone by orphan removal."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.commit.expiration_records import (
    RECORD_RETENTION_MS,
    prune_records,
    recorded_parents,
)
from appendtable.errors import StorageError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import ExpiredSnapshots
from appendtable.storage import LocalStorage
from appendtable.table import Table

pytestmark = pytest.mark.usefixtures("tables_stay_intact")

SCHEMA = pa.schema([("v", pa.int64())])
OPTIONS = {"write-only": True, "commit.fsync": False}


def _table(tmp_path: Path, commits: int) -> at.Table:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=OPTIONS)
    for i in range(commits):
        table.append(pa.table({"v": [i]}, schema=SCHEMA))
    return table


def _records(root: Path) -> dict[str, ExpiredSnapshots]:
    directory = root / layout.EXPIRED_DIR
    if not directory.exists():
        return {}
    return {
        p.name: codec.decode(p.read_bytes(), ExpiredSnapshots, codec.Kind.EXPIRED_SNAPSHOTS, str(p))
        for p in directory.iterdir()
    }


def _expire_all(table: at.Table, *, dry_run: bool = False) -> at.ExpireResult:
    cut = int(time.time() * 1000) + 1
    return table.expire_snapshots(retain_min=1, older_than_ms=cut, dry_run=dry_run)


def test_an_expiration_records_the_nonces_of_every_snapshot_it_removes(tmp_path: Path) -> None:
    table = _table(tmp_path, 5)
    nonces = {s.id: s.nonce for s in table.snapshots()}
    parents = {s.id: s.parent_nonce for s in table.snapshots()}
    assert _expire_all(table).expired_snapshots == [1, 2, 3, 4]
    records = _records(tmp_path / "t")
    assert len(records) == 1
    ((name, record),) = records.items()
    assert layout.expiration_record_span(name)[:2] == (1, 4)  # type: ignore[index]
    assert record.nonces == {str(i): nonces[i] for i in range(1, 5)}
    assert record.parent_nonces == {str(i): parents[i] for i in range(1, 5)}
    assert parents[2] == nonces[1] and parents[1] == ""
    storage = LocalStorage(str(tmp_path / "t"))
    assert all(recorded_parents(storage, i) == {nonces[i - 1]} for i in range(2, 5))
    assert recorded_parents(storage, 5) == set()


def test_a_dry_run_records_nothing(tmp_path: Path) -> None:
    table = _table(tmp_path, 3)
    assert _expire_all(table, dry_run=True).expired_snapshots == [1, 2]
    assert _records(tmp_path / "t") == {}


class _FailingSnapshotDelete(LocalStorage):
    def _delete(self, path: str) -> None:
        if path.startswith("snapshot/snapshot-"):
            raise OSError("the disk is gone")
        super()._delete(path)


def test_the_record_is_durable_before_the_first_snapshot_is_deleted(tmp_path: Path) -> None:
    """An expiration that fails at its first snapshot deletion has recorded it already (a
    commit that then finds the snapshot gone finds its record)."""
    table = _table(tmp_path, 3)
    failing = Table(TableState(_FailingSnapshotDelete(table.uri), table._state.schema))
    with pytest.raises(StorageError):
        _expire_all(failing)
    assert [s.id for s in at.open_table(table.uri).snapshots()] == [1, 2, 3]
    (record,) = _records(tmp_path / "t").values()
    assert set(record.nonces) == {"1", "2"}


def _plant(root: Path, first: int, last: int, age_ms: int) -> str:
    time_ms = int(time.time() * 1000) - age_ms
    path = layout.expiration_record_path(first, last, time_ms, uuid.uuid4().hex)
    ids = [str(i) for i in range(first, last + 1)]
    record = ExpiredSnapshots(
        time_ms=time_ms, nonces=dict.fromkeys(ids, "x"), parent_nonces=dict.fromkeys(ids, "y")
    )
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(codec.encode(record, codec.Kind.EXPIRED_SNAPSHOTS))
    return path.rsplit("/", 1)[-1]


def test_pruning_removes_only_old_records_below_the_earliest_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(tmp_path, 1)
    hour = RECORD_RETENTION_MS
    old_below = _plant(root, 1, 9, hour + 60_000)
    old_reaching = _plant(root, 5, 10, hour + 60_000)  # 10 is the earliest: still needed
    young_below = _plant(root, 1, 3, hour - 60_000)
    pruned = prune_records(LocalStorage(str(root)), earliest=10, now_ms=int(time.time() * 1000))
    assert pruned == [f"{layout.EXPIRED_DIR}/{old_below}"]
    assert set(_records(root)) == {old_reaching, young_below}


def test_expiration_prunes_old_records_as_the_earliest_id_passes_a_multiple(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("appendtable.commit.expire.PRUNE_EVERY", 4)
    root = tmp_path / "t"
    table = _table(tmp_path, 3)
    old = _plant(root, 1, 1, RECORD_RETENTION_MS + 60_000)
    _expire_all(table)  # earliest 1 -> 3: no multiple of 4 passed, nothing pruned
    assert old in _records(root)
    for i in range(3):
        table.append(pa.table({"v": [i]}, schema=SCHEMA))
    _expire_all(table)  # earliest 3 -> 6: passes 4
    records = _records(root)
    assert old not in records and len(records) == 2


def test_orphan_removal_keeps_records_and_reports_nothing_foreign(tmp_path: Path) -> None:
    table = _table(tmp_path, 4)
    _expire_all(table)
    before = set(_records(tmp_path / "t"))
    assert before
    future = int(time.time() * 1000) + 10 * 24 * 3600 * 1000
    result = table.remove_orphan_files(older_than=future, dry_run=True)
    assert not any("expired" in f for f in result.files + result.not_table_files)
    table.remove_orphan_files(older_than=future, dry_run=False)
    assert set(_records(tmp_path / "t")) == before
    # a record's name anywhere else is not the table's: listed, never taken for a record
    stray = tmp_path / "t" / "snapshot" / sorted(before)[0]
    stray.write_bytes(b"x")
    result = table.remove_orphan_files(older_than=future, dry_run=True)
    assert result.not_table_files == [f"snapshot/{stray.name}"]
