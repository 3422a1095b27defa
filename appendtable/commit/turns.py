"""Taking turns at committing, for the commits of one table handle in one process.

A handle's own commits (its appends, overwrites and deletes) and the commits of its background
maintenance worker (compaction) would otherwise race for the next snapshot id like commits of
two processes: the loser backs off (``commit.min-retry-wait``, 10 ms by default) and writes its
manifests again, which made a one-row append that met a compaction commit three to four times
slower than one that did not. Holding one ``CommitTurns`` for each commit attempt, they wait
for each other instead (an attempt takes a few milliseconds on local disk).

Guarantees: an attempt never runs while another attempt of the same turns runs in another
thread; the thread holding a turn may take it again (a commit inside a commit's hook, as some
tests inject, proceeds and the outer attempt loses the race as it would to another process).
Commits of other handles and other processes still race through the protocol: the turns are an
optimisation, never what keeps a commit correct. In a child process forked while a turn was
held, the turns start free (the thread that held it does not exist there).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CommitTurns"]

_all_turns: weakref.WeakSet[CommitTurns] = weakref.WeakSet()


class CommitTurns:
    """One turn at a time for the commit attempts of one handle (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        _all_turns.add(self)

    @contextmanager
    def turn(self, deadline: float | None) -> Iterator[bool]:
        """Hold the turn while the block runs; yields False (without the turn) when
        ``deadline`` (``time.monotonic()``) passed first."""
        timeout = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._lock.acquire(timeout=timeout):
            yield False
            return
        try:
            yield True
        finally:
            self._lock.release()

    def _reset_in_child(self) -> None:
        self._lock = threading.RLock()


def _after_fork_in_child() -> None:
    for turns in list(_all_turns):
        turns._reset_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
