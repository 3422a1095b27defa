"""Compaction planning counts deleted rows: a file is weighed by the bytes of its rows that are
not deleted, and a file with at least half of its rows deleted is rewritten on its own."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.metadata.models import DataFileMeta, DeletionVectorRef
from appendtable.planning.compaction_selection import (
    full_runs,
    live_size,
    mostly_deleted,
    pick_windows,
)


def file(name: str, size: int, rows: int, deleted: int = 0, seq: int = 0) -> DataFileMeta:
    meta = DataFileMeta(name, size, rows, seq, seq + rows - 1, 0, 0, 0)
    if not deleted:
        return meta
    vector = DeletionVectorRef(f"index/dv-{name}.puffin", 4, 40, deleted)
    return msgspec.structs.replace(meta, deletion=vector)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2**40), st.integers(1, 10**9), st.data())
def test_live_size_scales_by_the_rows_left(size: int, rows: int, data: st.DataObject) -> None:
    deleted = data.draw(st.integers(0, rows))
    meta = file("a", size, rows, deleted)
    assert live_size(meta) == size * (rows - deleted) // rows
    assert 0 <= live_size(meta) <= size
    assert mostly_deleted(meta) == (deleted > 0 and 2 * deleted >= rows)


def test_a_large_file_mostly_deleted_counts_as_small() -> None:
    big, thinned = file("a", 1000, 100, seq=0), file("b", 1000, 100, 95, seq=100)
    other = file("c", 10, 1, seq=200)
    assert full_runs([big, thinned, other], small=100) == [[thinned, other]]
    assert full_runs([big, file("b", 1000, 100, seq=100), other], small=100) == []


def test_windows_weigh_live_bytes() -> None:
    files = [file(str(i), 100, 10, 9, seq=i * 10) for i in range(5)]
    # five files of 100 bytes, 10 live each: 50 live bytes, under a target of 400
    assert pick_windows(files, target=400, min_files=5, max_files=50) == []
    plain = [file(str(i), 100, 10, seq=i * 10) for i in range(5)]
    assert pick_windows(plain, target=400, min_files=5, max_files=50) == [plain]
