"""Writing data files: rolling Parquet files with statistics and checksums.

A data file holds exactly the table's columns (partition columns included), written with the
table's codec (zstd by default) and Parquet statistics, except for float columns: Parquet
statistics leave NaN out, and readers that prune row groups with them (Arrow, and so
pyiceberg and DuckDB over Arrow datasets) skip a group of ``[1.0, NaN]`` for ``x != 1.0``,
losing the NaN row (the manifests keep their own float statistics, which never prune ``!=``
or ``not in``). Files roll when they reach
``target-file-size``; a file may overshoot by at most one row group, which is sized to a quarter
of the target (estimated from the observed compression ratio). Files are fsynced on local disk
before they are reported, so a committed snapshot never references a file that a crash can lose.
Every page carries a CRC-32, and the footer's checksum is recorded in the file's metadata
(``footer``); every file is written in exactly the table's schema.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from appendtable.datafiles.arrow_schema import empty_table, parquet_write_schema
from appendtable.datafiles.bloom_filters import FileIndexSpec, describe_blooms
from appendtable.datafiles.file_columns import (
    same_layout,
)
from appendtable.datafiles.footer import (
    TailKeeper,
    read_tail,
    tail_crc,
)
from appendtable.datafiles.nested_nulls import fill_hidden_nulls
from appendtable.datafiles.stats import StatsCollector
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import (
    DataFileMeta,
    FileIndex,
    FileSource,
    TableSchema,
)
from appendtable.metadata.types import FieldSpec
from appendtable.storage import Storage

__all__ = [
    "FileWriteSpec",
    "RollingWriter",
    "choose_dictionary_columns",
    "row_group_rows",
    "write_files",
]

_MAX_ROW_GROUP_ROWS = 1024 * 1024
_MAX_ROW_GROUP_BYTES = 128 * 1024 * 1024
_DICTIONARY_SAMPLE_ROWS = 65_536
_DICTIONARY_MAX_DISTINCT_RATIO = 0.5
#: How every data file is read: INT96 timestamps in microseconds (see ``file_columns``), and


@dataclass
class FileWriteSpec:
    """How to write data files of one table."""

    schema: pa.Schema
    fields: Sequence[FieldSpec]
    schema_id: int
    compression: str
    zstd_level: int
    stats_mode: str
    stats_truncate: int | None
    target_file_size: int
    dictionary_columns: list[str] | None = None
    #: The codec of small files (``small_file_bytes``: Arrow bytes; 0: none is small).
    small_file_compression: str = "snappy"
    small_file_bytes: int = 0
    index: FileIndexSpec | None = None
    #: Observed bytes on disk per byte of Arrow data; refined as files are written.
    compression_ratio: float = 0.5
    _ratio_samples: list[float] = field(default_factory=list)

    @staticmethod
    def for_table(
        schema: TableSchema, arrow_schema: pa.Schema, options: opt.Options
    ) -> FileWriteSpec:
        """The spec of a table's data files, from its options."""
        return FileWriteSpec(
            schema=arrow_schema,
            fields=schema.fields,
            schema_id=schema.id,
            compression=options.get(opt.FILE_COMPRESSION),
            zstd_level=options.get(opt.FILE_COMPRESSION_LEVEL),
            stats_mode=options.get(opt.STATS_MODE),
            stats_truncate=options.stats_truncate,
            target_file_size=options.target_file_size,
            index=FileIndexSpec.for_table(schema.fields, arrow_schema, options),
            small_file_compression=options.get(opt.SMALL_FILE_COMPRESSION),
            small_file_bytes=options.get(opt.SMALL_FILE_SIZE),
        )

    def codec(self, arrow_bytes: int | None) -> tuple[str, int | None]:
        """The codec (and zstd level) of a file written whole from ``arrow_bytes`` of Arrow
        data (None: not known, a file that may grow): a small file's codec below
        ``small_file_bytes``, the table's otherwise. A tiny file's cost is the codec's set-up
        per column chunk, which zstd pays dearly on both sides (measured on 2 cores, 100 files
        of 100 rows x 3 columns, CPU: read 23 vs 10 ms with snappy, write 31 vs 13 ms)."""
        small = arrow_bytes is not None and arrow_bytes < self.small_file_bytes
        codec = self.small_file_compression if small else self.compression
        return codec, (self.zstd_level if codec == "zstd" else None)

    def observe_ratio(self, arrow_bytes: int, file_bytes: int) -> None:
        if arrow_bytes > 0 and file_bytes > 0:
            self._ratio_samples.append(file_bytes / arrow_bytes)
            recent = self._ratio_samples[-8:]
            self.compression_ratio = max(0.01, sum(recent) / len(recent))


