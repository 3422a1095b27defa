"""Spark's own Parquet reader over a pinned, pruned snapshot.

The core plans the read (snapshot, partition/statistics/bucket pruning); Spark's native
Parquet reader carries the data. A data file holds every column of the schema version it was
written with, so when every file of the read was written with the snapshot's own schema
version they read as one Parquet dataset in that schema. Spark's reader matches columns by
name, which is wrong across schema changes (a renamed column would read as null, a column
dropped and added again under its old name would read the old values): when the files span
several schema versions, and for types Spark's Parquet reader cannot read (nanosecond
timestamps), the read goes through the Python data source, which matches them by field id.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import json
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, assert_never

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import appendtable as at
from appendtable_spark.locations import spark_location
from appendtable_spark.source import FORMAT
from appendtable_spark.types import spark_schema

__all__ = ["filter_condition", "native_readable", "read_table"]


def native_readable(schema: pa.Schema) -> bool:
    """Whether Spark's Parquet reader reads every column type of ``schema``."""

    def ok(dtype: pa.DataType) -> bool:
        if pa.types.is_timestamp(dtype) or pa.types.is_time(dtype):
            return bool(dtype.unit != "ns")
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return ok(dtype.value_type)
        if pa.types.is_map(dtype):
            return ok(dtype.key_type) and ok(dtype.item_type)
        if pa.types.is_struct(dtype):
            return all(ok(field.type) for field in dtype)
        return not pa.types.is_fixed_size_list(dtype)

    return all(ok(field.type) for field in schema)


#: Parquet's row-group filters (as Spark's reader applies them to the filters Spark pushes,
#: including those of a user's own ``.filter`` on the DataFrame) compare floats by their bit
#: patterns in dictionaries and bloom filters and leave NaN out of statistics: a row group whose
#: only zero is -0.0 was skipped for ``x = 0.0``, one holding NaN for Spark's ``x = NaN``. For
#: reads of float columns they are off (the core has pruned the files already); Spark's reader
#: takes these options into the read's Hadoop configuration.
_NO_ROW_GROUP_SKIPPING = {
    "parquet.filter.dictionary.enabled": "false",
    "parquet.filter.stats.enabled": "false",
    "parquet.filter.columnindex.enabled": "false",
    "parquet.filter.bloom.enabled": "false",
}


def _has_floats(schema: pa.Schema) -> bool:
    def floats(dtype: pa.DataType) -> bool:
        if pa.types.is_floating(dtype):
            return True
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return floats(dtype.value_type)
        if pa.types.is_map(dtype):
            return floats(dtype.key_type) or floats(dtype.item_type)
        if pa.types.is_struct(dtype):
            return any(floats(field.type) for field in dtype)
        return False

    return any(floats(field.type) for field in schema)


def _literal(value: object, dtype: pa.DataType | None) -> Column:
    """A filter value as a Spark literal of a column of ``dtype``. Dates and datetimes are
    built from their fields, in the proleptic Gregorian calendar as the core compares them:
    PySpark renders a ``datetime.date`` literal as text without the year's leading zeros
    (which Spark cannot parse for years before 1000), and turns a ``datetime`` into a Java
    timestamp of the hybrid Julian calendar (which moves instants before 1582-10-15 by days:
    a user's filter on year 1 matched nothing). A naive datetime is UTC for a column with a
    time zone, and an aware one is taken at UTC for a column without, as in the core."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return F.make_date(F.lit(value.year), F.lit(value.month), F.lit(value.day))
    if isinstance(value, datetime.datetime) and dtype is not None and pa.types.is_timestamp(dtype):
        at_utc = value.astimezone(datetime.UTC) if value.tzinfo is not None else value
        seconds = decimal.Decimal(at_utc.second) + decimal.Decimal(at_utc.microsecond).scaleb(-6)
        fields = {
            "years": F.lit(at_utc.year),
            "months": F.lit(at_utc.month),
            "days": F.lit(at_utc.day),
            "hours": F.lit(at_utc.hour),
            "mins": F.lit(at_utc.minute),
            "secs": F.lit(seconds).cast("decimal(8,6)"),
        }
        if dtype.tz is None:
            return F.make_timestamp_ntz(**fields)
        return F.make_timestamp(**fields, timezone=F.lit("UTC"))
    return F.lit(value)


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _column(name: object, schema: pa.Schema) -> tuple[Column, pa.DataType | None]:
    """The Spark column a filter term names, and its type: a top-level name whole (even with a
    dot in it), else a dotted path (or a tuple of names) into structs, as the core reads it."""
    if isinstance(name, tuple | list):
        parts = [str(part) for part in name]
    elif str(name) in schema.names:
        parts = [str(name)]
    else:
        parts = str(name).split(".")
    dtype: pa.DataType | None = None
    fields: Sequence[pa.Field] = list(schema)
    for part in parts:
        found = next((f for f in fields if f.name == part), None)
        dtype = found.type if found is not None else None
        fields = list(dtype) if dtype is not None and pa.types.is_struct(dtype) else []
    path = ".".join("`" + part.replace("`", "``") + "`" for part in parts)
    return F.col(path), dtype


def _condition(term: object, schema: pa.Schema) -> Column:
    """One filter term as a Spark condition with the core's semantics, which for floats are
    IEEE's where Spark's differ: NaN equals nothing and orders with nothing (Spark: NaN = NaN,
    NaN above every number), so it passes only ``!=`` and ``not in``; nulls pass only
    ``is null``. The term was checked by the core's scan first."""
    assert isinstance(term, list | tuple)  # read_table's scan checked the filter first
    column, dtype = _column(term[0], schema)
    op = at.FilterOp.parse(term[1])
    assert op is not None
    floating = dtype is not None and pa.types.is_floating(dtype)
    nan = F.isnan(column) if floating else F.lit(False)
    match op:
        case at.FilterOp.IS_NULL:
            return column.isNull()
        case at.FilterOp.IS_NOT_NULL:
            return column.isNotNull()
        case at.FilterOp.IN | at.FilterOp.NOT_IN:
            listed = term[2]
            assert isinstance(listed, Iterable)
            values = [_literal(v, dtype) for v in listed if not _is_nan(v)]
            inside = column.isin(values) & ~nan if values else F.lit(False)
            return inside if op is at.FilterOp.IN else ~inside & column.isNotNull()
        case (
            at.FilterOp.EQ
            | at.FilterOp.NE
            | at.FilterOp.LT
            | at.FilterOp.LE
            | at.FilterOp.GT
            | at.FilterOp.GE
        ):
            rule = at.filter_operator(op)
            value = term[2]
            if _is_nan(value):
                return column.isNotNull() if rule.matches_nan else F.lit(False)
            compared: Column = rule.test(column, _literal(value, dtype))  # the Python operator
            return compared | nan if rule.matches_nan else compared & ~nan
        case _:
            assert_never(op)


