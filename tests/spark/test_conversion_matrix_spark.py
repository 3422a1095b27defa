"""The Spark rows of the conversion matrix (tests/table/test_conversion_matrix.py): a DataFrame
column of each Spark type, holding that type's boundary values, written into a table column of
each type of the same family, through ``appendtable_spark.write_table`` and through the
``appendtable`` format writer. The write either stores every value exactly (floats narrowed to
the nearest value, as documented) or is refused naming the column with nothing committed.
The values sent are what Spark itself holds (``DataFrame.toArrow()``), never appendtable's
reading of them."""

from __future__ import annotations

import decimal
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers import strategies
from tests.table.test_conversion_matrix import canon_array, expected_stored, plain_number

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")
T = pytest.importorskip("pyspark.sql.types")
PySparkException = pytest.importorskip("pyspark.errors").PySparkException

D = decimal.Decimal
NUMERIC_TABLES = [
    pa.int8(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(10, 2),
    pa.decimal128(38, 10),
]


def _python_edges(dtype: pa.DataType) -> list[Any]:
    """The boundary values of ``dtype`` that Python (and so Spark's Python API) can hold."""
    out = []
    for value in strategies.edges(dtype):
        try:
            out.append(pa.array([value], dtype).to_pylist()[0])
        except (OverflowError, ValueError):
            continue
    return out


#: (Spark type, its boundary values, the table types it is written into)
SPARK_COLUMNS: list[tuple[str, Any, list[Any], list[pa.DataType]]] = [
    ("byte", T.ByteType(), _python_edges(pa.int8()), NUMERIC_TABLES),
    ("short", T.ShortType(), _python_edges(pa.int16()), NUMERIC_TABLES),
    ("int", T.IntegerType(), _python_edges(pa.int32()), NUMERIC_TABLES),
    ("long", T.LongType(), _python_edges(pa.int64()), NUMERIC_TABLES),
    ("float", T.FloatType(), _python_edges(pa.float32()), NUMERIC_TABLES),
    ("double", T.DoubleType(), _python_edges(pa.float64()), NUMERIC_TABLES),
    ("decimal(10,2)", T.DecimalType(10, 2), _python_edges(pa.decimal128(10, 2)), NUMERIC_TABLES),
    ("decimal(38,10)", T.DecimalType(38, 10), _python_edges(pa.decimal128(38, 10)), NUMERIC_TABLES),
    ("string", T.StringType(), _python_edges(pa.string()), [pa.string(), pa.large_string()]),
    ("binary", T.BinaryType(), _python_edges(pa.binary()), [pa.binary(), pa.large_binary()]),
    ("boolean", T.BooleanType(), [True, False], [pa.bool_()]),
    ("date", T.DateType(), _python_edges(pa.date32()), [pa.date32(), pa.date64()]),
    (
        "timestamp",
        T.TimestampType(),
        _python_edges(pa.timestamp("us", tz="UTC")),
        [pa.timestamp(u, tz="UTC") for u in ("s", "ms", "us", "ns")],
    ),
    (
        "timestamp_ntz",
        T.TimestampNTZType(),
        _python_edges(pa.timestamp("us")),
        [pa.timestamp("ms"), pa.timestamp("us")],
    ),
]
PAIRS = [
    pytest.param(name, table_type, id=f"{name}->{table_type}")
    for name, _, _, table_types in SPARK_COLUMNS
    for table_type in table_types
]


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def _frame(spark: Any, spark_type: Any, values: list[Any]) -> Any:
    schema = T.StructType(
        [T.StructField("k", T.LongType(), False), T.StructField("c", spark_type, True)]
    )
    rows = [(i, v) for i, v in enumerate([*values, None])]
    return spark.createDataFrame(rows, schema=schema).repartition(2)


@dataclass(frozen=True)
class Sent:
    """One Spark type's column of boundary values (and a null), cached in Spark in two
    partitions, and what Spark holds of it (``DataFrame.toArrow()``) by key."""

    df: Any
    values: dict[int, Any]


class SentFrames:
    """Each Spark type's frame, built and exported once and written into every table type of
    the matrix (each write is a new job over the same cached partitions)."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._sent: dict[str, Sent] = {}

    def __getitem__(self, name: str) -> Sent:
        if name not in self._sent:
            spark_type, values = _COLUMNS[name]
            df = _frame(self._spark, spark_type, values).cache()
            exported = df.toArrow().sort_by("k")  # what Spark holds (this job fills the cache)
            keys = exported.column("k").to_pylist()
            canon = canon_array(exported.column("c").combine_chunks())
            self._sent[name] = Sent(df, dict(zip(keys, canon, strict=True)))
        return self._sent[name]

    def release(self) -> None:
        for sent in self._sent.values():
            sent.df.unpersist()
        self._sent.clear()


_COLUMNS = {name: (spark_type, values) for name, spark_type, values, _ in SPARK_COLUMNS}


@pytest.fixture(scope="module")
def sent_frames(spark_at: Any) -> Iterator[SentFrames]:
    frames = SentFrames(spark_at)
    try:
        yield frames
    finally:
        frames.release()


def _check(table: at.Table, sent: dict[int, Any], table_type: pa.DataType, how: str) -> None:
    rows = table.scan().to_arrow().sort_by("k")
    stored = dict(
        zip(
            rows.column("k").to_pylist(),
            canon_array(rows.column("c").combine_chunks()),
            strict=True,
        )
    )
    assert sorted(stored) == sorted(sent), how
    for key, value in sent.items():
        assert plain_number(stored[key]) == expected_stored(value, table_type), (
            how,
            table_type,
            value,
        )


@pytest.mark.parametrize(("name", "table_type"), PAIRS)
def test_spark_columns_are_stored_exactly_or_refused(
    sent_frames: SentFrames, root: Path, name: str, table_type: pa.DataType
) -> None:
    sent = sent_frames[name]
    df = sent.df
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("c", table_type)])
    writes = {
        "write_table": lambda uri: appendtable_spark.write_table(df, uri),
        "write_table(python)": lambda uri: appendtable_spark.write_table(df, uri, native=False),
        "format": lambda uri: df.write.format("appendtable").mode("append").save(uri),
    }
    for how, write in writes.items():
        uri = str(root / f"t-{uuid.uuid4().hex[:8]}")
        at.create_table(uri, schema, options={"write-only": True})
        try:
            write(uri)
        except (at.AppendTableError, PySparkException) as exc:  # Spark wraps executors' errors
            message = str(exc)
            assert "'c'" in message or "column c" in message or "`c`" in message, (how, message)
            assert at.open_table(uri).latest_snapshot() is None, how  # nothing committed
            continue
        _check(at.open_table(uri), sent.values, table_type, how)


def test_a_double_beyond_float32_is_refused_through_spark(spark_at: Any, root: Path) -> None:
    """[1e300, -1e300] into a float32 column was stored as [inf, -inf]."""
    df = _frame(spark_at, T.DoubleType(), [1e300, -1e300, 1.5, math.inf])
    schema = pa.schema([("k", pa.int64()), ("c", pa.float32())])
    for native in (None, False):
        uri = str(root / f"t-{native}")
        at.create_table(uri, schema)
        # refused by the format's writer on the executors (Spark wraps the error)
        with pytest.raises(PySparkException, match=r"SchemaMismatchError: column 'c'.*infinite"):
            appendtable_spark.write_table(df, uri, native=native)
        assert at.open_table(uri).latest_snapshot() is None
    unchecked = "column 'c': Spark's cast from double to float is unchecked"
    with pytest.raises(at.InvalidOptionError, match=unchecked):
        appendtable_spark.write_table(df, str(root / "t-None"), native=True)


def test_spark_pushes_long_decimals_down_exactly(spark_at: Any, root: Path) -> None:
    """A pushed-down decimal(38, 0) literal of 31 digits found no row through the bloom index
    (hashed after rounding to 28 digits)."""
    value = D("1234567890123456789012345678901")
    schema = pa.schema([("k", pa.int64()), ("c", pa.decimal128(38, 0))])
    uri = str(root / "t")
    table = at.create_table(
        uri, schema, options={"file-index.bloom-filter.columns": "c", "write-only": True}
    )
    table.append(pa.table({"k": [1, 2], "c": pa.array([value, D(5)], pa.decimal128(38, 0))}))
    table.append(pa.table({"k": [3], "c": pa.array([D(-7)], pa.decimal128(38, 0))}))
    df = spark_at.read.format("appendtable").load(uri)
    assert [r.k for r in df.filter(df.c == value).collect()] == [1]
    assert [r.k for r in df.filter(df.c.isin(value, D(-7))).orderBy("k").collect()] == [1, 3]


def test_a_pushed_filter_that_prunes_every_file_reads_no_rows(spark_at: Any, root: Path) -> None:
    """With no split left, Spark ran one task with its own empty partition and the reader
    failed: ``'InputPartition' object has no attribute 'uri'``."""
    uri = str(root / "t")
    table = at.create_table(uri, pa.schema([("k", pa.int64())]))
    table.append(pa.table({"k": [1, 2]}))
    df = spark_at.read.format("appendtable").load(uri)
    assert df.filter(df.k == 99).collect() == []
    assert df.filter(df.k > 1).count() == 1
