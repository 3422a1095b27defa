"""Structured Streaming source: a table read like a queue, micro-batch by micro-batch.

Offsets are stream positions of the core (``{"snapshot", "full"}``) plus ``split``, the index of
the next split inside that snapshot's unit, so admission control (``maxFilesPerTrigger``,
``maxRowsPerTrigger``) can cut a large snapshot across micro-batches. ``partitions(start, end)``
is a pure function of immutable snapshots (Spark replans it after a crash) and gives one Spark
partition per (partition, bucket), holding that bucket's splits in order: each bucket is read
in write order within a micro-batch and, batch after batch, across them. COMPACT snapshots
produce no rows. ``commit(end)`` records consumer progress (when ``consumer-id`` is set), which
protects unread snapshots from expiration.

Trap-aware: Spark pickles this object to run ``read`` on executors, so the driver-side stream
state is created lazily and left out of the pickle.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

import appendtable as at
from appendtable_spark.options import MAX_FILES_PER_TRIGGER, MAX_ROWS_PER_TRIGGER
from appendtable_spark.pinning import retarget
from appendtable_spark.settings import Settings
from appendtable_spark.tables import cached_table
from appendtable_spark.types import cast_batch, spark_arrow_schema

__all__ = ["StreamSource"]

Offset = dict[str, Any]


@dataclass
class BucketPartition(InputPartition):  # type: ignore[misc]
    """The splits of one (partition, bucket) in a micro-batch, in read order."""

    uri: str
    storage_options: dict[str, Any]
    splits: list[bytes]
    columns: list[str] | None


def _offset(position: at.StreamPosition, split: int = 0, base: int | None = None) -> Offset:
    offset: Offset = {"snapshot": position.next_snapshot, "full": position.full, "split": split}
    if base is not None:
        offset["base"] = base
    return offset


def _position(offset: Offset) -> at.StreamPosition:
    return at.StreamPosition(offset.get("snapshot"), bool(offset.get("full", False)))


class StreamSource(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """A stream in the schema the query started with (``schema_id``, the version of the
    DataFrame's schema; None: the core stream's, the current one when it opens): rows of files
    written after a schema change are read as that version by field id (columns added later
    are not there, renamed ones keep their start name, dropped ones read as null)."""

    def __init__(
        self, settings: Settings, schema: StructType, schema_id: int | None = None
    ) -> None:
        self._settings = settings
        self._schema = schema
        self._schema_id = schema_id
        self._stream: at.StreamReader | None = None
        self._target: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_stream"] = None  # driver-only: holds open handles and locks
        return state

    def _core(self) -> at.StreamReader:
        if self._stream is None:
            table = self._settings.open()
            self._stream = table.stream(
                tag=self._settings.format_options.get("scan.tag-name") or None,
                options=self._settings.format_options,
            )
        return self._stream

    # ---- offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> Offset:
        return _offset(self._core().position)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._settings.given(MAX_FILES_PER_TRIGGER):
            return ReadMaxFiles(self._settings.get(MAX_FILES_PER_TRIGGER))
        if self._settings.given(MAX_ROWS_PER_TRIGGER):
            return ReadMaxRows(self._settings.get(MAX_ROWS_PER_TRIGGER))
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        table = cached_table(self._settings)
        latest = table.latest_snapshot()
        self._target = latest.id if latest is not None else 0

    def _units(self, start: Offset) -> Iterator[tuple[at.StreamUnit, int, int | None]]:
        """Units from ``start`` onwards, the first split index to take in each, and ``base``:
        the snapshot that a start at "the latest snapshot" resolved to. Offsets derived from
        such a start carry it, so that replanning a batch after a crash resolves it the same
        way."""
        stream = self._core()
        position, split = _position(start), int(start.get("split", 0))
        base = start.get("base")
        if position.next_snapshot is None and base is not None:
            position = at.StreamPosition(int(base), full=True)
        while True:
            unit = stream.next_unit(position)
            if unit is None or unit is at.END_OF_STREAM:
                return
            assert isinstance(unit, at.StreamUnit)
            if self._target is not None and unit.snapshot_id > self._target:
                return
            if position.next_snapshot is None:
                base = unit.snapshot_id
            yield unit, split, base
            position, split = unit.next_position, 0

    def latestOffset(self, start: Offset, limit: ReadLimit) -> Offset:
        """The end of the next micro-batch: whole snapshots until the limit, at least one
        split when any is available, never beyond an AvailableNow target."""
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        files = rows = 0
        end = start
        for unit, first, base in self._units(start):
            for index in range(first, len(unit.splits)):
                split = unit.splits[index]
                over_files = max_files is not None and files + len(split.files) > max_files
                over_rows = max_rows is not None and rows + split.row_count > max_rows
                if (files or rows) and (over_files or over_rows):
                    return _offset(at.StreamPosition(unit.snapshot_id, unit.full), index, base)
                files += len(split.files)
                rows += split.row_count
            end = _offset(unit.next_position, 0, base)
        return end

    def reportLatestOffset(self) -> Offset | None:
        latest = cached_table(self._settings).latest_snapshot()
        return None if latest is None else {"snapshot": latest.id + 1, "full": False, "split": 0}

    # ---- reading -------------------------------------------------------------------------------

    def partitions(self, start: Offset, end: Offset) -> list[BucketPartition]:
        stop = (_position(end), int(end.get("split", 0)))
        groups: dict[tuple[object, int], list[bytes]] = {}
        for unit, first, _ in self._units(start if "base" in start else {**start, **_base(end)}):
            here = at.StreamPosition(unit.snapshot_id, unit.full)
            for index in range(first, len(unit.splits)):
                if (here, index) == stop:
                    return self._partitions(groups)
                split = unit.splits[index]
                groups.setdefault((split.partition_values, split.bucket), []).append(
                    retarget(split, self._schema_id).to_bytes()
                )
            if (unit.next_position, 0) == stop:
                break
        return self._partitions(groups)

    def _partitions(self, groups: dict[tuple[object, int], list[bytes]]) -> list[BucketPartition]:
        return [
            BucketPartition(
                uri=self._settings.uri,
                storage_options=self._settings.storage_options,
                splits=splits,
                columns=self._settings.columns(),
            )
            for splits in groups.values()
        ]

    def read(self, partition: BucketPartition) -> Iterator[pa.RecordBatch]:
        table = cached_table(Settings(partition.uri, partition.storage_options))
        target = spark_arrow_schema(self._schema)
        for payload in partition.splits:
            for batch in table.read(at.Split.from_bytes(payload), columns=target.names):
                yield cast_batch(batch, target)

    def commit(self, end: Offset) -> None:
        """Record consumer progress (Spark calls this lazily, one batch behind). Mid-snapshot
        ends keep the consumer at that snapshot, so it stays protected until fully read."""
        stream = self._core()
        position = _position(end)
        if position.next_snapshot is None and end.get("base") is not None:
            position = at.StreamPosition(int(end["base"]), full=True)
        if self._settings.format_options.get("consumer-id"):
            stream.commit(position)

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.close()


def _base(end: Offset) -> dict[str, Any]:
    return {"base": end["base"]} if "base" in end else {}
