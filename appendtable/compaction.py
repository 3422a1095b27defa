"""Compaction: planning tasks, running them anywhere, committing the result.

Three separable pieces, so threads, processes or Spark executors can run the workers:

* ``Compactor.plan`` (the coordinator) lists :class:`CompactionTask`s against one snapshot;
* ``Compactor.run_task`` (a worker) rewrites one task's files and returns a ``CommitMessage``;
* ``Compactor.commit`` commits messages as one COMPACT snapshot.

Guarantees: compaction never loses, duplicates or reorders rows. Queue-mode tasks merge only
adjacent files of a bucket and keep their sequence range, so batch and stream reads return each
bucket in write order. A COMPACT commit deletes only files that are still live: racing with
appends it loses nothing (appends never conflict); racing with another compaction or an
overwrite over the same files, exactly one wins and the other raises ``CommitConflictError``,
after which ``compact()`` re-plans (within the ``commit.timeout`` budget, as a commit retries).
Streams skip COMPACT snapshots, so no row is re-emitted.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass

import msgspec
import pyarrow as pa

from appendtable import argument_checks, display
from appendtable._state import TableState
from appendtable.commit.changes import CommitRequest, PartitionScope
from appendtable.commit.discard import DiscardResult
from appendtable.commit.live_index import LiveIndex, Refresh
from appendtable.datafiles.rewrite import read_tables, rewrite_files
from appendtable.datafiles.writing import FileWriteSpec
from appendtable.errors import (
    CommitConflictError,
    InvalidArgumentError,
    InvalidOptionError,
    ObjectNotFoundError,
)
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import (
    CommitKind,
    CommitMessage,
    CompactionTask,
    DataFileMeta,
    FileKind,
    FileSource,
    ManifestEntry,
    PartitionValues,
    Snapshot,
)
from appendtable.planning.compaction_selection import (
    UnawareCoordinator,
    full_runs,
    live_size,
    mostly_deleted,
    pack_unaware,
    pick_windows,
)
from appendtable.planning.sort_keys import SortStrategy, sort_indices
from appendtable.staging import StagingArea

__all__ = [
    "AutoCompaction",
    "CompactionPlan",
    "CompactionProgress",
    "Compactor",
    "merge_new_files",
]

log = logging.getLogger("appendtable.compaction")


def _replan_wait(attempt: int, options: opt.Options) -> float:
    """Seconds before re-plan number ``attempt``: the commit backoff (``commit.min-retry-wait``
    doubling up to ``commit.max-retry-wait``), jittered so that rivals spread out."""
    low = options.get(opt.COMMIT_MIN_RETRY_WAIT)
    high = options.get(opt.COMMIT_MAX_RETRY_WAIT)
    wait_ms = min(high, low * (1 << min(attempt - 1, 30)))
    return float(wait_ms * random.uniform(0.5, 1.0) / 1000)


SORT_STRATEGIES = tuple(strategy.value for strategy in SortStrategy)


def _sort_strategy(strategy: str) -> SortStrategy:
    if strategy not in SORT_STRATEGIES:
        raise InvalidArgumentError(
            f"strategy: {strategy!r} is not one of {', '.join(SORT_STRATEGIES)}"
        )
    return SortStrategy(strategy)


@dataclass(frozen=True)
class CompactionPlan:
    """Tasks planned against snapshot ``snapshot_id`` (None for an empty table)."""

    snapshot_id: int | None
    tasks: list[CompactionTask]

    def __repr__(self) -> str:
        return display.plan_repr(self)

    def _repr_html_(self) -> str:
        return display.plan_html(self)


@dataclass(frozen=True)
class CompactionProgress:
    """Reported after each finished task of a compaction run."""

    tasks_done: int
    tasks_total: int
    files_read: int
    bytes_read: int
    files_written: int
    bytes_written: int

    def __str__(self) -> str:
        return display.progress_text(self)


ProgressCallback = Callable[[CompactionProgress], None]


class Compactor:
    """Plans, runs and commits compaction for one table."""

    def __init__(self, state: TableState, *, commit_user: str | None = None) -> None:
        self._state = state
        self._commit_user = commit_user or f"compaction-{uuid.uuid4().hex}"
        self._ordered = state.options.bucket > 0

    # The thresholds are read at each use: an option change applies to the next round.

    @property
    def _target(self) -> int:
        return self._state.options.target_file_size

    @property
    def _small(self) -> int:
        options = self._state.options
        return int(options.target_file_size * options.get(opt.COMPACTION_SMALL_FILE_RATIO))

    @property
    def _min_files(self) -> int:
        return self._state.options.get(opt.COMPACTION_MIN_FILE_NUM)

    @property
    def _max_files(self) -> int:
        return self._state.options.get(opt.COMPACTION_MAX_FILE_NUM)

    # ---- planning ------------------------------------------------------------------------------

    def plan(
        self,
        *,
        full: bool = False,
        partitions: Sequence[Mapping[str, object]] | None = None,
    ) -> CompactionPlan:
        """Tasks for the latest snapshot. ``full`` rewrites every run of small files (queue
        mode) or every partition's small files (scalable mode), not only ripe windows, and
        every file with a deletion vector (applied: rewritten without its deleted rows)."""
        snapshot = self._state.snapshots.latest()
        self._state.refresh(snapshot)
        if snapshot is None:
            return CompactionPlan(None, [])
        scope = self._state.partition_scope(partitions)
        groups = self._groups(self._state.manifests.live_files(snapshot), scope)
        tasks: list[CompactionTask] = []
        for (partition, bucket), files in groups.items():
            for chosen in self.choose(files, full=full):
                tasks.append(self.make_task(snapshot.id, partition, bucket, chosen))
        return CompactionPlan(snapshot.id, tasks)

    def _groups(
        self, entries: Iterable[ManifestEntry], scope: PartitionScope
    ) -> dict[tuple[PartitionValues, int], list[DataFileMeta]]:
        keys = self._state.schema.partition_keys
        groups: dict[tuple[PartitionValues, int], list[DataFileMeta]] = {}
        for entry in entries:
            if scope.matches(entry.partition, keys):
                groups.setdefault((entry.partition, entry.bucket), []).append(entry.file)
        for files in groups.values():
            files.sort(key=lambda f: (f.min_seq, f.path))
        return groups

    def choose(self, files: Sequence[DataFileMeta], *, full: bool) -> list[list[DataFileMeta]]:
        """The file sets to merge in one (partition, bucket), files sorted by ``min_seq``; and
        each file that no set holds with at least half its rows deleted (``full``: with any
        deletion vector), rewritten alone (without its deleted rows; a single file keeps the
        bucket's order). So a full compaction leaves no deletion vector."""
        chosen = self._choose_sets(files, full=full)
        taken = {file.path for group in chosen for file in group}
        return chosen + [
            [f]
            for f in files
            if f.path not in taken and (mostly_deleted(f) or (full and f.deletion is not None))
        ]

    def _choose_sets(
        self, files: Sequence[DataFileMeta], *, full: bool
    ) -> list[list[DataFileMeta]]:
        if self._ordered:
            if full:
                return full_runs(files, small=self._small)
            return pick_windows(
                files, target=self._target, min_files=self._min_files, max_files=self._max_files
            )
        small = [f for f in files if live_size(f) < self._small]
        if full:
            bins, left = pack_unaware(small, target=self._target, open_cost=0, min_files=2)
            return [*bins, left] if len(left) >= 2 else bins
        bins, _ = pack_unaware(
            small,
            target=self._target,
            open_cost=self._state.options.get(opt.SPLIT_OPEN_FILE_COST),
            min_files=self._min_files,
        )
        return bins

    def make_task(
        self,
        snapshot_id: int,
        partition: PartitionValues,
        bucket: int,
        files: Sequence[DataFileMeta],
        *,
        sort_by: Sequence[str] = (),
        strategy: str = "order",
    ) -> CompactionTask:
        return CompactionTask(
            snapshot_id=snapshot_id,
            partition=partition,
            bucket=bucket,
            total_buckets=self._state.options.bucket,
            schema_id=self._state.schema.id,
            files=tuple(sorted(files, key=lambda f: (f.min_seq, f.path))),
            ordered=self._ordered,
            sort_by=tuple(sort_by),
            strategy=strategy,
        )

    def plan_sort(
        self,
        by: Sequence[str],
        *,
        strategy: str = "order",
        partitions: Sequence[Mapping[str, object]] | None = None,
    ) -> CompactionPlan:
        """One task per partition: rewrite all its files ordered by ``by``."""
        by = argument_checks.names(by, "by") or []
        _sort_strategy(strategy)
        if self._ordered:
            raise InvalidOptionError(
                "sort compaction reorders rows, so it applies to bucket = -1 tables only; a "
                "bucketed table keeps each bucket in write order"
            )
        snapshot = self._state.snapshots.latest()
        self._state.refresh(snapshot)
        names = self._state.schema.field_names()
        unknown = [column for column in by if column not in names]
        if not by or unknown:
            raise InvalidArgumentError(
                f"by: sort compaction needs existing columns to sort by (unknown: {unknown or by})"
            )
        if snapshot is None:
            return CompactionPlan(None, [])
        scope = self._state.partition_scope(partitions)
        groups = self._groups(self._state.manifests.live_files(snapshot), scope)
        tasks = [
            self.make_task(snapshot.id, partition, bucket, files, sort_by=by, strategy=strategy)
            for (partition, bucket), files in groups.items()
        ]
        return CompactionPlan(snapshot.id, tasks)

    # ---- the worker ----------------------------------------------------------------------------

    def run_task(
        self, task: CompactionTask, *, staging: StagingArea | None = None
    ) -> CommitMessage:
        """Rewrite one task's files (on any worker); the message replaces them. On failure the
        files written so far are discarded. With ``staging`` the outputs are written into that
        staging area (a distributed run's, which moves them into the table with
        ``adopt_written`` before committing, and removes whatever failed tasks left)."""
        state = self._state
        view = state.view_of(task.schema_id)  # the outputs' schema: files of older ones convert
        spec = FileWriteSpec.for_table(view.schema, view.arrow_schema, view.options)
        projection = state.projection(view)
        directory = self.directory(task.partition, task.bucket)
        if staging is not None:
            directory = f"{staging.path}/{directory}"
        chunks: Iterator[pa.Table] | None = None
        if task.sort_by:
            everything = pa.concat_tables(read_tables(state.storage, task.files, projection))
            order = sort_indices(everything, task.sort_by, _sort_strategy(task.strategy))
            chunks = iter([everything.take(order)])
        created: list[str] = []
        try:
            outputs = rewrite_files(
                state.storage,
                directory,
                task.files,
                spec,
                projection=projection,
                source=FileSource.COMPACT,
                keep_sequence=task.ordered,
                chunks=chunks,
                on_file=created.append,
            )
        except BaseException:
            state.discard(created, since_snapshot_id=task.snapshot_id)
            raise
        return CommitMessage(
            partition=task.partition,
            bucket=task.bucket,
            total_buckets=task.total_buckets,
            schema_id=task.schema_id,
            compact_before=task.files,
            compact_after=tuple(outputs),
        )

    def directory(self, partition: PartitionValues, bucket: int) -> str:
        return layout.bucket_dir(self._state.partition_name(partition), bucket)

    # ---- committing ----------------------------------------------------------------------------

    def commit(self, messages: Sequence[CommitMessage]) -> Snapshot | None:
        """Commit rewritten files as one COMPACT snapshot. Raises CommitConflictError (nothing
        applied) if another commit removed any of the files first; delete the outputs then
        with ``abort``."""
        if not messages:
            return None
        return self._state.committer().commit(
            CommitRequest(
                kind=CommitKind.COMPACT, commit_user=self._commit_user, messages=tuple(messages)
            )
        )

    def abort(
        self, messages: Iterable[CommitMessage], *, since_snapshot_id: int | None = None
    ) -> DiscardResult:
        """Delete the outputs of messages that will not be committed, through the discard
        gate (outputs a snapshot references are kept). ``since_snapshot_id``: the snapshot
        the tasks were planned against, if known (a cheaper check)."""
        return self._state.discard(
            (file.path for message in messages for file in message.compact_after),
            since_snapshot_id=since_snapshot_id,
        )

    # ---- a whole run -----------------------------------------------------------------------------

    def run(
        self,
        planner: Callable[[], CompactionPlan],
        *,
        parallelism: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Snapshot | None:
        """Plan, rewrite in parallel threads, commit one COMPACT snapshot; re-plan when a
        concurrent change makes the commit conflict, for as long as the table's
        ``commit.timeout`` allows (as a commit retries lost races), backing off between
        attempts; then CommitConflictError."""
        parallelism = argument_checks.maybe_thread_count(parallelism)
        options = self._state.options
        budget_ms = options.get(opt.COMMIT_TIMEOUT)
        started = time.monotonic()
        attempt = 0
        while True:
            plan = planner()
            if not plan.tasks:
                return None
            try:
                messages = self.execute(plan.tasks, parallelism=parallelism, progress=progress)
            except ObjectNotFoundError as missing:
                if self._inputs_live(plan):
                    raise  # a file the table still references is gone: not a race
                lost = CommitConflictError(
                    "a concurrent compaction or expiration removed files this compaction was "
                    f"rewriting ({missing})"
                )
            else:
                try:
                    snapshot = self.commit(messages)
                except CommitConflictError as conflict:
                    self.abort(messages, since_snapshot_id=plan.snapshot_id)
                    lost = conflict
                else:
                    if snapshot is not None:
                        log.info(
                            "compacted %d files into %d (snapshot %d)",
                            sum(len(m.compact_before) for m in messages),
                            sum(len(m.compact_after) for m in messages),
                            snapshot.id,
                        )
                    return snapshot
            attempt += 1
            if budget_ms and (time.monotonic() - started) * 1000 > budget_ms:
                raise lost
            log.info(
                "compaction lost a race with a concurrent change; re-planning (attempt %d)",
                attempt + 1,
            )
            time.sleep(_replan_wait(attempt, options))

    def _inputs_live(self, plan: CompactionPlan) -> bool:
        """Whether every file ``plan`` rewrites is still live in the latest snapshot."""
        latest = self._state.snapshots.latest()
        live = (
            set()
            if latest is None
            else {e.file.path for e in self._state.manifests.live_files(latest)}
        )
        return all(f.path in live for task in plan.tasks for f in task.files)

    def execute(
        self,
        tasks: Sequence[CompactionTask],
        *,
        parallelism: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> list[CommitMessage]:
        """Run tasks in a thread pool (the Parquet codec releases the GIL). All or nothing: if
        one task fails, the outputs of the others are deleted and the error is raised."""
        chosen = argument_checks.maybe_thread_count(parallelism)
        workers = max(1, chosen or self._state.options.write_parallelism)
        messages: list[CommitMessage] = []
        counters = [0, 0, 0, 0]
        with ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="appendtable-compact"
        ) as pool:
            futures = [pool.submit(self.run_task, task) for task in tasks]
            try:
                for future in as_completed(futures):
                    message = future.result()
                    messages.append(message)
                    counters[0] += len(message.compact_before)
                    counters[1] += sum(f.file_size for f in message.compact_before)
                    counters[2] += len(message.compact_after)
                    counters[3] += sum(f.file_size for f in message.compact_after)
                    if progress is not None:
                        progress(CompactionProgress(len(messages), len(tasks), *counters))
            except BaseException:
                for future in futures:
                    future.cancel()
                wait(futures)  # running tasks cannot be cancelled: let them finish, then undo
                self.abort(
                    (f.result() for f in futures if not f.cancelled() and f.exception() is None),
                    since_snapshot_id=min(task.snapshot_id for task in tasks),
                )
                raise
        return messages


class AutoCompaction:
    """Compaction after a writer's commits (unless ``write-only``), kept across commits of one
    table handle: queue mode merges ripe windows of the buckets just written (a full compaction
    every ``full-compaction.delta-commits`` commits); scalable mode feeds a long-lived
    coordinator with each new snapshot's small files."""

    def __init__(self, state: TableState) -> None:
        self._state = state
        self._compactor = Compactor(state)
        self._index = LiveIndex(state.snapshots, state.manifests)
        options = state.options
        #: The options it was configured with (a change of options makes a new one).
        self.options = options
        self._coordinator = UnawareCoordinator(
            target=options.target_file_size,
            open_cost=options.get(opt.SPLIT_OPEN_FILE_COST),
            min_files=options.get(opt.COMPACTION_MIN_FILE_NUM),
            max_files_held=options.get(opt.COMPACTION_FILE_NUM_LIMIT),
        )
        self._small = int(options.target_file_size * options.get(opt.COMPACTION_SMALL_FILE_RATIO))
        self._full_every = options.get(opt.FULL_COMPACTION_DELTA_COMMITS)
        self._commits = 0

    def after_commit(
        self, written: Iterable[tuple[PartitionValues, int]], *, commits: int = 1
    ) -> Snapshot | None:
        """Compact after ``commits`` commits (merged into one round) wrote ``written``; the
        full compaction every ``full-compaction.delta-commits`` counts each of them."""
        before = self._commits
        self._commits += commits
        full = self._full_every > 0 and (
            self._commits // self._full_every > before // self._full_every
        )
        return self._compactor.run(lambda: self._plan(set(written), full=full))

    def _plan(self, written: set[tuple[PartitionValues, int]], *, full: bool) -> CompactionPlan:
        refresh = self._index.refresh()
        snapshot_id = self._index.snapshot_id
        if snapshot_id is None:
            return CompactionPlan(None, [])
        if self._state.options.bucket > 0:
            tasks = []
            for key in written:
                files = sorted(
                    (e.file for e in self._index.groups.get(key, {}).values()),
                    key=lambda f: (f.min_seq, f.path),
                )
                for chosen in self._compactor.choose(files, full=full):
                    tasks.append(self._compactor.make_task(snapshot_id, key[0], key[1], chosen))
            return CompactionPlan(snapshot_id, tasks)
        alone = self._feed(refresh)
        # a file with at least half its rows deleted is rewritten on its own (as in queue mode)
        self._coordinator.forget(e.file.path for e in alone)
        return CompactionPlan(
            snapshot_id,
            [
                self._compactor.make_task(snapshot_id, partition, 0, files)
                for partition, files in self._coordinator.plan()
            ]
            + [self._compactor.make_task(snapshot_id, e.partition, 0, [e.file]) for e in alone],
        )

    def _feed(self, refresh: Refresh) -> list[ManifestEntry]:
        """Tell the coordinator about new small files and files that are gone; returns the
        new live files with at least half their rows deleted."""
        if refresh.rebuilt:  # first round, or after a rollback: a full scan
            self._coordinator.partitions.clear()
            live = [entry for group in self._index.groups.values() for entry in group.values()]
            for entry in live:
                if live_size(entry.file) < self._small:
                    self._coordinator.add(entry.partition, entry.file)
            return [e for e in live if mostly_deleted(e.file)]
        added: dict[str, ManifestEntry] = {}
        for snapshot in refresh.snapshots:
            entries = self._state.manifests.delta_entries(snapshot)
            # removals first: a delete re-adds a path with its new deletion vector
            gone = [e.file.path for e in entries if e.kind == FileKind.DELETE]
            self._coordinator.forget(gone)
            for path in gone:
                added.pop(path, None)
            for entry in entries:
                if entry.kind != FileKind.ADD:
                    continue
                added[entry.file.path] = entry
                if live_size(entry.file) < self._small:
                    self._coordinator.add(entry.partition, entry.file)
        return [e for e in added.values() if mostly_deleted(e.file)]


def merge_new_files(
    state: TableState,
    messages: Sequence[CommitMessage],
    *,
    since_snapshot_id: int | None = None,
) -> list[CommitMessage]:
    """Pre-commit compaction: merge a commit's own small new files before it is published, so
    the snapshot never shows them. Queue mode merges runs of adjacent small files per bucket
    (write order kept); scalable mode packs a partition's small files by size. The merged
    originals were never committed and are discarded (through the gate, which keeps any that
    a snapshot after ``since_snapshot_id`` references); on failure nothing is changed."""
    options = state.options
    small = int(options.target_file_size * options.get(opt.COMPACTION_SMALL_FILE_RATIO))
    ordered = options.bucket > 0
    groups: dict[tuple[PartitionValues, int], list[DataFileMeta]] = {}
    for message in messages:
        groups.setdefault((message.partition, message.bucket), []).extend(message.new_files)
    compactor = Compactor(state)
    created: list[str] = []
    replaced: list[str] = []
    merged_messages = []
    event_times = [m.max_event_time_ms for m in messages if m.max_event_time_ms is not None]
    try:
        for (partition, bucket), files in groups.items():
            if not files:
                continue
            # the writer's schema (a writer opened before a schema change keeps its own)
            view = state.view_of(max(f.schema_id for f in files))
            spec = FileWriteSpec.for_table(view.schema, view.arrow_schema, view.options)
            if ordered:
                runs = full_runs(files, small=small)
            else:
                candidates = [f for f in files if live_size(f) < small]
                bins, left = pack_unaware(
                    candidates, target=options.target_file_size, open_cost=0, min_files=2
                )
                runs = [*bins, left] if len(left) >= 2 else bins
            result = _replace_runs(files, runs, compactor, state, spec, partition, bucket, created)
            replaced.extend(f.path for run in runs for f in run)
            merged_messages.append(
                CommitMessage(
                    partition=partition,
                    bucket=bucket,
                    total_buckets=options.bucket,
                    schema_id=view.schema.id,
                    new_files=tuple(_renumber(result)),
                    max_event_time_ms=max(event_times) if event_times else None,
                )
            )
    except BaseException:
        state.discard(created, since_snapshot_id=since_snapshot_id)
        raise
    state.discard(replaced, since_snapshot_id=since_snapshot_id)
    return merged_messages


def _replace_runs(
    files: Sequence[DataFileMeta],
    runs: Sequence[Sequence[DataFileMeta]],
    compactor: Compactor,
    state: TableState,
    spec: FileWriteSpec,
    partition: PartitionValues,
    bucket: int,
    created: list[str],
) -> list[DataFileMeta]:
    """``files`` with each run replaced, at the run's place, by its merged output."""
    if not runs:
        return list(files)
    directory = compactor.directory(partition, bucket)
    first_of = {run[0].path: run for run in runs}
    members = {f.path for run in runs for f in run}
    result: list[DataFileMeta] = []
    for file in files:
        run = first_of.get(file.path)
        if run is not None:
            result.extend(
                rewrite_files(
                    state.storage,
                    directory,
                    run,
                    spec,
                    projection=state.projection(state.view_of(spec.schema_id)),
                    source=FileSource.APPEND,
                    keep_sequence=False,
                    on_file=created.append,
                )
            )
        elif file.path not in members:
            result.append(file)
    return result


def _renumber(files: Sequence[DataFileMeta]) -> list[DataFileMeta]:
    """Local sequence numbers 0, 1, ... in file order (the committer shifts them)."""
    renumbered = []
    next_seq = 0
    for file in files:
        renumbered.append(
            msgspec.structs.replace(file, min_seq=next_seq, max_seq=next_seq + file.row_count - 1)
        )
        next_seq += file.row_count
    return renumbered
