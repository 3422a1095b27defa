"""Reading the data files of a sequence of items (stream units) ahead of their consumer, on a
few threads, while handing out their rows strictly in order.

Decoding a file of some size (pages, decompression) runs in pyarrow without the GIL, so files
read on worker threads overlap with each other and with the consumer's planning. Tiny files are
the exception: their cost is Python-level set-up under the GIL, so they are read in place (see
``ReadAheadLimits``).

Guarantees:

* **Order.** Batches come item by item in the order items are pulled, and within an item file
  by file in the given order, each file's batches in file order: exactly the order of reading
  everything one by one.
* **Same results, same errors.** A file read ahead is read by the same function; whatever that
  raises is raised when the consumer reaches the file, not before, and nothing after it is
  handed out.
* **Bounded.** Only files of ``min_file_bytes`` to ``max_file_bytes`` are read ahead (others
  are read in place, batch by batch, when their turn comes), and the files read ahead but not
  yet handed out total at most ``budget_bytes`` (stored size) beyond the one being handed out.
  Items are pulled ahead only while there is room.
* **Cancellation.** Closing the generator early cancels reads that have not started and drops
  what was read ahead.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa

from appendtable.metadata.models import DataFileMeta

__all__ = ["ReadAheadLimits", "read_ahead", "read_files_ahead", "shared_pool"]

T = TypeVar("T")
FileReader = Callable[[DataFileMeta], Iterator[pa.RecordBatch]]
#: Reads one file of an item (the item tells how: a stream unit's later deletes).
ItemFileReader = Callable[[T, DataFileMeta], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class ReadAheadLimits:
    """How far ahead to read: files of ``min_file_bytes`` to ``max_file_bytes``,
    ``budget_bytes`` in all, ``max_items`` items pulled ahead of the one being handed out; up
    to ``group_files`` files per task.

    Tiny files are read in place: their read is mostly Python-level set-up under the GIL, so
    another thread cannot overlap it, and the hand-off costs more than it saves (measured:
    100 files of 3 KB take 59 ms in place, 72 ms read ahead; 40 files of 2 MB take 299 ms in
    place, 180 ms read ahead, on 2 cores)."""

    budget_bytes: int = 32 << 20
    min_file_bytes: int = 64 << 10
    max_file_bytes: int = 8 << 20
    max_items: int = 64
    group_files: int = 8


class _Group:
    """Files read ahead by one task, in order; the task's result has their batches."""

    __slots__ = ("bytes", "count", "future")

    def __init__(self, future: Future[list[list[pa.RecordBatch]]], count: int, size: int) -> None:
        self.future = future
        self.count = count
        self.bytes = size


class _File(Generic[T]):
    """One file of an item: read ahead (as file ``index`` of ``group``) or, until there is
    room, not started."""

    __slots__ = ("file", "group", "index", "item")

    def __init__(self, file: DataFileMeta, item: T) -> None:
        self.file = file
        self.item = item
        self.group: _Group | None = None
        self.index = 0


class _Item(Generic[T]):
    __slots__ = ("files", "item")

    def __init__(self, item: T, files: Sequence[DataFileMeta]) -> None:
        self.item = item
        self.files = deque(_File(f, item) for f in files)


