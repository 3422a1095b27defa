"""The Iceberg mirror seen from the facade: publishing it after each commit without ever
making that commit look failed."""

from __future__ import annotations

import logging

from appendtable._state import TableState
from appendtable.metadata.models import Snapshot

__all__ = ["publish_mirror_quietly"]

log = logging.getLogger("appendtable")


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
            exc_info=True,
        )
