"""Parquet data files: rolling writes with statistics, and ordered reads.

A data file holds exactly the table's columns (partition columns included), written with the
table's codec (zstd by default) and Parquet statistics. Files roll when they reach
``target-file-size``; a file may overshoot by at most one row group, which is sized to a quarter
of the target (estimated from the observed compression ratio). Files are fsynced on local disk
before they are reported, so a committed snapshot never references a file that a crash can lose.
"""

from __future__ import annotations

import functools
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from appendtable.datafiles.file_columns import (
    INT96_UNIT,
    column_mismatch,
    int96_columns,
    same_layout,
)
from appendtable.datafiles.footer import (
    TailKeeper,
    metadata_of,
    read_tail,
    tail_crc,
    verified_tail,
)
from appendtable.datafiles.nested_nulls import fill_hidden_nulls
from appendtable.datafiles.stats import StatsCollector
from appendtable.errors import CorruptDataFileError, ObjectNotFoundError
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import DataFileMeta, FileSource, TableSchema
from appendtable.metadata.types import FieldSpec
from appendtable.storage import Storage
from appendtable.storage.translate import translated

__all__ = [
    "FileWriteSpec",
    "RollingWriter",
    "arrow_filesystem",
    "choose_dictionary_columns",
    "is_damage",
    "open_parquet",
    "read_file",
    "read_files",
    "row_group_rows",
    "stored_schema",
    "write_files",
]

_MAX_ROW_GROUP_ROWS = 1024 * 1024
_MAX_ROW_GROUP_BYTES = 128 * 1024 * 1024
_DICTIONARY_SAMPLE_ROWS = 65_536
_DICTIONARY_MAX_DISTINCT_RATIO = 0.5
#: How every data file is read: INT96 timestamps in microseconds (see ``file_columns``), and
#: each page's CRC-32 checked where the writer recorded one (this table's writers always do;
#: Spark's do by default), so damage inside a page raises instead of returning wrong values.
_READ_OPTIONS: dict[str, Any] = {
    "coerce_int96_timestamp_unit": INT96_UNIT,
    "page_checksum_verification": True,
}
_PARQUET = ds.ParquetFileFormat(
    read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit=INT96_UNIT),
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True),
)
#: What pyarrow's errors about the storage (not about a file's content) say: its native S3
#: client's and transport errors. Every other error decoding a data file is damage.
_STORAGE_MARKERS = ("aws error", "curl", "connection", "timed out", "timeout", "http", "network")
_ARROW_FILESYSTEMS: weakref.WeakKeyDictionary[Storage, tuple[pafs.FileSystem, str]] = (
    weakref.WeakKeyDictionary()
)


@dataclass
class FileWriteSpec:
    """How to write data files of one table."""

    schema: pa.Schema
    fields: Sequence[FieldSpec]
    schema_id: int
    compression: str
    compression_level: int | None
    stats_mode: str
    stats_truncate: int | None
    target_file_size: int
    dictionary_columns: list[str] | None = None
    #: Observed bytes on disk per byte of Arrow data; refined as files are written.
    compression_ratio: float = 0.5
    _ratio_samples: list[float] = field(default_factory=list)

    @staticmethod
    def for_table(
        schema: TableSchema, arrow_schema: pa.Schema, options: opt.Options
    ) -> FileWriteSpec:
        """The spec of a table's data files, from its options."""
        compression = options.get(opt.FILE_COMPRESSION)
        return FileWriteSpec(
            schema=arrow_schema,
            fields=schema.fields,
            schema_id=schema.id,
            compression=compression,
            compression_level=options.get(opt.FILE_COMPRESSION_LEVEL)
            if compression == "zstd"
            else None,
            stats_mode=options.get(opt.STATS_MODE),
            stats_truncate=options.stats_truncate,
            target_file_size=options.target_file_size,
        )

    def observe_ratio(self, arrow_bytes: int, file_bytes: int) -> None:
        if arrow_bytes > 0 and file_bytes > 0:
            self._ratio_samples.append(file_bytes / arrow_bytes)
            recent = self._ratio_samples[-8:]
            self.compression_ratio = max(0.01, sum(recent) / len(recent))


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
            self._threshold = row_group_rows(chunk, self._spec)
            if self._pending_rows >= self._threshold:
                self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        combined = self._pending[0] if len(self._pending) == 1 else pa.concat_tables(self._pending)
        self._pending, self._pending_rows = [], 0
        for piece in _row_groups(combined, self._spec):
            if self._current is None:
                name = layout.data_file_name(self._writer_id, len(self.files))
                path = f"{self._directory}/{name}"
                if self._on_file is not None:
                    self._on_file(path)
                self._current = _OpenFile(self._storage, path, self._spec)
            self._current.write(piece)
            if self._current.size() >= self._spec.target_file_size:
                self._close_current()

    def close(self) -> None:
        """Write what is pending and finish the current file (if any)."""
        self._write_pending()
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


