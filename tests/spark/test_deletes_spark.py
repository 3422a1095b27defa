"""Spark reads of a table with deleted rows: ``read_table`` (whose native Parquet path would
return rows deleted by deletion vectors, so it falls back to the data source) and the
``appendtable`` format give exactly the rows of ``table.scan()``, in both delete modes, and time
travel before the delete still shows them."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

appendtable_spark = pytest.importorskip("appendtable_spark")
F = pytest.importorskip("pyspark.sql.functions")

SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("x", pa.float64())])


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_spark_reads_honour_deletes(spark_at: Any, tmp_path: Any, vectors: str) -> None:
    table = at.create_table(
        str(tmp_path / "t"), SCHEMA, options={"deletion-vectors.enabled": vectors}
    )
    model = pa.table(
        {
            "id": list(range(300)),
            "kind": [f"k{i % 5}" for i in range(300)],
            "x": [i / 7 for i in range(300)],
        },
        schema=SCHEMA,
    )
    table.append(model.slice(0, 150))
    table.append(model.slice(150))
    before = table.latest_snapshot()
    assert before is not None
    table.delete([[("kind", "=", "k2")], [("id", ">=", 280)]])
    hit = pc.or_(pc.equal(model["kind"], "k2"), pc.greater_equal(model["id"], 280))
    expected = sorted(model.filter(pc.invert(hit))["id"].to_pylist())
    native = appendtable_spark.read_table(spark_at, table.uri)
    assert sorted(r.id for r in native.select("id").collect()) == expected
    filtered = appendtable_spark.read_table(spark_at, table.uri, filter=[("x", ">", 10.0)])
    assert sorted(r.id for r in filtered.select("id").collect()) == [i for i in expected if i > 70]
    source = spark_at.read.format("appendtable").load(table.uri)
    assert sorted(r.id for r in source.select("id").collect()) == expected
    assert source.count() == len(expected)
    old = appendtable_spark.read_table(spark_at, table.uri, snapshot_id=before.id)
    assert old.count() == 300
    # whole rows, against Spark over plain Parquet of the expected rows
    plain = str(tmp_path / "expected.parquet")
    pq.write_table(model.filter(pc.invert(hit)), plain)
    oracle = spark_at.read.parquet(plain)
    for df in (native, source, spark_at.read.format("appendtable").load(table.uri)):
        assert df.exceptAll(oracle).count() == 0
        assert oracle.exceptAll(df).count() == 0
    sliced = appendtable_spark.read_table(
        spark_at, table.uri, columns=["x"], filter=[("id", "<", 50)]
    )
    assert sorted(r.x for r in sliced.collect()) == sorted(
        r.x for r in oracle.where("id < 50").select("x").collect()
    )


# ---- appendtable_spark.delete --------------------------------------------------------------

NESTED = pa.schema(
    [
        ("id", pa.int64()),
        ("kind", pa.string()),
        ("x", pa.float64()),
        ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
    ]
)


def _nested_model(n: int, seed: int) -> pa.Table:
    """Rows over the whole domain of each column, nulls included (no NaN: see the NaN test)."""
    rng = random.Random(seed)
    kinds = [None, "", "k0", "k1", "k2", "é", "k'q"]
    return pa.table(
        {
            "id": list(range(n)),
            "kind": [rng.choice(kinds) for _ in range(n)],
            "x": [
                rng.choice([None, -1e300, -0.0, 0.0, 1e-300, 3.5, 1e300, rng.uniform(-50, 50)])
                for _ in range(n)
            ],
            "s": [
                None
                if rng.random() < 0.1
                else {
                    "a": rng.choice([None, -(2**31), -1, 0, 1, 7, 2**31 - 1]),
                    "b": rng.choice([None, "x", "y"]),
                }
                for _ in range(n)
            ],
        },
        schema=NESTED,
    )


def _live_ids(table: at.Table) -> list[int]:
    return sorted(table.scan(columns=["id"]).to_arrow()["id"].to_pylist())


def _spark_selected(spark: Any, plain: str, condition: Any) -> set[int]:
    """The ids Spark's own filter selects over plain Parquet of the model's live rows."""
    cond = F.expr(condition) if isinstance(condition, str) else condition
    return {r.id for r in spark.read.parquet(plain).where(cond).select("id").collect()}


CONDITIONS: list[Any] = [
    "kind = 'k2'",
    "x > 10.0 OR kind IS NULL",
    "NOT (s.a >= 0 AND s.b IN ('x', 'y')) AND id < 250",
    "kind IN ('', 'é', 'k''q') AND NOT (x <= 0)",
    "5 > id OR s IS NULL",
    "kind != 'k1' AND s.a IS NOT NULL AND id % 1 = 0",  # refused: a function
]


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_delete_removes_exactly_what_sparks_filter_selects(
    spark_at: Any, tmp_path: Any, vectors: str
) -> None:
    table = at.create_table(
        str(tmp_path / "t"),
        NESTED,
        # write-only: no automatic compaction after a delete changes the latest snapshot while
        # the test checks that a dry run wrote nothing and a delete wrote one snapshot
        options={
            "deletion-vectors.enabled": vectors,
            "bucket": "2",
            "bucket-key": "id",
            "write-only": "true",
        },
    )
    model = _nested_model(400, seed=7)
    for start in range(0, 400, 100):
        table.append(model.slice(start, 100))
    live = set(range(400))
    for step, condition in enumerate([*CONDITIONS, F.col("s.b") == "y"]):
        plain = str(tmp_path / f"plain-{step}.parquet")
        pq.write_table(model.filter(pc.is_in(model["id"], pa.array(sorted(live)))), plain)
        before = table.latest_snapshot()
        if isinstance(condition, str) and "%" in condition:
            with pytest.raises(at.InvalidFilterError, match="id %"):
                appendtable_spark.delete(spark_at, table.uri, condition)
            assert table.latest_snapshot() == before
            continue
        expected = _spark_selected(spark_at, plain, condition)
        assert appendtable_spark.delete(spark_at, table.uri, condition, dry_run=True) == len(
            expected
        )
        assert table.latest_snapshot() == before  # a dry run writes nothing
        assert appendtable_spark.delete(spark_at, table.uri, condition) == len(expected)
        live -= expected
        assert _live_ids(table) == sorted(live)
        if expected:
            latest = table.latest_snapshot()
            assert latest is not None and latest.kind == at.CommitKind.DELETE
            assert latest.id == before.id + 1  # one atomic snapshot
    assert 0 < len(live) < 400


def test_delete_refuses_where_spark_and_the_filter_differ_on_nan(
    spark_at: Any, tmp_path: Any
) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"id": [1, 2, 3], "kind": ["a", "b", "c"], "x": [1.0, math.nan, 20.0]}))
    before = table.latest_snapshot()
    with pytest.raises(at.InvalidFilterError, match="selects 2 rows in Spark"):
        appendtable_spark.delete(spark_at, table.uri, "x > 10.0")
    assert table.latest_snapshot() == before
    assert appendtable_spark.delete(spark_at, table.uri, "x > 10.0 AND NOT isnan(x)") == 1
    assert _live_ids(table) == [1, 2]


def test_delete_refuses_what_has_no_exact_form(spark_at: Any, tmp_path: Any) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"id": [1, 2], "kind": ["a", "b"], "x": [1.0, 2.0]}))
    for condition, part in [
        ("upper(kind) = 'A'", "upper"),
        ("x > x", "is not a literal"),
        ("CAST(x AS INT) = 1", "is not a column"),
        ("id = x", "is not a column"),  # Spark casts id to double
        ("kind <=> 'a'", "<=>"),
    ]:
        with pytest.raises(at.InvalidFilterError, match=re.escape(part)):
            appendtable_spark.delete(spark_at, table.uri, condition)
    with pytest.raises(at.InvalidArgumentError, match="condition"):
        appendtable_spark.delete(spark_at, table.uri, 42)
    assert table.latest_snapshot() is not None and table.scan().count() == 2


def test_sql_delete_from_a_catalog_table_fails(spark_at: Any, tmp_path: Any) -> None:
    """Spark's DELETE FROM is not available to Python data sources: it fails, deleting
    nothing (docs/spark.md points to appendtable_spark.delete)."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"id": [1, 2], "kind": ["a", "b"], "x": [1.0, 2.0]}))
    spark_at.sql(f"CREATE TABLE del_t USING appendtable LOCATION '{table.uri}'")
    try:
        with pytest.raises(Exception) as raised:
            spark_at.sql("DELETE FROM del_t WHERE id = 1")
        assert re.search("does not support delete", str(raised.value), re.IGNORECASE)
    finally:
        spark_at.sql("DROP TABLE del_t")
    assert table.scan().count() == 2


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_reused_dataframes_and_streams_across_deletes(
    spark_at: Any, tmp_path: Any, vectors: str
) -> None:
    """A DataFrame defined before a delete keeps reading its snapshot (deleted rows
    included, consistently: rows, count, filters, pruned columns); one defined after reads
    without them; a stream delivers no row deleted before it read it, and nothing for rows it
    had already delivered."""
    table = at.create_table(
        str(tmp_path / "t"), SCHEMA, options={"deletion-vectors.enabled": vectors}
    )
    model = pa.table(
        {
            "id": list(range(200)),
            "kind": [f"k{i % 4}" for i in range(200)],
            "x": [float(i) for i in range(200)],
        },
        schema=SCHEMA,
    )
    table.append(model.slice(0, 100))
    delivered: list[int] = []

    def collect(batch: Any, _batch_id: int) -> None:
        delivered.extend(r.id for r in batch.select("id").collect())

    def run_stream() -> None:
        query = (
            spark_at.readStream.format("appendtable")
            .option("scan.mode", "from-snapshot")
            .option("scan.snapshot-id", "1")
            .load(table.uri)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    run_stream()  # delivers the first 100 rows
    table.append(model.slice(100, 100))
    old = spark_at.read.format("appendtable").load(table.uri)
    old_filtered = old.where("x >= 50").select("id")
    assert old.count() == 200
    assert appendtable_spark.delete(spark_at, table.uri, "kind = 'k1' OR id >= 180") > 0
    hit = pc.or_(pc.equal(model["kind"], "k1"), pc.greater_equal(model["id"], 180))
    kept = sorted(model.filter(pc.invert(hit))["id"].to_pylist())
    # the reused DataFrames: still their snapshot, whole
    assert old.count() == 200
    assert sorted(r.id for r in old_filtered.collect()) == list(range(50, 200))
    new = spark_at.read.format("appendtable").load(table.uri)
    for _ in range(2):
        assert new.count() == len(kept)
        assert sorted(r.id for r in new.select("id").collect()) == kept
        assert sorted(r.id for r in new.where("x >= 50").select("id").collect()) == [
            i for i in kept if i >= 50
        ]
        assert new.select("kind").distinct().count() == 3
    run_stream()  # the second append's unit, read after the delete
    assert delivered == list(range(100)) + [i for i in kept if i >= 100]


def test_a_cast_that_changes_no_value_is_taken_and_any_other_is_refused(
    spark_at: Any, tmp_path: Any
) -> None:
    """Spark widens an integral column compared with wider literals (``isin`` of Python ints,
    a ``L`` literal): the comparison of the widened column is one of the column itself."""
    schema = pa.schema([("small", pa.int16()), ("id", pa.int32()), ("x", pa.float64())])
    table = at.create_table(str(tmp_path / "t"), schema, options={"write-only": "true"})
    data = pa.table(
        {
            "small": pa.array([i % 7 for i in range(40)], pa.int16()),
            "id": pa.array(range(40), pa.int32()),
            "x": [i / 2 for i in range(40)],
        },
        schema=schema,
    )
    table.append(data)
    plain = str(tmp_path / "plain.parquet")
    pq.write_table(data, plain)
    live = set(range(40))
    for condition in [F.col("id").isin(0, 3, 2**40), "small = 5L", "id > 30L AND small <= 2"]:
        expected = _spark_selected(spark_at, plain, condition) & live
        assert appendtable_spark.delete(spark_at, table.uri, condition) == len(expected)
        live -= expected
        assert _live_ids(table) == sorted(live)
    before = table.latest_snapshot()
    with pytest.raises(at.InvalidFilterError, match="CAST"):
        appendtable_spark.delete(spark_at, table.uri, "CAST(x AS INT) = 3")
    assert table.latest_snapshot() == before
