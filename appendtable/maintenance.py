"""Table maintenance: snapshot expiration and consumer expiration (compaction lives in
``appendtable.compaction``). Safe to run concurrently with writers and readers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from appendtable import display, orphans
from appendtable._state import TableState
from appendtable.commit.consumers import ConsumerStore
from appendtable.commit.expire import (
    ExpirePlan,
    execute_expiration,
    plan_expiration,
    plan_releases,
    tag_references,
)
from appendtable.commit.groups import expire_groups, groups_floor
from appendtable.commit.tags import TagStore
from appendtable.errors import InvalidArgumentError, InvalidOptionError, SnapshotExpiredError
from appendtable.metadata import options as opt
from appendtable.planning.expiration import expire_until

__all__ = ["ExpireResult", "OrphanResult", "expire_snapshots", "remove_orphan_files"]

# Orphan removal lives in ``appendtable.orphans``; its names are kept here for callers.
OrphanResult = orphans.OrphanResult
remove_orphan_files = orphans.remove_orphan_files


@dataclass(frozen=True)
class ExpireResult:
    """What an expiration removed (or, with ``dry_run``, would remove)."""

    expired_snapshots: list[int] = field(default_factory=list)
    deleted_data_files: list[str] = field(default_factory=list)
    deleted_metadata_files: list[str] = field(default_factory=list)
    expired_consumers: list[str] = field(default_factory=list)
    earliest_snapshot: int | None = None
    dry_run: bool = False
    #: Abandoned consumer groups (``<group>``) and former members' leases (``<group>/<member>``).
    expired_groups: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return display.expire_repr(self)

    def _repr_html_(self) -> str:
        return display.expire_html(self)


def expire_snapshots(
    state: TableState,
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    release_tags: bool = True,
) -> ExpireResult:
    """Expire old snapshots (defaults from the table options) and idle consumers, and free
    the files of deleted tags.

    Guarantees: at least ``retain_min`` snapshots stay; no snapshot a consumer still needs is
    expired; a data file is deleted only when no retained snapshot and no tag references it;
    the last identifier of every commit user survives (it is carried forward by each
    snapshot). When nothing is old enough and ``release_tags`` is false (the post-commit
    run) this reads a handful of small files and lists nothing; deleted tags are then
    released by the next run that expires a snapshot.
    """
    options = state.options
    now = int(time.time() * 1000)
    snapshots = state.snapshots
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id(repair=not dry_run)
    if latest is None or earliest is None:
        return ExpireResult(dry_run=dry_run)
    keep_min = retain_min if retain_min is not None else options.get(opt.SNAPSHOT_RETAINED_MIN)
    keep_max = retain_max if retain_max is not None else options.get(opt.SNAPSHOT_RETAINED_MAX)
    if keep_min < 1 or keep_max < keep_min:
        # The arguments are at fault when one was given; otherwise the table's options are.
        error = (
            InvalidOptionError
            if retain_min is None and retain_max is None
            else InvalidArgumentError
        )
        raise error(
            f"snapshot retention needs 1 <= retain_min <= retain_max (got retain_min={keep_min}, "
            f"retain_max={keep_max}; defaults come from snapshot.num-retained.min/max)"
        )

    def window(consumer_floor: int | None) -> int:
        return expire_until(
            earliest=earliest,
            latest=latest,
            retain_min=keep_min,
            retain_max=keep_max,
            limit=limit if limit is not None else options.get(opt.SNAPSHOT_EXPIRE_LIMIT),
            consumer_floor=consumer_floor,
            older_than_ms=older_than_ms
            if older_than_ms is not None
            else now - options.get(opt.SNAPSHOT_TIME_RETAINED),
            committed_at=committed_at,
        )

    def committed_at(snapshot_id: int) -> int:
        try:
            return snapshots.get(snapshot_id).time_ms
        except SnapshotExpiredError:  # another expiration removed it meanwhile: old enough
            return -1

    if window(None) <= earliest:  # nothing old enough, whatever the consumers need
        if release_tags:
            return _release_only(state, earliest, dry_run=dry_run)
        return ExpireResult(earliest_snapshot=earliest, dry_run=dry_run)
    consumers = ConsumerStore(state.storage)
    ttl = options.get(opt.CONSUMER_EXPIRATION_TIME)
    expired_consumers = consumers.expire(now - ttl, dry_run=dry_run) if ttl > 0 else []
    expired_groups = expire_groups(state.storage, now - ttl, dry_run=dry_run) if ttl > 0 else []
    live = [s.next_snapshot for cid, s in consumers.all().items() if cid not in expired_consumers]
    group_floor = groups_floor(state.storage, skip=expired_groups)
    end = window(min([*live, *([] if group_floor is None else [group_floor])], default=None))
    if end <= earliest:
        if release_tags:
            released = _release_only(state, earliest, dry_run=dry_run)
            return ExpireResult(
                deleted_data_files=released.deleted_data_files,
                deleted_metadata_files=released.deleted_metadata_files,
                expired_consumers=expired_consumers,
                expired_groups=expired_groups,
                earliest_snapshot=earliest,
                dry_run=dry_run,
            )
        return ExpireResult(
            expired_consumers=expired_consumers,
            expired_groups=expired_groups,
            earliest_snapshot=earliest,
            dry_run=dry_run,
        )
    tag_store = TagStore(state.storage)
    tags = tag_references(state.manifests, tag_store.all().values())
    plan = plan_expiration(snapshots, state.manifests, earliest, end, tags)
    plan_releases(snapshots, state.manifests, plan, tag_store.released(), tags)
    deleted = (plan.data_files, plan.metadata_files)
    if not dry_run:
        deleted = execute_expiration(
            state.storage,
            snapshots,
            state.manifests,
            plan,
            before_deleting_files=state.publish_and_prune_mirror,
        )
    return ExpireResult(
        expired_snapshots=plan.snapshot_ids,
        deleted_data_files=deleted[0],
        deleted_metadata_files=deleted[1],
        expired_consumers=expired_consumers,
        expired_groups=expired_groups,
        earliest_snapshot=end,
        dry_run=dry_run,
    )


def _release_only(state: TableState, earliest: int, *, dry_run: bool) -> ExpireResult:
    """Free the files of deleted tags when no snapshot expires."""
    tag_store = TagStore(state.storage)
    released = tag_store.released()
    if not released:
        return ExpireResult(earliest_snapshot=earliest, dry_run=dry_run)
    tags = tag_references(state.manifests, tag_store.all().values())
    plan = ExpirePlan(new_earliest=earliest)
    plan_releases(state.snapshots, state.manifests, plan, released, tags)
    deleted = (plan.data_files, plan.metadata_files)
    if not dry_run:
        deleted = execute_expiration(
            state.storage,
            state.snapshots,
            state.manifests,
            plan,
            before_deleting_files=state.publish_and_prune_mirror,
        )
    return ExpireResult(
        deleted_data_files=deleted[0],
        deleted_metadata_files=deleted[1],
        earliest_snapshot=earliest,
        dry_run=dry_run,
    )