class _OpenFile:
    def __init__(self, storage: Storage, path: str, spec: FileWriteSpec) -> None:
        self._storage = storage
        self._path = path
        self._spec = spec
        self._rows = 0
        self._arrow_bytes = 0
        self._stats = StatsCollector(spec.fields, spec.stats_mode, spec.stats_truncate)
        self._local = storage.local_path(path)
        self._keeper: TailKeeper | None = None
        with translated("write", storage.uri(path)):
            if self._local is not None:
                storage.ensure_parent(path)
                self._sink: pa.NativeFile = pa.OSFile(self._local, "wb")
            else:
                self._keeper = TailKeeper(storage.open_output(path))
                self._sink = pa.PythonFile(self._keeper, mode="w")
            self._writer = pq.ParquetWriter(
                self._sink,
                spec.schema,
                compression=spec.compression,
                compression_level=spec.compression_level,
                write_page_checksum=True,  # every page's CRC-32, verified by every read
                use_dictionary=spec.dictionary_columns
                if spec.dictionary_columns is not None
                else True,
                write_statistics=True,
            )

    def write(self, piece: pa.Table) -> None:
        if not same_layout(piece.schema, self._spec.schema):
            # every data file is written in exactly the table's schema (types, nullability,
            # no foreign metadata); rows read from files of another accepted form get here
            piece = piece.cast(self._spec.schema, safe=True)
        piece = fill_hidden_nulls(piece)  # readers may leave nulls under null structs
        with translated("write", self._storage.uri(self._path)):
            self._writer.write_table(piece, row_group_size=piece.num_rows)
        self._stats.update(piece)
        self._rows += piece.num_rows
        self._arrow_bytes += piece.nbytes

    def size(self) -> int:
        return int(self._sink.tell())

    def close(self, seq_start: int, source: FileSource) -> DataFileMeta:
        uri = self._storage.uri(self._path)
        with translated("write", uri):
            self._writer.close()
            size = int(self._sink.tell())
            self._sink.close()
            footer_crc = self._footer_crc(size, uri)
        self._storage.sync_file(self._path)
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
        )

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


def arrow_filesystem(storage: Storage) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system and the root path in it, for reading data files natively: the
    local file system, pyarrow's own S3 client for S3 (configured like the table's s3fs), or
    the fsspec file system bridged into pyarrow. Built once per storage."""
    cached = _ARROW_FILESYSTEMS.get(storage)
    if cached is None:
        probe = storage.local_path("")
        if probe is not None:
            cached = (pafs.LocalFileSystem(), probe)
        else:
            fs, root = storage.fsspec()
            native = _native_s3(fs)
            cached = (native or pafs.PyFileSystem(pafs.FSSpecHandler(fs)), root)
        _ARROW_FILESYSTEMS[storage] = cached
    return cached


def _native_s3(fs: Any) -> pafs.FileSystem | None:
    """pyarrow's S3 client with s3fs's settings: the bridge through fsspec costs several extra
    requests per file (each open is a HEAD), the native client reads with ranged GETs only."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple | list) else (fs.protocol,)
    if not {"s3", "s3a"} & set(protocols):
        return None
    client = dict(getattr(fs, "client_kwargs", None) or {})
    options: dict[str, Any] = {
        "access_key": getattr(fs, "key", None),
        "secret_key": getattr(fs, "secret", None),
        "session_token": getattr(fs, "token", None),
        "region": client.get("region_name") or "us-east-1",
    }
    if getattr(fs, "anon", False):
        options = {"anonymous": True, "region": options["region"]}
    endpoint = client.get("endpoint_url") or getattr(fs, "endpoint_url", None)
    if endpoint:
        parsed = urlsplit(str(endpoint))
        options["endpoint_override"] = parsed.netloc or parsed.path
        options["scheme"] = parsed.scheme or "https"
    return pafs.S3FileSystem(**{k: v for k, v in options.items() if v is not None})


