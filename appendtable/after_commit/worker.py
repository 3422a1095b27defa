"""Post-commit maintenance (compaction and expiration; the mirror of what they commit) off the
committer's latency path: one worker thread per table handle.

Guarantees:

* **A commit returns as soon as its snapshot landed.** It only records what the maintenance
  after it must look at; a worker thread does the work.
* **Nothing is skipped, work is coalesced.** Requests that arrive while the worker is busy are
  merged into one round: the latest snapshot, every (partition, bucket) written since the last
  round and the number of commits it covers. A round always starts after the request it
  serves was made, so it sees that commit.
* **Rounds are spaced.** A round starts ``_SETTLE_S`` after the oldest request it serves, but
  no sooner than ``_ROUND_INTERVAL_S`` after the previous round started, so that a writer
  appending back to back meets a round a second instead of one every few commits (each of
  which rewrote the previous round's output and took the handle's commit turn). ``wait()``
  and interpreter exit start the round at once.
* **Finished before the handle or the process goes.** ``wait()`` blocks until no work is
  pending; ``Table.close()`` calls it; at interpreter exit every worker finishes its pending
  work before thread pools shut down (a script that exits right after an append still
  compacts). A process killed meanwhile loses nothing: the snapshots landed, and the next
  commit or a maintenance job does what was left.
* **Failures are logged, never raised**, neither to the commit that asked for the work nor to
  a later one (the runner given to the worker runs each round under
  ``appendtable.after_commit.guard.run_maintenance``).
* The thread exists only while there is work, and lingers a quarter of a second for more
  (so a stream of commits does not start one thread each): an idle handle holds no thread.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (its exit hook must be registered before ours)
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from appendtable.metadata.models import PartitionValues, Snapshot

__all__ = ["BackgroundMaintenance", "MaintenanceRound", "wait_for_all", "wait_for_idle"]

log = logging.getLogger("appendtable")

#: A round starts this long after the oldest request it serves (seconds: the committing thread
#: returns without waiting for the GIL this thread would take) ...
_SETTLE_S = 0.002
#: ... and no sooner than this long after the previous round started (seconds).
_ROUND_INTERVAL_S = 1.0
#: How long an idle worker thread waits for more work before it ends (seconds).
_LINGER_S = 0.25
#: Set at interpreter exit: lingering threads end at once.
_exiting = False

Written = frozenset[tuple[PartitionValues, int]]


@dataclass(frozen=True)
class MaintenanceRound:
    """What one round of maintenance covers: the latest snapshot it must see, the
    (partition, bucket) pairs written by the commits it serves, and how many commits."""

    snapshot: Snapshot
    written: Written = field(default_factory=frozenset)
    commits: int = 1

    def merged(self, later: MaintenanceRound) -> MaintenanceRound:
        newest = later.snapshot if later.snapshot.id >= self.snapshot.id else self.snapshot
        return MaintenanceRound(newest, self.written | later.written, self.commits + later.commits)


#: Runs one round; must not raise (it logs what fails).
Runner = Callable[[MaintenanceRound], None]

_workers: weakref.WeakSet[BackgroundMaintenance] = weakref.WeakSet()
_workers_lock = threading.Lock()


class BackgroundMaintenance:
    """A worker that runs maintenance rounds one at a time, in submission order, merging the
    requests that wait."""

    def __init__(self, runner: Runner, *, name: str) -> None:
        self._runner = runner
        self._name = name
        self._pending: MaintenanceRound | None = None
        #: ``time.monotonic()`` of the oldest request pending, and when the last round started.
        self._first_request = 0.0
        self._last_round = float("-inf")
        #: Threads in ``wait()``: while there are any, rounds start at once.
        self._waiters = 0
        self._running = False
        self._thread: threading.Thread | None = None
        self._changed = threading.Condition()
        with _workers_lock:
            _workers.add(self)

    def submit(self, request: MaintenanceRound) -> None:
        """Ask for a round (merged with any still waiting); returns at once."""
        with self._changed:
            if self._pending is None:
                self._first_request = time.monotonic()
            self._pending = request if self._pending is None else self._pending.merged(request)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name=f"appendtable-maintenance {self._name}", daemon=False
                )
                self._thread.start()
            else:
                self._changed.notify_all()  # wakes a lingering thread

    @property
    def busy(self) -> bool:
        """Whether a round is running or waiting."""
        with self._changed:
            return self._running or self._pending is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every requested round has finished (True), or ``timeout`` seconds passed
        (False). Called from the worker itself (a round that commits), returns at once."""
        with self._changed:
            if self._thread is threading.current_thread():
                return True
            self._waiters += 1
            self._changed.notify_all()  # a round waiting for its time starts now
            try:
                return self._changed.wait_for(
                    lambda: not self._running and self._pending is None, timeout
                )
            finally:
                self._waiters -= 1

    def _loop(self) -> None:
        while True:
            with self._changed:
                if self._pending is None:
                    # Linger a little for the next commit's request: starting a thread is on
                    # that commit's latency path, waking one is not.
                    self._changed.wait_for(lambda: self._pending is not None or _exiting, _LINGER_S)
                self._wait_for_its_time()
                work = self._pending
                self._pending = None
                if work is None:
                    self._thread = None
                    self._changed.notify_all()
                    return
                self._running = True
                self._last_round = time.monotonic()
            try:
                self._runner(work)
            finally:
                with self._changed:
                    self._running = False
                    self._changed.notify_all()

    def _wait_for_its_time(self) -> None:
        """Hold the pending round until its start (see the module), or until someone waits for
        it (called holding the lock)."""
        while self._pending is not None and not self._waiters and not _exiting:
            start = max(self._first_request + _SETTLE_S, self._last_round + _ROUND_INTERVAL_S)
            pause = start - time.monotonic()
            if pause <= 0:
                return
            self._changed.wait(pause)

    def release_idle_thread(self) -> None:
        """Wake a lingering thread so that it sees ``_exiting`` and ends."""
        with self._changed:
            self._changed.notify_all()

    def _forget_thread(self) -> None:
        """In a forked child: the parent's thread does not exist here (its pending work is the
        parent's to do)."""
        self._changed = threading.Condition()
        self._thread = None
        self._pending = None
        self._running = False
        self._waiters = 0


def wait_for_idle(timeout: float | None = None) -> bool:
    """Block until no worker of the process has a round running or requested (True), or
    ``timeout`` seconds passed for one of them (False, logged)."""
    with _workers_lock:
        workers = list(_workers)
    idle = True
    for worker in workers:
        if not worker.wait(timeout):
            log.warning("post-commit maintenance of %s did not finish in time", worker._name)
            idle = False
    return idle


def wait_for_all(timeout: float | None = None) -> None:
    """Wait for every worker of the process, then let idle threads end at once (at
    interpreter exit, which joins them)."""
    global _exiting
    wait_for_idle(timeout)
    with _workers_lock:
        workers = list(_workers)
    _exiting = True
    for worker in workers:
        worker.release_idle_thread()


def _after_fork_in_child() -> None:
    global _workers_lock
    _workers_lock = threading.Lock()
    for worker in list(_workers):
        worker._forget_thread()


def _register_exit_hook() -> None:
    """Finish pending maintenance at interpreter exit *before* thread pools refuse new work:
    ``threading`` runs these hooks before it joins threads, in reverse order of registration,
    and ``concurrent.futures`` registered its own when it was imported (before this module)."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(wait_for_all)
    else:  # pragma: no cover - every supported Python has it
        atexit.register(wait_for_all)


_register_exit_hook()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
