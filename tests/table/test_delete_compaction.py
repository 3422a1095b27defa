"""Compaction and deletion vectors: a full compaction applies every vector (each file that
has one is rewritten without its deleted rows, alone or merged with its neighbours, the
bucket's order kept), and the automatic maintenance after a DELETE commit rewrites a file
with at least half of its rows deleted, as after an append. The oracle is the rows appended
less those the delete filters match (pyarrow compute)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at

SCHEMA = pa.schema([("seq", pa.int64()), ("user", pa.int64()), ("tag", pa.string())])


def batch(start: int, count: int) -> pa.Table:
    seq = np.arange(start, start + count)
    return pa.table(
        {"seq": seq, "user": seq * 7919 % 13, "tag": [f"t{s % 5}" for s in seq]}, schema=SCHEMA
    )


def make(tmp_path: Path, bucket: int, **options: str) -> at.Table:
    settings = {"bucket": str(bucket), "deletion-vectors.enabled": "true", **options}
    if bucket > 0:
        settings["bucket-key"] = "user"
    return at.create_table(str(tmp_path / "t"), SCHEMA, options=settings)


def vectors(table: at.Table) -> list[str]:
    return [f.path for s in table.scan().plan() for f in s.files if f.deletion is not None]


def check_rows_and_order(table: at.Table, expected: pa.Table) -> None:
    assert sorted(table.scan().to_arrow()["seq"].to_pylist()) == sorted(expected["seq"].to_pylist())
    # every file holds only live rows: the listing's counts add up to the rows
    assert sum(table.files()["rows"].to_pylist()) == expected.num_rows
    assert sum(f.row_count for s in table.scan().plan() for f in s.files) == expected.num_rows
    if table.option("bucket") > 0:  # write order kept per bucket
        for split in table.scan().plan():
            seq = [s for b in table.read(split) for s in b["seq"].to_pylist()]
            assert seq == sorted(seq)


@pytest.mark.parametrize("bucket", [2, -1])
def test_a_full_compaction_applies_every_vector(tmp_path: Path, bucket: int) -> None:
    table = make(tmp_path, bucket, **{"write-only": "true"})
    appended = [batch(n * 1000, 1000) for n in range(4)]
    for rows in appended:
        table.append(rows)
    table.compact(full=True)  # big files: none left to merge
    # fewer than half of each file's rows deleted, in every file
    mask = lambda t: pc.equal(t["tag"], "t3")  # noqa: E731
    table.delete([("tag", "=", "t3")])
    everything = pa.concat_tables(appended)
    expected = everything.filter(pc.invert(mask(everything)))
    assert vectors(table)
    assert table.compact(full=True) is not None
    assert vectors(table) == []
    check_rows_and_order(table, expected)
    assert table.compact(full=True) is None  # nothing left to do


@pytest.mark.parametrize("maintenance", ["inline", "background"])
@pytest.mark.parametrize("bucket", [2, -1])
def test_maintenance_after_a_delete_rewrites_mostly_deleted_files(
    tmp_path: Path, bucket: int, maintenance: str
) -> None:
    table = make(tmp_path, bucket, **{"commit.maintenance": maintenance})
    appended = batch(0, 10_000)
    table.append(appended)
    table.wait_for_maintenance()
    table.delete([("seq", "<", 6000)])  # 60 % of the file's rows
    table.wait_for_maintenance()
    assert vectors(table) == []
    kinds = [s.kind for s in table.snapshots()]
    assert kinds[-1] == at.CommitKind.COMPACT
    check_rows_and_order(table, appended.filter(pc.greater_equal(appended["seq"], 6000)))


def test_maintenance_after_a_delete_keeps_files_mostly_alive(tmp_path: Path) -> None:
    table = make(tmp_path, 2, **{"commit.maintenance": "inline"})
    appended = batch(0, 10_000)
    table.append(appended)
    table.delete([("seq", "<", 3000)])  # 30 %: a vector is enough
    assert vectors(table)
    assert table.latest_snapshot().kind == at.CommitKind.DELETE
    check = appended.filter(pc.greater_equal(appended["seq"], 3000))
    assert sorted(table.scan().to_arrow()["seq"].to_pylist()) == check["seq"].to_pylist()