@functools.lru_cache(maxsize=64)
def statistics_columns(schema: pa.Schema) -> list[str] | bool:
    """The Parquet column paths written with statistics: every leaf but floats (see the
    module); True when that is every leaf."""
    sink = pa.BufferOutputStream()
    pq.write_table(empty_table(schema), sink)
    parquet = pq.read_metadata(pa.BufferReader(sink.getvalue())).schema
    columns = [parquet.column(i) for i in range(len(parquet))]
    kept = [
        column.path
        for column in columns
        if column.physical_type not in ("FLOAT", "DOUBLE") and str(column.logical_type) != "Float16"
    ]
    return True if len(kept) == len(columns) else kept


def choose_dictionary_columns(sample: pa.Table, rows_per_group: int = 1 << 20) -> list[str]:
    """Columns worth dictionary encoding, decided once per writer from a sample: Parquet
    otherwise tries a dictionary for every column of every file (then gives it up), a large
    cost for high-cardinality columns.

    A column gets a dictionary when its estimated number of distinct values (Chao1, from the
    sample's singletons and doubletons) is at most half the rows of a row group: the values
    then repeat enough for the dictionary to pay, even if a small sample looks unique."""
    rows = min(rows_per_group, max(sample.num_rows, 1))
    head = sample.slice(0, _DICTIONARY_SAMPLE_ROWS)
    chosen = []
    for name in head.column_names:
        column = head.column(name)
        if pa.types.is_nested(column.type) or pa.types.is_boolean(column.type):
            continue
        if len(column) == column.null_count:
            chosen.append(name)
            continue
        if _estimated_distinct(column) <= _DICTIONARY_MAX_DISTINCT_RATIO * rows:
            chosen.append(name)
    return chosen


def _estimated_distinct(column: pa.ChunkedArray) -> float:
    counts = pc.value_counts(column.drop_null().combine_chunks()).field("counts")
    frequencies = counts.to_numpy(zero_copy_only=False)
    seen = len(frequencies)
    singletons = int((frequencies == 1).sum())
    doubletons = int((frequencies == 2).sum())
    if singletons == 0:
        return float(seen)
    if doubletons == 0:
        return float("inf") if singletons == seen else seen + singletons * (singletons - 1) / 2
    return seen + singletons * singletons / (2 * doubletons)


def write_files(
    storage: Storage,
    directory: str,
    chunks: Iterable[pa.Table],
    spec: FileWriteSpec,
    *,
    source: FileSource = FileSource.APPEND,
    seq_start: int = 0,
    on_file: Callable[[str], None] | None = None,
) -> list[DataFileMeta]:
    """Write ``chunks`` (in order) as rolling Parquet files under ``directory``.

    Returns the files in write order, with sequence numbers ``seq_start, seq_start + 1, ...``
    per row. ``on_file`` is called with each path before writing starts, so a caller can clean
    up after a failure.
    """
    writer = RollingWriter(storage, directory, spec, source=source, on_file=on_file)
    try:
        for chunk in chunks:
            writer.write(chunk)
        writer.close()
    except BaseException:
        writer.abandon()
        raise
    files = []
    for meta in writer.files:
        files.append(
            msgspec.structs.replace(meta, min_seq=seq_start, max_seq=seq_start + meta.row_count - 1)
        )
        seq_start += meta.row_count
    return files


def row_group_rows(chunk: pa.Table, spec: FileWriteSpec, row_bytes: float | None = None) -> int:
    """Rows per row group for data like ``chunk``: a quarter of the target file size (estimated
    with the observed compression ratio), at most 1 Mi rows or 128 MiB of Arrow data.
    ``row_bytes`` (Arrow bytes per row) saves measuring ``chunk`` when already known."""
    if row_bytes is None:
        row_bytes = chunk.nbytes / max(1, chunk.num_rows)
    row_bytes = max(1.0, row_bytes)
    by_target = spec.target_file_size / 4 / (row_bytes * spec.compression_ratio)
    return int(max(1, min(_MAX_ROW_GROUP_ROWS, _MAX_ROW_GROUP_BYTES / row_bytes, by_target)))


