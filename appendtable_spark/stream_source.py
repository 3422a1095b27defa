"""Structured Streaming source: a table read like a queue, micro-batch by micro-batch.

Offsets are positions fixed once (:mod:`appendtable_spark.offsets`): a query's start is
resolved from its start options when its first micro-batch is planned and recorded in that
batch's end offset, which Spark writes to the checkpoint before running the batch; every end
offset says where its batch started. So a replay of any batch reads exactly the same rows, and
a restart continues from the checkpoint whatever the start options say (they only matter to a
new checkpoint). A position that has expired fails with SnapshotExpiredError naming it.

Admission control (``maxFilesPerTrigger``, ``maxRowsPerTrigger``) cuts between data files, in
write order, also inside the full snapshot of a start: every micro-batch holds at most that
many files (rows: in whole files, at least one). ``partitions(start, end)`` is a pure function
of the offsets and of immutable snapshots, and gives one Spark partition per (partition,
bucket), holding that bucket's files in write order: each bucket is read in write order within a
micro-batch and, batch after batch, across them. COMPACT snapshots produce no rows.

With ``consumer-id``, the consumer's progress is saved when the next micro-batch is planned
(the previous one is then in Spark's commit log): it protects the snapshots the query still
needs from expiration, and a new checkpoint with the same consumer id starts there.

Trap-aware: Spark pickles this object to run ``read`` on executors, so the driver-side stream
state is created lazily and left out of the pickle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
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
from appendtable_spark.offsets import INITIAL, BatchEnd, Position, is_initial
from appendtable_spark.options import MAX_FILES_PER_TRIGGER, MAX_ROWS_PER_TRIGGER
from appendtable_spark.pinning import retarget
from appendtable_spark.settings import Settings
from appendtable_spark.tables import cached_table
from appendtable_spark.types import cast_batch, spark_arrow_schema

__all__ = ["START_KEYS", "StreamSource", "check_start"]

Offset = dict[str, Any]

#: Core options that say where a new stream starts: a restart ignores them.
START_KEYS = frozenset(
    {
        "scan.mode",
        "scan.snapshot-id",
        "scan.timestamp-millis",
        "scan.file-creation-time-millis",
        "scan.tag-name",
        "consumer.ignore-progress",
    }
)
_READ_OVERWRITE = "streaming-read-append-overwrite"
_BOUND = "scan.bounded.watermark"
_NO_BOUND = 2**62
#: What each start mode needs (any one of the keys).
_NEEDS = {
    "from-snapshot": ("scan.snapshot-id", "scan.tag-name"),
    "from-snapshot-full": ("scan.snapshot-id", "scan.tag-name"),
    "from-timestamp": ("scan.timestamp-millis",),
    "from-file-creation-time": ("scan.file-creation-time-millis",),
}


#: The start options, and the explicit modes that use each.
_START_OPTIONS = {
    "scan.snapshot-id": ("from-snapshot", "from-snapshot-full"),
    "scan.tag-name": ("from-snapshot", "from-snapshot-full"),
    "scan.timestamp-millis": ("from-timestamp",),
    "scan.file-creation-time-millis": ("from-file-creation-time",),
}


def check_start(table: at.Table, options: Mapping[str, str]) -> None:
    """Refuse start options that cannot start a stream, when the stream is defined: a start
    mode without the option it needs, or with a start option it does not use (it would be
    ignored: ``latest`` with ``scan.snapshot-id``), a ``scan.snapshot-id`` beyond the next
    snapshot. (An expired start is refused only when a new checkpoint resolves it: a restart
    ignores it.)"""
    mode = options.get("scan.mode", "default")
    needs = _NEEDS.get(mode)
    if needs is not None and not any(options.get(key) for key in needs):
        extra = f" (or '{needs[1]}')" if len(needs) > 1 else ""
        raise at.InvalidOptionError(f"scan.mode '{mode}' needs option '{needs[0]}'{extra}")
    if mode != "default":
        unused = [k for k, modes in _START_OPTIONS.items() if options.get(k) and mode not in modes]
        if unused:
            raise at.InvalidOptionError(
                f"option '{unused[0]}' is not used by scan.mode '{mode}' (it would be ignored): "
                f"leave it out, or use a scan.mode that starts from it ("
                + ", ".join(f"'{m}'" for m in _START_OPTIONS[unused[0]])
                + ")"
            )
    if mode in ("from-snapshot", "from-snapshot-full") and all(
        options.get(k) for k in ("scan.snapshot-id", "scan.tag-name")
    ):
        raise at.InvalidOptionError(
            f"scan.mode '{mode}' starts from 'scan.snapshot-id' or 'scan.tag-name': give one"
        )
    snapshot = options.get("scan.snapshot-id")
    from_snapshot = mode in ("from-snapshot", "from-snapshot-full") or (
        mode == "default" and not options.get("scan.timestamp-millis")
    )
    if snapshot and from_snapshot:
        latest = table.latest_snapshot()
        following = latest.id + 1 if latest is not None else 1
        if int(snapshot) > following:
            raise at.InvalidOptionError(
                f"option 'scan.snapshot-id' is {snapshot}, but the table's latest snapshot is "
                f"{following - 1}: a stream can start at the next snapshot ({following}) at "
                "most; to read only what comes from now on, use scan.mode 'latest'"
            )


@dataclass
class BucketPartition(InputPartition):
    """The splits of one (partition, bucket) in a micro-batch, in read order."""

    uri: str
    storage_options: dict[str, Any]
    splits: list[bytes]
    columns: list[str] | None


@dataclass(frozen=True)
class _File:
    """A data file of a unit, with the split it was planned in (its partition and bucket)."""

    split: at.Split
    meta: at.DataFileMeta


def _files(unit: at.StreamUnit, floor: int | None, overwrite: bool) -> list[_File]:
    """The files a unit delivers, in write order: by sequence number, then path (no option
    changes it, so file counts are stable positions)."""
    if unit.commit_kind == at.CommitKind.OVERWRITE and not unit.full and not overwrite:
        return []
    files = [_File(split, meta) for split in unit.splits for meta in split.files]
    if unit.full and floor is not None:
        files = [f for f in files if f.meta.creation_time_ms >= floor]
    files.sort(key=lambda f: (f.meta.min_seq, f.meta.path))
    return files


class StreamSource(DataSourceStreamReader, SupportsTriggerAvailableNow):
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
        #: This run's start of a new checkpoint, resolved once (then recorded by Spark).
        self._start: Position | None = None
        self._target: int | None = None
        self._progress: at.StreamPosition | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_stream"] = None  # driver-only: holds open handles and locks
        return state

    def _core(self) -> at.StreamReader:
        """Plans units at given positions: the start options play no part, OVERWRITE
        snapshots are planned (each batch says whether it reads them), the bound is applied
        here."""
        if self._stream is None:
            options = {
                key: value
                for key, value in self._settings.format_options.items()
                if key not in START_KEYS
            }
            options[_READ_OVERWRITE] = "true"
            options[_BOUND] = str(_NO_BOUND)  # over a table's own bound too
            table = self._settings.open()
            self._stream = table.stream(options=options, position=at.StreamPosition(None, True))
        return self._stream

    def _option(self, key: str) -> str | None:
        """A read option, else the table's own setting of it."""
        value = self._settings.format_options.get(key)
        if value is None:
            value = cached_table(self._settings).options.get(key)
        return value

    def _read_overwrite(self) -> bool:
        return (self._option(_READ_OVERWRITE) or "false").strip().lower() == "true"

    def _resolve_start(self) -> Position:
        """Where a new checkpoint starts, from the start options (a consumer's progress first),
        resolved once per run; the consumer, if any, is registered there."""
        if self._start is None:
            table = self._settings.open()
            check_start(table, self._settings.format_options)
            with table.stream(options=self._settings.format_options) as resolving:
                begin = resolving.position
                floor = resolving.file_creation_floor_ms if begin.full else None
            self._start = Position(begin.next_snapshot, begin.full, 0, floor)
        return self._start

    def _unit(self, position: Position) -> at.StreamUnit | None:
        """The unit at ``position``, None if its snapshot does not exist yet."""
        try:
            unit = self._core().next_unit(position.unit)
        except at.SnapshotExpiredError as exc:
            earliest = cached_table(self._settings).earliest_snapshot()
            raise at.SnapshotExpiredError(
                f"the stream continues at {position.describe()}, where its checkpoint left "
                f"it, and that snapshot has expired (earliest retained: "
                f"{earliest.id if earliest else 'none'}): its rows cannot be read any more. "
                "To go on, start a new checkpoint (its start options apply, e.g. scan.mode "
                "'from-snapshot' with scan.snapshot-id at the earliest retained snapshot, "
                "accepting the gap); to keep this from happening, give the stream a "
                "'consumer-id': snapshots a consumer still needs are never expired"
            ) from exc
        return unit if isinstance(unit, at.StreamUnit) else None  # (the core has no bound)

    # ---- offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> Offset:
        return dict(INITIAL)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._settings.given(MAX_FILES_PER_TRIGGER):
            return ReadMaxFiles(self._settings.get(MAX_FILES_PER_TRIGGER))
        if self._settings.given(MAX_ROWS_PER_TRIGGER):
            return ReadMaxRows(self._settings.get(MAX_ROWS_PER_TRIGGER))
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        latest = cached_table(self._settings).latest_snapshot()
        self._target = latest.id if latest is not None else 0

    def latestOffset(self, start: Offset, limit: ReadLimit) -> Offset:
        """The end of the next micro-batch: files in write order up to the limit (at least
        one when any is available), never beyond an AvailableNow target or the bound. The
        first batch of a checkpoint resolves the start and always gets an end offset, which
        records it."""
        initial = is_initial(start)
        begin = self._resolve_start() if initial else _end_of(start)
        if not initial:
            self._record(begin)  # Spark plans a batch after the previous one is committed
        overwrite = self._read_overwrite()
        first, end = self._advance(begin, limit, overwrite)
        if not initial and end == first:
            return start  # nothing new: the same offset, so Spark runs no batch
        return BatchEnd(first, end, overwrite).to_json()

    def _advance(
        self, begin: Position, limit: ReadLimit, overwrite: bool
    ) -> tuple[Position, Position]:
        """(where the batch starts, where it ends): ``begin``, made concrete when it waits for
        a first snapshot that now exists."""
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        bound_text = self._option(_BOUND)
        bound = int(bound_text) if bound_text is not None else None
        taken = rows = 0
        first = position = begin
        while True:
            unit = self._unit(position)
            if unit is None or (self._target is not None and unit.snapshot_id > self._target):
                return first, position
            if bound is not None and unit.watermark is not None and unit.watermark > bound:
                return first, position
            if position.snapshot is None:  # the latest snapshot, now that there is one
                first = position = Position(unit.snapshot_id, True, 0, begin.floor)
            files = _files(unit, position.floor, overwrite)
            for index in range(position.file, len(files)):
                count = files[index].meta.row_count
                over_files = max_files is not None and taken + 1 > max_files
                over_rows = max_rows is not None and rows + count > max_rows
                if taken and (over_files or over_rows):
                    return first, dataclasses.replace(position, file=index)
                taken += 1
                rows += count
            position = Position(unit.next_position.next_snapshot, False)

    def reportLatestOffset(self) -> Offset | None:
        latest = cached_table(self._settings).latest_snapshot()
        return None if latest is None else Position(latest.id + 1, False).to_json()

    # ---- reading -------------------------------------------------------------------------------

    def partitions(self, start: Offset, end: Offset) -> list[BucketPartition]:
        if start == end:  # Spark's setLatestSeenOffset on restart: no batch
            return []
        batch = BatchEnd.from_json(end)
        if batch is None:  # an end offset of an older version
            begin = self._resolve_start() if is_initial(start) else _end_of(start)
            batch = BatchEnd(begin, Position.from_json(end), self._read_overwrite())
        groups: dict[tuple[object, int], list[bytes]] = {}
        for unit_files in self._walk(batch):
            chunks: dict[tuple[object, int], list[_File]] = {}
            for file in unit_files:
                chunks.setdefault((file.split.partition_values, file.split.bucket), []).append(file)
            for key, files in chunks.items():
                split = msgspec.structs.replace(files[0].split, files=tuple(f.meta for f in files))
                groups.setdefault(key, []).append(retarget(split, self._schema_id).to_bytes())
        return [
            BucketPartition(
                uri=self._settings.uri,
                storage_options=self._settings.storage_options,
                splits=splits,
                columns=self._settings.columns(),
            )
            for splits in groups.values()
        ]

    def _walk(self, batch: BatchEnd) -> Iterator[list[_File]]:
        """The files of each unit the batch covers, from its start to its end."""
        position, end = batch.start, batch.end
        while position != end:
            if position.snapshot is None:
                raise at.InvalidArgumentError(
                    f"micro-batch offsets from {position.describe()} to {end.describe()} "
                    "cannot be replayed: the start was never resolved"
                )
            unit = self._unit(position)
            if unit is None:
                raise at.SnapshotNotFoundError(
                    f"the micro-batch ends at {end.describe()}, but {position.describe()} is "
                    "not in the table"
                )
            files = _files(unit, position.floor, batch.overwrite)
            inside = end.snapshot == unit.snapshot_id and end.full == unit.full and end.file
            stop = end.file if inside else len(files)
            yield files[position.file : stop]
            if inside:
                return
            position = Position(unit.next_position.next_snapshot, False)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, BucketPartition):
            return  # not one of ours (partitions() returns only BucketPartition): nothing to read
        table = cached_table(Settings(partition.uri, partition.storage_options))
        target = spark_arrow_schema(self._schema)
        for payload in partition.splits:
            for batch in table.read(at.Split.from_bytes(payload), columns=target.names):
                yield cast_batch(batch, target)

    def commit(self, end: Offset) -> None:
        """Spark committed the batch ending at ``end`` (called when the next one is planned)."""
        self._record(_end_of(end))

    def _record(self, position: Position) -> None:
        """Save a consumer's progress: the unit of ``position`` (a position inside a unit keeps
        that unit, so it stays protected until fully read)."""
        if not self._option("consumer-id") or position.snapshot is None:
            return
        unit = position.unit
        if unit != self._progress:
            self._core().commit(unit)
            self._progress = unit

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.close()


def _end_of(offset: Offset) -> Position:
    """The position an offset ends at (an end offset, or one of an older version)."""
    batch = BatchEnd.from_json(offset)
    return batch.end if batch is not None else Position.from_json(offset)


class RefusedStream(DataSourceStreamReader):
    """A stream whose options were refused when Spark asked for its reader: the refusal is
    raised at Spark's first call (before any micro-batch is planned). PySpark 4.3's streaming
    worker hides an exception raised while the reader is made behind an ``UnboundLocalError``
    of its own, so the reader is made, and refuses."""

    def __init__(self, error: at.AppendTableError) -> None:
        self._error = error

    def initialOffset(self) -> Offset:
        raise self._error

    def latestOffset(self, start: Offset | None = None, limit: ReadLimit | None = None) -> Offset:
        raise self._error

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        raise self._error

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise self._error

    def commit(self, end: Offset) -> None:
        raise self._error
