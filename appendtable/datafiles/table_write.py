"""The table writer: rows in, Parquet files and commit messages out.

Guarantees:

* Nothing is visible until the messages are committed; the writer only creates uniquely named
  files. ``abort`` (or leaving a ``with`` block by an exception) deletes every file the writer
  created that was not yet handed over.
* Within a (partition, bucket), files and the rows in them are in write order, and the messages'
  local sequence numbers follow that order.
* Memory is bounded by ``write-buffer-size`` (plus files being encoded). Under pressure, groups
  that would make a file of at least the small-file threshold are written out; with many open
  groups (``write-max-writers-to-spill``) or ``write-buffer-for-append``, smaller ones are
  spilled to local disk instead of being cut into tiny files, so one commit writes at most one
  file per (partition, bucket) unless a file reaches the target size.
* Files are encoded concurrently in ``write.parallelism`` threads (the encoder releases the GIL).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.arrow_schema import conform, to_table
from appendtable.datafiles.parquet_io import FileWriteSpec, choose_dictionary_columns, write_files
from appendtable.datafiles.routing import GroupKey, RoutingSpec, route
from appendtable.datafiles.spill import SpillArea, SpilledPart
from appendtable.errors import AppendTableError
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitMessage, DataFileMeta, TableSchema
from appendtable.planning.partitions import partition_path
from appendtable.storage import Storage

__all__ = ["TableWriter", "event_time_ms"]

#: Below this estimated size per part, a group is not split for parallel encoding.
_PARALLEL_MIN_PART_BYTES = 32 * 1024 * 1024


@dataclass
class _Group:
    key: GroupKey
    directory: str
    memory: list[pa.Table] = field(default_factory=list)
    memory_bytes: int = 0
    memory_rows: int = 0
    spilled: list[SpilledPart] = field(default_factory=list)
    spilled_bytes: int = 0
    results: list[Future[list[DataFileMeta]]] = field(default_factory=list)

    @property
    def buffered_bytes(self) -> int:
        return self.memory_bytes + self.spilled_bytes

    def take_memory(self) -> list[pa.Table]:
        tables = self.memory
        self.memory, self.memory_bytes, self.memory_rows = [], 0, 0
        return tables


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
    ) -> None:
        self._storage = storage
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
        self._partition_types = [
            next(f.type for f in schema.fields if f.name == key) for key in schema.partition_keys
        ]
        compression = options.get(opt.FILE_COMPRESSION)
        self._file_spec = FileWriteSpec(
            schema=arrow_schema,
            fields=schema.fields,
            schema_id=schema.id,
            compression="none" if compression == "none" else compression,
            compression_level=options.get(opt.FILE_COMPRESSION_LEVEL)
            if compression == "zstd"
            else None,
            stats_mode=options.get(opt.STATS_MODE),
            stats_truncate=options.stats_truncate,
            target_file_size=options.target_file_size,
        )
        self._buffer_limit = options.get(opt.WRITE_BUFFER_SIZE)
        self._small_file_bytes = int(
            options.target_file_size * options.get(opt.COMPACTION_SMALL_FILE_RATIO)
        )
        self._spillable = options.get(opt.WRITE_BUFFER_SPILLABLE)
        self._always_buffer = options.get(opt.WRITE_BUFFER_FOR_APPEND)
        self._max_writers_before_spill = options.get(opt.WRITE_MAX_WRITERS_TO_SPILL)
        self._parallelism = options.write_parallelism
        self._spill = SpillArea(options.get(opt.WRITE_SPILL_DIR), arrow_schema)
        self._watermark_column = options.get(opt.WATERMARK_COLUMN)
        self._groups: dict[GroupKey, _Group] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._created: list[str] = []
        self._max_event_ms: int | None = None
        self._closed = False
        self.rows_written = 0

    # ---- public API -------------------------------------------------------------------------

    def write(self, data: object) -> None:
        """Buffer and (eventually) write ``data``: a pyarrow Table, RecordBatch, iterable of
        RecordBatches or pandas DataFrame. Raises SchemaMismatchError, naming the column, if the
        data does not fit the table; then nothing of it is written."""
        self._check_open()
        table = conform(to_table(data, self._arrow_schema), self._arrow_schema)
        if table.num_rows == 0:
            return
        if self._file_spec.dictionary_columns is None:
            self._file_spec.dictionary_columns = choose_dictionary_columns(table)
        self._track_event_time(table)
        for key, rows in route(table, self._routing):
            group = self._groups.get(key)
            if group is None:
                group = _Group(key, self._directory(key))
                self._groups[key] = group
            group.memory.append(rows)
            group.memory_bytes += rows.nbytes
            group.memory_rows += rows.num_rows
            if self._estimated_file_bytes(group.buffered_bytes) >= self._options.target_file_size:
                self._flush_full_files(group)
        self.rows_written += table.num_rows
        self._relieve_memory_pressure()

    def prepare_commit(self) -> list[CommitMessage]:
        """Write everything buffered and return one message per (partition, bucket) written
        since the last call, files in write order. The files stay invisible until committed."""
        self._check_open()
        try:
            for group in self._groups.values():
                self._flush(group, final=True)
            messages = [self._message(group) for group in self._groups.values()]
            self._max_event_ms = None
        except BaseException:
            self.abort()
            raise
        finally:
            self._spill.clear()
        self._groups = {}
        self._created = []
        return [message for message in messages if message.new_files]

    def abort(self) -> None:
        """Delete every file written since the last ``prepare_commit`` and drop all buffers."""
        for group in self._groups.values():
            for future in group.results:
                future.cancel()
        for group in self._groups.values():
            for future in group.results:
                if not future.cancelled():
                    future.exception()  # wait for it to finish before deleting its files
        for path in self._created:
            self._storage.delete(path)
        self._created = []
        self._groups = {}
        self._spill.clear()

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

    # ---- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise AppendTableError("this writer is closed")

    def _directory(self, key: GroupKey) -> str:
        partition = partition_path(
            self._schema.partition_keys,
            key.partition,
            self._partition_types,
            self._options.get(opt.PARTITION_DEFAULT_NAME),
        )
        return layout.bucket_dir(partition, key.bucket)

    def _estimated_file_bytes(self, arrow_bytes: int) -> int:
        return int(arrow_bytes * self._file_spec.compression_ratio)

    def _track_event_time(self, table: pa.Table) -> None:
        if not self._watermark_column:
            return
        latest = event_time_ms(pc.max(table.column(self._watermark_column)))
        if latest is not None and (self._max_event_ms is None or latest > self._max_event_ms):
            self._max_event_ms = latest

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._parallelism, thread_name_prefix="appendtable-write"
            )
        return self._executor

    def _submit(self, group: _Group, chunks: Iterator[pa.Table]) -> None:
        future = self._pool().submit(
            write_files,
            self._storage,
            group.directory,
            chunks,
            self._file_spec,
            on_file=self._created.append,
        )
        group.results.append(future)

    def _chunks(self, spilled: list[SpilledPart], memory: list[pa.Table]) -> Iterator[pa.Table]:
        for part in spilled:
            yield from self._spill.read(part)
        yield from memory

    def _flush(self, group: _Group, *, final: bool) -> None:
        """Write all of a group's buffered rows. For the scalable mode, a large final flush is
        split into parts written concurrently."""
        if not group.memory and not group.spilled:
            return
        spilled, memory = group.spilled, group.take_memory()
        group.spilled, group.spilled_bytes = [], 0
        parts = 1
        if final and self._options.bucket == -1 and not spilled and self._parallelism > 1:
            estimated = self._estimated_file_bytes(sum(t.nbytes for t in memory))
            parts = max(1, min(self._parallelism, estimated // _PARALLEL_MIN_PART_BYTES))
        if parts == 1:
            self._submit(group, self._chunks(spilled, memory))
            return
        combined = pa.concat_tables(memory)
        size = math.ceil(combined.num_rows / parts)
        for offset in range(0, combined.num_rows, size):
            self._submit(group, iter([combined.slice(offset, size)]))

    def _flush_full_files(self, group: _Group) -> None:
        """Write the leading rows of a group that fill whole target-size files; keep the rest
        buffered so the next file is not cut short."""
        if group.spilled:
            self._flush(group, final=False)
            return
        estimated = self._estimated_file_bytes(group.memory_bytes)
        whole_files = estimated // self._options.target_file_size
        if whole_files < 1:
            return
        combined = pa.concat_tables(group.take_memory())
        keep_from = int(
            combined.num_rows * whole_files * self._options.target_file_size / estimated
        )
        keep_from = max(1, min(combined.num_rows, keep_from))
        self._submit(group, iter([combined.slice(0, keep_from)]))
        rest = combined.slice(keep_from)
        if rest.num_rows:
            group.memory, group.memory_bytes = [rest], rest.nbytes
            group.memory_rows = rest.num_rows

    def _relieve_memory_pressure(self) -> None:
        buffered = sum(group.memory_bytes for group in self._groups.values())
        if buffered <= self._buffer_limit:
            return
        open_groups = sum(1 for group in self._groups.values() if group.memory or group.spilled)
        spill_small = self._spillable and (
            self._always_buffer or open_groups > self._max_writers_before_spill
        )
        to_spill: list[_Group] = []
        for group in sorted(self._groups.values(), key=lambda g: g.memory_bytes, reverse=True):
            if buffered <= self._buffer_limit // 2 or not group.memory:
                break
            buffered -= group.memory_bytes
            small = self._estimated_file_bytes(group.buffered_bytes) < self._small_file_bytes
            if small and spill_small:
                to_spill.append(group)
            else:
                self._flush(group, final=True)
        if to_spill:
            tables = [group.take_memory() for group in to_spill]
            for group, part, batch in zip(to_spill, self._spill.spill(tables), tables, strict=True):
                group.spilled.append(part)
                group.spilled_bytes += sum(t.nbytes for t in batch)

    def _message(self, group: _Group) -> CommitMessage:
        files: list[DataFileMeta] = []
        next_seq = 0
        for future in group.results:
            for meta in future.result():
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
