"""Spark reads of a table with deleted rows: ``read_table`` (whose native Parquet path would
return rows deleted by deletion vectors, so it falls back to the data source) and the
``appendtable`` format give exactly the rows of ``table.scan()``, in both delete modes, and time
travel before the delete still shows them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

appendtable_spark = pytest.importorskip("appendtable_spark")

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
