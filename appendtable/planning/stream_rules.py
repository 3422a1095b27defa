"""Pure rules of streaming reads: where a stream starts, what a snapshot emits, and when a
reader of a watermark-alignment group must wait.

A stream position says which unit comes next: the whole of snapshot ``next_snapshot`` (the
initial "full" read of a start mode) or only what that snapshot added (a "delta").
``next_snapshot = None`` stands for "the latest snapshot, as soon as one exists", so a stream on
an empty table does not miss the first snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import assert_never

from appendtable.errors import InvalidOptionError, SnapshotExpiredError
from appendtable.metadata.models import CommitKind, WatermarkMember
from appendtable.metadata.options import SCAN_MODES, StartMode

__all__ = [
    "MODES",
    "StartMode",
    "StartRequest",
    "StreamStart",
    "emits_rows",
    "may_emit",
    "resolve_mode",
    "resolve_start",
]

MODES = SCAN_MODES


@dataclass(frozen=True)
class StreamStart:
    """The first position of a stream."""

    next_snapshot: int | None
    full: bool


@dataclass(frozen=True)
class StartRequest:
    mode: str
    snapshot_id: int | None = None
    timestamp_ms: int | None = None
    file_creation_time_ms: int | None = None


def resolve_mode(request: StartRequest) -> StartMode:
    """``default`` resolves from the other options, else ``latest-full``; ``full`` is an alias."""
    mode = request.mode
    if mode == "full":
        return StartMode.LATEST_FULL
    if mode != "default":
        if mode not in MODES:
            raise InvalidOptionError(f"option 'scan.mode': unknown mode {mode!r}")
        return StartMode(mode)
    if request.timestamp_ms is not None:
        return StartMode.FROM_TIMESTAMP
    if request.snapshot_id is not None:
        return StartMode.FROM_SNAPSHOT
    if request.file_creation_time_ms is not None:
        return StartMode.FROM_FILE_CREATION_TIME
    return StartMode.LATEST_FULL


def resolve_start(
    request: StartRequest,
    *,
    earliest: int | None,
    latest: int | None,
    first_at_or_after: Callable[[int], int | None],
    latest_compacted: Callable[[], int | None],
) -> StreamStart:
    """The position a new stream starts from (a consumer's saved progress takes precedence and
    is handled by the caller). Raises SnapshotExpiredError rather than skip data silently."""
    mode = resolve_mode(request)
    # On an empty table the modes that start with the latest snapshot in full start with the
    # first one, whenever it comes: a reader created before it misses none of its rows, even
    # when later commits replaced them before its first poll.
    latest_or_first = latest if latest is not None else 1
    match mode:
        case StartMode.LATEST_FULL:
            return StreamStart(latest_or_first, full=True)
        case StartMode.LATEST:
            return StreamStart((latest or 0) + 1, full=False)
        case StartMode.FROM_SNAPSHOT | StartMode.FROM_SNAPSHOT_FULL:
            return _from_snapshot(request, mode, earliest)
        case StartMode.FROM_TIMESTAMP:
            return _from_timestamp(request, earliest, latest, first_at_or_after)
        case StartMode.FROM_FILE_CREATION_TIME:
            if request.file_creation_time_ms is None:
                raise InvalidOptionError(
                    "scan.mode 'from-file-creation-time' needs 'scan.file-creation-time-millis'"
                )
            return StreamStart(latest_or_first, full=True)
        case StartMode.COMPACTED_FULL:  # the newest COMPACT snapshot in full, else the latest
            compacted = latest_compacted()
            return StreamStart(compacted if compacted is not None else latest_or_first, full=True)
        case _:
            assert_never(mode)


#: How a stream's start is kept from expiring (said when it has expired).
_KEEPING = (
    "A consumer id keeps what a reader needs only from the position it first saves (its "
    "start, once resolved), so it cannot bring back a start that expired before"
)


def _from_snapshot(request: StartRequest, mode: StartMode, earliest: int | None) -> StreamStart:
    if request.snapshot_id is None:
        raise InvalidOptionError(f"scan.mode '{mode}' needs option 'scan.snapshot-id'")
    wanted = request.snapshot_id
    if earliest is not None and wanted < earliest:
        raise SnapshotExpiredError(
            f"the stream should start at snapshot {wanted}, which has expired (earliest "
            f"retained is {earliest}); start at a retained snapshot. {_KEEPING}"
        )
    return StreamStart(wanted, full=mode is StartMode.FROM_SNAPSHOT_FULL)


def _from_timestamp(
    request: StartRequest,
    earliest: int | None,
    latest: int | None,
    first_at_or_after: Callable[[int], int | None],
) -> StreamStart:
    if request.timestamp_ms is None:
        raise InvalidOptionError("scan.mode 'from-timestamp' needs 'scan.timestamp-millis'")
    if latest is None:
        return StreamStart(1, full=False)
    found = first_at_or_after(request.timestamp_ms)
    if found is None:
        return StreamStart(latest + 1, full=False)
    if found == earliest and earliest is not None and earliest > 1:
        raise SnapshotExpiredError(
            f"snapshots up to {earliest - 1} have expired, and some of them may have been "
            f"committed after {request.timestamp_ms}; start at a later time. {_KEEPING}"
        )
    return StreamStart(found, full=False)


def emits_rows(kind: CommitKind, *, read_overwrite: bool) -> bool:
    """Only appends produce rows in a stream: compaction rewrites rows already delivered, and an
    overwrite's new files are emitted only when the reader opts in."""
    return kind == CommitKind.APPEND or (kind == CommitKind.OVERWRITE and read_overwrite)


def may_emit(
    watermark: int | None,
    *,
    own: int | None,
    others: Mapping[str, WatermarkMember],
    max_drift_ms: int,
) -> bool:
    """Whether a reader of an alignment group may emit a unit with ``watermark`` now.

    It may if the unit has no watermark, if no other member has a watermark yet, if the unit stays
    within ``max_drift_ms`` of the slowest other member, or if this reader is itself the slowest
    (a reader never waits for itself)."""
    if watermark is None:
        return True
    known = [member.watermark for member in others.values() if member.watermark is not None]
    if not known:
        return True
    slowest = min(known)
    if watermark <= slowest + max_drift_ms:
        return True
    return own is not None and own <= slowest
