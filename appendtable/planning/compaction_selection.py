"""Choosing files to compact (pure).

**Queue mode** (bucketed tables), per (partition, bucket), files ordered by ``min_seq``: a window
of *adjacent* files slides over the queue. It is picked when it holds at least ``min_files``
files whose total size reaches ``target``, or ``max_files`` files whatever their size. A window
that grows past ``2 x target`` drops its oldest file. Picked windows never overlap, so rewriting
each one in order keeps the bucket's write order. A *full* compaction instead rewrites every
maximal run of adjacent small files (below ``small`` bytes) of at least two files: big files are
never rewritten, and order is kept for the same reason.

Sizes are *live* sizes (``live_size``): a file's bytes scaled by the share of its rows not
deleted, so a file whose rows are mostly deleted counts as small and is merged sooner.

**Scalable mode** (``bucket = -1``), per partition, no order: small files are bin-packed by size
(smallest first) into tasks; a bin is emitted once it holds more than one file and its weight
(bytes plus ``open_cost`` per file) reaches ``2 x target``; what is left becomes one more task if
it holds at least ``min_files`` files. The rest waits for more files (see ``UnawareCoordinator``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from appendtable.metadata.models import DataFileMeta, PartitionValues

__all__ = [
    "COMPACT_AGE",
    "REMOVE_AGE",
    "PartitionState",
    "UnawareCoordinator",
    "full_runs",
    "live_size",
    "mostly_deleted",
    "pack_unaware",
    "pick_windows",
]

#: Rounds without new files after which a partition's leftovers are compacted anyway.
COMPACT_AGE = 5
#: Rounds without new files after which an idle partition is dropped from memory.
REMOVE_AGE = 10


def live_size(file: DataFileMeta) -> int:
    """The bytes of a file's rows that are not deleted (its size, scaled by the share of its
    rows a deletion vector leaves): what compaction weighs a file by, so that a file with
    many deleted rows counts as small."""
    if file.deletion is None or file.row_count <= 0:
        return file.file_size
    return file.file_size * file.live_row_count // file.row_count


def mostly_deleted(file: DataFileMeta) -> bool:
    """Whether at least half of a file's rows are deleted: worth rewriting on its own."""
    return file.deletion is not None and 2 * file.deletion.cardinality >= file.row_count


def pick_windows(
    files: Sequence[DataFileMeta],
    *,
    target: int,
    min_files: int,
    max_files: int,
) -> list[list[DataFileMeta]]:
    """Non-overlapping windows of adjacent files (``files`` sorted by ``min_seq``) to compact."""
    windows: list[list[DataFileMeta]] = []
    window: list[DataFileMeta] = []
    size = 0
    for file in files:
        window.append(file)
        size += live_size(file)
        if (len(window) >= min_files and size >= target) or len(window) >= max_files:
            windows.append(window)
            window, size = [], 0
            continue
        while size > 2 * target and window:
            size -= live_size(window.pop(0))
    return windows


def full_runs(files: Sequence[DataFileMeta], *, small: int) -> list[list[DataFileMeta]]:
    """Every maximal run of adjacent small files with at least two files."""
    runs: list[list[DataFileMeta]] = []
    run: list[DataFileMeta] = []
    for file in files:
        if live_size(file) < small:
            run.append(file)
            continue
        if len(run) >= 2:
            runs.append(run)
        run = []
    if len(run) >= 2:
        runs.append(run)
    return runs


def pack_unaware(
    files: Iterable[DataFileMeta],
    *,
    target: int,
    open_cost: int,
    min_files: int,
) -> tuple[list[list[DataFileMeta]], list[DataFileMeta]]:
    """(bins to compact, files left for later), packing smallest files first."""
    bins: list[list[DataFileMeta]] = []
    current: list[DataFileMeta] = []
    weight = 0
    for file in sorted(files, key=lambda f: (live_size(f), f.path)):
        current.append(file)
        weight += live_size(file) + open_cost
        if len(current) > 1 and weight >= 2 * target:
            bins.append(current)
            current, weight = [], 0
    if len(current) >= min_files:
        bins.append(current)
        current = []
    return bins, current


@dataclass
class PartitionState:
    """What the coordinator remembers of one partition: its small files and how many rounds
    passed without new ones."""

    files: dict[str, DataFileMeta] = field(default_factory=dict)
    age: int = 0


@dataclass
class UnawareCoordinator:
    """Plans compaction of a scalable-mode table round after round.

    Feed it the small files of each new snapshot (``add``), then call ``plan`` once per round. A
    partition with leftovers that received no new files for ``COMPACT_AGE`` rounds gets them
    compacted anyway (if there are at least two); a partition idle for ``REMOVE_AGE`` rounds is
    dropped from memory (a restarted coordinator finds its files again by a full scan).
    """

    target: int
    open_cost: int
    min_files: int
    max_files_held: int
    partitions: dict[PartitionValues, PartitionState] = field(default_factory=dict)

    @property
    def held(self) -> int:
        return sum(len(state.files) for state in self.partitions.values())

    def add(self, partition: PartitionValues, file: DataFileMeta) -> bool:
        """Remember a small file; False when the coordinator is full (``file-num-limit``)."""
        if self.held >= self.max_files_held:
            return False
        state = self.partitions.setdefault(partition, PartitionState())
        if file.path not in state.files:
            state.files[file.path] = file
            state.age = 0
        return True

    def forget(self, paths: Iterable[str]) -> None:
        """Drop files that are gone (compacted or overwritten by someone else)."""
        gone = set(paths)
        for state in self.partitions.values():
            for path in gone & state.files.keys():
                del state.files[path]

    def plan(self) -> list[tuple[PartitionValues, list[DataFileMeta]]]:
        """This round's tasks; their files leave the coordinator's memory."""
        tasks: list[tuple[PartitionValues, list[DataFileMeta]]] = []
        for partition in list(self.partitions):
            state = self.partitions[partition]
            bins, left = pack_unaware(
                state.files.values(),
                target=self.target,
                open_cost=self.open_cost,
                min_files=self.min_files,
            )
            if not bins:
                state.age += 1
                if state.age > COMPACT_AGE and len(left) > 1:
                    bins, left = [left], []
            for chosen in bins:
                tasks.append((partition, chosen))
                for file in chosen:
                    del state.files[file.path]
            if not state.files or state.age > REMOVE_AGE:
                del self.partitions[partition]
        return tasks