def read_files(
    storage: Storage,
    files: Sequence[DataFileMeta],
    *,
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
    row_filter: pc.Expression | None = None,
) -> pa.Table:
    """The rows of several data files as one table, in the order of ``files`` (Arrow's
    scanner reads them concurrently and reassembles them in order). Footers are checked
    against their recorded checksums first (concurrently)."""
    filesystem, root = arrow_filesystem(storage)
    paths = [file.path for file in files]
    full = [f"{root}/{path}" for path in paths]

    def culprit(usable: Callable[[str], bool]) -> str | None:
        """The first file that is not ``usable`` (Arrow's errors do not always say which)."""
        return next((p for p, f in zip(paths, full, strict=True) if not usable(f)), None)

    checked = [f for f in files if f.footer_crc is not None]
    if checked:
        with ThreadPoolExecutor(max_workers=min(16, len(checked))) as pool:
            list(pool.map(lambda f: _check_footer(storage, filesystem, root, f), checked))
    with translated("read", storage.uri(paths[0])):
        try:
            dataset = ds.dataset(full, schema=schema, format=_PARQUET, filesystem=filesystem)
            result = dataset.to_table(
                columns=list(columns) if columns is not None else None,
                filter=row_filter,
                use_threads=True,
            )
            written = sum(file.row_count for file in files)
            if row_filter is None and result.num_rows != written:  # e.g. a page header lost
                raise pa.ArrowInvalid(f"{result.num_rows} rows read, {written} written")
            return result
        except FileNotFoundError as exc:
            missing = culprit(lambda f: _exists(filesystem, f)) or paths[0]
            raise _missing(storage.uri(missing)) from exc
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            # a file of another shape fails in a cast (invalid) or in a pushed-down filter (no
            # kernel for its type), a damaged one in its footer or a page checksum; a missing
            # kernel with every file intact is not about the files, nor is a storage failure
            if isinstance(exc, OSError) and not is_damage(exc):
                raise
            damaged = next((f.path for f in files if not _intact(storage, f, schema)), None)
            if damaged is None and isinstance(exc, pa.ArrowNotImplementedError):
                raise
            named = f"one of {len(paths)} files" if damaged is None else storage.uri(damaged)
            raise _corrupt(named, exc, path=storage.uri(damaged or paths[0])) from exc


def _check_footer(
    storage: Storage, filesystem: pafs.FileSystem, root: str, file: DataFileMeta
) -> None:
    uri = storage.uri(file.path)
    with (
        translated("read", uri),
        _data_file_errors(uri),
        filesystem.open_input_file(f"{root}/{file.path}") as handle,
    ):
        verified_tail(handle, handle.size(), file.footer_crc, uri)


def _missing(uri: str) -> ObjectNotFoundError:
    return ObjectNotFoundError(
        f"data file {uri} is missing: the table references it but it is gone (deleted outside "
        "the table?)",
        path=uri,
        operation="read",
    )


def _corrupt(named: str, exc: BaseException, *, path: str) -> CorruptDataFileError:
    return CorruptDataFileError(
        f"data file {named} is not readable Parquet (truncated, overwritten or damaged): {exc}",
        path=path,
    )


def open_parquet(
    source: str | pa.NativeFile,
    filesystem: pafs.FileSystem | None = None,
    *,
    metadata: pq.FileMetaData | None = None,
) -> pq.ParquetFile:
    """A Parquet file opened the way every data file is read (``_READ_OPTIONS``); with
    ``metadata``, on a footer already read."""
    return pq.ParquetFile(source, filesystem=filesystem, metadata=metadata, **_READ_OPTIONS)


def is_damage(exc: BaseException) -> bool:
    """Whether pyarrow's ``exc`` says a Parquet file is damaged (a bad footer, a failed page
    checksum, an unknown encoding, a page that does not decompress), as opposed to the storage
    failing (an errno, or the S3 client's and transport's messages)."""
    if isinstance(exc, pa.ArrowInvalid):
        return True
    if not isinstance(exc, OSError) or isinstance(exc, FileNotFoundError) or exc.errno:
        return False
    text = str(exc).lower()
    return not any(marker in text for marker in _STORAGE_MARKERS)


@contextmanager
def _data_file_errors(uri: str) -> Iterator[None]:
    """Name the data file in what reading it raises: a missing file, or one that is not
    readable Parquet (damaged anywhere: footer, pages, checksums)."""
    try:
        yield
    except FileNotFoundError as exc:
        raise _missing(uri) from exc
    except (pa.ArrowInvalid, OSError) as exc:
        if is_damage(exc):
            raise _corrupt(uri, exc, path=uri) from exc
        raise


def _intact(storage: Storage, file: DataFileMeta, schema: pa.Schema) -> bool:
    """Whether a data file reads whole on its own, with every check ``read_file`` makes (used
    only to find the culprit after a failure)."""
    try:
        for _ in read_file(storage, file, schema=schema):
            pass
    except (CorruptDataFileError, ObjectNotFoundError):
        return False
    return True


