"""Reading data files: in order, projected and filtered, checked for integrity.

Every read gives exactly the table's types and nullability, whatever accepted form a file
stores them in (``file_columns``), and checks the file: its footer against the checksum
recorded when it was written (``footer``), every page against its CRC, its columns against the
table's, and (unfiltered) its row count. Damage of any kind raises ``CorruptDataFileError``
naming the file; a missing file ``ObjectNotFoundError``; a failing storage ``StorageError``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from appendtable.datafiles.arrow_schema import empty_table
from appendtable.datafiles.deletion_vectors import Positions, deleted_positions, keep_mask
from appendtable.datafiles.expressions import (
    needs_exact_pass,
    pushdown_expression,
    to_expression,
)
from appendtable.datafiles.file_columns import (
    INT96_UNIT,
    column_mismatch,
    int96_columns,
    same_layout,
)
from appendtable.datafiles.file_threads import file_threads, in_order
from appendtable.datafiles.footer import (
    SMALL_FILE_BYTES,
    metadata_of,
    verified_small_file,
    verified_tail,
)
from appendtable.datafiles.kept_scan import RowCountMismatch, scan_kept
from appendtable.datafiles.parquet_format import datasets, parquet_format
from appendtable.datafiles.projection import Projection
from appendtable.errors import CorruptDataFileError, ObjectNotFoundError
from appendtable.metadata.models import DataFileMeta
from appendtable.planning.filters import Filter
from appendtable.storage import Storage

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = [
    "check_files",
    "is_damage",
    "open_parquet",
    "read_as",
    "read_file",
    "read_files",
    "read_files_as",
    "stored_schema",
    "with_positions",
]

#: each page's CRC-32 checked where the writer recorded one (this table's writers always do;
#: Spark's do by default), so damage inside a page raises instead of returning wrong values.
_READ_OPTIONS: dict[str, Any] = {
    "coerce_int96_timestamp_unit": INT96_UNIT,
    "page_checksum_verification": True,
}
_Rows = TypeVar("_Rows", pa.Table, pa.RecordBatch)
#: Footers checked at once on object stores (a request each; on local disk one thread).
_FOOTER_THREADS = 16
#: What pyarrow's errors about the storage (not about a file's content) say: its native S3
#: client's and transport errors. Every other error decoding a data file is damage.
_STORAGE_MARKERS = ("aws error", "curl", "connection", "timed out", "timeout", "http", "network")


def read_as(
    storage: Storage,
    file: DataFileMeta,
    projection: Projection,
    *,
    columns: Sequence[str] | None = None,
    row_filter: Filter | None = None,
    batch_size: int = 65_536,
    also_deleted: Positions | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one data file in file order, as the projection's target schema (matched
    by field id, see ``projection``), projected to ``columns`` and filtered by ``row_filter``
    (given on the target's columns), without its deleted rows (``read_file``). Files of the
    target's own schema go straight to ``read_file``; others are read in their own schema,
    converted, then filtered."""
    layout = projection.layout(file.schema_id)
    if layout.native:
        yield from read_file(
            storage,
            file,
            schema=projection.arrow_schema,
            columns=columns,
            row_filter=row_filter,
            batch_size=batch_size,
            also_deleted=also_deleted,
        )
        return
    expression = to_expression(row_filter)
    wanted = list(columns) if columns is not None else projection.arrow_schema.names
    needed = wanted + sorted((row_filter.columns if row_filter else set()) - set(wanted))
    sources = projection.file_columns(layout, needed)
    for batch in read_file(
        storage,
        file,
        schema=layout.arrow_schema,
        columns=sources,
        batch_size=batch_size,
        also_deleted=also_deleted,
    ):
        if not needed:
            yield batch  # no column at all: only the row count matters
            continue
        converted = projection.convert(batch, layout, needed)
        if expression is not None:
            converted = converted.filter(expression)
        yield converted.select(wanted) if len(needed) != len(wanted) else converted


