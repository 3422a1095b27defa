"""After ``CommitStateUnknownError`` nothing the commit wrote is deleted (docs/reliability.md),
whatever wrote it: a delete (both modes) and a purge's rewrite keep their files, so when the
snapshot did land (its publish reached the store, the answer was lost and the read-back
failed) the table reads whole. A docs-only hunt found deletes removing their rewritten data
files and vector file here, on S3 with the snapshot's PUT delivered late: every later scan
failed with a data file "deleted outside the table".

The store is local disk whose snapshot publish is held back and reported as failed, and lands
after the commit gave up.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.errors import StorageError
from appendtable.storage import LocalStorage
from appendtable.table import Table
from tests.helpers.data import EVENTS, events


class _LateSnapshot(LocalStorage):
    """Once armed, the next snapshot publish is held back (it reaches the store later, as a
    PUT a proxy or a congested network delivers late) and reports a lost connection; reading
    the held snapshot back fails, and anything else finds it absent, until ``land()`` writes
    it."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.armed = False
        self.held: tuple[str, bytes] | None = None

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self.armed and path.startswith("snapshot/snapshot-"):
            self.armed = False
            self.held = (path, data)
            raise StorageError("connection reset", path=path, operation="publish")
        return super().put_if_absent(path, data)

    def read(self, path: str) -> bytes:
        self._unanswered(path)
        return super().read(path)

    def land(self) -> None:
        assert self.held is not None
        path, data = self.held
        self.held = None
        assert super().put_if_absent(path, data)

    def _unanswered(self, path: str) -> None:
        if self.held is not None and path == self.held[0]:
            raise StorageError("timeout", path=path, operation="read")


def _tables(tmp_path: Path, *, vectors: bool) -> tuple[str, Table, _LateSnapshot]:
    uri = str(tmp_path / "t")
    options = {"deletion-vectors.enabled": str(vectors).lower(), "write-only": "true"}
    at.create_table(uri, EVENTS, options=options)
    writer = at.open_table(uri)
    for start in range(0, 400, 100):
        writer.append(events(start, 100))
    storage = _LateSnapshot(uri)
    return uri, Table(TableState(storage, writer._state.schema)), storage


def _expected(keep: pa.compute.Expression) -> list[int]:
    rows = events(0, 400)
    return sorted(rows.filter(keep).column("seq").to_pylist())


@pytest.mark.parametrize("vectors", [False, True], ids=["copy-on-write", "vectors"])
def test_a_delete_whose_outcome_is_unknown_keeps_its_files(tmp_path: Path, vectors: bool) -> None:
    uri, table, storage = _tables(tmp_path, vectors=vectors)
    storage.armed = True
    with pytest.raises(at.CommitStateUnknownError, match="do not delete its files"):
        table.delete([("seq", "<", 50)])
    storage.land()
    fresh = at.open_table(uri)
    assert [s.kind for s in fresh.snapshots()][-1] == at.CommitKind.DELETE  # it landed
    seqs = sorted(fresh.scan().to_arrow().column("seq").to_pylist())
    assert seqs == _expected(pc.field("seq") >= 50)


def test_a_purge_whose_rewrite_has_an_unknown_outcome_keeps_its_files(tmp_path: Path) -> None:
    uri, table, storage = _tables(tmp_path, vectors=True)
    table.delete([("seq", "<", 50)])
    storage.armed = True
    with pytest.raises(at.CommitStateUnknownError, match="do not delete its files"):
        table.purge(older_than=dt.timedelta(days=1))
    storage.land()
    fresh = at.open_table(uri)
    assert fresh.snapshots()[-1].properties.get("purge") == "true"  # the rewrite landed
    seqs = sorted(fresh.scan().to_arrow().column("seq").to_pylist())
    assert seqs == _expected(pc.field("seq") >= 50)


@pytest.mark.parametrize("kind", ["append", "overwrite"])
def test_writes_whose_outcome_is_unknown_keep_their_files(tmp_path: Path, kind: str) -> None:
    uri, table, storage = _tables(tmp_path, vectors=False)
    storage.armed = True
    with pytest.raises(at.CommitStateUnknownError, match="do not delete its files"):
        if kind == "append":
            table.append(events(1000, 10))
        else:
            table.overwrite(events(1000, 10))
    storage.land()
    seqs = sorted(at.open_table(uri).scan().to_arrow().column("seq").to_pylist())
    before = list(range(400)) if kind == "append" else []
    assert seqs == sorted([*before, *range(1000, 1010)])
