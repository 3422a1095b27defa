"""Parquet files written outside the table (by Spark, for instance), checked and described.

Before such a file can join the table it must hold the table's columns in the table's order,
each in a form the table accepts (``file_columns``: the table's type, where nullability may be
stricter and entry fields may be named otherwise, or an INT96 instant), no nulls in
non-nullable columns, and one value of each partition column. Its statistics come from the
Parquet footer (exact null counts and per-row-group extremes, aggregated), so describing a
file reads its footer and, only where the footer cannot say, single columns: partition columns
always (a footer extreme may be truncated), a non-nullable column or the watermark column when
the footer has no statistics for it (INT96 timestamps have none). No rows are rewritten.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import field as dataclass_field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from appendtable.datafiles.arrow_schema import PARQUET_FIELD_ID
from appendtable.datafiles.bloom_filters import FileIndexSpec, describe_blooms
from appendtable.datafiles.file_columns import column_mismatch, int96_columns
from appendtable.datafiles.footer import metadata_of, read_tail, tail_crc
from appendtable.datafiles.reading import (
    is_damage,
    open_parquet,
    stored_schema,
)
from appendtable.datafiles.stats import scalar_to_stat, stat_less, stored_stats
from appendtable.datafiles.table_write import event_time_ms
from appendtable.errors import CorruptDataFileError, ObjectNotFoundError, SchemaMismatchError
from appendtable.metadata.models import FileIndex, PartitionValues, StatValue
from appendtable.metadata.types import STATS_KINDS, FieldSpec
from appendtable.planning.iceberg_metadata import NameOwners
from appendtable.storage import Storage

__all__ = ["ForeignFile", "ForeignFileSpec", "describe_foreign_file"]

_TIME_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


@dataclass(frozen=True)
class ForeignFileSpec:
    """What a file must match, and what to record about it."""

    arrow_schema: pa.Schema
    fields: Sequence[FieldSpec]
    partition_keys: Sequence[str]
    stats_mode: str
    stats_truncate: int | None
    watermark_column: str | None
    #: The table's bloom-filter columns: the file's own Parquet filters on them are described.
    index: FileIndexSpec | None = None
    #: Which field id each name stands for in a file without Parquet field ids (over the
    #: table's schemas up to this one): such a file is refused where a name stands for
    #: another column than the table's of that name today.
    name_owners: NameOwners = dataclass_field(default_factory=dict)


@dataclass(frozen=True)
class ForeignFile:
    """A checked file: its rows, partition, statistics (as the table's metadata stores them)
    and, when the table has a watermark column, its latest event time (epoch ms)."""

    path: str
    file_size: int
    row_count: int
    partition: PartitionValues
    null_counts: tuple[int | None, ...]
    min_values: tuple[StatValue, ...]
    max_values: tuple[StatValue, ...]
    max_event_time_ms: int | None
    footer_crc: int
    file_index: FileIndex | None = None


def describe_foreign_file(storage: Storage, path: str, spec: ForeignFileSpec) -> ForeignFile:
    """Check the file at ``path`` against the table and describe it from its footer.

    Raises SchemaMismatchError (naming the column and the file) when it does not fit,
    CorruptDataFileError when it is not readable Parquet, ObjectNotFoundError when it is gone.
    """
    filesystem, root = storage.arrow_filesystem()
    uri = storage.uri(path)
    with (
        storage.translated("read", path),
        _foreign_errors(uri),
        filesystem.open_input_file(f"{root}/{storage.checked(path)}") as handle,
    ):
        file_size = handle.size()
        tail = read_tail(handle.read_at, file_size, uri)
        source = open_parquet(handle, metadata=metadata_of(tail))
        _check_columns(
            uri, source.schema_arrow, stored_schema(spec.arrow_schema), int96_columns(source.schema)
        )
        for found, table_field in zip(source.schema_arrow, spec.fields, strict=True):
            _check_field_ids(uri, found, table_field, None, table_field.name, spec.name_owners)
        metadata = source.metadata
        rows = metadata.num_rows
        nulls, lows, highs = _footer_extremes(metadata, spec)
        unknown = [
            field.name
            for field, count in zip(spec.arrow_schema, nulls, strict=True)
            if count is None and not field.nullable
        ]
        wanted = [*spec.partition_keys, *unknown]
        watermark = spec.watermark_column
        watermark_index = spec.arrow_schema.get_field_index(watermark) if watermark else -1
        if watermark and highs[watermark_index] is None:
            wanted.append(watermark)
        read = source.read(columns=list(dict.fromkeys(wanted))) if wanted and rows else None
        blooms = (
            describe_blooms(spec.index, handle.read_at, file_size, uri)
            if spec.index is not None and spec.index.columns
            else None
        )
    for name in unknown:  # no rows were read only when there are none
        nulls[spec.arrow_schema.get_field_index(name)] = (
            read.column(name).null_count if read is not None else 0
        )
    for field, count in zip(spec.arrow_schema, nulls, strict=True):
        if not field.nullable and count:
            raise SchemaMismatchError(
                f"column '{field.name}' is not nullable, but staged file {uri} holds {count} "
                "null(s) in it",
                column=field.name,
            )
    partition = _partition(uri, read, spec)
    kinds = [field.type.kind for field in spec.fields]
    stored = stored_stats(spec.stats_mode, spec.stats_truncate, nulls, lows, highs, kinds)
    return ForeignFile(
        path=path,
        file_size=file_size,
        row_count=rows,
        partition=partition,
        null_counts=stored[0],
        min_values=stored[1],
        max_values=stored[2],
        max_event_time_ms=_event_time(read, highs, watermark_index, spec),
        footer_crc=tail_crc(tail),
        file_index=blooms,
    )


@contextmanager
def _foreign_errors(uri: str) -> Iterator[None]:
    try:
        yield
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(
            f"staged file {uri} does not exist", path=uri, operation="read"
        ) from exc
    except (pa.ArrowInvalid, OSError) as exc:
        if not is_damage(exc):
            raise
        raise CorruptDataFileError(
            f"staged file {uri} is not readable Parquet: {exc}", path=uri
        ) from exc


def _check_columns(uri: str, found: pa.Schema, expected: pa.Schema, int96: frozenset[str]) -> None:
    """Exactly the table's columns, in its order, each in a form that fits the type the
    table's own files hold (readers return a file's columns in the order they are stored)."""
    for position, column in enumerate(expected):
        index = found.get_field_index(column.name)
        if index < 0:
            raise SchemaMismatchError(
                f"staged file {uri} lacks column '{column.name}' of the table", column=column.name
            )
        reason = column_mismatch(found.field(index).type, column.type, int96=column.name in int96)
        if reason is not None:
            raise SchemaMismatchError(
                f"column '{column.name}' of staged file {uri} {reason}", column=column.name
            )
        if index != position:
            raise SchemaMismatchError(
                f"column '{column.name}' of staged file {uri} is at position {index}, the "
                f"table's is {position}: write the columns in the table's order",
                column=column.name,
            )
    if len(found) != len(expected):
        extra = found.field(len(expected)).name
        raise SchemaMismatchError(
            f"staged file {uri} has column '{extra}', which is not in the table", column=extra
        )


def _check_field_ids(
    uri: str,
    found: pa.Field,
    table_field: FieldSpec,
    parent: int | None,
    path: str,
    owners: NameOwners,
    top: str | None = None,
) -> None:
    """The file's Parquet field ids (where it has them) are the table's, at every depth, and
    a field without one has a name that stands for this field: readers that match columns by
    field id, or by name through the Iceberg mirror's name mapping, then read the column the
    table reads. Both are refused otherwise (SchemaMismatchError naming the column)."""
    stored = (found.metadata or {}).get(PARQUET_FIELD_ID)
    if stored is not None and stored.decode(errors="replace") != str(table_field.id):
        raise SchemaMismatchError(
            f"column '{path}' of staged file {uri} carries Parquet field id "
            f"{stored.decode(errors='replace')}, the table's column '{path}' has id "
            f"{table_field.id}: readers that match columns by field id (an Iceberg reader of "
            "the table's mirror) would read it as another column. Write the file without "
            "field ids, or append its rows (Table.append writes the table's ids)",
            column=top or path,
        )
    if stored is None and owners.get((parent, table_field.name), table_field.id) != table_field.id:
        raise SchemaMismatchError(
            f"column '{path}' of staged file {uri} has no Parquet field id, and another column "
            f"of this table held the name '{table_field.name}' before: readers that match "
            "columns by name (an Iceberg reader of the table's mirror) would read it as that "
            "column. Append its rows instead (Table.append writes the table's field ids)",
            column=top or path,
        )
    children = _children(found.type)
    kind = table_field.type.kind
    for index, child in enumerate(table_field.type.fields):
        if kind == "struct":
            position = found.type.get_field_index(child.name)
            match = children[position] if position >= 0 else None
        else:
            match = children[index] if index < len(children) else None
        if match is not None:
            _check_field_ids(
                uri, match, child, table_field.id, f"{path}.{child.name}", owners, top or path
            )


def _children(dtype: pa.DataType) -> list[pa.Field]:
    """The child fields of a nested Arrow type (a list's element, a map's key and value, a
    struct's fields); none for other types."""
    if pa.types.is_map(dtype):
        return [dtype.key_field, dtype.item_field]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [dtype.value_field]
    if pa.types.is_fixed_size_list(dtype):
        return [dtype.value_field]
    if pa.types.is_struct(dtype):
        return [dtype.field(i) for i in range(dtype.num_fields)]
    return []


def _footer_extremes(
    metadata: pq.FileMetaData, spec: ForeignFileSpec
) -> tuple[list[int | None], list[StatValue], list[StatValue]]:
    """Per top-level column: the null count and the stored min/max over all row groups (None
    where the footer does not know)."""
    chunk_index = {
        metadata.schema.column(i).path: i for i in range(metadata.num_columns)
    }  # leaf paths; a top-level primitive column's path is its name
    count = len(spec.fields)
    nulls: list[int | None] = [0] * count
    lows: list[StatValue] = [None] * count
    highs: list[StatValue] = [None] * count
    for position, (field, arrow_field) in enumerate(
        zip(spec.fields, spec.arrow_schema, strict=True)
    ):
        index = chunk_index.get(field.name)
        kind = field.type.kind
        if index is None:  # a nested column: no statistics kept
            nulls[position] = None
            continue
        known = kind in STATS_KINDS
        for group in range(metadata.num_row_groups):
            group_rows = metadata.row_group(group).num_rows
            stats = metadata.row_group(group).column(index).statistics
            if stats is None or not stats.has_null_count:
                nulls[position] = None
                known = False
                continue
            if nulls[position] is not None:
                nulls[position] = nulls[position] + stats.null_count
            if not known or stats.null_count == group_rows:
                continue  # an all-null row group has no extremes
            low = _stored(stats, arrow_field.type, kind, "min") if stats.has_min_max else None
            high = _stored(stats, arrow_field.type, kind, "max") if stats.has_min_max else None
            if low is None or high is None:
                known = False
                continue
            if lows[position] is None or stat_less(low, lows[position], kind):
                lows[position] = low
            if highs[position] is None or stat_less(highs[position], high, kind):
                highs[position] = high
        if not known:
            lows[position] = highs[position] = None
    return nulls, lows, highs


def _stored(stats: pq.Statistics, dtype: pa.DataType, kind: str, end: str) -> StatValue:
    """One footer extreme in the table's stored form, or None if it cannot be trusted."""
    try:
        if pa.types.is_timestamp(dtype) or pa.types.is_time(dtype):
            raw = stats.min_raw if end == "min" else stats.max_raw
            unit = _TIME_UNITS.get(json.loads(stats.logical_type.to_json()).get("timeUnit", ""))
            if not isinstance(raw, int) or unit is None:
                return None  # e.g. INT96 timestamps
            base = pa.timestamp(unit) if pa.types.is_timestamp(dtype) else _time_type(unit)
            scalar = pa.scalar(raw, type=base).cast(dtype)
        else:
            value = stats.min if end == "min" else stats.max
            if isinstance(value, float) and math.isnan(value):
                return None
            scalar = pa.scalar(value, type=dtype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None
    return scalar_to_stat(scalar, kind)


def _time_type(unit: str) -> pa.DataType:
    return pa.time32(unit) if unit == "ms" else pa.time64(unit)


def _partition(uri: str, read: pa.Table | None, spec: ForeignFileSpec) -> PartitionValues:
    """The file's partition values, read from the partition columns: one value per column."""
    if not spec.partition_keys:
        return ()
    if read is None:
        raise SchemaMismatchError(f"staged file {uri} holds no rows")
    kinds = {field.name: field.type.kind for field in spec.fields}
    values = []
    for key in spec.partition_keys:
        column = read.column(key)
        if pc.count_distinct(column, mode="all").as_py() != 1:
            raise SchemaMismatchError(
                f"staged file {uri} holds rows of several values of partition column '{key}': "
                "each file must hold one partition",
                column=key,
            )
        values.append(scalar_to_stat(column[0], kinds[key]))
    return tuple(values)


def _event_time(
    read: pa.Table | None, highs: Sequence[StatValue], index: int, spec: ForeignFileSpec
) -> int | None:
    if index < 0:
        return None
    dtype = spec.arrow_schema.field(index).type
    high = highs[index]
    if high is not None:
        return event_time_ms(pa.scalar(high, type=dtype))
    if read is not None and spec.watermark_column in read.column_names:
        return event_time_ms(pc.max(read.column(spec.watermark_column)))
    return None