def _row_groups(chunk: pa.Table, spec: FileWriteSpec) -> Iterator[pa.Table]:
    rows = chunk.num_rows
    if rows == 0:
        return
    per_group = row_group_rows(chunk, spec)
    for offset in range(0, rows, per_group):
        yield chunk.slice(offset, per_group)


class RollingWriter:
    """Writes rows, in order, into data files under one directory, starting a new file when the
    current one reaches the target size. Not thread-safe: one thread at a time."""

    def __init__(
        self,
        storage: Storage,
        directory: str,
        spec: FileWriteSpec,
        *,
        source: FileSource = FileSource.APPEND,
        on_file: Callable[[str], None] | None = None,
    ) -> None:
        self._storage = storage
        self._directory = directory
        self._spec = spec
        self._source = source
        self._on_file = on_file
        self._writer_id = uuid.uuid4().hex
        self._current: _OpenFile | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._threshold: int | None = None
        self._row_bytes = 0.0  # Arrow bytes per row, measured on the first chunk
        #: Closed files, in write order (sequence numbers are 0-based per file).
        self.files: list[DataFileMeta] = []

    def write(self, chunk: pa.Table) -> None:
        """Add rows. Small chunks are coalesced so that row groups reach their full size."""
        if chunk.num_rows == 0:
            return
        self._pending.append(chunk)
        self._pending_rows += chunk.num_rows
        if self._threshold is None or self._pending_rows >= self._threshold:
            # measured once per writer: nbytes walks every buffer of (sliced) tables
            if self._threshold is None:
                self._row_bytes = chunk.nbytes / chunk.num_rows
            self._threshold = row_group_rows(chunk, self._spec, self._row_bytes or None)
            if self._pending_rows >= self._threshold:
                self._write_pending(last=False)

    def _write_pending(self, *, last: bool) -> None:
        """Write the pending rows; ``last``: nothing follows them (a file opened now is
        written whole from them, and its size is known)."""
        if not self._pending:
            return
        combined = self._pending[0] if len(self._pending) == 1 else pa.concat_tables(self._pending)
        whole_bytes = int(self._pending_rows * self._row_bytes) if last else None
        self._pending, self._pending_rows = [], 0
        for piece in _row_groups(combined, self._spec):
            if self._current is None:
                name = layout.data_file_name(self._writer_id, len(self.files))
                path = f"{self._directory}/{name}"
                if self._on_file is not None:
                    self._on_file(path)
                small = whole_bytes is not None and piece.num_rows == combined.num_rows
                self._current = _OpenFile(
                    self._storage,
                    path,
                    self._spec,
                    self._on_file,
                    rows_hint=piece.num_rows,
                    codec=self._spec.codec(whole_bytes if small else None),
                )
            self._current.write(piece)
            if self._current.size() >= self._spec.target_file_size:
                self._close_current()

    def close(self) -> None:
        """Write what is pending and finish the current file (if any)."""
        self._write_pending(last=True)
        if self._current is not None:
            self._close_current()

    def _close_current(self) -> None:
        assert self._current is not None
        current, self._current = self._current, None
        self.files.append(current.close(0, self._source))

    def abandon(self) -> None:
        """Stop and delete the file being written (closed files are left to the caller)."""
        self._pending, self._pending_rows = [], 0
        if self._current is not None:
            current, self._current = self._current, None
            current.abandon()


class _NotKept(Exception):
    """A read before the tail kept from an object-store stream."""


