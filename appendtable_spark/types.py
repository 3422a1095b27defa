"""Table (Arrow) types as Spark types, and Arrow batches in the exact form Spark expects.

Mapping: bool, int8..int64, float32/64, string, binary, date, decimal(p <= 38), list, struct and
map map to their Spark counterparts; large and view variants to the plain ones; uint8/16/32 to
the next wider signed type and uint64 to decimal(20, 0) (Spark has no unsigned types);
timestamps with a time zone to TIMESTAMP (instants), without one to TIMESTAMP_NTZ; time to TIME;
duration to a day-time interval. Anything else is rejected with the column named.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    TimeType,
)

import appendtable as at

__all__ = ["cast_batch", "spark_arrow_schema", "spark_schema"]


def spark_type(dtype: pa.DataType, column: str) -> DataType:
    types = pa.types
    simple: list[tuple[Callable[[pa.DataType], bool], DataType]] = [
        (types.is_boolean, BooleanType()),
        (types.is_int8, ByteType()),
        (types.is_int16, ShortType()),
        (types.is_uint8, ShortType()),
        (types.is_int32, IntegerType()),
        (types.is_uint16, IntegerType()),
        (types.is_int64, LongType()),
        (types.is_uint32, LongType()),
        (types.is_float16, FloatType()),
        (types.is_float32, FloatType()),
        (types.is_float64, DoubleType()),
        (types.is_date, DateType()),
        (types.is_duration, DayTimeIntervalType()),
    ]
    for predicate, result in simple:
        if predicate(dtype):
            return result
    if types.is_uint64(dtype):
        return DecimalType(20, 0)
    if types.is_string(dtype) or types.is_large_string(dtype) or types.is_string_view(dtype):
        return StringType()
    if (
        types.is_binary(dtype)
        or types.is_large_binary(dtype)
        or types.is_fixed_size_binary(dtype)
        or types.is_binary_view(dtype)
    ):
        return BinaryType()
    if types.is_timestamp(dtype):
        return TimestampType() if dtype.tz is not None else TimestampNTZType()
    if types.is_time(dtype):
        return TimeType()
    if types.is_decimal(dtype) and dtype.precision <= 38:
        return DecimalType(dtype.precision, dtype.scale)
    if types.is_list(dtype) or types.is_large_list(dtype) or types.is_fixed_size_list(dtype):
        field = dtype.value_field
        return ArrayType(spark_type(field.type, f"{column}[]"), containsNull=field.nullable)
    if types.is_map(dtype):
        return MapType(
            spark_type(dtype.key_type, f"{column}.key"),
            spark_type(dtype.item_type, f"{column}.value"),
            valueContainsNull=dtype.item_field.nullable,
        )
    if types.is_struct(dtype):
        return StructType(
            [
                StructField(f.name, spark_type(f.type, f"{column}.{f.name}"), f.nullable)
                for f in dtype
            ]
        )
    raise at.InvalidSchemaError(f"column '{column}' has type {dtype}, which Spark cannot read")


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of a table."""
    return StructType([StructField(f.name, spark_type(f.type, f.name), f.nullable) for f in schema])


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark requires of batches returned for ``schema`` (UTC instants)."""
    return to_arrow_schema(schema, timezone="UTC")


def cast_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly ``target``'s types (a no-op when they already match).
    Nanosecond times are floored to Spark's microseconds, as PySpark itself does; every other
    cast is checked (it fails rather than change a value)."""
    if batch.schema.equals(target):
        return batch
    columns = []
    for field in target:
        column = batch.column(field.name)
        source = column.type
        if (
            (pa.types.is_timestamp(source) or pa.types.is_time(source))
            and source.unit == "ns"
            and getattr(field.type, "unit", "ns") != "ns"
        ):
            column = pc.floor_temporal(column, unit="microsecond")
        columns.append(column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)
