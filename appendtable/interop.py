"""The Iceberg mirror seen from the facade: publishing it after each commit without ever
making that commit look failed."""

from __future__ import annotations

import logging

from appendtable._state import TableState

__all__ = ["publish_mirror_quietly"]

log = logging.getLogger("appendtable")


def publish_mirror_quietly(state: TableState, snapshot_id: int | None) -> None:
    """Publish the Iceberg mirror if the table has it on. Runs after a snapshot landed, so it
    never raises: a failure is logged with the snapshot id, and the next commit (or
    ``appendtable iceberg TABLE --repair``) completes the mirror."""
    try:
        state.refresh()
        if state.mirrors_iceberg:
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
