"""Table maintenance: snapshot expiration and consumer expiration (compaction lives in
``appendtable.compaction``). Safe to run concurrently with writers and readers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from appendtable._state import TableState
from appendtable.commit.consumers import ConsumerStore
from appendtable.commit.expire import execute_expiration, plan_expiration
from appendtable.metadata import options as opt
from appendtable.planning.expiration import expire_until

__all__ = ["ExpireResult", "expire_snapshots"]


@dataclass(frozen=True)
class ExpireResult:
    """What an expiration removed (or, with ``dry_run``, would remove)."""

    expired_snapshots: list[int] = field(default_factory=list)
    deleted_data_files: list[str] = field(default_factory=list)
    deleted_metadata_files: list[str] = field(default_factory=list)
    expired_consumers: list[str] = field(default_factory=list)
    earliest_snapshot: int | None = None
    dry_run: bool = False


def expire_snapshots(
    state: TableState,
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    limit: int | None = None,
    dry_run: bool = False,
) -> ExpireResult:
    """Expire old snapshots (defaults from the table options) and idle consumers.

    Guarantees: at least ``retain_min`` snapshots stay; no snapshot a consumer still needs is
    expired; a data file is deleted only when no retained snapshot references it; the last
    identifier of every commit user survives (it is carried forward by each snapshot).
    """
    options = state.options
    now = int(time.time() * 1000)
    consumers = ConsumerStore(state.storage)
    expired_consumers: list[str] = []
    ttl = options.get(opt.CONSUMER_EXPIRATION_TIME)
    if ttl > 0:
        expired_consumers = consumers.expire(now - ttl, dry_run=dry_run)
    snapshots = state.snapshots
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
    if latest is None or earliest is None:
        return ExpireResult(expired_consumers=expired_consumers, dry_run=dry_run)
    keep_min = retain_min if retain_min is not None else options.get(opt.SNAPSHOT_RETAINED_MIN)
    keep_max = retain_max if retain_max is not None else options.get(opt.SNAPSHOT_RETAINED_MAX)
    if keep_min < 1 or keep_max < keep_min:
        raise ValueError("need 1 <= retain_min <= retain_max")
    threshold = (
        older_than_ms
        if older_than_ms is not None
        else now - options.get(opt.SNAPSHOT_TIME_RETAINED)
    )
    live = {cid: s for cid, s in consumers.all().items() if cid not in set(expired_consumers)}
    floor = min((s.next_snapshot for s in live.values()), default=None)
    end = expire_until(
        earliest=earliest,
        latest=latest,
        retain_min=keep_min,
        retain_max=keep_max,
        limit=limit if limit is not None else options.get(opt.SNAPSHOT_EXPIRE_LIMIT),
        consumer_floor=floor,
        older_than_ms=threshold,
        committed_at=lambda snapshot_id: snapshots.get(snapshot_id).time_ms,
    )
    if end <= earliest:
        return ExpireResult(
            expired_consumers=expired_consumers, earliest_snapshot=earliest, dry_run=dry_run
        )
    plan = plan_expiration(snapshots, state.manifests, earliest, end)
    if not dry_run:
        execute_expiration(state.storage, snapshots, plan)
    return ExpireResult(
        expired_snapshots=plan.snapshot_ids,
        deleted_data_files=plan.data_files,
        deleted_metadata_files=plan.metadata_files,
        expired_consumers=expired_consumers,
        earliest_snapshot=end,
        dry_run=dry_run,
    )
