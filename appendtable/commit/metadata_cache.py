"""A process-wide cache of decoded immutable metadata files (manifests, manifest lists, commit
user records), shared by every handle of every table in the process.

Why it is safe: these files are written once under a fresh random name and never change, so a
decoded copy stays exact for as long as the file exists, and a name is never reused (a deleted
manifest is never read again: no snapshot that is still read references it). Entries are keyed
by the table root's URI and the file name, so two tables never share an entry.

Why it exists: a new handle of a table (``open_table`` in a loop, a worker per task, a fresh
``Scan`` in a notebook) would otherwise decode every manifest again; with it, planning on a new
handle costs about what it costs on a warm one.

Bounds: each cache holds at most ``max_weight`` units (entries of the decoded lists) and drops
the least recently used files first. Thread-safe.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["MetadataCache", "clear_metadata_caches"]

V = TypeVar("V")
Key = tuple[str, str]

_all_caches: list[MetadataCache[object]] = []


class MetadataCache(Generic[V]):
    """A thread-safe LRU map of (table root URI, file name) to a decoded file, bounded by the
    total weight of what it holds."""

    def __init__(self, max_weight: int) -> None:
        self.max_weight = max_weight
        self._items: OrderedDict[Key, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        _all_caches.append(self)  # type: ignore[arg-type]

    def get(self, key: Key) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: Key, value: V, weight: int) -> None:
        """Remember ``value``; a file heavier than the whole cache is not kept."""
        weight = max(weight, 1)
        with self._lock:
            if key in self._items or weight > self.max_weight:
                return
            self._items[key] = (value, weight)
            self._weight += weight
            while self._weight > self.max_weight:
                _, (_, dropped) = self._items.popitem(last=False)
                self._weight -= dropped

    def discard(self, key: Key) -> None:
        """Forget one file (after deleting it)."""
        with self._lock:
            found = self._items.pop(key, None)
            if found is not None:
                self._weight -= found[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weight = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def _new_locks_in_child() -> None:
    """After ``fork``: a lock another thread of the parent held would never be released in the
    child; the child keeps the cached files with fresh locks."""
    for cache in _all_caches:
        cache._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_locks_in_child)


def clear_metadata_caches() -> None:
    """Empty every metadata cache of the process (for measurements of a cold process, and for
    tests that damage metadata files on purpose)."""
    for cache in _all_caches:
        cache.clear()