class _Window(Generic[T]):
    """Items pulled but not yet handed out, and the bytes read ahead for them."""

    def __init__(self, read: ItemFileReader[T], pool: Executor, limits: ReadAheadLimits) -> None:
        self.items: deque[_Item[T]] = deque()
        self.unstarted: deque[_File[T]] = deque()  # files of ``items`` not read ahead yet, in order
        self.read = read
        self.pool = pool
        self.limits = limits
        self.in_flight = 0

    def room(self) -> bool:
        return self.in_flight < self.limits.budget_bytes

    def add(self, item: T, files: Sequence[DataFileMeta]) -> None:
        pending = _Item(item, files)
        self.items.append(pending)
        self.unstarted.extend(pending.files)

    def top_up(self) -> None:
        """Start reading small files not started yet, in order and in groups, while there is
        room (large files are left to be read in place)."""
        limits = self.limits
        while self.unstarted and self.room():
            entries: list[_File[T]] = []
            size = 0
            while (
                self.unstarted
                and len(entries) < limits.group_files
                and self.in_flight + size < limits.budget_bytes
            ):
                entry = self.unstarted[0]
                if not limits.min_file_bytes <= entry.file.file_size <= limits.max_file_bytes:
                    if not entries:
                        self.unstarted.popleft()  # read in place at its turn
                    break
                self.unstarted.popleft()
                entries.append(entry)
                size += entry.file.file_size
            if not entries:
                continue
            pairs: list[tuple[T, DataFileMeta]] = [(entry.item, entry.file) for entry in entries]
            group = _Group(self.pool.submit(_read_all, self.read, pairs), len(pairs), size)
            for index, entry in enumerate(entries):
                entry.group, entry.index = group, index
            self.in_flight += size

    def take(self, entry: _File[T]) -> Iterator[pa.RecordBatch]:
        """The batches of the file at the head: read ahead, or read in place (also when its
        group failed: reading in place raises the file's own error at its turn, after every
        file before it was handed out)."""
        group = entry.group
        item = entry.item
        if group is None:
            return self.read(item, entry.file)
        failed = group.future.exception() is not None  # (waits for the task)
        if entry.index == group.count - 1:
            self.in_flight -= group.bytes
        if failed:
            return self.read(item, entry.file)
        return iter(group.future.result()[entry.index])

    def drop(self) -> None:
        for pending in self.items:
            for entry in pending.files:
                if entry.group is not None:
                    entry.group.future.cancel()
        self.items.clear()
        self.unstarted.clear()
        self.in_flight = 0


def _read_all(
    read: ItemFileReader[T], pairs: Sequence[tuple[T, DataFileMeta]]
) -> list[list[pa.RecordBatch]]:
    return [list(read(item, file)) for item, file in pairs]


def read_ahead(
    pull: Callable[[bool], T | None],
    files_of: Callable[[T], Sequence[DataFileMeta]],
    read: ItemFileReader[T],
    pool: Executor,
    limits: ReadAheadLimits | None = None,
) -> Iterator[tuple[T, pa.RecordBatch | None]]:
    """For each item, in the order ``pull`` gives them: ``(item, batch)`` for every batch of
    its files (``files_of(item)``, read by ``read(item, file)``), then ``(item, None)`` once
    all of them were handed out.

    ``pull(block)`` gives the next item. With ``block=False`` (asked only to read ahead) it
    returns None when no item is ready now; with ``block=True`` (asked when nothing is left to
    hand out) None ends the iteration."""
    window: _Window[T] = _Window(read, pool, limits or ReadAheadLimits())
    try:
        while True:
            while window.room() and len(window.items) <= window.limits.max_items:
                item = pull(not window.items)
                if item is None:
                    break
                window.add(item, files_of(item))
                window.top_up()
            if not window.items:
                return
            head = window.items[0]
            while head.files:
                entry = head.files.popleft()
                if window.unstarted and window.unstarted[0] is entry:
                    window.unstarted.popleft()  # its turn came before there was room: in place
                batches = window.take(entry)
                window.top_up()
                for batch in batches:
                    yield head.item, batch
            window.items.popleft()
            yield head.item, None
    finally:
        window.drop()


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def shared_pool() -> Executor:
    """The process's read-ahead threads (a few: reading small files is mostly waiting on
    storage and pyarrow, which releases the GIL). Only leaf reads run on it, never work that
    waits for other reads, so it cannot deadlock."""
    global _pool
    with _pool_lock:
        if _pool is None:
            threads = min(4, os.cpu_count() or 1)
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="appendtable-read")
        return _pool


def _forget_pool_in_child() -> None:
    """After ``fork``: the parent's threads do not exist in the child (its executor would queue
    work for them forever); the child starts threads of its own on first use."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def read_files_ahead(
    files: Sequence[DataFileMeta], read: FileReader, limits: ReadAheadLimits | None = None
) -> Iterator[pa.RecordBatch]:
    """The batches of ``files`` in order (each file's in file order), files of moderate size
    read ahead on the shared pool; a single file is read in place."""
    if len(files) <= 1:
        for file in files:
            yield from read(file)
        return
    pending = list(reversed(files))
    for _, batch in read_ahead(
        lambda _: pending.pop() if pending else None,
        lambda file: (file,),
        lambda _, file: read(file),
        shared_pool(),
        limits,
    ):
        if batch is not None:
            yield batch