def _where(filter_terms: Sequence[Any], schema: pa.Schema) -> Column:
    """The filter as one Spark condition: its clauses read as the core reads them."""
    return functools.reduce(
        operator.or_,
        (
            functools.reduce(operator.and_, (_condition(term, schema) for term in clause))
            for clause in at.filter_clauses(filter_terms)
        ),
    )


def filter_condition(filter_terms: Sequence[Any], schema: pa.Schema) -> Column:
    """A core filter as one Spark condition with the core's semantics (see ``_condition``)."""
    return _where(filter_terms, schema)


def read_table(
    spark: SparkSession,
    uri: str,
    *,
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
    tag: str | None = None,
    columns: Sequence[str] | None = None,
    filter: Sequence[Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A DataFrame of one snapshot (the latest by default, or ``snapshot_id``,
    ``timestamp_ms`` or ``tag``: time travel, in the schema that snapshot had), read by
    Spark's Parquet reader from the files the core planned: pruned by partition, statistics and
    bucket, then filtered exactly by Spark with the core's semantics (the same rows as
    ``table.scan(filter=...)``: for floats NaN matches only ``!=`` and ``not in``, where
    Spark's own comparisons would order it above every number). Falls back to the
    ``appendtable`` format when a column type needs it, the files span several schema
    versions, or some have deleted rows (deletion vectors)."""
    table = at.open_table(uri, storage_options=storage_options)
    scan = table.scan(
        snapshot_id=snapshot_id, timestamp_ms=timestamp_ms, tag=tag, columns=columns, filter=filter
    )
    snapshot = scan.snapshot
    if tag is not None:
        whole = table.scan(tag=tag)
    else:
        whole = table.scan(snapshot_id=snapshot.id if snapshot is not None else None)
    snapshot_schema = whole.output_schema  # every column, in the snapshot's schema
    wanted = list(columns) if columns is not None else snapshot_schema.names
    splits = scan.plan()
    versions = {f.schema_id for split in splits for f in split.files}
    # Spark's Parquet reader would return rows deleted by deletion vectors: the data
    # source reads those files through the core, which drops them.
    deleted = any(f.deletion is not None for split in splits for f in split.files)
    if (
        deleted
        or not native_readable(snapshot_schema)
        or (snapshot is not None and versions - {snapshot.schema_id})
    ):
        reader = spark.read.format(FORMAT)
        for key, value in (storage_options or {}).items():
            text = value if isinstance(value, str) else json.dumps(value)
            reader = reader.option(f"storage.{key}", text)
        if tag is not None:
            reader = reader.option("scan.tag-name", tag)
        elif snapshot is not None:
            reader = reader.option("scan.snapshot-id", str(snapshot.id))
        df = reader.load(uri)
    else:
        paths = [spark_location(table, f.path) for split in splits for f in split.files]
        schema = spark_schema(snapshot_schema)
        parquet = spark.read.schema(schema)
        if _has_floats(snapshot_schema):
            parquet = parquet.options(**_NO_ROW_GROUP_SKIPPING)
        df = parquet.parquet(*paths) if paths else spark.createDataFrame([], schema)
    if filter:
        df = df.where(_where(filter, snapshot_schema))
    return df.select(*[F.col("`" + name.replace("`", "``") + "`") for name in wanted])