def read_files_as(
    storage: Storage,
    files: Sequence[DataFileMeta],
    projection: Projection,
    *,
    columns: Sequence[str] | None = None,
    row_filter: Filter | None = None,
) -> pa.Table:
    """``read_files`` for files of any schema version, as the projection's target schema: runs
    of files in the target's own schema are scanned together, the others file by file; the
    result keeps the order of ``files``."""
    wanted = (
        projection.arrow_schema
        if columns is None
        else pa.schema([projection.arrow_schema.field(c) for c in columns])
    )
    parts: list[pa.Table] = []
    run: list[DataFileMeta] = []

    def flush() -> None:
        if run:
            parts.append(
                read_files(
                    storage,
                    run,
                    schema=projection.arrow_schema,
                    columns=columns,
                    row_filter=row_filter,
                )
            )
            run.clear()

    for file in files:
        if projection.layout(file.schema_id).native:
            run.append(file)
            continue
        flush()
        batches = list(read_as(storage, file, projection, columns=columns, row_filter=row_filter))
        parts.append(pa.Table.from_batches(batches, schema=wanted))
    flush()
    if not parts:
        return empty_table(wanted)
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def read_files(
    storage: Storage,
    files: Sequence[DataFileMeta],
    *,
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
    row_filter: Filter | None = None,
) -> pa.Table:
    """The rows of several data files as one table, in the order of ``files`` (Arrow's
    scanner reads them concurrently and reassembles them in order), after their footers are
    checked against their recorded checksums (concurrently on object stores); unfiltered, the
    row count is checked too. Filtered with row-group pruning that keeps NaN rows (see
    ``expressions``).

    Files with deleted rows (deletion vectors): unfiltered, the scan leaves each file's
    deleted rows out as it goes (``kept_scan``); filtered, every file is read by ``read_file``
    (which evaluates the filter on its columns before reading the others, then leaves the
    deleted rows out), several files at a time (``file_threads``), and the parts are joined in
    the order of ``files``. Tiny files on local disk, unfiltered, are read by ``read_file`` one
    after the other: the scanner's set-up per file costs more than reading one whole
    (measured on 2 cores, 500 one-row files: 114 ms through the scanner, 50 ms one by one;
    threads only contend)."""
    vectors = any(file.deletion is not None for file in files)
    tiny = row_filter is None and _tiny_and_local(storage, files)
    if tiny or (vectors and row_filter is not None):
        wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns])

        def one(file: DataFileMeta) -> pa.Table:
            batches = read_file(
                storage, file, schema=schema, columns=columns, row_filter=row_filter
            )
            return pa.Table.from_batches(list(batches), schema=wanted)

        parts = in_order(one, files, file_threads(storage, len(files)) if vectors else 1)
        return pa.concat_tables(parts) if parts else empty_table(wanted)
    filesystem, root = storage.arrow_filesystem()
    paths = [file.path for file in files]
    full = [f"{root}/{storage.checked(path)}" for path in paths]

    def culprit(usable: Callable[[str], bool]) -> str | None:
        """The first file that is not ``usable`` (Arrow's errors do not always say which)."""
        return next((p for p, f in zip(paths, full, strict=True) if not usable(f)), None)

    check_files(storage, files, schema)
    with storage.translated("read", paths[0]):
        try:
            dataset = datasets().dataset(
                full, schema=schema, format=parquet_format(), filesystem=filesystem
            )
            selected = list(columns) if columns is not None else None
            if vectors:
                return _scan_kept(storage, dataset, files, full, selected, schema)
            exact = needs_exact_pass(row_filter)
            result = dataset.to_table(
                columns=_with_filter_columns(selected, row_filter) if exact else selected,
                filter=pushdown_expression(row_filter),
                use_threads=True,
            )
            if exact:
                result = result.filter(to_expression(row_filter))
                result = result.select(selected) if selected is not None else result
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


def _scan_kept(
    storage: Storage,
    dataset: ds.Dataset,
    files: Sequence[DataFileMeta],
    full: Sequence[str],
    selected: list[str] | None,
    schema: pa.Schema,
) -> pa.Table:
    """The unfiltered rows of ``files`` (at the dataset paths ``full``) without their deleted
    ones (``kept_scan``)."""
    deleted = {
        path: deleted_positions(storage, file) for path, file in zip(full, files, strict=True)
    }
    rows = {path: file.row_count for path, file in zip(full, files, strict=True)}
    wanted = schema if selected is None else pa.schema([schema.field(c) for c in selected])
    try:
        return scan_kept(dataset, selected, deleted, rows, wanted)
    except RowCountMismatch as exc:  # e.g. a page header lost
        uri = storage.uri(files[list(full).index(exc.path)].path)
        raise _corrupt(uri, exc, path=uri) from exc


