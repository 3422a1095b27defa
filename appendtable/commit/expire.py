"""Executing a snapshot expiration.

Order matters for crash safety: the expiration is recorded first (``expiration_records``:
which snapshot held each id), then snapshot files are deleted, oldest first, then the
``EARLIEST`` hint is written, and only then the data files and metadata files that no retained
snapshot references. A crash part-way leaves unreferenced files (reclaimed by orphan removal),
never a retained snapshot that points at deleted files.

Which files: a data file removed (DELETE entry) by a snapshot in ``(begin, end]`` was live only
in expired snapshots; a manifest (or list, or commit-users file) referenced by an expired
snapshot and not by the oldest retained one is referenced by no retained snapshot, because a
manifest is referenced by a contiguous range of snapshots.

Rollbacks: files live in a rollback in the retained history are kept, and so is everything
while a rollback to an expired snapshot is under way (``rollback_pins``); both are read again
after the snapshot files are deleted, as the tags are.

Tags: files a tag references (its snapshot's live data files and its manifests) are never
deleted. The tags are read again after the snapshot files are deleted and before any other
file is: a tag created meanwhile on a snapshot being expired was written before that snapshot's
file disappeared (``create_tag`` checks), so that second read sees it. A deleted tag's release
record frees the files only that tag kept, once its snapshot is older than the earliest
retained one (until then the snapshot itself keeps them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from appendtable.commit.expiration_records import (
    PRUNE_EVERY,
    prune_records,
    record_expiration,
)
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.rollback_pins import pinned_ids
from appendtable.commit.snapshots import SnapshotStore
from appendtable.commit.tags import TagStore
from appendtable.errors import ObjectNotFoundError, SnapshotNotFoundError, StorageError
from appendtable.metadata import layout
from appendtable.metadata.models import FileKind, Snapshot, Tag
from appendtable.storage import Storage

__all__ = [
    "ExpirePlan",
    "TagReferences",
    "execute_expiration",
    "mark_landed",
    "metadata_of",
    "plan_expiration",
    "plan_releases",
    "tag_references",
]


@dataclass
class ExpirePlan:
    #: The oldest snapshot kept (the new ``EARLIEST``).
    new_earliest: int
    snapshot_ids: list[int] = field(default_factory=list)
    #: The nonce and parent nonce of each snapshot in ``snapshot_ids``, as read when planning.
    nonces: dict[int, tuple[str, str]] = field(default_factory=dict)
    data_files: list[str] = field(default_factory=list)
    metadata_files: list[str] = field(default_factory=list)
    #: Release records of deleted tags processed by this plan (removed last).
    releases: list[str] = field(default_factory=list)
    #: The delete records the expired DELETE snapshots named: marked as landed first.
    delete_records: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TagReferences:
    """What the tags keep: data file paths and metadata file names."""

    data: frozenset[str] = frozenset()
    metadata: frozenset[str] = frozenset()


def tag_references(
    manifests: ManifestStore, tags: Iterable[Tag], *, released: bool = False
) -> TagReferences:
    """The data files live in each tagged snapshot and the metadata files it names. With
    ``released`` (release records of deleted tags), a tag whose metadata is gone names
    nothing: an expiration already freed it (one that saw the tag deleted, or was killed
    part-way through freeing it, or a tag that failed because its snapshot expired)."""
    data: set[str] = set()
    metadata: set[str] = set()
    for tag in tags:
        try:
            tag_data = {entry.file.path for entry in manifests.live_files(tag.snapshot)}
            tag_metadata = metadata_of(tag.snapshot, manifests)
        except ObjectNotFoundError:
            if not released:
                raise  # a tag whose metadata is missing: damage
            continue
        data |= tag_data
        metadata |= tag_metadata
    return TagReferences(frozenset(data), frozenset(metadata))


def metadata_of(snapshot: Snapshot, manifests: ManifestStore) -> set[str]:
    """The names of the metadata files ``snapshot`` references (manifest lists, manifests,
    its commit-users file)."""
    names = {snapshot.base_manifest_list, snapshot.delta_manifest_list}
    if snapshot.commit_users is not None:
        names.add(snapshot.commit_users)
    names.update(m.file_name for m in manifests.all_manifests(snapshot))
    return names


def plan_expiration(
    snapshots: SnapshotStore,
    manifests: ManifestStore,
    begin: int,
    end: int,
    tags: TagReferences = TagReferences(),
) -> ExpirePlan:
    """What expiring snapshots ``[begin, end)`` deletes (``end`` is kept), keeping what the
    ``tags`` reference."""
    plan = ExpirePlan(new_earliest=end)
    if end <= begin:  # pragma: no mutate (with end == begin the rest plans nothing too)
        return plan
    kept_read = _unless_expired(snapshots, manifests, end)
    if kept_read is None:
        return plan  # another expiration went further meanwhile
    kept, kept_metadata = kept_read
    expired_metadata: set[str] = set()
    # Each snapshot is read once (the store caches only the newest few: a run expiring
    # thousands would read every file twice).
    expired: dict[int, Snapshot] = {}
    for snapshot_id in range(begin, end):
        read = _unless_expired(snapshots, manifests, snapshot_id)
        if read is None:
            continue  # another expiration (or one that crashed) deleted it already
        snapshot, metadata = read
        plan.snapshot_ids.append(snapshot_id)
        if snapshot.delete_record is not None:
            plan.delete_records.append(snapshot.delete_record)
        plan.nonces[snapshot_id] = (snapshot.nonce, snapshot.parent_nonce)
        expired[snapshot_id] = snapshot
        expired_metadata |= metadata
    removed: set[str] = set()
    # Whether a rollback is in (begin, end]. Taking the kept snapshot's live files out of the
    # deletions is never wrong, only slower, so mutations that only widen this are equivalent.
    rolled_back = False  # pragma: no mutate
    for snapshot_id in range(begin + 1, end + 1):
        found = kept if snapshot_id == end else expired.get(snapshot_id)
        if found is None:
            continue  # its deletions are not known: those files are left to orphan removal
        snapshot = found
        rolled_back = rolled_back or (
            snapshot.last_rollback == snapshot_id  # pragma: no mutate (see ``rolled_back``)
        )
        try:
            removed |= _deleted_by(manifests, snapshot)
        except ObjectNotFoundError:
            if snapshots.on_storage(snapshot_id):
                raise
            continue  # expired by another expiration meanwhile: left to orphan removal
    if rolled_back:
        # A rollback in the range re-added files deleted before it in the range: those still
        # live in the kept snapshot are not unreferenced (the rollback itself expires here).
        removed -= {entry.file.path for entry in manifests.live_files(kept)}
    plan.data_files = sorted(
        removed - _restored_by_rollbacks(snapshots, manifests, end) - tags.data
    )
    plan.metadata_files = sorted(
        layout.manifest_path(n) for n in expired_metadata - kept_metadata - tags.metadata
    )
    return plan


def _unless_expired(
    snapshots: SnapshotStore, manifests: ManifestStore, snapshot_id: int
) -> tuple[Snapshot, set[str]] | None:
    """A snapshot and its metadata file names; None when another expiration removed it
    meanwhile. A snapshot still there whose metadata is missing is damage: raised."""
    try:
        snapshot = snapshots.get(snapshot_id)
        return snapshot, metadata_of(snapshot, manifests)
    except (SnapshotNotFoundError, ObjectNotFoundError):
        if snapshots.on_storage(snapshot_id):
            raise
        return None


def _deleted_by(manifests: ManifestStore, snapshot: Snapshot) -> set[str]:
    """The data files ``snapshot`` itself removed (DELETE entries of its delta), less those
    it re-added with a new deletion vector (the path stays live)."""
    delta = manifests.read_list(snapshot.delta_manifest_list)
    if not any(m.num_deleted for m in delta):
        return set()  # (an append) nothing to read: its manifests add files only
    entries = manifests.entries(delta)
    readded = {e.file.path for e in entries if e.kind == FileKind.ADD}
    return {e.file.path for e in entries if e.kind == FileKind.DELETE} - readded


def plan_releases(
    snapshots: SnapshotStore,
    manifests: ManifestStore,
    plan: ExpirePlan,
    released: dict[str, Tag],
    tags: TagReferences,
) -> None:
    """Add to ``plan`` the files that deleted tags (``released``: release records by path)
    alone kept: live in the released snapshot, older than the earliest snapshot ``plan``
    keeps, and referenced neither by that snapshot, nor by a retained rollback, nor by
    another tag. Records whose snapshot is still retained free nothing: the snapshot's own
    expiration will handle its files."""
    if not released:
        return
    keep_from = plan.new_earliest
    kept = snapshots.get(keep_from)
    kept_data = {entry.file.path for entry in manifests.live_files(kept)}
    kept_data |= _restored_by_rollbacks(snapshots, manifests, keep_from)
    kept_metadata = metadata_of(kept, manifests)
    data: set[str] = set()
    metadata: set[str] = set()
    for path, tag in released.items():
        plan.releases.append(path)
        # (a tag of the kept snapshot itself frees nothing either way: equivalent mutants)
        if tag.snapshot.id >= keep_from:  # pragma: no mutate
            continue
        freed = tag_references(manifests, [tag], released=True)
        data |= freed.data
        metadata |= freed.metadata
    plan.data_files = sorted(set(plan.data_files) | (data - kept_data - tags.data))
    plan.metadata_files = sorted(
        set(plan.metadata_files)
        | {layout.manifest_path(n) for n in metadata - kept_metadata - tags.metadata}
    )


def _restored_by_rollbacks(
    snapshots: SnapshotStore, manifests: ManifestStore, keep_from: int
) -> set[str]:
    """Files live in a retained rollback snapshot: a rollback re-adds files that the history
    it undid had deleted, so those deletions no longer mean the files are unreferenced."""
    latest = snapshots.get(snapshots.latest_id() or keep_from)  # (never empty: keep_from is in it)
    protected: set[str] = set()
    rollback_id = latest.last_rollback
    # (the kept snapshot's own files are kept anyway: ">" instead of ">=" is equivalent)
    while rollback_id is not None and (
        rollback_id >= keep_from  # pragma: no mutate
    ):
        rollback = snapshots.get(rollback_id)
        protected.update(entry.file.path for entry in manifests.live_files(rollback))
        previous = rollback.properties.get("previous-rollback")
        rollback_id = int(previous) if previous else None
    return protected


def _still_unreferenced(
    storage: Storage, snapshots: SnapshotStore, manifests: ManifestStore, plan: ExpirePlan
) -> list[str]:
    """The plan's data and metadata files, less those live in a rollback that landed since
    it was made; none while a rollback to a snapshot that is no longer retained is under way
    (expired by this expiration or an earlier one: the snapshots this one expires may hold
    the same files), or when the rollbacks cannot be read (another expiration removed one):
    left to orphan removal."""
    pinned = pinned_ids(storage, now_ms=int(time.time() * 1000))
    if any(snapshot_id < plan.new_earliest for snapshot_id in pinned):
        return []
    try:
        restored = _restored_by_rollbacks(snapshots, manifests, plan.new_earliest)
    except (SnapshotNotFoundError, ObjectNotFoundError):
        return []
    return [p for p in (*plan.data_files, *plan.metadata_files) if p not in restored]


def mark_landed(storage: Storage, records: Sequence[str]) -> None:
    """Durably mark the delete ``records`` as landed (their DELETE snapshots are about to be
    deleted): a purge then deletes them at once, as no retained snapshot names them, instead of
    waiting until they are old enough not to be a delete still in flight."""
    marks = [m for m in (layout.landed_mark_path(r) for r in records) if m is not None]
    for mark in marks:
        storage.write(mark, b"")
    if marks:
        storage.sync_names(marks)


def execute_expiration(
    storage: Storage,
    snapshots: SnapshotStore,
    manifests: ManifestStore,
    plan: ExpirePlan,
    *,
    before_deleting_files: Callable[[], object] | None = None,
) -> tuple[list[str], list[str]]:
    """Delete the snapshots, then (after reading the tags, rollback pins and rollbacks again,
    see the module doc) the files; release records last. Returns the data and metadata files
    it deleted (the plan's, less those a tag or rollback keeps, those a rollback under way
    leaves, and those a failed delete left as orphans).
    ``before_deleting_files`` runs between the two (the Iceberg
    mirror drops the expired snapshots there, so it never lists one whose files are gone); if
    it raises, no file is deleted (they are left to orphan removal)."""
    record_expiration(storage, plan.nonces)
    mark_landed(storage, plan.delete_records)
    for snapshot_id in plan.snapshot_ids:
        storage.delete(layout.snapshot_path(snapshot_id))
        snapshots.forget(snapshot_id)
    snapshots.write_earliest_hint(plan.new_earliest)
    if before_deleting_files is not None:
        before_deleting_files()
    tags = tag_references(manifests, TagStore(storage).all().values())
    metadata_paths = {layout.manifest_path(n) for n in tags.metadata}
    deleted: set[str] = set()
    for path in _still_unreferenced(storage, snapshots, manifests, plan):
        if path in tags.data or path in metadata_paths:
            continue
        try:
            storage.delete(path)
        except StorageError:
            continue  # left as an orphan; remove_orphan_files reclaims it
        deleted.add(path)
    tag_store = TagStore(storage)
    for path in plan.releases:
        tag_store.forget_release(path)
    first = min(plan.snapshot_ids, default=plan.new_earliest)
    if first // PRUNE_EVERY < plan.new_earliest // PRUNE_EVERY:
        prune_records(storage, earliest=plan.new_earliest, now_ms=int(time.time() * 1000))
    return (
        [p for p in plan.data_files if p in deleted],
        [p for p in plan.metadata_files if p in deleted],
    )
