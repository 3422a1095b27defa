"""Working on several data files at once, in order.

Parquet decoding, encoding and compression release the GIL, so files read or rewritten on a
few threads use every core; on object stores each file is also a few round trips, so more
threads hide latency. ``in_order`` is the one place that runs per-file work on threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from appendtable.storage import Storage

__all__ = ["file_threads", "in_order"]

#: Files worked on at once on object stores (latency-bound: a request or more each).
_REMOTE_THREADS = 8

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def file_threads(storage: Storage, files: int) -> int:
    """Threads for working on ``files`` files of ``storage`` at once: on local disk one more
    than the cores (CPU-bound: more threads only contend; measured best on 2 cores), on object
    stores ``_REMOTE_THREADS``; never more than the files."""
    if storage.local_path("") is not None:
        wanted = (os.cpu_count() or 1) + 1
    else:
        wanted = _REMOTE_THREADS
    return max(1, min(wanted, files))


def in_order(
    work: Callable[[_Item], _Result], items: Sequence[_Item], threads: int
) -> list[_Result]:
    """``work`` applied to every item on up to ``threads`` threads, results in the order of
    ``items``. When one fails, the others still finish before the first error (in the order
    of ``items``) is raised, so that whatever they wrote is known to the caller's undo."""
    if len(items) <= 1 or threads <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        futures = [pool.submit(work, item) for item in items]
    return [future.result() for future in futures]
