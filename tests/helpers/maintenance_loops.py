"""Processes that hammer one table with maintenance for a while, for the race tests: each loop
is ``loop(uri, seconds, ...)``, run in a process of its own by :func:`run_together` (bind the
extra arguments with ``functools.partial``)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import appendtable as at
from tests.helpers.crash import fork_context

__all__ = [
    "FAR_FUTURE_MS",
    "expiring",
    "purging",
    "removing_orphans",
    "rolling_back",
    "run_together",
]

FAR_FUTURE_MS = 2**62


def run_together(uri: str, seconds: float, *loops: Callable[[str, float], None]) -> None:
    """Each loop in a process of its own for ``seconds``; each must exit cleanly."""
    context = fork_context(["tests.reliability.crash_children"])
    workers = [context.Process(target=loop, args=(uri, seconds)) for loop in loops]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0, worker


def rolling_back(uri: str, seconds: float, *, position: int, pause: float = 0.03) -> None:
    """Roll back to the retained snapshot at ``position`` of the list (-2: the one before
    the latest; 0: the oldest, the next to expire), again and again, through one handle."""
    table = at.open_table(uri)
    stop = time.time() + seconds
    while time.time() < stop:
        try:
            ids = [s.id for s in table.snapshots()]
            if len(ids) > 1:
                table.rollback_to(ids[position])
        except (at.SnapshotNotFoundError, at.CommitConflictError):
            pass  # the target expired first, or the mirror kept changing: clean refusals
        time.sleep(pause)


def _repeat(uri: str, seconds: float, call: Callable[[at.Table], object]) -> None:
    """``call`` on one handle of the table, again and again (20 ms apart), for ``seconds``."""
    table = at.open_table(uri)
    stop = time.time() + seconds
    while time.time() < stop:
        call(table)
        time.sleep(0.02)


def expiring(uri: str, seconds: float, *, keep: int) -> None:
    """Expire all but the newest ``keep`` snapshots, again and again."""
    _repeat(
        uri, seconds, lambda t: t.expire_snapshots(retain_min=keep, older_than_ms=FAR_FUTURE_MS)
    )


def removing_orphans(uri: str, seconds: float, *, older_than: dt.timedelta) -> None:
    """Remove orphan files older than ``older_than``, again and again."""
    _repeat(uri, seconds, lambda t: t.remove_orphan_files(older_than=older_than, dry_run=False))


def purging(uri: str, seconds: float, *, older_than: dt.timedelta) -> None:
    """Purge (orphans older than ``older_than`` included), again and again."""
    _repeat(uri, seconds, lambda t: t.purge(older_than=older_than))
