"""Staged writes: files written into a private directory join the table by a move.

A staging area is a directory inside the table (``_staging/<id>``) that one write owns: every
file the write produces lands there first, so a write that fails is cleaned up by removing one
directory, whatever its tasks (or an engine's zombie tasks) left behind. Two ways in:

* ``adopt``: Parquet files written by another engine with its own writer (Spark, for instance)
  are checked against the table, moved into the table's layout and described from their
  footers;
* ``writer`` and ``adopt_written``: the table's own writer writes into the area (on any number
  of workers, which re-open the area by its ``id``), and the files of its commit messages are
  moved into the table's layout.

The resulting commit messages are committed like any writer's. Until they are, nothing is
visible.

Guarantees:

* ``adopt`` checks every file (columns, order, types, nulls, partition values) before it moves
  any: a file that does not fit raises SchemaMismatchError naming the column and the file, and
  leaves all files where they were.
* Files are moved, never copied through this process: a rename on local disk, a server-side
  copy on object stores. If a move fails, the files already moved are moved back.
* Within one (partition, bucket), files keep the order in which they are given: that is their
  order for streaming readers.
* ``remove`` (also on leaving a ``with`` block) deletes the area through the discard gate
  (``appendtable.commit.discard``): never a file a snapshot references.
* A staging area left behind by a crashed job holds only unreferenced files, which
  ``remove_orphan_files`` deletes once they are older than its threshold.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

import msgspec

from appendtable._state import TableState
from appendtable.commit.discard import DiscardResult
from appendtable.datafiles.bloom_filters import FileIndexSpec
from appendtable.datafiles.foreign import ForeignFile, ForeignFileSpec, describe_foreign_file
from appendtable.datafiles.table_write import TableWriter
from appendtable.errors import InvalidArgumentError, StorageError
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitMessage, DataFileMeta, FileSource, PartitionValues
from appendtable.planning.iceberg_metadata import name_owners
from appendtable.storage.containment import path_problem

__all__ = ["StagingArea"]

#: Files described or moved at a time (footers and moves are I/O-bound round trips).
_IO_THREADS = 16


class StagingArea:
    """A directory inside the table (``_staging/<id>``) for the files of one write.

    Use it as a context manager: leaving the block removes the directory and whatever is still
    in it (adopted files have already moved out). ``id`` re-opens an existing area (a worker
    writing into the driver's area); ``since_snapshot_id`` is the latest snapshot when the
    write began (read when a new area is made), which keeps the discard checks cheap."""

    def __init__(
        self,
        state: TableState,
        area_id: str | None = None,
        *,
        since_snapshot_id: int | None = None,
        schema_id: int | None = None,
    ) -> None:
        self._state = state
        latest = state.snapshots.latest() if area_id is None else None
        if area_id is None and since_snapshot_id is None:
            since_snapshot_id = latest.id if latest is not None else None
        #: The schema the area's files are checked against and recorded with: the current one
        #: when the area is made (a later schema change does not move it; files keep it).
        #: A worker re-opening the area passes the creator's ``view.schema.id``.
        if schema_id is not None:
            self.view = state.view_of(schema_id)
        else:
            self.view = state.refresh(latest) if area_id is None else state.view
        #: The area's id: give it to ``Table.staging_area`` to re-open the area elsewhere.
        self.id = area_id or uuid.uuid4().hex
        #: The directory, relative to the table root (created where directories exist).
        self.path = layout.staging_dir(self.id)
        self.since_snapshot_id = since_snapshot_id
        state.storage.ensure_parent(f"{self.path}/")

    @property
    def uri(self) -> str:
        """The directory's full location (a local path, or a URI such as ``s3://...``)."""
        return self._state.storage.uri(self.path)

    def __repr__(self) -> str:
        return f"StagingArea({self.uri!r})"

    def files(self, suffix: str = ".parquet") -> list[str]:
        """The files below the area ending in ``suffix``, relative to it and sorted, leaving
        out hidden and bookkeeping names (starting with ``.`` or ``_``, such as checksum files,
        ``_SUCCESS`` or an engine's ``_temporary`` directory)."""
        prefix = f"{self.path}/"
        found = []
        for info in self._state.storage.walk(self.path):
            relative = info.path[len(prefix) :]
            parts = relative.split("/")
            if relative.endswith(suffix) and not any(p.startswith((".", "_")) for p in parts):
                found.append(relative)
        return sorted(found)

    def adopt(
        self, files: Sequence[str], *, buckets: Sequence[int] | None = None
    ) -> list[CommitMessage]:
        """Check ``files`` (relative to the area), move them into the table's layout and
        return commit messages for them: one per (partition, bucket), files in the given order,
        files without rows left out. Commit the messages with ``Table.committer()``; on failure
        ``abort`` them like any writer's. A name that leaves the area (``..``, absolute) raises
        PathOutsideTableError before any file is read or moved.

        Bucketed tables need ``buckets``, each file's bucket: every row of the file must
        belong to it (as Spark's ``pmod(hash(key...), N)`` computes it; see
        ``appendtable_spark.bucket_column``). Raises SchemaMismatchError for a file that does
        not fit the table, CorruptDataFileError for one that is not Parquet.

        A file's Parquet field ids, where it has them, must be the table's; a file without
        them is refused where a column's name belonged to another column before (see
        ``Table.reused_names``): readers that match columns by id or through the Iceberg
        mirror's name mapping would read another column there."""
        state, view = self._state, self.view
        options = view.options
        assigned = self._buckets(files, buckets, options.bucket)
        paths = [state.storage.checked(f"{self.path}/{name}") for name in files]
        spec = ForeignFileSpec(
            arrow_schema=view.arrow_schema,
            fields=view.schema.fields,
            partition_keys=view.schema.partition_keys,
            stats_mode=options.get(opt.STATS_MODE),
            stats_truncate=options.stats_truncate,
            watermark_column=options.get(opt.WATERMARK_COLUMN) or None,
            index=FileIndexSpec.for_table(view.schema.fields, view.arrow_schema, options),
            name_owners=name_owners(
                state.schemas.get(i) for i in state.schemas.list_ids() if i <= view.schema.id
            ),
        )
        with ThreadPoolExecutor(max_workers=_IO_THREADS) as pool:
            described = list(
                pool.map(lambda p: describe_foreign_file(state.storage, p, spec), paths)
            )
            groups: dict[tuple[PartitionValues, int], list[ForeignFile]] = {}
            for file, bucket in zip(described, assigned, strict=True):
                if file.row_count > 0:
                    groups.setdefault((file.partition, bucket), []).append(file)
            targets = {
                file.path: self._target(partition, bucket)
                for (partition, bucket), group in groups.items()
                for file in group
            }
            self._move_all(pool, targets)
        now = int(time.time() * 1000)
        return [
            self._message(partition, bucket, group, targets, now)
            for (partition, bucket), group in groups.items()
        ]

    def writer(self) -> TableWriter:
        """A table writer whose files land in this area, laid out as in the table (partition
        and bucket directories). Commit their messages after ``adopt_written``."""
        view = self.view
        return TableWriter(
            self._state.storage, view.schema, view.arrow_schema, view.options, prefix=self.path
        )

    def adopt_written(self, messages: Sequence[CommitMessage]) -> list[CommitMessage]:
        """Move the files of ``messages`` (from writers of this area) to the same place in the
        table's layout; the messages, naming the files there. All or nothing: if a move fails,
        the files already moved are moved back. Raises InvalidArgumentError for a file that is
        not in this area."""
        prefix = f"{self.path}/"
        targets: dict[str, str] = {}
        for message in messages:
            for file in (*message.new_files, *message.compact_after):
                if not file.path.startswith(prefix) or path_problem(file.path) is not None:
                    raise InvalidArgumentError(
                        f"messages: {file.path} was not written into staging area {self.id}"
                    )
                targets[file.path] = file.path[len(prefix) :]
        with ThreadPoolExecutor(max_workers=_IO_THREADS) as pool:
            self._move_all(pool, targets)
        return [_renamed(message, targets) for message in messages]

    def remove(self) -> DiscardResult:
        """Delete the area and everything still in it, through the discard gate."""
        return self._state.discard_directory(self.path, since_snapshot_id=self.since_snapshot_id)

    def __enter__(self) -> StagingArea:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.remove()

    # ---- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _buckets(files: Sequence[str], buckets: Sequence[int] | None, total: int) -> list[int]:
        if total <= 0:
            if buckets is not None and any(b != 0 for b in buckets):
                raise InvalidArgumentError(
                    f"buckets: this table is not bucketed (bucket = {total}): do not give buckets"
                )
            return [0] * len(files)
        if buckets is None or len(buckets) != len(files):
            raise InvalidArgumentError(
                f"buckets: a bucketed table (bucket = {total}) needs the bucket of each staged file"
            )
        for name, bucket in zip(files, buckets, strict=True):
            if not 0 <= bucket < total:
                raise InvalidArgumentError(
                    f"buckets: staged file {name} is given bucket {bucket}, outside 0..{total - 1}"
                )
        return list(buckets)

    def _target(self, partition: PartitionValues, bucket: int) -> str:
        """A new data file name in the (partition, bucket)'s directory."""
        directory = layout.bucket_dir(self._state.partition_name(partition), bucket)
        return f"{directory}/{layout.data_file_name(uuid.uuid4().hex, 0)}"

    def _move_all(self, pool: ThreadPoolExecutor, targets: dict[str, str]) -> None:
        """Move every file; if one move fails, move the others back before raising."""
        storage = self._state.storage
        pairs = list(targets.items())
        outcomes = list(pool.map(lambda pair: _try_move(storage.rename, *pair), pairs))
        failure = next((error for error in outcomes if error is not None), None)
        if failure is not None:
            for (source, target), error in zip(pairs, outcomes, strict=True):
                if error is None:
                    _try_move(storage.rename, target, source)
            raise failure
        storage.sync_names(list(targets.values()))

    def _message(
        self,
        partition: PartitionValues,
        bucket: int,
        group: list[ForeignFile],
        targets: dict[str, str],
        now_ms: int,
    ) -> CommitMessage:
        files = []
        next_seq = 0
        for file in group:
            files.append(
                DataFileMeta(
                    path=targets[file.path],
                    file_size=file.file_size,
                    row_count=file.row_count,
                    min_seq=next_seq,
                    max_seq=next_seq + file.row_count - 1,
                    schema_id=self.view.schema.id,
                    creation_time_ms=now_ms,
                    source=int(FileSource.APPEND),
                    null_counts=file.null_counts,
                    min_values=file.min_values,
                    max_values=file.max_values,
                    footer_crc=file.footer_crc,
                    file_index=file.file_index,
                )
            )
            next_seq += file.row_count
        event_times = [f.max_event_time_ms for f in group if f.max_event_time_ms is not None]
        return CommitMessage(
            partition=partition,
            bucket=bucket,
            total_buckets=self.view.options.bucket,
            schema_id=self.view.schema.id,
            new_files=tuple(files),
            max_event_time_ms=max(event_times) if event_times else None,
        )


def _renamed(message: CommitMessage, targets: dict[str, str]) -> CommitMessage:
    def moved(files: tuple[DataFileMeta, ...]) -> tuple[DataFileMeta, ...]:
        return tuple(msgspec.structs.replace(f, path=targets[f.path]) for f in files)

    return msgspec.structs.replace(
        message, new_files=moved(message.new_files), compact_after=moved(message.compact_after)
    )


def _try_move(rename: Callable[[str, str], None], source: str, target: str) -> StorageError | None:
    try:
        rename(source, target)
    except StorageError as error:
        return error
    return None
