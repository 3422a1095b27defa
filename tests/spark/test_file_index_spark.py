"""Bloom-filter file indexes through Spark (marker ``spark``): both write paths give every
file filters the table's scans use (Spark's own Parquet writer is asked for them, and adopting
its files describes them), and lookups through Spark return exactly the matching rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import appendtable as at

pytestmark = pytest.mark.spark

appendtable_spark = pytest.importorskip("appendtable_spark")
F = pytest.importorskip("pyspark.sql.functions")

OPTIONS = {"file-index.bloom-filter.columns": "order_id,n", "write-only": True}


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


def _orders(spark: Any, start: int, rows: int) -> Any:
    """Order ids that hash all over the alphabet: every file's min/max spans nearly all of
    them, so only the bloom filters can skip files."""
    return spark.range(start, start + rows).select(
        F.sha2(F.col("id").cast("string"), 256).alias("order_id"),
        (F.col("id") * 7919 % 100_003).alias("n"),
        F.col("id").alias("seq"),
    )


@pytest.mark.parametrize("native", [True, False])
def test_both_write_paths_give_files_bloom_filters(
    spark_at: Any, tmp_path: Path, native: bool
) -> None:
    uri = str(tmp_path / "t")
    for batch in range(4):
        frame = _orders(spark_at, batch * 500, 500).coalesce(1)
        appendtable_spark.write_table(frame, uri, options=OPTIONS, native=native)
    table = at.open_table(uri)
    files = [f for split in table.scan().plan() for f in split.files]
    assert len(files) == 4
    for file in files:
        assert file.file_index is not None, file.path
        assert len({bloom.field_id for bloom in file.file_index.blooms}) == 2
    rows = table.scan().to_arrow()
    wanted = rows["order_id"][1234].as_py()
    lookup = table.scan(filter=[("order_id", "=", wanted)])
    assert lookup.to_arrow()["seq"].to_pylist() == [rows["seq"][1234].as_py()]
    assert len([f for split in lookup.plan() for f in split.files]) <= 2
    n = rows["n"][77].as_py()
    through_spark = (
        spark_at.read.format("appendtable").load(uri).where(F.col("n") == n).select("seq").collect()
    )
    pairs = zip(rows["seq"].to_pylist(), rows["n"].to_pylist(), strict=True)
    expected = sorted(seq for seq, value in pairs if value == n)
    assert sorted(r.seq for r in through_spark) == expected
