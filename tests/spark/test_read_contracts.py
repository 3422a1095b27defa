"""What a batch read accepts and which snapshot it reads: a user schema (``.schema(...)``) must
be the table's columns with their types (a read never casts), a column named twice in
``columns`` is refused when the DataFrame is defined, a ``spark.table(...)`` DataFrame of a
catalog table is not on one snapshot (docs/spark.md, SQL), and what a batch read ignores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")

SCHEMA = pa.schema(
    [("id", pa.int64()), ("v", pa.float64()), ("name", pa.string()), ("part", pa.string())]
)

SPARK_TYPES = {"id": "BIGINT", "v": "DOUBLE", "name": "STRING", "part": "STRING"}


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


def _table(path: Path) -> at.Table:
    table = at.create_table(str(path), SCHEMA, partition_by=["part"])
    table.append(
        pa.table(
            {
                "id": [1, 2, 3, None],
                "v": [1e300, -1e-320, 0.5, None],
                "name": ["7", "8", None, "x"],
                "part": ["a", "b", "a", None],
            },
            schema=SCHEMA,
        )
    )
    return table


def _read(spark: Any, uri: str, schema: str) -> Any:
    return spark.read.format("appendtable").schema(schema).load(uri)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("id BIGINT, v FLOAT", r"column 'v' as float, but it is double"),
        ("name BIGINT", r"column 'name' as bigint, but it is string"),
        ("id INT", r"column 'id' as int, but it is bigint"),
        ("id STRING", r"column 'id' as string, but it is bigint"),
        ("nope BIGINT", r"column 'nope', which the current schema .* does not have"),
        ("ID BIGINT", r"column 'ID', .*did you mean 'id'"),
        ("id BIGINT, ID BIGINT", r"column 'ID' twice"),
        ("id BIGINT NOT NULL", r"column 'id' NOT NULL, but it may hold nulls"),
    ],
)
def test_a_user_schema_that_is_not_the_tables_is_refused_naming_the_column(
    spark_at: Any, tmp_path: Path, schema: str, message: str
) -> None:
    table = _table(tmp_path / "t")
    with pytest.raises(Exception, match=message) as caught:
        _read(spark_at, table.uri, schema).collect()
    assert "SchemaMismatchError" in str(caught.value) or isinstance(
        caught.value, at.SchemaMismatchError
    )


def test_a_user_schema_of_the_tables_columns_reads_them_in_any_order(
    spark_at: Any, tmp_path: Path
) -> None:
    table = _table(tmp_path / "t")
    expected = table.scan().to_arrow()
    for columns in (["name", "id"], ["part", "v", "name", "id"], ["v"]):
        schema = ", ".join(f"{c} {SPARK_TYPES[c]}" for c in columns)
        df = _read(spark_at, table.uri, schema)
        assert df.columns == columns
        got = sorted(df.collect(), key=repr)
        want = sorted((tuple(row[c] for c in columns) for row in expected.to_pylist()), key=repr)
        assert [tuple(r) for r in got] == want
    # time travel: checked against the snapshot's own schema
    with table.update_schema() as update:
        update.add_column("extra", pa.int32())
    with pytest.raises(Exception, match=r"'extra', which snapshot 1"):
        spark_at.read.format("appendtable").schema("id BIGINT, extra INT").option(
            "scan.snapshot-id", "1"
        ).load(table.uri).collect()
    assert _read(spark_at, table.uri, "extra INT, id BIGINT").count() == 4


def test_a_column_named_twice_is_refused_when_the_dataframe_is_defined(
    spark_at: Any, tmp_path: Path
) -> None:
    table = _table(tmp_path / "t")
    for columns, named in (("id,id", "id"), ("id, name, ID", "ID")):
        with pytest.raises(Exception, match=rf"'columns'.*column '{named}' is named twice"):
            spark_at.read.format("appendtable").option("columns", columns).load(table.uri)


def test_a_spark_table_dataframe_is_not_on_one_snapshot(spark_at: Any, tmp_path: Path) -> None:
    """docs/spark.md (SQL): a ``spark.table(name)`` DataFrame of a catalog table reads, at its
    first action, the latest snapshot then (not the one of its definition); repeating that
    action keeps returning the answer of its first run, since PySpark keeps the planned read.
    SQL statements, and ``spark.table(name)`` again, read the latest."""
    table = _table(tmp_path / "t")
    spark_at.sql(f"CREATE TABLE pinned_t USING appendtable LOCATION '{table.uri}'")
    rows = pa.table({"id": [10], "v": [1.0], "name": ["n"], "part": ["a"]}, schema=SCHEMA)
    df = spark_at.table("pinned_t")
    table.append(rows)  # after the definition, before the first action: seen
    assert df.count() == 5
    table.append(rows)
    assert df.count() == 5  # the planned read of its first run
    assert spark_at.sql("SELECT count(*) FROM pinned_t").first()[0] == 6
    assert spark_at.table("pinned_t").count() == 6


def test_a_batch_read_ignores_stream_options_and_time_travels_with_scan_mode(
    spark_at: Any, tmp_path: Path
) -> None:
    """docs/spark.md (Batch, "What a batch read uses")."""
    table = _table(tmp_path / "t")
    table.append(pa.table({"id": [10], "v": [1.0], "name": ["n"], "part": ["a"]}, schema=SCHEMA))

    def read(**options: str) -> Any:
        return spark_at.read.format("appendtable").options(**options).load(table.uri)

    bucket = table.bucket
    assert read(**{"consumer-id": "c1"}).count() == 5
    assert table.system_table("consumers").num_rows == 0  # no progress recorded
    assert read(bucket="4").count() == 5
    assert at.open_table(table.uri).bucket == bucket != 4
    # snapshot 1 whole (4 rows), not its changes, and not the latest (5 rows)
    assert read(**{"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}).count() == 4
    with pytest.raises(Exception, match="applies to streaming reads, not to batch reads"):
        read(maxFilesPerTrigger="1").collect()
