"""The live files of a table, kept current incrementally.

Built once from a full read of a snapshot, then advanced snapshot by snapshot by applying each
delta manifest list (ADD / DELETE), so a long-lived writer or compaction coordinator pays
O(changes) per commit instead of reading every manifest again. A rollback snapshot (which
replaces the whole file set) triggers a rebuild, and so does a gap: when snapshots the index
has not applied yet have expired meanwhile (a handle that did not commit for a while, or one
whose maintenance runs behind on a background worker), it is rebuilt from the latest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from appendtable.commit.changes import ROLLBACK_PROPERTY
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.errors import ObjectNotFoundError, SnapshotExpiredError
from appendtable.metadata.models import FileKind, ManifestEntry, PartitionValues, Snapshot

__all__ = ["LiveIndex", "Refresh"]

GroupKey = tuple[PartitionValues, int]


@dataclass(frozen=True)
class Refresh:
    """The snapshots applied by a refresh (oldest first), and whether the index was rebuilt
    from a full read instead of applying deltas."""

    snapshots: list[Snapshot]
    rebuilt: bool


class LiveIndex:
    def __init__(self, snapshots: SnapshotStore, manifests: ManifestStore) -> None:
        self._snapshots = snapshots
        self._manifests = manifests
        self.snapshot_id: int | None = None
        self.groups: dict[GroupKey, dict[str, ManifestEntry]] = {}

    def refresh(self) -> Refresh:
        """Advance to the latest snapshot."""
        latest = self._snapshots.latest_id()
        if latest is None or latest == self.snapshot_id:
            return Refresh([], rebuilt=False)
        if self.snapshot_id is None:
            snapshot = self._snapshots.get(latest)
            self._rebuild(snapshot)
            return Refresh([snapshot], rebuilt=True)
        try:
            return self._advance(latest)
        except SnapshotExpiredError:  # deltas it needs are gone: start again from the latest
            newest = self._snapshots.latest()
            if newest is None:
                self.snapshot_id, self.groups = None, {}
                return Refresh([], rebuilt=True)
            self._rebuild(newest)
            return Refresh([newest], rebuilt=True)

    def _advance(self, latest: int) -> Refresh:
        assert self.snapshot_id is not None
        applied = []
        rebuilt = False
        for snapshot_id in range(self.snapshot_id + 1, latest + 1):
            snapshot = self._snapshots.get(snapshot_id)
            with self._expired_if_gone(snapshot):
                if ROLLBACK_PROPERTY in snapshot.properties:
                    self._rebuild(snapshot)
                    rebuilt = True
                else:
                    _apply(self.groups, self._manifests.delta_entries(snapshot))
                    self.snapshot_id = snapshot.id
            applied.append(snapshot)
        return Refresh(applied, rebuilt)

    @contextmanager
    def _expired_if_gone(self, snapshot: Snapshot) -> Iterator[None]:
        """Reading ``snapshot``'s manifests: SnapshotExpiredError when they went with the
        snapshot (expired since this handle cached it: its commit, or an earlier read)."""
        try:
            yield
        except ObjectNotFoundError:
            if self._snapshots.on_storage(snapshot.id):
                raise  # a retained snapshot whose metadata is gone: damage
            self._snapshots.forget(snapshot.id)
            raise SnapshotExpiredError(
                f"snapshot {snapshot.id} expired while the index of live files read it"
            ) from None

    def _rebuild(self, snapshot: Snapshot) -> None:
        """From a full read of ``snapshot``; the index is unchanged if the read fails."""
        groups: dict[GroupKey, dict[str, ManifestEntry]] = {}
        _apply(groups, self._manifests.live_files(snapshot))
        self.groups, self.snapshot_id = groups, snapshot.id


def _apply(
    groups: dict[GroupKey, dict[str, ManifestEntry]], entries: Iterable[ManifestEntry]
) -> None:
    for entry in entries:
        key = (entry.partition, entry.bucket)
        if entry.kind == FileKind.ADD:
            groups.setdefault(key, {})[entry.file.path] = entry
        else:
            group = groups.get(key)
            # (a delete re-adds the path with a new vector: only the old key goes)
            held = group.get(entry.file.path) if group is not None else None
            if group is not None and held is not None and held.file.key == entry.file.key:
                del group[entry.file.path]
                if not group:
                    del groups[key]
