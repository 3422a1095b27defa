"""The snapshot log: ``snapshot/snapshot-<id>`` files with ids 1, 2, 3, ... and no gaps.

``LATEST`` and ``EARLIEST`` are hints only. The latest id is found by reading ``LATEST`` and
probing forward for ``snapshot-<hint+1>``, ``+2``, ... until one is missing (O(1) when the hint is
current); a missing or damaged hint falls back to listing. Snapshots are immutable once
published, so decoded snapshots are cached by id.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from appendtable.commit.validation import check_snapshot
from appendtable.errors import (
    AppendTableError,
    CorruptMetadataError,
    ObjectNotFoundError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    StorageError,
)
from appendtable.metadata import codec, layout
from appendtable.metadata.models import Snapshot
from appendtable.storage import Storage

__all__ = ["SnapshotStore", "decode_snapshot", "flush_hints"]

_CACHE_LIMIT = 1024
#: One thread writes LATEST hints in order, so a newer hint is never overwritten by an older.
_HINTS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="appendtable-hint")


def decode_snapshot(data: bytes, uri: str) -> Snapshot:
    """A snapshot file's content, checked (``commit.validation``)."""
    snapshot = codec.decode(data, Snapshot, codec.Kind.SNAPSHOT, uri)
    check_snapshot(snapshot, uri)
    return snapshot


def flush_hints() -> None:
    """Wait until every hint submitted so far is written (or given up on)."""
    _HINTS.submit(lambda: None).result()  # one worker: tasks run in submission order


