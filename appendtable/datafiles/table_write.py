"""The table writer: rows in, Parquet files and commit messages out.

Rows are routed to (partition, bucket) groups. Each group buffers rows in memory and, once it
holds a row group's worth, streams them into an open data file (a *lane*) that rolls at
``target-file-size``; ``prepare_commit`` closes the files. Encoding runs in a thread pool of
``write.parallelism`` threads (the Parquet encoder releases the GIL), overlapping with routing.

Guarantees:

* Nothing is visible until the messages are committed; the writer only creates uniquely named
  files. ``abort`` (or leaving a ``with`` block by an exception) deletes every file the writer
  created that was not yet handed over.
* A bucketed group has one lane, fed by tasks chained in submission order, so its files and the
  rows in them are in write order, and so are the messages' local sequence numbers. A group of
  the scalable mode (no order) spreads row groups over up to ``write.parallelism`` lanes.
* Memory stays near ``write-buffer-size``. The accounting counts what is really held: the rows
  of all groups routed from one slice of input are slices of one buffer (the routing's
  ``take``), which lives until every group and encoding task holding a slice of it let go, so
  buffered bytes are counted per routed slice, not per group. Room is made before every routed
  slice, so the buffers never hold more than the limit. Under pressure the largest groups are
  written out early (as smaller row groups of the same open files, not as extra files), or,
  with many open groups (``write-max-writers-to-spill``) or ``write-buffer-for-append``, every
  buffered group is spilled to local disk at once (spilling only some would free nothing: the
  others still hold the shared buffers). Either way a commit writes at most one file per
  (partition, bucket) and lane unless a file reaches the target size, and a spilled group's
  file is written in one go when the commit is prepared.
* Files are fsynced by a pool of I/O threads (``durability.DeferredSync``) while the encoding
  threads go on encoding; ``prepare_commit`` returns messages only once every file is durable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from types import TracebackType

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.arrow_schema import conform, to_table
from appendtable.datafiles.durability import DeferredSync, uses_io_threads
from appendtable.datafiles.mirror_values import check_mirrorable_rows
from appendtable.datafiles.routing import GroupKey, RoutingSpec, partitions_of, route
from appendtable.datafiles.spill import SpillArea, SpilledPart
from appendtable.datafiles.writing import (
    FileWriteSpec,
    RollingWriter,
    choose_dictionary_columns,
    row_group_rows,
)
from appendtable.errors import AppendTableError
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitMessage, DataFileMeta, PartitionValues, TableSchema
from appendtable.planning.partitions import MAX_NAME_BYTES, outside_overwrite, partition_path
from appendtable.storage import Storage

__all__ = ["TableWriter", "event_time_ms"]

#: Commits with less buffered data than this are encoded on the calling thread.
_INLINE_BYTES = 4 * 1024 * 1024
#: Rows routed at a time, and buffered bytes of a group handed to its lane at a time.
_ROUTE_ROWS = 1 << 18
_HANDOFF_BYTES = 16 * 1024 * 1024
#: Bytes of rows copied at a time when a group's rows are spilled.
_SPILL_PIECE_BYTES = 16 * 1024 * 1024


@dataclass(eq=False)
class _Routed:
    """One routed slice of input: ``table`` holds the rows of all its groups, each a range of
    it. Held until no group buffer (``buffered``) and no encoding task (``holders``) has a
    range of it."""

    table: pa.Table
    nbytes: int
    holders: int
    buffered: int


@dataclass(frozen=True, slots=True)
class _Rows:
    """Rows ``start .. start + count - 1`` of a routed slice."""

    routed: _Routed
    start: int
    count: int

    def table(self) -> pa.Table:
        return self.routed.table.slice(self.start, self.count)


@dataclass
class BufferStats:
    """What a writer's buffer did over the writer's life (deterministic for a given input and
    options: it does not depend on thread timing)."""

    #: Most bytes held by group buffers at once: at most ``write-buffer-size`` (room is made
    #: before each routed slice), unless one routed slice alone is larger.
    peak_buffered_bytes: int = 0
    #: Spill events (one spill file each) and rows spilled.
    spills: int = 0
    spilled_rows: int = 0
    #: Groups written out early, before ``prepare_commit``, because of memory pressure.
    pressure_flushes: int = 0


@dataclass
class _Lane:
    """An open rolling file of a group and the last task writing into it."""

    writer: RollingWriter
    tail: Future[None] | None = None


@dataclass
class _Group:
    key: GroupKey
    directory: str
    #: Buffered rows, as ranges of routed slices (table objects are made only to write them).
    memory: list[_Rows] = field(default_factory=list)
    #: The group's own rows in memory (rows x bytes per row: shared buffers not counted).
    memory_bytes: int = 0
    spilled: list[SpilledPart] = field(default_factory=list)
    lanes: list[_Lane] = field(default_factory=list)
    next_lane: int = 0

    def take_memory(self) -> list[_Rows]:
        taken, self.memory, self.memory_bytes = self.memory, [], 0
        return taken


class TableWriter:
    """Writes rows of one table as data files; ``prepare_commit`` hands them over.

    Not thread-safe: use one writer per thread or task. Reusable: after ``prepare_commit`` the
    writer starts a new set of files for the next commit.
    """

    def __init__(
        self,
        storage: Storage,
        schema: TableSchema,
        arrow_schema: pa.Schema,
        options: opt.Options,
        *,
        prefix: str = "",
        missing_as_null: bool = False,
    ) -> None:
        """``prefix``: a directory (relative to the table) the table's layout is placed under,
        for writes staged before they join the table (``StagingArea.writer``).
        ``missing_as_null``: nullable columns the data lacks are written as nulls (merge-mode
        writes); by default a missing column is a SchemaMismatchError."""
        self._storage = storage
        #: What data files are written through: on local disk, fsyncs and new directories on
        #: I/O threads.
        self._file_storage: Storage = DeferredSync(storage) if uses_io_threads(storage) else storage
        self._prefix = prefix.rstrip("/")
        self._missing_as_null = missing_as_null
        self._schema = schema
        self._arrow_schema = arrow_schema
        self._options = options
        names = schema.field_names()
        kinds = {f.name: f.type.kind for f in schema.fields}
        self._routing = RoutingSpec(
            partition_indices=tuple(names.index(k) for k in schema.partition_keys),
            partition_kinds=tuple(kinds[k] for k in schema.partition_keys),
            bucket_indices=tuple(names.index(k) for k in options.bucket_key),
            num_buckets=options.bucket,
        )
        types = {f.name: f.type for f in schema.fields}
        self._partition_types = [types[key] for key in schema.partition_keys]
        self._file_spec = FileWriteSpec.for_table(schema, arrow_schema, options)
        self._ordered = options.bucket > 0
        self._buffer_limit = options.get(opt.WRITE_BUFFER_SIZE)
        self._spillable = options.get(opt.WRITE_BUFFER_SPILLABLE)
        self._always_buffer = options.get(opt.WRITE_BUFFER_FOR_APPEND)
        self._max_writers_before_spill = options.get(opt.WRITE_MAX_WRITERS_TO_SPILL)
        self._parallelism = options.write_parallelism
        self._spill = SpillArea(options.get(opt.WRITE_SPILL_DIR) or None, arrow_schema)
        self._watermark_column = options.get(opt.WATERMARK_COLUMN)
        self._mirrored = options.get(opt.ICEBERG_STORAGE) != "disabled"
        self._groups: dict[GroupKey, _Group] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._pending: set[Future[None]] = set()
        #: Bytes of routed slices held by group buffers, and by buffers or encoding tasks.
        self._buffered_bytes = 0
        self._held_bytes = 0
        self._lock = threading.Lock()
        self.buffer_stats = BufferStats()
        #: Rows copied at a time when spilling (set from the data's bytes per row).
        self._piece_rows = 1 << 16
        self._created: list[str] = []
        self._max_event_ms: int | None = None
        self._closed = False
        self._inline = False
        self._restriction: tuple[Callable[[PartitionValues], bool], str] | None = None
        #: Rows accepted by ``write`` over the writer's life.
        self.rows_written = 0

    # ---- public API -------------------------------------------------------------------------

    def write(self, data: object) -> None:
        """Buffer and (eventually) write ``data``: a pyarrow Table, RecordBatch, iterable of
        RecordBatches or pandas DataFrame. Raises SchemaMismatchError, naming the column, if the
        data does not fit the table; then nothing of it is written."""
        self._check_open()
        table = conform(
            to_table(data, self._arrow_schema),
            self._arrow_schema,
            missing_as_null=self._missing_as_null,
        )
        if table.num_rows == 0:
            return
        if self._mirrored:
            check_mirrorable_rows(table)
        if self._restriction is not None:
            self._check_partitions(table)
        elif self._may_be_too_long(table):
            for partition in partitions_of(table, self._routing):
                self._partition_name(partition)  # raises for a name that is too long
        if self._file_spec.dictionary_columns is None:
            self._file_spec.dictionary_columns = choose_dictionary_columns(table)
        self._track_event_time(table)
        row_bytes = table.nbytes / table.num_rows  # measured once: slices are costly to measure
        # Hand rows to the encoder in pieces well below a row group: the lanes coalesce them
        # into full row groups, and encoding starts while later slices are still being routed.
        threshold = max(
            1,
            min(_HANDOFF_BYTES, int(row_group_rows(table, self._file_spec, row_bytes) * row_bytes)),
        )
        self._piece_rows = max(1, int(_SPILL_PIECE_BYTES / max(1.0, row_bytes)))
        for offset in range(0, table.num_rows, _ROUTE_ROWS):
            piece = table.slice(offset, _ROUTE_ROWS)
            nbytes = int(piece.num_rows * row_bytes)
            # make room first: the buffers never hold more than the limit (unless one routed
            # slice alone is larger)
            self._relieve_memory_pressure(nbytes)
            grouped = route(piece, self._routing)
            routed = self._hold(grouped.table, nbytes, len(grouped.keys))
            new: list[str] = []
            for key, start, count in zip(
                grouped.keys, grouped.starts, grouped.lengths, strict=True
            ):
                group = self._groups.get(key)
                if group is None:
                    group = self._new_group(key, new)
                group.memory.append(_Rows(routed, start, count))
                group.memory_bytes += int(count * row_bytes)
                if group.memory_bytes >= threshold and not self._spilling():
                    self._flush(group, final=False)
            if new and isinstance(self._file_storage, DeferredSync):
                self._file_storage.prepare_directories(new)  # while the next slice is routed
        self.rows_written += table.num_rows
        self._raise_failures()

    def restrict_partitions(
        self, allows: Callable[[PartitionValues], bool], described: str
    ) -> None:
        """Refuse rows of partitions that ``allows`` rejects (an overwrite of given partitions,
        ``described`` for the message): ``write`` raises SchemaMismatchError naming the
        partition before it writes anything of that data."""
        self._restriction = (allows, described)

    def _may_be_too_long(self, table: pa.Table) -> bool:
        """Whether a string partition value of ``table`` might exceed a directory name (a
        cheap bound: the longest value, every byte escaped to three)."""
        for key in self._schema.partition_keys:
            column = table.column(key)
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                longest = pc.max(pc.binary_length(column)).as_py() or 0
                if 3 * longest + len(key) + 1 > MAX_NAME_BYTES:
                    return True
        return False

    def _check_partitions(self, table: pa.Table) -> None:
        assert self._restriction is not None
        allows, described = self._restriction
        for partition in partitions_of(table, self._routing):
            self._partition_name(partition)  # raises for a name that is too long
            if not allows(partition):
                raise outside_overwrite(
                    self._partition_name(partition), described, self._schema.partition_keys[0]
                )

    def prepare_commit(self) -> list[CommitMessage]:
        """Write everything buffered, close the open files, and return one message per
        (partition, bucket) written since the last call (files in write order). The files stay
        invisible until the messages are committed."""
        self._check_open()
        pending = sum(group.memory_bytes for group in self._groups.values())
        # Small commits encode on this thread: starting a thread pool costs more than the work.
        self._inline = self._executor is None and pending < _INLINE_BYTES
        try:
            for group in self._groups.values():
                self._flush(group, final=True)
            wait(list(self._pending))
            messages = [self._message(group) for group in self._groups.values()]
            if isinstance(self._file_storage, DeferredSync):
                self._file_storage.wait()  # every file durable before it is reported
        except BaseException:
            self.abort()
            raise
        self._spill.clear()
        self._groups = {}
        self._created = []
        self._max_event_ms = None
        self._inline = False
        return [message for message in messages if message.new_files]

    def abort(self) -> None:
        """Delete every file written since the last ``prepare_commit`` and drop all buffers."""
        wait(list(self._pending))
        for group in self._groups.values():
            for lane in group.lanes:
                lane.writer.abandon()
        if isinstance(self._file_storage, DeferredSync):
            self._file_storage.settle()
        for path in self._created:
            self._storage.delete(path)
        self._created = []
        self._groups = {}
        self._spill.clear()
        with self._lock:
            self._buffered_bytes = self._held_bytes = 0

    def close(self) -> None:
        """Release threads and spill space. Files not handed over by ``prepare_commit`` are
        deleted."""
        if self._closed:
            return
        if self._groups or self._created:
            self.abort()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if isinstance(self._file_storage, DeferredSync):
            self._file_storage.close()
        self._closed = True

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.abort()
        self.close()

    # ---- routing and buffering --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise AppendTableError("this writer is closed")

    def _partition_name(self, partition: PartitionValues) -> str:
        return partition_path(
            self._schema.partition_keys,
            partition,
            self._partition_types,
            self._options.get(opt.PARTITION_DEFAULT_NAME),
        )

    def _new_group(self, key: GroupKey, new: list[str]) -> _Group:
        group = _Group(key, self._directory(key))
        self._groups[key] = group
        new.append(group.directory)
        return group

    def _directory(self, key: GroupKey) -> str:
        directory = layout.bucket_dir(self._partition_name(key.partition), key.bucket)
        return f"{self._prefix}/{directory}" if self._prefix else directory

    def _track_event_time(self, table: pa.Table) -> None:
        if not self._watermark_column:
            return
        latest = event_time_ms(pc.max(table.column(self._watermark_column)))
        if latest is not None and (self._max_event_ms is None or latest > self._max_event_ms):
            self._max_event_ms = latest

    def _spilling(self) -> bool:
        """Whether small groups go to spill files rather than open data files."""
        if not self._spillable:
            return False
        return self._always_buffer or len(self._groups) > self._max_writers_before_spill

    def _hold(self, table: pa.Table, nbytes: int, groups: int) -> _Routed:
        """Count a newly routed slice of ``nbytes`` as held by the buffers of ``groups``."""
        routed = _Routed(table, nbytes, holders=groups, buffered=groups)
        with self._lock:
            self._buffered_bytes += routed.nbytes
            self._held_bytes += routed.nbytes
            buffered = self._buffered_bytes
        if buffered > self.buffer_stats.peak_buffered_bytes:
            self.buffer_stats.peak_buffered_bytes = buffered
        return routed

    def _release(self, ranges: Iterable[_Rows], holders: int, buffered: int) -> None:
        """Drop ``holders`` holds of the routed slice of each range, ``buffered`` of them by
        group buffers."""
        with self._lock:
            for rows in ranges:
                slice_ = rows.routed
                slice_.buffered -= buffered
                if buffered and slice_.buffered == 0:
                    self._buffered_bytes -= slice_.nbytes
                slice_.holders -= holders
                if slice_.holders == 0:
                    self._held_bytes -= slice_.nbytes

    def _relieve_memory_pressure(self, incoming: int) -> None:
        """Make room for ``incoming`` more bytes of routed rows."""
        if self._buffered_bytes + incoming > self._buffer_limit:
            if self._spilling():
                self._spill_buffers()
            else:
                # Write out the largest groups until the buffers hold half the limit. A routed
                # slice is freed only when all its groups let go, so this may take many groups.
                for group in sorted(
                    self._groups.values(), key=lambda g: g.memory_bytes, reverse=True
                ):
                    if (
                        self._buffered_bytes + incoming <= self._buffer_limit // 2
                        or not group.memory
                    ):
                        break
                    self.buffer_stats.pressure_flushes += 1
                    self._flush(group, final=False)
        self._wait_for_capacity(incoming)

    def _spill_buffers(self) -> None:
        """Spill every buffered group into one spill file (groups with open files write to
        them instead), so the routed slices they share are freed."""
        to_spill: list[_Group] = []
        for group in self._groups.values():
            if not group.memory:
                continue
            if group.lanes:
                self.buffer_stats.pressure_flushes += 1
                self._flush(group, final=False)
            else:
                to_spill.append(group)
        if not to_spill:
            return
        taken = [group.take_memory() for group in to_spill]
        parts = self._spill.spill(
            ([rows.table() for rows in ranges] for ranges in taken), self._piece_rows
        )
        for group, part in zip(to_spill, parts, strict=True):
            group.spilled.append(part)
        self.buffer_stats.spills += 1
        self.buffer_stats.spilled_rows += sum(part.rows for part in parts)
        for ranges in taken:
            self._release(ranges, 1, 1)

    def _wait_for_capacity(self, incoming: int) -> None:
        """Back-pressure: rows handed to the encoder still occupy memory until written."""
        while self._pending and self._held_bytes + incoming > self._buffer_limit:
            wait(list(self._pending), return_when=FIRST_COMPLETED)

    # ---- writing ----------------------------------------------------------------------------

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._parallelism, thread_name_prefix="appendtable-write"
            )
        return self._executor

    def _lane(self, group: _Group, index: int) -> _Lane:
        while len(group.lanes) <= index:
            group.lanes.append(
                _Lane(
                    RollingWriter(
                        self._file_storage,
                        group.directory,
                        self._file_spec,
                        on_file=self._created.append,
                    )
                )
            )
        return group.lanes[index]

    def _submit(
        self, lane: _Lane, chunks: Iterable[pa.Table], ranges: list[_Rows], close: bool
    ) -> None:
        """Queue ``chunks`` for ``lane``; the task holds the routed slices of ``ranges``
        (already released by the group buffers) until it is done."""
        previous = lane.tail
        if self._inline:  # errors propagate to prepare_commit, which aborts
            self._run(lane, previous, chunks, ranges, close)
            done: Future[None] = Future()
            done.set_result(None)
            lane.tail = done
            return
        future = self._pool().submit(self._run, lane, previous, chunks, ranges, close)
        lane.tail = future
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def _run(
        self,
        lane: _Lane,
        previous: Future[None] | None,
        chunks: Iterable[pa.Table],
        ranges: list[_Rows],
        close: bool,
    ) -> None:
        """One task of a lane. Tasks of a lane are chained: each first waits for the previous
        one (submitted earlier, so already running or done: no deadlock in a FIFO pool)."""
        try:
            if previous is not None:
                previous.result()
            for chunk in chunks:
                lane.writer.write(chunk)
            if close:
                lane.writer.close()
        finally:
            self._release(ranges, 1, 0)

    def _chunks(self, spilled: list[SpilledPart], memory: list[_Rows]) -> Iterator[pa.Table]:
        """A group's rows in order (read and sliced only when the task gets to them)."""
        for part in spilled:
            yield from self._spill.read(part)
        for rows in memory:
            yield rows.table()

    def _flush(self, group: _Group, *, final: bool) -> None:
        """Hand a group's buffered rows to its lane(s); with ``final``, close the files."""
        memory_bytes = group.memory_bytes
        spilled = group.spilled
        memory = group.take_memory()
        group.spilled = []
        self._release(memory, 0, 1)  # from the buffer to the task(s)
        if spilled or self._ordered:
            if spilled or memory:
                self._submit(self._lane(group, 0), self._chunks(spilled, memory), memory, final)
            elif final and group.lanes:
                self._submit(group.lanes[0], (), [], True)
            return
        # Scalable mode: no order to keep, so spread row groups over parallel lanes.
        if memory:
            combined = pa.concat_tables([rows.table() for rows in memory])
            step = row_group_rows(combined, self._file_spec, memory_bytes / combined.num_rows)
            pieces = range(0, combined.num_rows, step)
            with self._lock:  # each piece's task holds the routed slices
                for rows in memory:
                    rows.routed.holders += len(pieces) - 1
            for offset in pieces:
                lane = self._lane(group, group.next_lane % self._parallelism)
                group.next_lane += 1
                self._submit(lane, (combined.slice(offset, step),), memory, False)
        if final:
            for lane in group.lanes:
                self._submit(lane, (), [], True)

    def _raise_failures(self) -> None:
        for group in self._groups.values():
            for lane in group.lanes:
                tail = lane.tail
                if tail is not None and tail.done() and tail.exception() is not None:
                    self.abort()
                    raise tail.exception()  # type: ignore[misc]

    def _message(self, group: _Group) -> CommitMessage:
        files: list[DataFileMeta] = []
        next_seq = 0
        for lane in group.lanes:
            if lane.tail is not None:
                lane.tail.result()  # re-raise a failure of this lane
            for meta in lane.writer.files:
                files.append(
                    msgspec.structs.replace(
                        meta, min_seq=next_seq, max_seq=next_seq + meta.row_count - 1
                    )
                )
                next_seq += meta.row_count
        return CommitMessage(
            partition=group.key.partition,
            bucket=group.key.bucket,
            total_buckets=self._options.bucket,
            schema_id=self._schema.id,
            new_files=tuple(files),
            max_event_time_ms=self._max_event_ms,
        )


def event_time_ms(scalar: pa.Scalar) -> int | None:
    """Epoch milliseconds of an event-time value: timestamps (any unit), dates, or integers
    taken as epoch milliseconds."""
    if not scalar.is_valid:
        return None
    dtype = scalar.type
    if pa.types.is_timestamp(dtype):
        per_ms = {"s": 0.001, "ms": 1, "us": 1_000, "ns": 1_000_000}[dtype.unit]
        return int(scalar.value // per_ms) if per_ms >= 1 else int(scalar.value * 1000)
    if pa.types.is_date32(dtype):
        return int(scalar.value) * 86_400_000
    if pa.types.is_date64(dtype):
        return int(scalar.value)
    if pa.types.is_integer(dtype):
        return int(scalar.as_py())
    raise AppendTableError(f"watermark column has type {dtype}; use a timestamp, date or int")
