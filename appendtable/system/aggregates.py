"""System tables that sum up a snapshot's live files: ``partitions`` and ``buckets``.

Both are Arrow aggregations of the rows of the ``files`` system table (the same listing), so
their counts and sizes always add up to it. Rows come in the files' order: partitions in
value order (nulls last), then buckets.
"""

from __future__ import annotations

import pyarrow as pa

from appendtable._state import TableState
from appendtable.metadata.models import Snapshot
from appendtable.system.columns import INT32, INT64, STRING, UTC_MS, Column, SystemTableInfo
from appendtable.system.files import live_files

__all__ = ["BUCKETS", "PARTITIONS", "buckets_table", "partitions_table"]

_PARTITION = Column(
    "partition",
    STRING,
    "The partition, as in the files table ('k1=v1/k2=v2'; '' for an unpartitioned table).",
)
_SUMS = (
    Column("record_count", INT64, "Rows in its live files."),
    Column("file_size_in_bytes", INT64, "The total size of its live files."),
    Column("file_count", INT64, "Its live files."),
    Column("last_update_time", UTC_MS, "The creation time of its newest live file."),
)

PARTITIONS = SystemTableInfo(
    name="partitions",
    doc=(
        "One row per partition with live files in a snapshot (default: the latest); an "
        "unpartitioned table with rows has one row."
    ),
    time_travel=True,
    columns=(
        _PARTITION,
        *_SUMS,
        Column("bucket_count", INT64, "Buckets of the partition that hold live files."),
        Column(
            "total_buckets",
            INT32,
            "The table's bucket option when the files were written (-1: scalable mode).",
        ),
    ),
)

BUCKETS = SystemTableInfo(
    name="buckets",
    doc=("One row per (partition, bucket) with live files in a snapshot (default: the latest)."),
    time_travel=True,
    columns=(
        _PARTITION,
        Column("bucket", INT32, "The bucket (0 in a scalable table)."),
        *_SUMS,
    ),
)


def _file_rows(state: TableState, snapshot: Snapshot | None) -> pa.Table:
    """One row per live file with what the aggregations need, in listing order."""
    files = live_files(state, snapshot)
    entries = files.entries
    return pa.table(
        {
            "partition": pa.array(files.partitions, pa.string()),
            "bucket": pa.array([e.bucket for e in entries], pa.int32()),
            "record_count": pa.array([e.file.live_row_count for e in entries], pa.int64()),
            "file_size_in_bytes": pa.array([e.file.file_size for e in entries], pa.int64()),
            "creation_time": pa.array([e.file.creation_time_ms for e in entries], UTC_MS),
            "total_buckets": pa.array([e.total_buckets for e in entries], pa.int32()),
            "position": pa.array(range(len(entries)), pa.int64()),
        }
    )


def _aggregate(rows: pa.Table, keys: list[str], extra: list[tuple[str, str]]) -> pa.Table:
    """Sums per group of ``keys``, in the order the groups first appear."""
    grouped = rows.group_by(keys, use_threads=False).aggregate(
        [
            ("record_count", "sum"),
            ("file_size_in_bytes", "sum"),
            ("record_count", "count"),
            ("creation_time", "max"),
            ("position", "min"),
            *extra,
        ]
    )
    return grouped.sort_by("position_min")


def partitions_table(state: TableState, snapshot: Snapshot | None) -> pa.Table:
    grouped = _aggregate(
        _file_rows(state, snapshot),
        ["partition"],
        [("bucket", "count_distinct"), ("total_buckets", "max")],
    )
    return PARTITIONS.assemble(
        {
            "partition": grouped["partition"],
            "record_count": grouped["record_count_sum"],
            "file_size_in_bytes": grouped["file_size_in_bytes_sum"],
            "file_count": grouped["record_count_count"],
            "last_update_time": grouped["creation_time_max"],
            "bucket_count": grouped["bucket_count_distinct"],
            "total_buckets": grouped["total_buckets_max"],
        }
    )


def buckets_table(state: TableState, snapshot: Snapshot | None) -> pa.Table:
    grouped = _aggregate(_file_rows(state, snapshot), ["partition", "bucket"], [])
    return BUCKETS.assemble(
        {
            "partition": grouped["partition"],
            "bucket": grouped["bucket"],
            "record_count": grouped["record_count_sum"],
            "file_size_in_bytes": grouped["file_size_in_bytes_sum"],
            "file_count": grouped["record_count_count"],
            "last_update_time": grouped["creation_time_max"],
        }
    )