class SnapshotStore:
    """Reads and publishes the snapshots of one table."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self._latest_seen = 0

    # ---- ids --------------------------------------------------------------------------------

    def list_ids(self) -> list[int]:
        """Every snapshot id present, ascending (a listing: O(snapshots))."""
        ids = [
            layout.id_from_name(name, layout.SNAPSHOT_PREFIX)
            for name in self._storage.listnames(layout.SNAPSHOT_DIR)
        ]
        return sorted(i for i in ids if i is not None)

    def _read_hint(self, path: str) -> int | None:
        try:
            text = self._storage.read(path).decode("ascii", errors="replace").strip()
        except ObjectNotFoundError:
            return None
        return int(text) if text.isdigit() and int(text) > 0 else None

    def exists(self, snapshot_id: int) -> bool:
        if snapshot_id in self._cache:
            return True
        return self._storage.exists(layout.snapshot_path(snapshot_id))

    def on_storage(self, snapshot_id: int) -> bool:
        """Whether the snapshot file exists now (not the cache: it may have expired since)."""
        return self._storage.exists(layout.snapshot_path(snapshot_id))

    def check_retained(self, snapshot_id: int) -> None:
        """Raise SnapshotExpiredError (or SnapshotNotFoundError) unless snapshot
        ``snapshot_id`` is in the log now (not the cache: another process may have expired
        it)."""
        if not self.on_storage(snapshot_id):
            self.forget(snapshot_id)
            raise self._missing(snapshot_id)

    def latest_seen(self) -> int | None:
        """The newest snapshot id this process has seen (no request), None before it has
        seen one: at most what ``latest_id`` would answer now, unless snapshots were rolled
        back meanwhile."""
        return self._latest_seen or None

    def latest_id(self) -> int | None:
        """The id of the newest snapshot, None for an empty table.

        A process that already knows a recent id checks the next name and that the known one
        is still there (two existence checks when nothing changed): a next name missing only
        means "nothing new" while the known snapshot exists, as expiration removes snapshots
        oldest first; once the known one has expired, the next may have expired too, and
        committing on top of it would re-create an expired id. Otherwise, or when others
        committed meanwhile, it reads the LATEST hint and probes forward from there (commits
        write the hint only once they know their snapshot continues the log: ``announce``)."""
        start = self._latest_seen
        if not start or self.exists(start + 1) or not self.on_storage(start):
            hint = self._read_hint(layout.LATEST_HINT) or 0
            start = max(start, hint)
            if not start or not self.on_storage(start):
                return self._latest_by_listing()
        probe = start
        while self.exists(probe + 1):
            probe += 1
        self._latest_seen = probe
        return probe

    def resync_latest(self) -> None:
        """Find the latest id by listing, forgetting the one this process knew: after a lost
        race its id may be held for a moment by a stalled commit's re-creation, which probing
        forward from it would take for the latest."""
        self._latest_seen = 0
        self._latest_by_listing()

    def _latest_by_listing(self) -> int | None:
        ids = self.list_ids()
        if not ids:
            return None
        self._latest_seen = ids[-1]
        return ids[-1]

    def earliest_id(self, *, repair: bool = True) -> int | None:
        """The id of the oldest retained snapshot, None for an empty table.

        Verified against storage (not the cache: others may have expired snapshots). Without
        an EARLIEST hint (nothing expired yet) snapshot 1 is the answer when it exists, since
        ids start at 1; only a missing or stale hint costs a listing, after which the hint is
        written for the next reader (unless ``repair`` is false)."""
        hint = self._read_hint(layout.EARLIEST_HINT)
        if hint and self.on_storage(hint) and (hint == 1 or not self.on_storage(hint - 1)):
            return hint
        if not hint and self.on_storage(1):
            return 1
        ids = self.list_ids()
        if not ids:
            return None
        if repair:  # not in a dry run, which changes nothing
            self._write_hint(layout.EARLIEST_HINT, ids[0])
        return ids[0]

    def write_earliest_hint(self, snapshot_id: int) -> None:
        self._write_hint(layout.EARLIEST_HINT, snapshot_id)

    def _write_hint(self, path: str, snapshot_id: int) -> None:
        try:
            self._storage.write_hint(path, str(snapshot_id).encode("ascii"))
        except StorageError:
            pass  # a hint: readers verify it and fall back to listing

    # ---- snapshots --------------------------------------------------------------------------

    def get(self, snapshot_id: int) -> Snapshot:
        """Snapshot ``snapshot_id``. Raises SnapshotExpiredError if it was expired,
        SnapshotNotFoundError if it never existed."""
        with self._lock:
            cached = self._cache.get(snapshot_id)
        if cached is not None:
            return cached
        path = layout.snapshot_path(snapshot_id)
        try:
            data = self._storage.read(path)
        except ObjectNotFoundError:
            raise self._missing(snapshot_id) from None
        snapshot = decode_snapshot(data, self._storage.uri(path))
        if snapshot.id != snapshot_id:
            raise CorruptMetadataError(
                f"{self._storage.uri(path)} holds snapshot {snapshot.id}", path=path
            )
        self._remember(snapshot)
        return snapshot

    def _missing(self, snapshot_id: int) -> AppendTableError:
        if snapshot_id < 1:
            return SnapshotNotFoundError(
                f"no such snapshot: {snapshot_id} (snapshot ids start at 1)"
            )
        earliest = self.earliest_id()
        latest = self.latest_id()
        if earliest is not None and snapshot_id < earliest:
            return SnapshotExpiredError(
                f"snapshot {snapshot_id} has expired (earliest retained is {earliest}); to "
                "keep a snapshot readable, tag it (create_tag) or retain more snapshots "
                "('snapshot.time-retained', 'snapshot.num-retained.min')"
            )
        if latest is None:
            return SnapshotNotFoundError(f"no such snapshot: {snapshot_id} (the table is empty)")
        if earliest is not None and snapshot_id <= latest:
            return SnapshotNotFoundError(
                f"snapshot {snapshot_id} is missing though snapshots {earliest}..{latest} were "
                "listed: it was expired just now, or its file was deleted outside the table or "
                f"lost by the storage ({self._storage.uri(layout.snapshot_path(snapshot_id))})"
            )
        return SnapshotNotFoundError(
            f"no such snapshot: {snapshot_id} (snapshots {earliest}..{latest} exist)"
        )

    def _remember(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._cache[snapshot.id] = snapshot
            while len(self._cache) > _CACHE_LIMIT:
                self._cache.popitem(last=False)

    def latest(self) -> Snapshot | None:
        latest_id = self.latest_id()
        return None if latest_id is None else self.get(latest_id)

    def find_by_time(self, timestamp_ms: int) -> Snapshot | None:
        """The newest snapshot committed at or before ``timestamp_ms`` (binary search)."""
        earliest, latest = self.earliest_id(), self.latest_id()
        if earliest is None or latest is None:
            return None
        found: Snapshot | None = None
        low, high = earliest, latest
        while low <= high:
            middle = (low + high) // 2
            snapshot = self.get(middle)
            if snapshot.time_ms <= timestamp_ms:
                found, low = snapshot, middle + 1
            else:
                high = middle - 1
        return found

    def first_at_or_after(self, timestamp_ms: int) -> int | None:
        """The id of the oldest snapshot committed at or after ``timestamp_ms``."""
        before = self.find_by_time(timestamp_ms - 1)
        if before is None:
            return self.earliest_id()
        latest = self.latest_id()
        return before.id + 1 if latest is not None and before.id < latest else None

    # ---- publishing -------------------------------------------------------------------------

    def publish(self, snapshot: Snapshot) -> bool:
        """Atomically create ``snapshot-<id>``. True if this call created it; False if another
        commit took the id. Raises StorageError when the outcome is unknown."""
        data = codec.encode(snapshot, codec.Kind.SNAPSHOT)
        created = self._storage.put_if_absent(layout.snapshot_path(snapshot.id), data)
        if created:
            self._remember(snapshot)
            self._latest_seen = max(self._latest_seen, snapshot.id)
        return created

    def announce(self, snapshot: Snapshot) -> None:
        """Point the LATEST hint at ``snapshot``, once its commit knows it continues the log
        (never before: a stalled commit's re-creation of an expired id would lead the writers
        that follow the hint to build on it). Off the commit's critical path: a hint that
        lands late (or never) only costs other readers a few existence checks."""
        try:
            _HINTS.submit(self._write_hint, layout.LATEST_HINT, snapshot.id)
        except RuntimeError:  # the interpreter is shutting down: the snapshot landed
            pass

    def holds(self, snapshot_id: int, nonce: str) -> bool | None:
        """Whether the snapshot stored under ``snapshot_id`` now (not the cache) is the one
        with ``nonce``: True; False if another commit holds the id; None if it is absent.

        An id that exists is not always the snapshot once read under it: a commit stalled past
        the retention can re-create an expired id for a moment, until it finds itself outside
        the log and takes it back (``Committer._in_log``)."""
        path = layout.snapshot_path(snapshot_id)
        try:
            data = self._storage.read(path)
        except ObjectNotFoundError:
            return None
        stored = decode_snapshot(data, self._storage.uri(path))
        if stored.nonce != nonce:
            return False
        self._remember(stored)
        return True

    def read_back_is_ours(self, snapshot: Snapshot) -> bool | None:
        """After an ambiguous publish: whether the stored snapshot is ours (``holds``)."""
        return self.holds(snapshot.id, snapshot.nonce)

    def unpublish(self, snapshot: Snapshot) -> None:
        """Remove a snapshot this process just published outside the log (see
        ``Committer._in_log``)."""
        self._storage.delete(layout.snapshot_path(snapshot.id))
        self.forget(snapshot.id)
        self._latest_seen = 0

    def forget(self, snapshot_id: int) -> None:
        """Drop a snapshot from the cache (after it was expired)."""
        with self._lock:
            self._cache.pop(snapshot_id, None)