def check_files(storage: Storage, files: Sequence[DataFileMeta], schema: pa.Schema) -> None:
    """Check of each of ``files`` what a dataset scan of them as ``schema`` does not
    (``_check_before_scan``); raises CorruptDataFileError (or ObjectNotFoundError) naming the
    first file that fails. On remote storage the files' tails are read on threads."""
    if not files:
        return
    filesystem, root = storage.arrow_filesystem()
    expected = stored_schema(schema)

    def check(file: DataFileMeta) -> None:
        _check_before_scan(storage, filesystem, root, file, expected)

    threads = 1 if storage.local_path("") is not None else min(_FOOTER_THREADS, len(files))
    if threads == 1:
        for file in files:
            check(file)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(check, files))


def _check_before_scan(
    storage: Storage,
    filesystem: pafs.FileSystem,
    root: str,
    file: DataFileMeta,
    expected: pa.Schema,
) -> None:
    """What a dataset scan does not check of a data file: its footer against the checksum
    recorded when it was written (which vouches for its columns too: the writer checked
    them); a file of an older writer, without a checksum, column by column against
    ``expected`` (a scan would cast or null-fill columns that do not fit, silently)."""
    uri = storage.uri(file.path)
    full = f"{root}/{storage.checked(file.path)}"
    with (
        storage.translated("read", file.path),
        _data_file_errors(uri, filesystem, full),
        filesystem.open_input_file(full) as handle,
    ):
        tail = verified_tail(handle, handle.size(), file.footer_crc, uri)
        if file.footer_crc is None:
            with open_parquet(handle, metadata=metadata_of(tail)) as source:
                _check_columns(uri, source, expected)


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
def _data_file_errors(uri: str, filesystem: pafs.FileSystem, full: str) -> Iterator[None]:
    """Name the data file in what reading it raises: a missing file, or one that is not
    readable Parquet (damaged anywhere: footer, pages, checksums). A file deleted while it was
    being opened or read is missing too, whatever the client raised meanwhile (pyarrow's GCS
    client reports an object deleted under an open stream as a closed file, a ValueError)."""
    try:
        yield
    except FileNotFoundError as exc:
        raise _missing(uri) from exc
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        if _gone(filesystem, full):
            raise _missing(uri) from exc
        if isinstance(exc, pa.ArrowInvalid | OSError) and is_damage(exc):
            raise _corrupt(uri, exc, path=uri) from exc
        raise


