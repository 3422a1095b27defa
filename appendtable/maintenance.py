"""Table maintenance: snapshot expiration and consumer expiration (compaction lives in
``appendtable.compaction``). Safe to run concurrently with writers and readers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from appendtable import display
from appendtable._state import TableState
from appendtable.commit.consumers import ConsumerStore
from appendtable.commit.discard import files_referenced_by
from appendtable.commit.expire import (
    ExpirePlan,
    execute_expiration,
    plan_expiration,
    plan_releases,
    tag_references,
)
from appendtable.commit.groups import expire_groups, groups_floor
from appendtable.commit.tags import TagStore
from appendtable.errors import InvalidOptionError, SnapshotNotFoundError
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.planning.expiration import expire_until

__all__ = ["ExpireResult", "OrphanResult", "expire_snapshots", "remove_orphan_files"]


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
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
    if latest is None or earliest is None:
        return ExpireResult(dry_run=dry_run)
    keep_min = retain_min if retain_min is not None else options.get(opt.SNAPSHOT_RETAINED_MIN)
    keep_max = retain_max if retain_max is not None else options.get(opt.SNAPSHOT_RETAINED_MAX)
    if keep_min < 1 or keep_max < keep_min:
        raise InvalidOptionError(
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
            committed_at=lambda snapshot_id: snapshots.get(snapshot_id).time_ms,
        )

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
    if not dry_run:
        execute_expiration(
            state.storage,
            snapshots,
            state.manifests,
            plan,
            before_deleting_files=_mirror_step(state),
        )
    return ExpireResult(
        expired_snapshots=plan.snapshot_ids,
        deleted_data_files=plan.data_files,
        deleted_metadata_files=plan.metadata_files,
        expired_consumers=expired_consumers,
        expired_groups=expired_groups,
        earliest_snapshot=end,
        dry_run=dry_run,
    )


def _mirror_step(state: TableState) -> Callable[[], None] | None:
    """With the Iceberg mirror on: republish it without the expired snapshots and prune its
    older versions, before any data file goes."""
    if not state.mirrors_iceberg:
        return None

    def step() -> None:
        state.publish_mirror()
        state.mirror.prune()

    return step


def _release_only(state: TableState, earliest: int, *, dry_run: bool) -> ExpireResult:
    """Free the files of deleted tags when no snapshot expires."""
    tag_store = TagStore(state.storage)
    released = tag_store.released()
    if not released:
        return ExpireResult(earliest_snapshot=earliest, dry_run=dry_run)
    tags = tag_references(state.manifests, tag_store.all().values())
    plan = ExpirePlan(new_earliest=earliest)
    plan_releases(state.snapshots, state.manifests, plan, released, tags)
    if not dry_run:
        execute_expiration(
            state.storage,
            state.snapshots,
            state.manifests,
            plan,
            before_deleting_files=_mirror_step(state),
        )
    return ExpireResult(
        deleted_data_files=plan.data_files,
        deleted_metadata_files=plan.metadata_files,
        earliest_snapshot=earliest,
        dry_run=dry_run,
    )


@dataclass(frozen=True)
class OrphanResult:
    """Files no retained snapshot references, older than the threshold: removed, or with
    ``dry_run`` only listed."""

    files: list[str] = field(default_factory=list)
    bytes: int = 0
    dry_run: bool = True

    def __repr__(self) -> str:
        return display.orphan_repr(self)

    def _repr_html_(self) -> str:
        return display.orphan_html(self)


#: Paths that are never orphans: the table's identity, its log and its readers' state.
_NEVER_ORPHANS = (
    f"{layout.SCHEMA_DIR}/",
    f"{layout.CONSUMER_DIR}/",
    f"{layout.WATERMARK_DIR}/",
    f"{layout.TAG_DIR}/",
    layout.LATEST_HINT,
    layout.EARLIEST_HINT,
)


def _is_temp_file(path: str) -> bool:
    """A local storage temp file (``.<name>.<uuid>.tmp``): left by a process that died between
    writing it and renaming or linking it into place. No table file name starts with a dot."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") and name.endswith(".tmp")


def remove_orphan_files(state: TableState, *, older_than_ms: int, dry_run: bool) -> OrphanResult:
    """Delete files that no retained snapshot references and that are older than
    ``older_than_ms`` (epoch ms): leftovers of crashed writers, failed commits and
    interrupted expirations. Files younger than that are never touched, so in-flight
    commits are safe as long as they finish within the threshold.

    The table is listed *before* the snapshots are read, so a commit that lands meanwhile is
    seen as referencing its files."""
    listed = state.storage.walk()
    mirror_files = _mirror_files(state)
    data_files, metadata_files = _referenced(state)
    orphans = []
    size = 0
    for info in listed:
        path = info.path
        if info.mtime_ms >= older_than_ms:
            continue
        if path.startswith(_NEVER_ORPHANS) and not _is_temp_file(path):
            continue
        if path.startswith(f"{layout.ICEBERG_DIR}/"):
            if path in mirror_files:
                continue
        elif path.startswith(f"{layout.SNAPSHOT_DIR}/"):
            name = path.rsplit("/", 1)[-1]
            if layout.id_from_name(name, layout.SNAPSHOT_PREFIX) is not None:
                continue  # snapshots leave only through expiration
        elif path.startswith(f"{layout.MANIFEST_DIR}/"):
            if path.rsplit("/", 1)[-1] in metadata_files:
                continue
        elif path in data_files:
            continue
        orphans.append(path)
        size += info.size
    if not dry_run:
        for path in orphans:
            state.storage.delete(path)
    return OrphanResult(sorted(orphans), size, dry_run)


def _mirror_files(state: TableState) -> set[str]:
    """The Iceberg mirror files in use: with the mirror on, it is brought up to date first
    (so it lists no snapshot that is gone) and its older versions pruned. With it off, every
    mirror file is an orphan."""
    if not state.mirrors_iceberg:
        return set()
    state.publish_mirror()
    state.mirror.prune()
    return (state.mirror.referenced() or set()) | {layout.ICEBERG_VERSION_HINT}


def _referenced(state: TableState) -> tuple[set[str], set[str]]:
    """(data files, metadata file names) referenced by some retained snapshot.

    Data files: those live in the earliest retained snapshot, those added by any later one,
    those live in a retained rollback (which re-adds files), and those of tags (deleted tags
    too, until an expiration releases them). Files only named by DELETE entries, or added
    and removed before the earliest retained snapshot, are not referenced even if a retained
    manifest still names them (e.g. after an interrupted expiration)."""
    snapshots, manifests = state.snapshots, state.manifests
    metadata: set[str] = set()
    data: set[str] = set()
    first = True
    for snapshot_id in snapshots.list_ids():
        try:
            snapshot = snapshots.get(snapshot_id)
        except SnapshotNotFoundError:
            continue  # expired while we looked
        metadata.update((snapshot.base_manifest_list, snapshot.delta_manifest_list))
        if snapshot.commit_users is not None:
            metadata.add(snapshot.commit_users)
        metadata.update(m.file_name for m in manifests.all_manifests(snapshot))
        data.update(e.file.path for e in files_referenced_by(manifests, snapshot, first=first))
        first = False
    # Tags (and deleted tags not yet released) keep their snapshot's files and manifests.
    tag_store = TagStore(state.storage)
    tags = tag_references(manifests, [*tag_store.all().values(), *tag_store.released().values()])
    data |= tags.data
    metadata |= tags.metadata
    return data, metadata
