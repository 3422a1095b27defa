"""Crash-injection plumbing: cheap child processes to SIGKILL, and durable line logs.

Children come from a ``forkserver`` that imported pyarrow and appendtable once, so starting one
costs ~20-30 ms instead of ~1 s for a fresh interpreter: a test can afford hundreds of kills.
Every child is a new process (nothing survives a kill but what it put on disk), started by
forking the server, never the test process itself (whose threads and state must not leak in).

A child reports what it did through a :class:`DurableLog`: one line per event, each written
with a single ``write`` on an ``O_APPEND`` descriptor and fsynced before the child moves on, so
the parent sees every event that happened before a kill (an unfinished last line is ignored).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from multiprocessing.context import BaseContext
from typing import Any

#: ``pyarrow.dataset`` too: appendtable imports it at the first dataset read (about 0.3 s of CPU),
#: and the kill windows are sized for children that start reading at once.
_PRELOAD_BASE = ["pyarrow", "pyarrow.parquet", "pyarrow.dataset", "numpy", "appendtable"]


def fork_context(preload: Sequence[str] = ()) -> BaseContext:
    """The forkserver context, with ``pyarrow``, ``appendtable`` and ``preload`` imported in the
    server. The preload list only counts before the server's first start (once per test
    process), so every caller should pass the same modules."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*_PRELOAD_BASE, *preload])
    return context


class DurableLog:
    """An append-only log of text lines, each durable (fsynced) once ``write`` returns."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, *lines: str) -> None:
        data = "".join(f"{line}\n" for line in lines).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def read_log(path: str) -> list[list[str]]:
    """The complete lines of a log, split on spaces (a torn last line is dropped)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read().decode()
    except FileNotFoundError:
        return []
    complete = data[: data.rfind("\n") + 1]
    return [line.split(" ") for line in complete.splitlines() if line]


def run_child(
    context: BaseContext,
    target: Callable[..., None],
    args: tuple[Any, ...],
    *,
    kill_after: float | None = None,
    timeout: float = 60,
) -> int:
    """Run ``target(*args)`` in a fresh child; SIGKILL it after ``kill_after`` seconds (if it
    is still running). Returns the exit code: -9 when killed (by us or by itself)."""
    process = context.Process(target=target, args=args)  # type: ignore[attr-defined]
    process.start()
    if kill_after is not None:
        process.join(kill_after)
        if process.exitcode is None:
            process.kill()
    process.join(timeout)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise AssertionError(f"child {target.__name__}{args} did not finish within {timeout} s")
    return int(process.exitcode)
