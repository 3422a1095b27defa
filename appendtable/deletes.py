"""Deleting rows by a filter: one atomic DELETE snapshot, by deletion vectors or copy-on-write.

A delete plans on the latest snapshot (its *base*): the files that may hold matching rows are
found by partition values, buckets, column statistics and bloom filters (as a scan prunes),
then each is read (only the filter's columns) and the filter is evaluated with Arrow compute,
giving the matching row positions (row ordinals in the file) that are not deleted yet. Then:

* with ``deletion-vectors.enabled`` (merge-on-read), each touched file gets a new deletion
  vector holding the union of its old vector and the new positions, all written in one Puffin
  file (``index/dv-<uuid>.puffin``); the file is re-added with the vector;
* otherwise (copy-on-write), each touched file is rewritten without those rows (keeping its
  sequence range and creation time); files no row of which matches are never rewritten.

Either way a file whose every row is deleted is simply removed. The DELETE snapshot also
names a record of the delete (``index/delete-<uuid>``: its base snapshot and its filter) that
streams use (see ``stream``). The commit removes exactly the files (and vectors) it planned
on: if a concurrent compaction or delete changed one of them first, it conflicts, and the
delete plans again on the new latest snapshot; appends never conflict with it (rows appended
after its base are not deleted by it). A dry run reads what it needs and writes nothing.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from appendtable import display
from appendtable._state import SchemaView, TableState
from appendtable.commit.changes import CommitRequest
from appendtable.datafiles.deletion_vectors import deleted_positions, write_vectors
from appendtable.datafiles.expressions import to_expression
from appendtable.datafiles.file_threads import file_threads, in_order
from appendtable.datafiles.projection import Projection
from appendtable.datafiles.reading import read_as, with_positions
from appendtable.datafiles.rewrite import rewrite_files
from appendtable.datafiles.writing import FileWriteSpec
from appendtable.errors import (
    AppendTableError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptMetadataError,
    InvalidFilterError,
    ObjectNotFoundError,
    StorageError,
)
from appendtable.metadata import codec, layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import (
    CommitKind,
    CommitMessage,
    DataFileMeta,
    DeleteRecord,
    FileSource,
    ManifestEntry,
    PartitionValues,
    Snapshot,
    StoredPredicate,
)
from appendtable.planning.filters import Filter, Predicate, parse_filter
from appendtable.planning.operators import FilterOp
from appendtable.scan import plan_entries

__all__ = [
    "DeleteResult",
    "delete_rows",
    "filter_of",
    "matching_positions",
    "record_of",
    "stored_filter",
]

log = logging.getLogger("appendtable")


@dataclass(frozen=True)
class DeleteResult:
    """What a delete did (or, with ``dry_run``, would do).

    ``rows``: rows deleted; ``files_touched``: data files that held some; of those,
    ``files_removed`` held only deleted rows and were dropped, ``files_rewritten`` were
    rewritten without the rows (copy-on-write), and ``vectors_written`` got a new deletion
    vector (merge-on-read). ``snapshot``: the DELETE snapshot (None for a dry run or when no
    row matched). ``mode``: ``deletion-vectors`` or ``copy-on-write``."""

    rows: int
    files_touched: int
    files_removed: int
    files_rewritten: int
    vectors_written: int
    mode: str
    dry_run: bool
    snapshot: Snapshot | None = None
    #: Files considered after pruning (statistics, bloom filters), for the curious.
    files_read: int = 0
    paths: tuple[str, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        return display.delete_repr(self)


@dataclass(frozen=True)
class _Touched:
    entry: ManifestEntry
    #: the positions newly deleted
    positions: npt.NDArray[np.uint64]
    #: all positions deleted afterwards (the old vector's and the new)
    union: npt.NDArray[np.uint64]

    @property
    def emptied(self) -> bool:
        return len(self.union) >= self.entry.file.row_count


def _moved_on(state: TableState, base: Snapshot) -> bool:
    """Whether a snapshot was committed after ``base``: a file the delete planned on that is
    gone was then replaced and expired meanwhile (a compaction, a rollback, a purge), and the
    delete plans again; otherwise it is missing from the latest snapshot, and that is an
    error."""
    return state.snapshots.latest_id() != base.id


def _back_off(attempt: int, started: float, view: SchemaView, error: AppendTableError) -> int:
    """Wait before planning again (the attempt's number is returned); raises ``error`` once
    ``commit.timeout`` has passed."""
    attempt += 1
    budget_ms = view.options.get(opt.COMMIT_TIMEOUT)
    if budget_ms and (time.monotonic() - started) * 1000 > budget_ms:
        raise error
    log.info("delete raced a concurrent change; re-planning (attempt %d)", attempt)
    time.sleep(min(1.0, 0.01 * (1 << min(attempt, 7))) * random.uniform(0.5, 1.5))
    return attempt


def delete_rows(
    state: TableState, filter: object, *, dry_run: bool, commit_user: str
) -> DeleteResult:
    """Delete the rows matching ``filter`` (see the module doc); re-plans after a conflict
    for as long as ``commit.timeout`` allows."""
    if filter is None:
        raise InvalidFilterError(
            "delete needs a filter (a list of (column, op, value) tuples); to remove every row "
            "overwrite the table with no rows"
        )
    started = time.monotonic()
    attempt = 0
    while True:
        latest = state.snapshots.latest()
        view = state.refresh(latest)
        vectors = view.options.get(opt.DELETION_VECTORS_ENABLED)
        mode = "deletion-vectors" if vectors else "copy-on-write"
        parsed = parse_filter(filter, view.column_types)
        assert parsed is not None
        if latest is None:
            return DeleteResult(0, 0, 0, 0, 0, mode, dry_run)
        projection = state.projection(view)
        candidates = plan_entries(state, latest, parsed, projection=projection, view=view)
        try:
            touched = _touched(state, candidates, projection, parsed)
        except ObjectNotFoundError as exc:
            if not _moved_on(state, latest):
                raise
            attempt = _back_off(attempt, started, view, exc)
            continue
        rows = sum(len(t.positions) for t in touched)
        removed = sum(1 for t in touched if t.emptied)
        kept = len(touched) - removed
        paths = tuple(t.entry.file.path for t in touched)
        if dry_run or not touched:
            return DeleteResult(
                rows,
                len(touched),
                removed,
                0 if vectors else kept,
                kept if vectors else 0,
                mode,
                dry_run,
                files_read=len(candidates),
                paths=paths,
            )
        written: list[str] = []
        data_files: list[str] = []
        try:
            messages = (
                _with_vectors(state, touched, written)
                if vectors
                else _rewritten(state, view, projection, touched, data_files)
            )
            record = _write_record(state, latest.id, view, parsed)
            written.append(record)
            snapshot = state.committer().commit(
                CommitRequest(
                    kind=CommitKind.DELETE,
                    commit_user=commit_user,
                    messages=tuple(messages),
                    delete_record=record,
                )
            )
        except (CommitConflictError, ObjectNotFoundError) as exc:
            _undo(state, written, data_files, latest.id)
            if isinstance(exc, ObjectNotFoundError) and not _moved_on(state, latest):
                raise
            attempt = _back_off(attempt, started, view, exc)
            continue
        except CommitStateUnknownError:
            raise  # it may land yet (a publish delivered late): every file it wrote stays
        except BaseException:
            _undo(state, written, data_files, latest.id)
            raise
        return DeleteResult(
            rows,
            len(touched),
            removed,
            0 if vectors else kept,
            kept if vectors else 0,
            mode,
            False,
            snapshot,
            files_read=len(candidates),
            paths=paths,
        )


def _touched(
    state: TableState,
    entries: Sequence[ManifestEntry],
    projection: Projection,
    row_filter: Filter,
) -> list[_Touched]:
    """The entries holding rows that match and are not deleted yet, with their positions."""

    def touched(entry: ManifestEntry) -> _Touched | None:
        positions = matching_positions(state, entry.file, projection, row_filter)
        old = deleted_positions(state.storage, entry.file)
        if old is not None and len(old):
            positions = np.setdiff1d(positions, old, assume_unique=True)
        if not len(positions):
            return None
        union = positions if old is None else np.union1d(old, positions)
        return _Touched(entry, positions, union)

    threads = file_threads(state.storage, len(entries))
    return [t for t in in_order(touched, entries, threads) if t is not None]


def matching_positions(
    state: TableState, file: DataFileMeta, projection: Projection, row_filter: Filter
) -> npt.NDArray[np.uint64]:
    """The positions (row ordinals) of ``file``'s rows matching ``row_filter``, deleted or
    not, read as ``projection``'s schema: only the filter's columns are read, and the filter
    is evaluated on whole batches with Arrow compute."""
    expression = to_expression(row_filter)
    assert expression is not None
    physical = msgspec.structs.replace(file, deletion=None)
    columns = sorted(row_filter.columns)
    chunks: list[npt.NDArray[np.uint64]] = []
    offset = 0
    for batch in read_as(state.storage, physical, projection, columns=columns):
        numbered, name = with_positions(batch, offset)
        offset += batch.num_rows
        hits = numbered.filter(expression).column(name)
        chunks.append(hits.to_numpy(zero_copy_only=False).astype(np.uint64))
    if not chunks:
        return np.empty(0, dtype=np.uint64)
    return np.concatenate(chunks)


def _with_vectors(
    state: TableState, touched: Sequence[_Touched], written: list[str]
) -> list[CommitMessage]:
    """Merge-on-read: one Puffin file with the union vector of every file that keeps rows."""
    survivors = {t.entry.file.path: t.union for t in touched if not t.emptied}
    refs = write_vectors(state.storage, survivors) if survivors else {}
    written.extend({ref.path for ref in refs.values()})
    return _messages(
        touched,
        lambda t: (
            ()
            if t.emptied
            else (msgspec.structs.replace(t.entry.file, deletion=refs[t.entry.file.path]),)
        ),
    )


def _rewritten(
    state: TableState,
    view: SchemaView,
    projection: Projection,
    touched: Sequence[_Touched],
    created: list[str],
) -> list[CommitMessage]:
    """Copy-on-write: each file that keeps rows rewritten without the deleted ones (in the
    current schema, keeping its sequence range and creation time)."""
    spec = FileWriteSpec.for_table(view.schema, view.arrow_schema, view.options)

    def rewritten(item: _Touched) -> tuple[str, tuple[DataFileMeta, ...]]:
        file = item.entry.file
        directory = layout.bucket_dir(state.partition_name(item.entry.partition), item.entry.bucket)
        new = rewrite_files(
            state.storage,
            directory,
            [file],
            spec,
            projection=projection,
            source=FileSource(file.source),
            keep_sequence=True,
            chunks=_kept_tables(state, file, projection, item.positions),
            on_file=created.append,
        )
        return file.path, tuple(
            msgspec.structs.replace(output, creation_time_ms=file.creation_time_ms)
            for output in new
        )

    kept = [t for t in touched if not t.emptied]
    outputs = dict(in_order(rewritten, kept, file_threads(state.storage, len(kept))))
    return _messages(touched, lambda t: outputs.get(t.entry.file.path, ()))


def _kept_tables(
    state: TableState,
    file: DataFileMeta,
    projection: Projection,
    positions: npt.NDArray[np.uint64],
) -> Iterator[pa.Table]:
    for batch in read_as(state.storage, file, projection, also_deleted=positions):
        yield pa.Table.from_batches([batch])


def _messages(
    touched: Sequence[_Touched], after: Callable[[_Touched], tuple[DataFileMeta, ...]]
) -> list[CommitMessage]:
    """One message per (partition, bucket): the touched files out, ``after(t)`` in."""
    grouped: dict[tuple[PartitionValues, int], list[_Touched]] = {}
    for item in touched:
        grouped.setdefault((item.entry.partition, item.entry.bucket), []).append(item)
    messages = []
    for (partition, bucket), items in grouped.items():
        first = items[0].entry
        messages.append(
            CommitMessage(
                partition=partition,
                bucket=bucket,
                total_buckets=first.total_buckets,
                schema_id=max(t.entry.file.schema_id for t in items),
                compact_before=tuple(t.entry.file for t in items),
                compact_after=tuple(f for t in items for f in after(t)),
            )
        )
    return messages


def stored_filter(row_filter: Filter) -> tuple[tuple[StoredPredicate, ...], ...]:
    """A parsed filter as the delete record stores it."""
    return tuple(
        tuple(
            StoredPredicate(p.column, p.path, p.op.value, p.values, p.type, p.field_id)
            for p in clause
        )
        for clause in row_filter.clauses
    )


def filter_of(record: DeleteRecord) -> Filter:
    """The filter a delete record stores, as a parsed filter on the record's schema."""
    return Filter(
        tuple(
            tuple(
                Predicate(p.column, FilterOp(p.op), p.values, p.type, p.path, p.field_id)
                for p in clause
            )
            for clause in record.clauses
        )
    )


def _write_record(state: TableState, base: int, view: SchemaView, row_filter: Filter) -> str:
    record = DeleteRecord(
        base_snapshot=base, schema_id=view.schema.id, clauses=stored_filter(row_filter)
    )
    path = f"{layout.INDEX_DIR}/delete-{uuid.uuid4().hex}"
    state.storage.create(path, codec.encode(record, codec.Kind.DELETE_RECORD))
    state.storage.sync_names([path])
    return path


def record_of(state: TableState, snapshot: Snapshot) -> DeleteRecord | None:
    """The delete record a DELETE snapshot names (None for other snapshots)."""
    if snapshot.delete_record is None:
        return None
    uri = state.storage.uri(snapshot.delete_record)
    data = state.storage.read(snapshot.delete_record)
    record = codec.decode(data, DeleteRecord, codec.Kind.DELETE_RECORD, uri)
    for clause in record.clauses:
        for predicate in clause:
            if FilterOp.parse(predicate.op) is None:
                raise CorruptMetadataError(
                    f"delete record {uri} holds an unknown operator {predicate.op!r}", path=uri
                )
    return record


def _undo(state: TableState, written: Sequence[str], data_files: Sequence[str], base: int) -> None:
    """Remove what a delete that did not land wrote: its vector file and record (never
    referenced), and its rewritten data files (through the discard gate)."""
    for path in written:
        try:
            state.storage.delete(path)
        except StorageError:
            pass  # unreferenced: orphan removal reclaims it
    if data_files:
        state.discard(data_files, since_snapshot_id=base)
