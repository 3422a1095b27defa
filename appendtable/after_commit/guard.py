"""The two places that catch every exception, both after a snapshot landed: a landed commit
is reported as landed, whatever the work that follows it raises.

* ``run_maintenance`` runs post-commit maintenance (compaction, expiration), inline in the
  commit or on the handle's background worker.
* ``publish_mirror_quietly`` publishes the Iceberg mirror after a snapshot, also one that did
  not go through ``TableCommit`` (compaction, rollback, schema change).

Each logs what failed with the snapshot id and returns; the next commit, a maintenance job or
``appendtable iceberg TABLE --repair`` completes what was left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from appendtable._state import TableState
from appendtable.errors import AppendTableError, CommitConflictError
from appendtable.metadata.models import Snapshot

__all__ = ["publish_mirror_quietly", "run_maintenance"]

log = logging.getLogger("appendtable")


def run_maintenance(work: Callable[[], object], snapshot: Snapshot) -> None:
    """Run post-commit maintenance after ``snapshot`` landed, which must never make a landed
    commit look failed: whatever it raises is logged with the snapshot id."""
    try:
        work()
    except CommitConflictError as exc:  # ordinary contention: other writers got there first
        log.warning(
            "snapshot %d landed; the maintenance after it gave way to concurrent writers "
            "(left for the next commit or a maintenance job): %s",
            snapshot.id,
            " ".join(str(exc).split()),
        )
    except Exception as exc:  # any failure: the commit landed, so report it as landed
        log.warning(
            "snapshot %d landed, but the maintenance after it failed (left for the next "
            "commit or a maintenance job): %s: %s",
            snapshot.id,
            type(exc).__name__,
            exc,
            exc_info=True,
        )


def publish_mirror_quietly(
    state: TableState, snapshot: Snapshot, *, even_if_off: bool = False
) -> None:
    """Publish the Iceberg mirror if the table has it on (as of ``snapshot``, which just
    landed: no metadata is read when it is off), or ``even_if_off`` (a last version for a
    snapshot that turned it off). Never raises: a failure is logged with the snapshot id, and
    the next commit (or ``appendtable iceberg TABLE --repair``) completes the mirror."""
    snapshot_id = snapshot.id
    try:
        state.refresh(snapshot)
        if state.mirrors_iceberg or even_if_off:
            state.publish_mirror()
    except Exception as exc:  # the snapshot landed: report, never raise
        log.warning(
            "snapshot %s landed, but publishing its Iceberg mirror failed (the next commit or "
            "'appendtable iceberg --repair' completes it): %s: %s",
            snapshot_id,
            type(exc).__name__,
            exc,
            # a race or a storage failure the message names; anything else: a bug, traced
            exc_info=not isinstance(exc, AppendTableError),
        )
