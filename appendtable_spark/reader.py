"""Batch reads: a pinned snapshot, planned whole, read as Arrow batches.

Trap-aware: Spark pickles the reader before ``partitions()`` runs, so everything ``read()`` needs
travels inside the ``InputPartition`` (split bytes, table location).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

import appendtable as at
from appendtable_spark.options import SPLIT_TARGET_BYTES
from appendtable_spark.pinning import ReadPin, retarget
from appendtable_spark.settings import Settings
from appendtable_spark.tables import cached_table
from appendtable_spark.types import cast_batch, spark_arrow_schema

__all__ = ["BatchReader", "SplitsPartition", "default_target", "pack"]

_DEFAULT_TARGET = 128 * 1024 * 1024
#: Without ``splitTargetBytes``: a read is spread over at least this many tasks when each would
#: still hold ``_MIN_TASK_BYTES`` (a small table in one task would leave the other cores idle).
_SPREAD_TASKS = 8
_MIN_TASK_BYTES = 16 * 1024 * 1024


@dataclass
class SplitsPartition(InputPartition):
    """One Spark task: splits to read in order, and what reading them needs."""

    uri: str
    storage_options: dict[str, Any]
    splits: list[bytes]


def pack(splits: Sequence[at.Split], target: int) -> list[list[at.Split]]:
    """Few, large groups of consecutive splits (a Python task costs ~30 ms to start)."""
    groups: list[list[at.Split]] = []
    current: list[at.Split] = []
    size = 0
    for split in splits:
        if current and size + split.file_size > target:
            groups.append(current)
            current, size = [], 0
        current.append(split)
        size += split.file_size
    if current:
        groups.append(current)
    return groups


def default_target(splits: Sequence[at.Split]) -> int:
    """The bytes per task when the ``splitTargetBytes`` option is not given: about 128 MB,
    less for a read too small to keep several cores busy at that size (never below 16 MB:
    each Python task costs ~30 ms)."""
    total = sum(split.file_size for split in splits)
    return min(_DEFAULT_TARGET, max(_MIN_TASK_BYTES, -(-total // _SPREAD_TASKS)))


class BatchReader(DataSourceReader):
    """A batch read of one pinned snapshot, whole, in the DataFrame's schema version (the
    snapshot's own for time travel): every split is read as that version, by field id.

    It prunes nothing by the query's filters and implements no ``pushFilters``: PySpark 4.x
    keeps a relation's planned read and hands it to later queries of the relation (and to
    other scans of it in the same query), so a plan pruned for one query's filters would drop
    rows of another's (see :mod:`appendtable_spark.source`). Spark applies every filter
    itself; ``read_table`` is the read that prunes partitions, files and buckets."""

    def __init__(self, settings: Settings, schema: StructType, pin: ReadPin) -> None:
        self._settings = settings
        self._schema = schema
        self._pin = pin

    def partitions(self) -> list[SplitsPartition]:
        pin = self._pin
        if pin.snapshot_id is None and pin.missing is None:
            return []  # the table had no snapshot
        splits = pin.scan(cached_table(self._settings)).plan()
        target = self._settings.get(SPLIT_TARGET_BYTES) or default_target(splits)
        return [
            SplitsPartition(
                uri=self._settings.uri,
                storage_options=self._settings.storage_options,
                splits=[retarget(split, pin.schema_id).to_bytes() for split in group],
            )
            for group in pack(splits, target)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SplitsPartition):
            return  # no split to read: Spark runs one task with its own empty partition
        table = cached_table(Settings(partition.uri, partition.storage_options))
        target = spark_arrow_schema(self._schema)
        for payload in partition.splits:
            split = at.Split.from_bytes(payload)
            for batch in table.read(split, columns=target.names):
                yield cast_batch(batch, target)
