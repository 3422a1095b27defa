"""System tables of one snapshot's contents: ``files`` (its live data files) and ``manifests``
(the manifests of its two manifest lists). Both read the latest snapshot by default, or any
snapshot or tag.

``Table.files()`` is a narrower view of the same listing (``file_listing``): the two always
agree on the files, their order and every value they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from appendtable._state import SchemaView, TableState
from appendtable.datafiles.arrow_schema import empty_table
from appendtable.metadata import options as opt
from appendtable.metadata.models import ManifestEntry, PartitionValues, Snapshot
from appendtable.metadata.types import TypeSpec
from appendtable.planning.partitions import partition_text
from appendtable.planning.splits import partition_sort_key
from appendtable.system.columns import INT32, INT64, STRING, STRING_MAP, UTC_MS, Column
from appendtable.system.columns import SystemTableInfo as Info
from appendtable.system.values import value_texts

__all__ = [
    "FILES",
    "MANIFESTS",
    "LiveFiles",
    "file_listing",
    "files_table",
    "live_files",
    "manifests_table",
]

_PARTITION_DOC = (
    "The partition as its directory names it: 'k1=v1/k2=v2' in partition-key order, values "
    "as text (dates YYYY-MM-DD, timestamps ISO 8601), with the characters a directory name "
    "cannot hold escaped as %XX and a null value as the table's partition.default-name; "
    "an empty text value reads 'k=' and one spelled as the default name has its first "
    "character escaped, so that each partition has its own text; '' for an unpartitioned "
    "table."
)
_STATS_DOC = (
    "by column of the snapshot's schema (matched by field id, so renamed columns carry their "
    "current name); values as text (docs/system_tables.md), null where unknown. Strings may "
    "be truncated (option metadata.stats-mode): a truncated minimum is a prefix, a truncated "
    "maximum an upper bound."
)

FILES = Info(
    name="files",
    doc=(
        "One row per live data file of a snapshot (default: the latest), ordered by "
        "partition, bucket and write order."
    ),
    time_travel=True,
    columns=(
        Column("partition", STRING, _PARTITION_DOC),
        Column("bucket", INT32, "The file's bucket (0 in a scalable table, bucket = -1)."),
        Column("file_path", STRING, "The file's path relative to the table root."),
        Column(
            "file_uri",
            STRING,
            "The file's absolute location: a local path or a URL such as s3://..., what "
            "another engine opens.",
        ),
        Column("file_format", STRING, "Always parquet."),
        Column("schema_id", INT64, "The schema version the file was written with."),
        Column(
            "record_count", INT64, "Rows in the file, less those deleted (its deletion vector)."
        ),
        Column("file_size_in_bytes", INT64, "The file's size."),
        Column(
            "min_sequence_number",
            INT64,
            "The sequence number of the file's first row (rows are numbered in commit order).",
        ),
        Column("max_sequence_number", INT64, "The sequence number of the file's last row."),
        Column("creation_time", UTC_MS, "When the file was written."),
        Column(
            "file_source",
            STRING,
            "APPEND (written by a write) or COMPACT (written by compaction).",
        ),
        Column(
            "deleted_record_count",
            INT64,
            "Rows of the file that its deletion vector deletes (0: none). The Parquet file "
            "still holds them: an engine reading it directly must apply the vector.",
        ),
        Column(
            "deletion_vector_uri",
            STRING,
            "The absolute location of the Puffin file holding the file's deletion vector (a "
            "deletion-vector-v1 blob, as in Iceberg v3; docs/format.md); null: no vector.",
            True,
        ),
        Column(
            "deletion_vector_offset",
            INT64,
            "The byte offset of the vector's blob in that Puffin file (null: no vector).",
            True,
        ),
        Column(
            "deletion_vector_length",
            INT64,
            "The byte length of the vector's blob (null: no vector).",
            True,
        ),
        Column(
            "null_value_counts",
            pa.map_(pa.string(), pa.int64()),
            "Nulls in the file by column (a column added after the file was written counts "
            "every row; null: not recorded).",
        ),
        Column("min_value_stats", STRING_MAP, "Lower bounds of the file's values " + _STATS_DOC),
        Column("max_value_stats", STRING_MAP, "Upper bounds of the file's values " + _STATS_DOC),
    ),
)

MANIFESTS = Info(
    name="manifests",
    doc=(
        "One row per manifest of a snapshot (default: the latest): its base list (the files "
        "live in its parent) and then its delta list (its own changes)."
    ),
    time_travel=True,
    columns=(
        Column("file_name", STRING, "The manifest's file name, under manifest/."),
        Column("file_size", INT64, "Its size in bytes."),
        Column("num_added_files", INT64, "Entries that add a data file."),
        Column("num_deleted_files", INT64, "Entries that remove a data file."),
        Column("schema_id", INT64, "The highest schema version among its files."),
        Column(
            "min_partition_stats",
            STRING_MAP,
            "The smallest value of each partition column among its entries, as text (null: "
            "every value is null); empty for an unpartitioned table.",
        ),
        Column(
            "max_partition_stats",
            STRING_MAP,
            "The largest value of each partition column among its entries, as text.",
        ),
        Column("min_bucket", INT32, "The smallest bucket among its entries."),
        Column("max_bucket", INT32, "The largest bucket among its entries."),
        Column(
            "min_sequence_number",
            INT64,
            "The smallest row sequence number of its files (null if not recorded).",
            True,
        ),
        Column(
            "max_sequence_number",
            INT64,
            "The largest row sequence number of its files (null if not recorded).",
            True,
        ),
        Column("manifest_list", STRING, "BASE or DELTA: the manifest list that holds it."),
    ),
)


@dataclass(frozen=True)
class LiveFiles:
    """The live data files of a snapshot in listing order (partition, bucket, write order),
    with the schema version they are described in (the snapshot's) and their partitions as
    text."""

    view: SchemaView
    entries: list[ManifestEntry]
    partitions: list[str]


def live_files(state: TableState, snapshot: Snapshot | None) -> LiveFiles:
    """The live files of ``snapshot`` (None: an empty table, no files)."""
    view = state.view_at(snapshot)
    if snapshot is None:
        return LiveFiles(view, [], [])
    entries = state.manifests.live_files(snapshot)
    types = view.partition_types
    entries.sort(key=lambda e: (partition_sort_key(e.partition, types), e.bucket, e.file.min_seq))
    names: dict[PartitionValues, str] = {}
    keys = view.schema.partition_keys
    default = view.options.get(opt.PARTITION_DEFAULT_NAME)
    for entry in entries:
        if entry.partition not in names:
            names[entry.partition] = partition_text(keys, entry.partition, types, default)
    return LiveFiles(view, entries, [names[e.partition] for e in entries])


def _base_columns(state: TableState, files: LiveFiles) -> dict[str, Sequence[object]]:
    """The columns of ``files`` every listing has (no statistics)."""
    entries = files.entries
    return {
        "partition": files.partitions,
        "bucket": [e.bucket for e in entries],
        "file_path": [e.file.path for e in entries],
        "file_uri": [state.storage.uri(e.file.path) for e in entries],
        "record_count": [e.file.live_row_count for e in entries],
        "file_size_in_bytes": [e.file.file_size for e in entries],
        "min_sequence_number": [e.file.min_seq for e in entries],
        "max_sequence_number": [e.file.max_seq for e in entries],
        "creation_time": [e.file.creation_time_ms for e in entries],
        "file_source": ["COMPACT" if e.file.source else "APPEND" for e in entries],
        "deleted_record_count": [
            e.file.deletion.cardinality if e.file.deletion else 0 for e in entries
        ],
        "deletion_vector_uri": [
            state.storage.uri(e.file.deletion.path) if e.file.deletion else None for e in entries
        ],
        "deletion_vector_offset": [
            e.file.deletion.offset if e.file.deletion else None for e in entries
        ],
        "deletion_vector_length": [
            e.file.deletion.length if e.file.deletion else None for e in entries
        ],
    }


#: ``Table.files()``'s names for the columns it shares with the ``files`` system table.
_LISTING_NAMES = {
    "partition": "partition",
    "bucket": "bucket",
    "file_path": "path",
    "file_uri": "uri",
    "record_count": "rows",
    "file_size_in_bytes": "bytes",
    "min_sequence_number": "min_sequence",
    "max_sequence_number": "max_sequence",
    "creation_time": "created",
    "file_source": "source",
    "deleted_record_count": "deleted_rows",
    "deletion_vector_uri": "deletion_vector_uri",
    "deletion_vector_offset": "deletion_vector_offset",
    "deletion_vector_length": "deletion_vector_length",
}


def file_listing(state: TableState, snapshot: Snapshot | None) -> pa.Table:
    """What ``Table.files()`` returns: the ``files`` system table's rows, without statistics,
    under the listing's own column names."""
    values = _base_columns(state, live_files(state, snapshot))
    types = {column.name: column.type for column in FILES.columns}
    return pa.table(
        {new: pa.array(values[old], type=types[old]) for old, new in _LISTING_NAMES.items()}
    )


def files_table(state: TableState, snapshot: Snapshot | None) -> pa.Table:
    files = live_files(state, snapshot)
    nulls, low, high = _statistics(state, files)
    return FILES.assemble(
        {
            **_base_columns(state, files),
            "file_format": ["parquet"] * len(files.entries),
            "schema_id": [e.file.schema_id for e in files.entries],
            "null_value_counts": nulls,
            "min_value_stats": low,
            "max_value_stats": high,
        }
    )


def _statistics(state: TableState, files: LiveFiles) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Null counts, minima and maxima of ``files`` as maps by column of the snapshot's schema:
    gathered a column at a time, rendered as text a column at a time."""
    projection = state.projection(files.view)
    fields = files.view.schema.fields
    entries = files.entries
    positions = {
        schema_id: projection.layout(schema_id).stats_positions
        for schema_id in {e.file.schema_id for e in entries}
    }
    null_columns, low_columns, high_columns = [], [], []
    for field in fields:
        where = [positions[e.file.schema_id][field.name] for e in entries]
        null_columns.append(
            pa.array(
                [
                    e.file.row_count if p is None else _at(e.file.null_counts, p)
                    for e, p in zip(entries, where, strict=True)
                ],
                pa.int64(),
            )
        )
        low_columns.append(_texts(entries, where, field.type, low=True))
        high_columns.append(_texts(entries, where, field.type, low=False))
    names = [f.name for f in fields]
    return (
        _row_maps(names, null_columns, len(entries), pa.int64()),
        _row_maps(names, low_columns, len(entries), pa.string()),
        _row_maps(names, high_columns, len(entries), pa.string()),
    )


def _at(values: tuple[object, ...], position: int) -> object:
    return values[position] if position < len(values) else None


def _texts(
    entries: list[ManifestEntry], where: list[int | None], spec: TypeSpec, *, low: bool
) -> pa.Array:
    stored = [
        None if p is None else _at(e.file.min_values if low else e.file.max_values, p)
        for e, p in zip(entries, where, strict=True)
    ]
    return value_texts(stored, spec)


def _row_maps(
    names: list[str], columns: list[pa.Array], rows: int, value_type: pa.DataType
) -> pa.Array:
    """One map per row from one array per key (column ``j`` holds key ``names[j]``)."""
    width = len(names)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * width)
    keys = pa.array(np.tile(np.array(names, dtype=object), rows), pa.string())
    if width == 0:
        items = pa.array([], value_type)
    else:
        # column-major (all rows of key 0, then key 1, ...) to row-major
        stacked = pa.concat_arrays([c.cast(value_type) for c in columns])
        order = (np.arange(rows)[:, None] + np.arange(width)[None, :] * rows).ravel()
        items = stacked.take(pa.array(order, pa.int64()))
    return pa.MapArray.from_arrays(offsets, keys, items, type=pa.map_(pa.string(), value_type))


def manifests_table(state: TableState, snapshot: Snapshot | None) -> pa.Table:
    if snapshot is None:
        return empty_table(MANIFESTS.schema)
    manifests = state.manifests
    base = manifests.read_list(snapshot.base_manifest_list)
    delta = manifests.read_list(snapshot.delta_manifest_list)
    listed = base + delta
    view = state.view_at(snapshot)
    keys = list(view.schema.partition_keys)
    types = view.partition_types
    lows = [value_texts([m.partition_min[i] for m in listed], t) for i, t in enumerate(types)]
    highs = [value_texts([m.partition_max[i] for m in listed], t) for i, t in enumerate(types)]
    recorded = [m.max_seq >= m.min_seq for m in listed]
    return MANIFESTS.assemble(
        {
            "file_name": [m.file_name for m in listed],
            "file_size": [m.file_size for m in listed],
            "num_added_files": [m.num_added for m in listed],
            "num_deleted_files": [m.num_deleted for m in listed],
            "schema_id": [m.schema_id for m in listed],
            "min_partition_stats": _row_maps(keys, lows, len(listed), pa.string()),
            "max_partition_stats": _row_maps(keys, highs, len(listed), pa.string()),
            "min_bucket": [m.min_bucket for m in listed],
            "max_bucket": [m.max_bucket for m in listed],
            "min_sequence_number": [
                m.min_seq if ok else None for m, ok in zip(listed, recorded, strict=True)
            ],
            "max_sequence_number": [
                m.max_seq if ok else None for m, ok in zip(listed, recorded, strict=True)
            ],
            "manifest_list": ["BASE"] * len(base) + ["DELTA"] * len(delta),
        }
    )