def _exists(filesystem: pafs.FileSystem, path: str) -> bool:
    return bool(filesystem.get_file_info(path).type != pafs.FileType.NotFound)


def read_file(
    storage: Storage,
    file: DataFileMeta,
    *,
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
    row_filter: pc.Expression | None = None,
    batch_size: int = 65_536,
) -> Iterator[pa.RecordBatch]:
    """The rows of one data file in file order, projected and filtered, in exactly the table's
    types and nullability (``schema``, projected to ``columns``), whatever accepted form the
    file stores them in (see ``file_columns``): files written by this table, by its older
    versions, or adopted from another engine (Spark's ``NOT NULL`` columns, INT96 timestamps).

    Integrity: the footer is checked against the checksum recorded when the file was written
    (``footer``), every page against its CRC, and every column must fit the table's (checked
    against the footer before any row is returned); damage of any kind, or a file replaced
    outside the table, raises ``CorruptDataFileError`` naming the file. Unfiltered reads go
    through ``ParquetFile.iter_batches`` on the footer already read and checked, which costs
    about a third of a dataset scanner's set-up per file (what dominates reading many small
    files: streams catching up, compaction); filtered reads use the scanner for its row-group
    pruning."""
    filesystem, root = arrow_filesystem(storage)
    full = f"{root}/{file.path}"
    selected = list(columns) if columns is not None else None
    uri = storage.uri(file.path)
    expected = stored_schema(schema)
    wanted = schema if selected is None else pa.schema([schema.field(c) for c in selected])
    with translated("read", uri), _data_file_errors(uri):
        if row_filter is None:
            with filesystem.open_input_file(full) as handle:
                tail = verified_tail(handle, handle.size(), file.footer_crc, uri)
                with open_parquet(handle, metadata=metadata_of(tail)) as source:
                    _check_columns(uri, source, expected)
                    batches = source.iter_batches(
                        batch_size=batch_size, columns=selected, use_threads=False
                    )
                    found = source.schema_arrow
                    layout_of_file = pa.schema([found.field(c) for c in wanted.names])
                    cast = not same_layout(layout_of_file, wanted)
                    rows = 0
                    for batch in batches:
                        rows += batch.num_rows
                        yield _as_table_batch(batch, wanted) if cast else batch
                    if rows != file.row_count:  # a damaged page header can drop a page
                        raise _corrupt(
                            uri,
                            ValueError(f"{rows} rows read, {file.row_count} written"),
                            path=uri,
                        )
        else:
            if file.footer_crc is not None:
                _check_footer(storage, filesystem, root, file)
            fragment = _PARQUET.make_fragment(full, filesystem=filesystem)
            _check_columns(uri, fragment, expected)
            # scanning with the table's schema casts the file's columns before filtering
            scanner = fragment.scanner(
                schema=schema,
                columns=selected,
                filter=row_filter,
                batch_size=batch_size,
                use_threads=False,
            )
            yield from (_as_table_batch(batch, wanted) for batch in scanner.to_batches())


def _as_table_batch(batch: pa.RecordBatch, wanted: pa.Schema) -> pa.RecordBatch:
    """A batch in exactly the table's schema (a safe cast: a changed value raises)."""
    if same_layout(batch.schema, wanted):
        return batch
    return batch.cast(wanted, safe=True)


@functools.lru_cache(maxsize=64)
def stored_schema(schema: pa.Schema) -> pa.Schema:
    """The schema pyarrow reads back from a data file written with ``schema``: Parquet has no
    second-resolution times or date64, so those come back as milliseconds and date32 (reads
    cast them back to the table's types)."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    return pq.read_schema(pa.BufferReader(sink.getvalue()))


def _check_columns(
    uri: str, source: pq.ParquetFile | ds.ParquetFileFragment, expected: pa.Schema
) -> None:
    """Every table column is in the file with a type that fits (``file_columns``)."""
    if isinstance(source, pq.ParquetFile):
        found, parquet_schema = source.schema_arrow, source.schema
    else:
        found, parquet_schema = source.physical_schema, source.metadata.schema
    int96 = int96_columns(parquet_schema)
    for column in expected:
        index = found.get_field_index(column.name)
        reason = (
            "is missing"
            if index < 0
            else column_mismatch(found.field(index).type, column.type, int96=column.name in int96)
        )
        if reason is not None:
            raise CorruptDataFileError(
                f"data file {uri} does not match the table: column '{column.name}' {reason} "
                "(replaced outside the table?)",
                path=uri,
            )
