"""Describing a data file's Parquet bloom filters for its manifest entry.

Used for the files the table writes (its writer asks pyarrow for the filters) and for files
another engine wrote (Spark's Parquet writer can write them too): a column's filters are
described only when every row group has one and the column is stored in the physical type
that its Arrow type is hashed as (``planning.parquet_bloom.parquet_physical_type``); Spark's
INT96 timestamps or integer-stored decimals, for instance, are left out. Bitsets are copied
into the manifest when a file's filters total at most ``file-index.in-manifest-threshold``
bytes, else only located in the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from appendtable.datafiles.footer import read_tail
from appendtable.metadata import options as opt
from appendtable.metadata.models import BloomFilter, FileIndex
from appendtable.metadata.types import FieldSpec
from appendtable.planning.parquet_bloom import (
    bitset_of,
    parquet_physical_type,
    unsupported_bloom_reason,
)

__all__ = ["FileIndexSpec", "describe_blooms"]

_HEADER_READ = 64  # bytes read to find a filter's size (its Thrift header is ~15 bytes)


@dataclass(frozen=True)
class FileIndexSpec:
    """Which columns get a Parquet bloom filter per row group, and how big a file's filters may
    be for their bitsets to be copied into the manifest (larger ones are read from the file)."""

    #: (column name, field id, the table's Arrow type) of each indexed column.
    columns: tuple[tuple[str, int, pa.DataType], ...]
    fpp: float
    items: int
    in_manifest_threshold: int

    @staticmethod
    def for_table(
        fields: Sequence[FieldSpec], arrow_schema: pa.Schema, options: opt.Options
    ) -> FileIndexSpec | None:
        """The index spec of a table's data files; None when no column is indexed."""
        names = options.get(opt.FILE_INDEX_BLOOM_COLUMNS)
        if not names:
            return None
        ids = {f.name: f.id for f in fields}
        columns = []
        for name in names:
            data_type = arrow_schema.field(name).type
            field_id = ids[name]
            if unsupported_bloom_reason(data_type) is None and field_id is not None:
                columns.append((name, field_id, data_type))  # validated at create/alter
        return FileIndexSpec(
            columns=tuple(columns),
            fpp=options.get(opt.FILE_INDEX_BLOOM_FPP),
            items=options.get(opt.FILE_INDEX_BLOOM_ITEMS),
            in_manifest_threshold=options.get(opt.FILE_INDEX_IN_MANIFEST_THRESHOLD),
        )

    def writer_options(self, rows: int) -> dict[str, dict[str, float]]:
        """pyarrow's ``bloom_filter_options`` for row groups of about ``rows`` rows: filters
        sized for that many distinct values, or for ``items`` when set."""
        ndv = self.items if self.items > 0 else max(1, rows)
        return {name: {"ndv": ndv, "fpp": self.fpp} for name, _, _ in self.columns}


def describe_blooms(
    index: FileIndexSpec,
    read_at: Callable[[int, int], bytes],
    size: int,
    uri: str,
) -> FileIndex | None:
    """The :class:`FileIndex` of the Parquet file of ``size`` bytes read with ``read_at(count,
    offset)``, or None when no indexed column has usable filters."""
    footer = read_tail(read_at, size, uri)
    metadata = pq.read_metadata(pa.BufferReader(footer))
    if metadata.num_row_groups == 0:
        return None
    first = metadata.row_group(0)
    # leaf columns by path: a top-level column's path is its name ("s.id" is a struct field)
    paths = {first.column(i).path_in_schema: i for i in range(metadata.num_columns)}
    arrow = metadata.schema.to_arrow_schema()
    located: list[tuple[int, str, int, int, int]] = []  # field id, type, offset, length, bytes
    for name, field_id, table_type in index.columns:
        if name not in paths or not _same_encoding(arrow.field(name).type, table_type):
            continue
        expected = parquet_physical_type(table_type)
        found = _located(metadata, paths[name], field_id, str(table_type), expected, read_at)
        if found is not None:
            located.extend(found)
    if not located:
        return None
    copy = sum(item[4] for item in located) <= index.in_manifest_threshold
    blooms = []
    for field_id, value_type, offset, length, num_bytes in located:
        start = offset + length - num_bytes  # the bitset ends the serialized filter
        bits = read_at(num_bytes, start) if copy else b""
        blooms.append(BloomFilter(field_id, value_type, num_bytes, bits, start))
    return FileIndex(tuple(blooms), row_groups=metadata.num_row_groups)


def _same_encoding(stored: pa.DataType, table: pa.DataType) -> bool:
    """Whether values of the table's type are PLAIN-encoded alike in a file whose column reads
    as ``stored``: the same unit for timestamps and times (seconds are stored as
    milliseconds), the same precision and scale for decimals, the same width for fixed-size
    binaries; the physical type is checked per column chunk."""
    if pa.types.is_dictionary(table):
        table = table.value_type
    if pa.types.is_timestamp(table) or pa.types.is_time(table):
        unit = "ms" if table.unit == "s" else table.unit
        if pa.types.is_timestamp(table) != pa.types.is_timestamp(stored):
            return False
        return (pa.types.is_timestamp(stored) or pa.types.is_time(stored)) and bool(
            stored.unit == unit
        )
    if pa.types.is_decimal(table):
        return pa.types.is_decimal(stored) and bool(
            (stored.precision, stored.scale) == (table.precision, table.scale)
        )
    if pa.types.is_fixed_size_binary(table):
        return pa.types.is_fixed_size_binary(stored) and bool(stored.byte_width == table.byte_width)
    return True


def _located(
    metadata: pq.FileMetaData,
    position: int,
    field_id: int,
    value_type: str,
    physical: str | None,
    read_at: Callable[[int, int], bytes],
) -> list[tuple[int, str, int, int, int]] | None:
    """Where the filters of one column are, for every row group; None unless all are there."""
    found = []
    for row_group in range(metadata.num_row_groups):
        column = metadata.row_group(row_group).column(position)
        offset, length = column.bloom_filter_offset, column.bloom_filter_length
        if physical is None or column.physical_type != physical:
            return None
        if offset is None or not length or length <= 0:
            return None
        head = read_at(min(length, _HEADER_READ), offset)
        num_bytes = bitset_of(head, length)
        if num_bytes is None:
            return None
        found.append((field_id, value_type, offset, length, num_bytes))
    return found
