"""Writes across schema changes: ``mergeSchema``, and rows shaped to the table by name.

* ``merge_schema(table, data_schema)`` adds to the table what only the data has: top-level
  columns and fields of struct columns (at any depth of structs), as nullable fields, in the
  data's order (each after the field that precedes it in the data, the first after the
  table's last), as one ALTER snapshot. Types are never changed (as the core's
  ``schema_mode="merge"``). A change that loses a race with another is planned again on the
  schema that won, so writers merging the same column at once all succeed.
* ``check_write(table, data_schema, merge=...)``: SchemaMismatchError naming the column unless
  the data can be written as is (``merge=False``: the same columns) or with nulls for the
  nullable columns and struct fields it lacks (``merge=True``).
* ``pad_batch`` (Arrow, executors) and ``shaped_columns`` (Spark, driver) give rows exactly the
  table's columns: missing nullable columns and struct fields as nulls, struct fields matched
  by name (Spark's own cast matches them by position, which would mix up fields of the same
  type written in another order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DecimalType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructField,
    StructType,
)

import appendtable as at
from appendtable_spark.types import spark_type

__all__ = [
    "Addition",
    "additions",
    "check_write",
    "merge_schema",
    "pad_batch",
    "shaped_columns",
]

#: Plans of a merge before giving up (each lost race means another change landed).
_ATTEMPTS = 20


@dataclass(frozen=True)
class Addition:
    """A field to add: its path (top-level column: one name), type and the sibling it goes
    after (None: first)."""

    path: tuple[str, ...]
    type: pa.DataType
    after: str | None


def additions(table_schema: pa.Schema, data_schema: pa.Schema) -> list[Addition]:
    """What ``merge_schema`` adds so that data of ``data_schema`` fits ``table_schema``."""
    found: list[Addition] = []
    _additions((), list(table_schema), list(data_schema), found)
    return found


def _additions(
    parent: tuple[str, ...],
    table_fields: Sequence[pa.Field],
    data_fields: Sequence[pa.Field],
    found: list[Addition],
) -> None:
    existing = {f.name: f for f in table_fields}
    previous = table_fields[-1].name if table_fields else None
    for field in data_fields:
        current = existing.get(field.name)
        if current is None:
            found.append(Addition((*parent, field.name), field.type, previous))
            previous = field.name
        elif pa.types.is_struct(current.type) and pa.types.is_struct(field.type):
            _additions((*parent, field.name), list(current.type), list(field.type), found)


def merge_schema(table: at.Table, data_schema: pa.Schema) -> at.Snapshot | None:
    """Add the columns and struct fields only ``data_schema`` has to ``table`` (nullable), as
    one ALTER snapshot (returned; None when nothing was missing)."""
    for _ in range(_ATTEMPTS):
        before = table.schema_id
        planned = additions(table.schema, data_schema)
        if not planned:
            return None
        try:
            with table.update_schema() as update:
                for addition in planned:
                    update.add_column(addition.path, addition.type, after=addition.after)
        except at.SchemaChangeError:
            if table.schema_id == before:
                raise  # refused on the schema it was planned on: not a race
            continue  # another change landed meanwhile (perhaps adding the same columns)
        return update.snapshot
    raise at.SchemaChangeError(
        f"the schema of {table.uri} kept changing while merging columns into it: retry later"
    )


# ---- what the data must hold ----------------------------------------------------------------


def _padded_type(data: pa.DataType, table: pa.DataType, path: str) -> pa.DataType:
    """``data`` with the struct fields only ``table`` has appended (nullable ones; a
    non-nullable one the data lacks raises SchemaMismatchError)."""
    if not (pa.types.is_struct(data) and pa.types.is_struct(table)):
        return data
    present = {f.name: f for f in data}
    fields = []
    for field in data:
        wanted = table.field(field.name) if table.get_field_index(field.name) >= 0 else None
        fields.append(
            field
            if wanted is None
            else field.with_type(_padded_type(field.type, wanted.type, f"{path}.{field.name}"))
        )
    for field in table:
        if field.name not in present:
            if not field.nullable:
                raise at.SchemaMismatchError(
                    f"input is missing field '{path}.{field.name}' of the table schema, which "
                    "is not nullable",
                    column=f"{path}.{field.name}",
                )
            fields.append(field)
    return pa.struct(fields)


def padded_schema(data_schema: pa.Schema, table_schema: pa.Schema) -> pa.Schema:
    """The schema the data has once the nullable columns and struct fields it lacks are filled
    with nulls (SchemaMismatchError for a missing non-nullable one)."""
    fields = []
    for field in table_schema:
        if data_schema.get_field_index(field.name) < 0:
            if not field.nullable:
                raise at.SchemaMismatchError(
                    f"input is missing column '{field.name}' of the table schema, which is not "
                    "nullable",
                    column=field.name,
                )
            fields.append(field)
            continue
        given = data_schema.field(field.name)
        fields.append(given.with_type(_padded_type(given.type, field.type, field.name)))
    extra = [f for f in data_schema if table_schema.get_field_index(f.name) < 0]
    return pa.schema(fields + extra)


def check_write(table: at.Table, data_schema: pa.Schema, *, merge: bool) -> None:
    """SchemaMismatchError (naming the column) unless data of ``data_schema`` can be written to
    ``table``: the same columns, or with ``merge`` a subset of them (nullable columns and struct
    fields it lacks are written as nulls); types that cast safely."""
    if merge:
        data_schema = padded_schema(data_schema, table.schema)
    table.check_write_schema(data_schema)


# ---- Arrow batches (executors) ----------------------------------------------------------------


def _needs_padding(source: pa.DataType, target: pa.DataType) -> bool:
    if not (pa.types.is_struct(source) and pa.types.is_struct(target)):
        return False
    return any(source.get_field_index(f.name) < 0 for f in target) or any(
        _needs_padding(f.type, target.field(f.name).type)
        for f in source
        if target.get_field_index(f.name) >= 0
    )


def _pad_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    """A struct array with the fields of ``target`` it lacks (at any depth of structs) as
    nulls; anything else unchanged."""
    if not _needs_padding(array.type, target):
        return array
    children, fields = [], []
    for index, field in enumerate(array.type):
        position = target.get_field_index(field.name)
        child = array.field(index)
        if position >= 0:
            child = _pad_array(child, target.field(position).type)
        children.append(child)
        fields.append(pa.field(field.name, child.type, field.nullable))
    for field in target:
        if array.type.get_field_index(field.name) < 0:
            children.append(pa.nulls(len(array), field.type))
            fields.append(field)
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def pad_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with every nullable column and struct field of ``schema`` it lacks, as nulls
    (the core's writer then matches columns and struct fields by name and casts them)."""
    arrays, fields = [], []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            if field.nullable:
                arrays.append(pa.nulls(batch.num_rows, field.type))
                fields.append(field)
            continue  # a required column: the writer names it
        array = _pad_array(batch.column(index), field.type)
        arrays.append(array)
        fields.append(batch.schema.field(index).with_type(array.type))
    for index, field in enumerate(batch.schema):
        if schema.get_field_index(field.name) < 0:
            arrays.append(batch.column(index))  # not in the table: the writer names it
            fields.append(field)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


