"""Which Parquet files a table accepts, and how their columns become the table's: the one rule
that adopting a foreign file and reading any data file share.

A file column *fits* a table column when it holds the table's values in one of these forms:

* the type a Parquet round trip of the table's type gives (``stored_schema``), where
  nullability may be stricter than the table's at any depth (engines such as Spark mark
  columns ``NOT NULL``), list and map entry fields may carry other names (Spark's
  ``element``, ``key_value``) and the file may carry schema metadata of its own;
* for a timestamp column with a time zone (an instant), an INT96 timestamp: Spark's legacy
  encoding of instants, read as microseconds in UTC (finer digits, which Spark never writes,
  are cut). INT96 is refused for wall-clock timestamps (no time zone): writers disagree on
  whether it holds local or UTC time.

Decimals come back as ``decimal128(p, s)`` whether a writer stored them as INT32, INT64 or
fixed-length bytes, and dates as ``date32``; those need nothing more. Readers cast every batch
of a fitting file to the table's schema with safe casts, so a file of any accepted form yields
exactly the table's types, nullability and no foreign metadata (what compaction writes is then
in the table schema), and a value that a cast would change raises instead of being altered.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["INT96_UNIT", "column_mismatch", "int96_columns", "same_layout"]

#: The unit INT96 timestamps are read in: microseconds reach year 9999 (nanoseconds overflow
#: after 2262) and are Spark's own precision.
INT96_UNIT = "us"


def int96_columns(schema: pq.ParquetSchema) -> frozenset[str]:
    """Top-level columns of a file that hold INT96 timestamps (at any depth)."""
    found = set()
    for index in range(len(schema)):
        column = schema.column(index)
        if column.physical_type == "INT96":
            found.add(column.path.split(".", 1)[0])
    return frozenset(found)


def column_mismatch(found: pa.DataType, expected: pa.DataType, *, int96: bool) -> str | None:
    """Why a file column of type ``found`` cannot hold a table column of type ``expected`` (the
    type its files store, from ``stored_schema``), or None if it fits. ``int96``: the file
    stores timestamps of this column as INT96."""
    if pa.types.is_struct(expected):
        if not pa.types.is_struct(found) or found.num_fields != expected.num_fields:
            return f"has type {found}, the table's is {expected}"
        for index in range(expected.num_fields):
            want, have = expected.field(index), found.field(index)
            if have.name != want.name:
                return f"has field '{have.name}' where the table has '{want.name}'"
            reason = _child_mismatch(have, want, int96=int96)
            if reason is not None:
                return f"field '{want.name}' {reason}"
        return None
    if _is_list(expected):
        if type(found) is not type(expected) or (
            pa.types.is_fixed_size_list(expected) and found.list_size != expected.list_size
        ):
            return f"has type {found}, the table's is {expected}"
        reason = _child_mismatch(found.value_field, expected.value_field, int96=int96)
        return None if reason is None else f"element {reason}"
    if pa.types.is_map(expected):
        if not pa.types.is_map(found):
            return f"has type {found}, the table's is {expected}"
        reason = _child_mismatch(found.key_field, expected.key_field, int96=int96)
        if reason is None:
            reason = _child_mismatch(found.item_field, expected.item_field, int96=int96)
        return None if reason is None else f"entry {reason}"
    if found == expected:
        if int96 and pa.types.is_timestamp(expected) and expected.tz is None:
            return "is stored as INT96 (an instant), the table's is a wall-clock timestamp"
        return None
    if (
        int96
        and pa.types.is_timestamp(expected)
        and expected.tz is not None
        and pa.types.is_timestamp(found)
        and found.tz is None
    ):
        return None  # an INT96 instant, read in UTC
    return f"has type {found}, the table's is {expected}"


def _child_mismatch(found: pa.Field, expected: pa.Field, *, int96: bool) -> str | None:
    if found.nullable and not expected.nullable:
        return "may hold nulls, which the table does not allow"
    return column_mismatch(found.type, expected.type, int96=int96)


def _is_list(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
    )


def same_layout(found: pa.Schema, wanted: pa.Schema) -> bool:
    """Whether batches read with ``found`` are already exactly ``wanted`` (types and
    nullability; metadata aside), so no cast is needed."""
    return bool(found.equals(wanted, check_metadata=False))
