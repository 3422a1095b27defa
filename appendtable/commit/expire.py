"""Executing a snapshot expiration.

Order matters for crash safety: snapshot files are deleted first, oldest first, then the
``EARLIEST`` hint is written, and only then the data files and metadata files that no retained
snapshot references. A crash part-way leaves unreferenced files (reclaimed by orphan removal),
never a retained snapshot that points at deleted files.

Which files: a data file removed (DELETE entry) by a snapshot in ``(begin, end]`` was live only
in expired snapshots; a manifest (or list, or commit-users file) referenced by an expired
snapshot and not by the oldest retained one is referenced by no retained snapshot, because a
manifest is referenced by a contiguous range of snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from appendtable.commit.manifests import ManifestStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.errors import ObjectNotFoundError, StorageError
from appendtable.metadata import layout
from appendtable.metadata.models import FileKind, Snapshot
from appendtable.storage import Storage

__all__ = ["ExpirePlan", "execute_expiration", "plan_expiration"]


@dataclass
class ExpirePlan:
    snapshot_ids: list[int] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    metadata_files: list[str] = field(default_factory=list)
    new_earliest: int | None = None


def _metadata_of(snapshot: Snapshot, manifests: ManifestStore) -> set[str]:
    names = {snapshot.base_manifest_list, snapshot.delta_manifest_list}
    if snapshot.commit_users is not None:
        names.add(snapshot.commit_users)
    names.update(m.file_name for m in manifests.all_manifests(snapshot))
    return names


def plan_expiration(
    snapshots: SnapshotStore, manifests: ManifestStore, begin: int, end: int
) -> ExpirePlan:
    """What expiring snapshots ``[begin, end)`` deletes (``end`` is kept)."""
    plan = ExpirePlan(new_earliest=end)
    if end <= begin:
        return plan
    kept = snapshots.get(end)
    kept_metadata = _metadata_of(kept, manifests)
    expired_metadata: set[str] = set()
    for snapshot_id in range(begin, end):
        try:
            snapshot = snapshots.get(snapshot_id)
        except ObjectNotFoundError:
            continue  # a previous run deleted it and crashed before finishing
        plan.snapshot_ids.append(snapshot_id)
        expired_metadata |= _metadata_of(snapshot, manifests)
    removed: set[str] = set()
    for snapshot_id in range(begin + 1, end + 1):
        snapshot = kept if snapshot_id == end else snapshots.get(snapshot_id)
        for entry in manifests.delta_entries(snapshot):
            if entry.kind == FileKind.DELETE:
                removed.add(entry.file.path)
    plan.data_files = sorted(removed - _restored_by_rollbacks(snapshots, manifests, end))
    plan.metadata_files = sorted(layout.manifest_path(n) for n in expired_metadata - kept_metadata)
    return plan


def _restored_by_rollbacks(
    snapshots: SnapshotStore, manifests: ManifestStore, keep_from: int
) -> set[str]:
    """Files live in a retained rollback snapshot: a rollback re-adds files that the history
    it undid had deleted, so those deletions no longer mean the files are unreferenced."""
    latest = snapshots.latest()
    protected: set[str] = set()
    rollback_id = latest.last_rollback if latest is not None else None
    while rollback_id is not None and rollback_id >= keep_from:
        rollback = snapshots.get(rollback_id)
        protected.update(entry.file.path for entry in manifests.live_files(rollback))
        previous = rollback.properties.get("previous-rollback")
        rollback_id = int(previous) if previous else None
    return protected


def execute_expiration(storage: Storage, snapshots: SnapshotStore, plan: ExpirePlan) -> None:
    for snapshot_id in plan.snapshot_ids:
        storage.delete(layout.snapshot_path(snapshot_id))
        snapshots.forget(snapshot_id)
    if plan.new_earliest is not None:
        snapshots.write_earliest_hint(plan.new_earliest)
    for path in (*plan.data_files, *plan.metadata_files):
        try:
            storage.delete(path)
        except StorageError:
            pass  # left as an orphan; remove_orphan_files reclaims it