class _OpenFile:
    def __init__(
        self,
        storage: Storage,
        path: str,
        spec: FileWriteSpec,
        on_file: Callable[[str], None] | None = None,
        *,
        rows_hint: int = 0,
        codec: tuple[str, int | None],
    ) -> None:
        """``rows_hint``: rows of the first row group, which sizes the bloom filters;
        ``codec``: the compression and its level (``FileWriteSpec.codec``)."""
        self._storage = storage
        self._path = path
        self._spec = spec
        self._on_file = on_file
        self._codec = codec
        index = spec.index
        blooms = index.writer_options(rows_hint) if index is not None and index.columns else None
        self._rows = 0
        self._arrow_bytes = 0
        self._stats = StatsCollector(spec.fields, spec.stats_mode, spec.stats_truncate)
        self._local = storage.local_path(path)
        self._keeper: TailKeeper | None = None
        with storage.translated("write", path):
            if self._local is not None:
                storage.ensure_parent(path)
                self._sink: pa.NativeFile = pa.OSFile(self._local, "wb")
            else:
                self._keeper = TailKeeper(storage.open_output(path))
                self._sink = pa.PythonFile(self._keeper, mode="w")
            self._writer = pq.ParquetWriter(
                self._sink,
                parquet_write_schema(spec.fields),  # the table's schema, with field ids
                compression=codec[0],
                compression_level=codec[1],
                write_page_checksum=True,  # every page's CRC-32, verified by every read
                use_dictionary=spec.dictionary_columns
                if spec.dictionary_columns is not None
                else True,
                write_statistics=statistics_columns(parquet_write_schema(spec.fields)),
                bloom_filter_options=blooms,
            )

    def write(self, piece: pa.Table) -> None:
        if not same_layout(piece.schema, self._spec.schema):
            # every data file is written in exactly the table's schema (types, nullability,
            # no foreign metadata); rows read from files of another accepted form get here
            piece = piece.cast(self._spec.schema, safe=True)
        piece = fill_hidden_nulls(piece)  # readers may leave nulls under null structs
        with self._storage.translated("write", self._path):
            self._writer.write_table(piece, row_group_size=piece.num_rows)
        self._stats.update(piece)
        self._rows += piece.num_rows
        self._arrow_bytes += piece.nbytes

    def size(self) -> int:
        return int(self._sink.tell())

    def close(self, seq_start: int, source: FileSource) -> DataFileMeta:
        uri = self._storage.uri(self._path)
        with self._storage.translated("write", self._path):
            self._writer.close()
            size = int(self._sink.tell())
            self._sink.close()
            footer_crc = self._footer_crc(size, uri)
            file_index = self._file_index(size)
        self._storage.sync_file(self._path)
        if self._codec[0] == self._spec.compression:  # (the ratio sizes large files)
            self._spec.observe_ratio(self._arrow_bytes, size)
        nulls, mins, maxs = self._stats.result()
        return DataFileMeta(
            path=self._path,
            file_size=size,
            row_count=self._rows,
            min_seq=seq_start,
            max_seq=seq_start + self._rows - 1,
            schema_id=self._spec.schema_id,
            creation_time_ms=int(time.time() * 1000),
            source=int(source),
            null_counts=nulls,
            min_values=mins,
            max_values=maxs,
            footer_crc=footer_crc,
            file_index=file_index,
            nested_stats=self._stats.nested_result(),
        )

    def _file_index(self, size: int) -> FileIndex | None:
        """The Parquet bloom filters just written (see ``bloom_filters``), found from the
        file's tail: the page cache on local disk, the bytes kept from the stream on object
        stores. None when the table indexes no column, or when a filter lies before the kept
        tail (the file is then never skipped by an index)."""
        index = self._spec.index
        if index is None or not index.columns:
            return None
        try:
            return describe_blooms(index, self._tail_reader(), size, self._storage.uri(self._path))
        except _NotKept:
            return None

    def _tail_reader(self) -> Callable[[int, int], bytes]:
        """``read_at(count, offset)`` over the file just written: the local file, or the tail
        kept from the stream (raising _NotKept before it)."""
        if self._local is not None:
            local = self._local

            def read_local(count: int, offset: int) -> bytes:
                with pa.OSFile(local, "rb") as written:
                    return bytes(written.read_at(count, offset))

            return read_local
        assert self._keeper is not None
        kept, start = self._keeper.kept()

        def read_kept(count: int, offset: int) -> bytes:
            if offset < start:
                raise _NotKept
            return kept[offset - start : offset - start + count]

        return read_kept

    def _footer_crc(self, size: int, uri: str) -> int | None:
        """The checksum of the tail just written: kept from the stream on object stores, read
        back (from the page cache) on local disk."""
        if self._keeper is not None:
            return self._keeper.tail_crc(uri)
        assert self._local is not None
        with pa.OSFile(self._local, "rb") as written:
            return tail_crc(read_tail(written.read_at, size, uri))

    def abandon(self) -> None:
        try:
            self._writer.close()
            self._sink.close()
        except (OSError, pa.ArrowException):
            pass
        self._storage.delete(self._path)