def _gone(filesystem: pafs.FileSystem, full: str) -> bool:
    """Whether the file is certainly absent now (False when that cannot be told)."""
    try:
        return not _exists(filesystem, full)
    except OSError:
        return False


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
    row_filter: Filter | None = None,
    batch_size: int = 65_536,
    also_deleted: Positions | None = None,
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
    pruning.

    Deleted rows are never returned: the rows at the positions of the file's deletion vector
    (``DataFileMeta.deletion``), and at ``also_deleted`` (positions a stream drops), are taken
    out before filtering, row group by row group: filtered, only the row groups whose
    statistics may match are read (each group's first position follows from the footer)."""
    filesystem, root = storage.arrow_filesystem()
    full = f"{root}/{storage.checked(file.path)}"
    selected = list(columns) if columns is not None else None
    uri = storage.uri(file.path)
    expected = stored_schema(schema)
    wanted = schema if selected is None else pa.schema([schema.field(c) for c in selected])
    keep = _kept_rows(storage, file, also_deleted)
    with storage.translated("read", file.path), _data_file_errors(uri, filesystem, full):
        if keep is not None:
            with _opened(filesystem, full, file, uri, expected) as (source, _):
                groups = (
                    None  # the manifest's statistics of the file are its one group's
                    if row_filter is None or source.metadata.num_row_groups == 1
                    else _groups_that_may_match(full, filesystem, schema, row_filter)
                )
                yield from _read_kept(
                    source, uri, file, _Kept(keep, groups), schema, selected, row_filter, batch_size
                )
        elif row_filter is None:
            with _opened(filesystem, full, file, uri, expected) as (source, found):
                batches = source.iter_batches(
                    batch_size=batch_size, columns=selected, use_threads=False
                )
                cast = not _stored_as(found, wanted)
                rows = 0
                for batch in batches:
                    rows += batch.num_rows
                    yield _as_table_batch(batch, wanted) if cast else batch
                _check_rows(uri, rows, file.row_count)
        else:
            _check_before_scan(storage, filesystem, root, file, expected)
            fragment = parquet_format().make_fragment(full, filesystem=filesystem)
            # scanning with the table's schema casts the file's columns before filtering
            exact = needs_exact_pass(row_filter)
            scanner = fragment.scanner(
                schema=schema,
                columns=_with_filter_columns(selected, row_filter) if exact else selected,
                filter=pushdown_expression(row_filter),
                batch_size=batch_size,
                use_threads=False,
            )
            expression = to_expression(row_filter) if exact else None
            for batch in scanner.to_batches():
                if expression is not None:
                    batch = batch.filter(expression)
                    batch = batch.select(selected) if selected is not None else batch
                yield _as_table_batch(batch, wanted)


def _kept_rows(
    storage: Storage, file: DataFileMeta, also_deleted: Positions | None
) -> npt.NDArray[np.bool_] | None:
    """The mask of the file's rows that are not deleted; None if none is."""
    positions = deleted_positions(storage, file)
    if also_deleted is not None and len(also_deleted):
        positions = also_deleted if positions is None else np.union1d(positions, also_deleted)
    return keep_mask(positions, file.row_count)


@dataclass(frozen=True)
class _Kept:
    """Which rows of a file to read: ``rows`` (by position) of the row groups ``groups`` (all
    of them when None)."""

    rows: npt.NDArray[np.bool_]
    groups: list[int] | None


def _groups_that_may_match(
    full: str, filesystem: pafs.FileSystem, schema: pa.Schema, row_filter: Filter
) -> list[int] | None:
    """The row groups of the file whose statistics may hold rows matching ``row_filter`` (the
    pruning the scanner does, keeping NaN rows: see ``expressions``); None: all of them."""
    expression = pushdown_expression(row_filter)
    if expression is None:
        return None
    fragment = parquet_format().make_fragment(full, filesystem=filesystem)
    return [group.id for group in fragment.subset(filter=expression, schema=schema).row_groups]


def _read_kept(
    source: pq.ParquetFile,
    uri: str,
    file: DataFileMeta,
    kept: _Kept,
    schema: pa.Schema,
    selected: list[str] | None,
    row_filter: Filter | None,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """The rows of an opened file that ``kept`` selects, row group by row group, in
    ``schema``'s types, filtered by ``row_filter`` and projected to ``selected``. Every group
    read must hold the rows its footer says, and the footer the rows the manifest says
    (positions are row ordinals). Filtered, the filter runs first on the filter's columns of
    a group, and the group's other columns are read only when some row that is not deleted
    matches, for those rows (a point query reads the key column of most groups, nothing
    more)."""
    metadata = source.metadata
    sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    _check_rows(uri, sum(sizes), file.row_count)
    starts = np.cumsum([0, *sizes])
    names = selected if selected is not None else schema.names
    probed = sorted(row_filter.columns) if row_filter is not None else []
    rest = [n for n in names if n not in probed]
    expression = to_expression(row_filter)
    for group in range(len(sizes)) if kept.groups is None else kept.groups:
        first = int(starts[group])
        if expression is None:
            rows = _read_group(source, uri, group, names, sizes[group], schema)
            rows = rows.filter(pa.array(kept.rows[first : first + sizes[group]]))
        else:
            rows = _read_group(source, uri, group, probed, sizes[group], schema)
            numbered, name = with_positions(rows, 0)
            hits = numbered.filter(expression).column(name)
            local = hits.to_numpy(zero_copy_only=False).astype(np.int64)
            local = local[kept.rows[first + local]]
            if not len(local):
                continue
            indices = pa.array(local)
            rows = rows.take(indices)
            others = _read_group(source, uri, group, rest, sizes[group], schema) if rest else None
            for column in rest:
                assert others is not None
                rows = rows.append_column(schema.field(column), others[column].take(indices))
        yield from rows.select(names).to_batches(max_chunksize=batch_size)


def _read_group(
    source: pq.ParquetFile,
    uri: str,
    group: int,
    columns: Sequence[str],
    size: int,
    schema: pa.Schema,
) -> pa.Table:
    """``columns`` of one row group of an opened file, in ``schema``'s types, checked to hold
    the ``size`` rows its footer says."""
    rows = source.read_row_group(group, columns=list(columns), use_threads=False)
    _check_rows(uri, rows.num_rows, size)
    return _as_table(rows, pa.schema([schema.field(n) for n in rows.schema.names]))


def with_positions(rows: _Rows, first: int) -> tuple[_Rows, str]:
    """``rows`` with one more column numbering them by position from ``first`` (uint64), and
    that column's name (one no column of ``rows`` has)."""
    name = "__position"
    while name in rows.schema.names:
        name = "_" + name
    numbers = pa.array(np.arange(first, first + rows.num_rows, dtype=np.uint64))
    return rows.append_column(name, numbers), name


def _with_filter_columns(selected: list[str] | None, row_filter: Filter | None) -> list[str] | None:
    """``selected`` and the columns ``row_filter`` reads (to filter after the scanner)."""
    if selected is None or row_filter is None:
        return selected
    return selected + sorted(row_filter.columns - set(selected))


@contextmanager
def _opened(
    filesystem: pafs.FileSystem, full: str, file: DataFileMeta, uri: str, expected: pa.Schema
) -> Iterator[tuple[pq.ParquetFile, pa.Schema]]:
    """A data file opened on its footer, read once and checked (checksum, columns), with its
    Arrow schema; a small file is read whole at once, and opened on those bytes."""
    with filesystem.open_input_file(full) as handle:
        size = handle.size()
        whole = verified_small_file(handle, size, file.footer_crc, uri)
        if whole is not None:
            opened = open_parquet(pa.BufferReader(whole))
        else:
            tail = verified_tail(handle, size, file.footer_crc, uri)
            opened = open_parquet(handle, metadata=metadata_of(tail))
        with opened as source:
            yield source, _check_columns(uri, source, expected)


def _stored_as(found: pa.Schema, wanted: pa.Schema) -> bool:
    """Whether the columns of a file of schema ``found`` read as exactly ``wanted`` (no cast
    needed)."""
    if same_layout(found, wanted):
        return True
    return same_layout(pa.schema([found.field(c) for c in wanted.names]), wanted)


def _tiny_and_local(storage: Storage, files: Sequence[DataFileMeta]) -> bool:
    """Whether every file is read whole at once (``footer.verified_small_file``) from local
    disk, where reading needs no request that other threads could overlap."""
    return storage.local_path("") is not None and all(
        file.file_size <= SMALL_FILE_BYTES for file in files
    )


def _check_rows(uri: str, read: int, written: int) -> None:
    if read != written:  # a damaged page header can drop a page
        raise _corrupt(uri, ValueError(f"{read} rows read, {written} written"), path=uri)


def _as_table_batch(batch: pa.RecordBatch, wanted: pa.Schema) -> pa.RecordBatch:
    """A batch in exactly the table's schema (a safe cast: a changed value raises)."""
    if same_layout(batch.schema, wanted):
        return batch
    return batch.cast(wanted, safe=True)


def _as_table(rows: pa.Table, wanted: pa.Schema) -> pa.Table:
    """``_as_table_batch`` for a table."""
    if same_layout(rows.schema, wanted):
        return rows
    return rows.cast(wanted, safe=True)


@functools.lru_cache(maxsize=64)
def stored_schema(schema: pa.Schema) -> pa.Schema:
    """The schema pyarrow reads back from a data file written with ``schema``: Parquet has no
    second-resolution times or date64, so those come back as milliseconds and date32 (reads
    cast them back to the table's types)."""
    sink = pa.BufferOutputStream()
    pq.write_table(empty_table(schema), sink)
    return pq.read_schema(pa.BufferReader(sink.getvalue()))


def _check_columns(
    uri: str, source: pq.ParquetFile | ds.ParquetFileFragment, expected: pa.Schema
) -> pa.Schema:
    """Every table column is in the file with a type that fits (``file_columns``); the file's
    Arrow schema."""
    if isinstance(source, pq.ParquetFile):
        found, parquet_schema = source.schema_arrow, source.schema
    else:
        found, parquet_schema = source.physical_schema, source.metadata.schema
    int96 = int96_columns(parquet_schema)
    if not int96 and same_layout(found, expected):
        return found  # every column exactly as the table's writers store it
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
    return found
