"""System tables in Spark: DataFrames, the format's ``systemTable`` option and SQL tables give
the same rows as ``Table.system_table``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")

from pyspark.errors import PySparkException  # noqa: E402

SCHEMA = pa.schema([("day", pa.string()), ("id", pa.int64()), ("amount", pa.decimal128(20, 2))])


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


def _table(path: Path) -> at.Table:
    table = at.create_table(
        str(path), SCHEMA, partition_by=["day"], options={"bucket": 2, "bucket-key": "id"}
    )
    for start in (0, 10, 20):
        ids = list(range(start, start + 10))
        table.append(
            pa.table(
                {"day": ["mon", "tue"] * 5, "id": ids, "amount": [None] * 10},
                schema=SCHEMA,
            )
        )
    table.create_tag("first", snapshot_id=1)
    table.compact(full=True)
    return table


def _same(df: Any, expected: pa.Table) -> None:
    got = df.toArrow()
    assert got.num_rows == expected.num_rows
    assert (
        got.sort_by(got.schema.names[0]).to_pylist()
        == expected.cast(got.schema).sort_by(got.schema.names[0]).to_pylist()
    )


@pytest.mark.parametrize("name", at.SYSTEM_TABLE_NAMES)
def test_every_system_table_reads_as_in_the_core(spark_at: Any, tmp_path: Path, name: str) -> None:
    table = _table(tmp_path / "t")
    df = appendtable_spark.system_table(spark_at, table.uri, name)
    _same(df, table.system_table(name))
    assert df.count() == table.system_table(name).num_rows  # reused: the same rows again


def test_time_travel_and_options(spark_at: Any, tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    for name in ("files", "partitions", "buckets", "manifests"):
        old = appendtable_spark.system_table(spark_at, table.uri, name, snapshot_id=1)
        _same(old, table.system_table(name, snapshot_id=1))
        tagged = appendtable_spark.system_table(spark_at, table.uri, name, tag="first")
        _same(tagged, table.system_table(name, tag="first"))
    projected = (
        spark_at.read.format("appendtable")
        .option("systemTable", "snapshots")
        .option("columns", "snapshot_id")
        .load(table.uri)
    )
    assert projected.columns == ["snapshot_id"]
    assert sorted(r[0] for r in projected.collect()) == [s.id for s in table.snapshots()]
    with pytest.raises(at.InvalidArgumentError, match="did you mean 'snapshots'"):
        appendtable_spark.system_table(spark_at, table.uri, "snapshot")
    with pytest.raises(PySparkException, match=r"systemTable.*did you mean 'files'"):
        spark_at.read.format("appendtable").option("systemTable", "file").load(table.uri)
    with pytest.raises(PySparkException, match="snapshot_id"):
        appendtable_spark.system_table(spark_at, table.uri, "tags", snapshot_id=1).collect()


def test_system_tables_in_sql(spark_at: Any, tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    spark_at.sql("DROP TABLE IF EXISTS events_snapshots")
    spark_at.sql(
        f"CREATE TABLE events_snapshots USING appendtable LOCATION '{table.uri}' "
        "TBLPROPERTIES ('systemTable' = 'snapshots')"
    )
    try:
        count = "SELECT count(*) FROM events_snapshots"
        assert spark_at.sql(count).first()[0] == len(table.snapshots())
        table.append(pa.table({"day": ["wed"], "id": [99], "amount": [None]}, schema=SCHEMA))
        assert spark_at.sql(count).first()[0] == len(table.snapshots())  # at each statement
        kinds = spark_at.sql(
            "SELECT commit_kind, count(*) FROM events_snapshots GROUP BY commit_kind"
        ).collect()
        assert {r[0]: r[1] for r in kinds} == {"APPEND": 4, "COMPACT": 1}
        with pytest.raises(PySparkException):
            spark_at.sql("INSERT INTO events_snapshots SELECT * FROM events_snapshots")
    finally:
        spark_at.sql("DROP TABLE IF EXISTS events_snapshots")
    assert table.scan().count() == 31