# ---- Spark columns (the native write path) -----------------------------------------------------


def _quoted(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _same_ignoring_nullability(have: DataType, want: DataType) -> bool:
    if isinstance(have, StructType) and isinstance(want, StructType):
        return [f.name for f in have] == [f.name for f in want] and all(
            _same_ignoring_nullability(a.dataType, b.dataType)
            for a, b in zip(have.fields, want.fields, strict=True)
        )
    if isinstance(have, ArrayType) and isinstance(want, ArrayType):
        return _same_ignoring_nullability(have.elementType, want.elementType)
    if isinstance(have, MapType) and isinstance(want, MapType):
        return _same_ignoring_nullability(
            have.keyType, want.keyType
        ) and _same_ignoring_nullability(have.valueType, want.valueType)
    return bool(have == want)


def _shaped(expr: Column, have: DataType, nullable: bool, target: pa.DataType, path: str) -> Column:
    """``expr`` (of Spark type ``have``) as the table's type ``target``: struct fields by name
    (missing nullable ones as nulls), leaves cast (already checked to cast safely)."""
    want = spark_type(target, path)
    if _same_ignoring_nullability(have, want):
        return expr  # nullability may be stricter in a file than in the table
    if isinstance(have, StructType) and isinstance(want, StructType):
        by_name = {f.name: f for f in have.fields}
        children = []
        for index, field in enumerate(target):
            given: StructField | None = by_name.get(field.name)
            if given is None:
                child = F.lit(None).cast(want.fields[index].dataType)
            else:
                child = _shaped(
                    expr.getField(field.name),
                    given.dataType,
                    nullable or given.nullable,
                    field.type,
                    f"{path}.{field.name}",
                )
            children.append(child.alias(field.name))
        built = F.struct(*children)
        return F.when(expr.isNull(), F.lit(None)).otherwise(built) if nullable else built
    if isinstance(have, ArrayType) and isinstance(want, ArrayType):
        element = target.value_type
        return F.transform(
            expr,
            lambda item: _shaped(item, have.elementType, True, element, f"{path}[]"),
        )
    if isinstance(have, MapType) and isinstance(want, MapType):
        shaped = expr
        if not _same_ignoring_nullability(have.keyType, want.keyType):
            shaped = F.transform_keys(
                shaped,
                lambda key, _: _shaped(key, have.keyType, False, target.key_type, f"{path}.key"),
            )
        if not _same_ignoring_nullability(have.valueType, want.valueType):
            shaped = F.transform_values(
                shaped,
                lambda _, value: _shaped(
                    value, have.valueType, True, target.item_type, f"{path}.value"
                ),
            )
        return shaped
    return expr.cast(want)


def unchecked_cast(data: StructType, schema: pa.Schema) -> str | None:
    """Why Spark's own cast cannot shape ``data`` into ``schema`` without risking a silent
    change, or None. Spark casts value by value without the core's checks: with ANSI mode off
    a narrowing integer cast wraps around, a bigint becomes a double rounded above 2**53 even
    with it on, and a double becomes an infinite float. Only casts that hold every value
    exactly (wider integers, float to double, decimals with as many integer and fractional
    digits or more) are left to Spark; other writes take the format's writer, whose core cast
    stores each value exactly or refuses it naming the column."""
    by_name = {f.name: f for f in data.fields}
    for field in schema:
        given = by_name.get(field.name)
        if given is not None:
            reason = _unchecked(given.dataType, field.type, field.name)
            if reason is not None:
                return reason
    return None


#: Decimal digits of the Spark integral types' largest values.
_INTEGRAL_DIGITS: dict[type[DataType], int] = {
    ByteType: 3,
    ShortType: 5,
    IntegerType: 10,
    LongType: 19,
}
#: Bits of the Spark integral types.
_INTEGRAL_BITS: dict[type[DataType], int] = {
    ByteType: 8,
    ShortType: 16,
    IntegerType: 32,
    LongType: 64,
}
#: The widest Spark integral type a float of these bits holds exactly (mantissa bits).
_EXACT_IN_FLOAT = {32: 16, 64: 32}


def _unchecked(have: DataType, target: pa.DataType, path: str) -> str | None:
    if isinstance(have, StructType) and pa.types.is_struct(target):
        fields = {f.name: f for f in have.fields}
        for child in target:
            given = fields.get(child.name)
            if given is not None:
                reason = _unchecked(given.dataType, child.type, f"{path}.{child.name}")
                if reason is not None:
                    return reason
        return None
    if isinstance(have, ArrayType) and (pa.types.is_list(target) or pa.types.is_large_list(target)):
        return _unchecked(have.elementType, target.value_type, f"{path}.element")
    if isinstance(have, MapType) and pa.types.is_map(target):
        return _unchecked(have.keyType, target.key_type, f"{path}.key") or _unchecked(
            have.valueType, target.item_type, f"{path}.value"
        )
    if _exact_cast(have, target, path):
        return None
    return f"column '{path}': Spark's cast from {have.simpleString()} to {target} is unchecked"


def _exact_cast(have: DataType, target: pa.DataType, path: str) -> bool:
    """Whether Spark's cast of ``have`` to the table's ``target`` keeps every value."""
    try:
        if _same_ignoring_nullability(have, spark_type(target, path)):
            return True
    except (at.InvalidSchemaError, TypeError, ValueError):
        return False
    integral = type(have) if type(have) in _INTEGRAL_BITS else None
    if integral is not None and pa.types.is_signed_integer(target):
        return _INTEGRAL_BITS[integral] <= int(target.bit_width)
    if integral is not None and pa.types.is_floating(target):
        return _INTEGRAL_BITS[integral] <= _EXACT_IN_FLOAT.get(int(target.bit_width), 0)
    if integral is not None and pa.types.is_decimal(target):
        return _INTEGRAL_DIGITS[integral] <= int(target.precision - target.scale)
    if isinstance(have, FloatType):
        return bool(pa.types.is_float64(target))
    if isinstance(have, DecimalType) and pa.types.is_decimal(target):
        digits, scale = int(target.precision), int(target.scale)
        return have.scale <= scale and have.precision - have.scale <= digits - scale
    return False


def shaped_columns(data: StructType, schema: pa.Schema) -> list[Column]:
    """Spark columns selecting ``data``'s rows as the table's columns (``schema``), in its
    order: columns the data lacks as nulls (they were checked to be nullable), struct fields
    matched by name, leaves cast to the table's types."""
    by_name = {f.name: f for f in data.fields}
    columns = []
    for field in schema:
        given = by_name.get(field.name)
        if given is None:
            column = F.lit(None).cast(spark_type(field.type, field.name))
        else:
            column = _shaped(
                _quoted(field.name), given.dataType, given.nullable, field.type, field.name
            )
        columns.append(column.alias(field.name))
    return columns
