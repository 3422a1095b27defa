"""A commit in flight while expiration removes the snapshot it was based on (deterministic
interleavings; the torture test hits them only rarely, with aggressive retention).

Both need a retention shorter than one commit attempt (e.g. ``snapshot.num-retained.min`` and
``snapshot.time-retained`` set low, or a writer stalled longer than the time retention)."""

from __future__ import annotations

import time
from pathlib import Path
from threading import Event, Thread
from typing import Any

import msgspec
import pyarrow as pa
import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.commit.expiration_records import RECORD_RETENTION_MS, prune_records
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.commit.snapshots import decode_snapshot, flush_hints
from appendtable.metadata import codec
from appendtable.metadata.models import Snapshot
from appendtable.storage import LocalStorage
from appendtable.table import Table

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

SCHEMA = pa.schema([("w", pa.string())])


def _rows(*values: str) -> pa.Table:
    return pa.table({"w": list(values)}, schema=SCHEMA)


class _Interleaved(LocalStorage):
    """Storage of writer B: at its first call matching ``prefix`` (``method`` ``write``, which
    stands for ``write`` and ``create``, or ``put_if_absent``), another writer commits twice
    and expires all but the latest snapshot."""

    def __init__(self, root: str, other: at.Table, method: str, prefix: str) -> None:
        super().__init__(root, fsync=False)
        self.other, self.method, self.prefix = other, method, prefix
        self.fired = False

    def _maybe_interleave(self, method: str, path: str) -> None:
        if method == self.method and path.startswith(self.prefix) and not self.fired:
            self.fired = True
            self.other.append(_rows("A"))
            self.other.append(_rows("C"))
            self.other.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1)

    def write(self, path: str, data: bytes) -> None:
        self._maybe_interleave("write", path)
        super().write(path, data)

    def create(self, path: str, data: bytes) -> None:
        self._maybe_interleave("write", path)
        super().create(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self._maybe_interleave("put_if_absent", path)
        return super().put_if_absent(path, data)


def _writers(tmp_path: Path, method: str, prefix: str) -> tuple[str, Table]:
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    other.append(_rows("first"))  # snapshot 1: B reads it as the latest
    storage = _Interleaved(uri, other, method, prefix)
    return uri, Table(TableState(storage, other._state.schema))


def test_publish_never_reuses_an_expired_snapshot_id(tmp_path: Path) -> None:
    uri, b = _writers(tmp_path, "put_if_absent", "snapshot/snapshot-")
    snapshot = b.append(_rows("B"))
    assert snapshot is not None
    table = at.open_table(uri)
    rows = sorted(table.scan().to_arrow()["w"].to_pylist())
    assert rows == ["A", "B", "C", "first"], f"B acknowledged as {snapshot.id}, latest: {rows}"


def test_append_survives_expiration_of_its_base_snapshot(tmp_path: Path) -> None:
    uri, b = _writers(tmp_path, "write", "manifest/manifest-")
    snapshot = b.append(_rows("B"))
    assert snapshot is not None and snapshot.id == 4
    rows = sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist())
    assert rows == ["A", "B", "C", "first"]


class _StalledCommitReappears(_Interleaved):
    """``_Interleaved``, and then a third writer, stalled since before the expiration, publishes
    its snapshot under the expired id ``stalled_id`` (it takes it back later, once it sees it
    is outside the log). The other writers are processes of their own: B has none of their
    metadata in its caches."""

    def __init__(self, root: str, other: at.Table, method: str, prefix: str, stalled_id: int):
        super().__init__(root, other, method, prefix)
        self.stalled_id = stalled_id

    def _maybe_interleave(self, method: str, path: str) -> None:
        if method == self.method and path.startswith(self.prefix) and not self.fired:
            name = f"snapshot/snapshot-{self.stalled_id}"
            expired = decode_snapshot(super().read(name), name)
            super()._maybe_interleave(method, path)
            assert not super().exists(name), "the interleaving expires the snapshot"
            stalled = msgspec.structs.replace(expired, nonce="a-stalled-commit")
            assert super().put_if_absent(name, codec.encode(stalled, codec.Kind.SNAPSHOT))
            clear_metadata_caches()

    def take_back(self) -> None:
        super().delete(f"snapshot/snapshot-{self.stalled_id}")


def _writers_with_stalled(
    tmp_path: Path, method: str, prefix: str, stalled_id: int
) -> tuple[str, Table, _StalledCommitReappears]:
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    other.append(_rows("first"))
    other.append(_rows("second"))  # snapshot 2: B reads it as the latest
    storage = _StalledCommitReappears(uri, other, method, prefix, stalled_id)
    return uri, Table(TableState(storage, other._state.schema)), storage


def test_append_survives_its_base_expiring_and_its_id_reappearing(tmp_path: Path) -> None:
    """Regression (found by the torture test under load): B's base snapshot 2 expired while B
    prepared, and a stalled commit re-created id 2 for a moment; B took the existing id for
    its base still being there, and failed on its base's deleted manifests."""
    uri, b, storage = _writers_with_stalled(tmp_path, "write", "manifest/manifest-", 2)
    snapshot = b.append(_rows("B"))
    storage.take_back()
    assert snapshot is not None and snapshot.id == 5 and snapshot.parent_id == 4
    rows = sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist())
    assert rows == ["A", "B", "C", "first", "second"]


def test_publish_on_a_parent_whose_id_reappeared_is_outside_the_log(tmp_path: Path) -> None:
    """B publishes snapshot 3 on its parent 2 after both expired, while a stalled commit holds
    id 2 again: B's snapshot is outside the log (snapshot 4 is not built on it), so B takes it
    back and commits again, rather than acknowledge rows that no later snapshot holds."""
    uri, b, storage = _writers_with_stalled(tmp_path, "put_if_absent", "snapshot/snapshot-", 2)
    snapshot = b.append(_rows("B"))
    storage.take_back()
    assert snapshot is not None and snapshot.id == 5 and snapshot.parent_id == 4
    table = at.open_table(uri)
    assert [s.id for s in table.snapshots()] == [4, 5]
    assert sorted(table.scan().to_arrow()["w"].to_pylist()) == ["A", "B", "C", "first", "second"]


def test_idle_writer_does_not_reuse_an_expired_snapshot_id(tmp_path: Path) -> None:
    """A writer idle while others committed and expiration removed the snapshots after its
    last one must not take "the next name is missing" for "nothing new" (regression: its
    append was acknowledged as a re-created expired snapshot and lost)."""
    uri = str(tmp_path / "t")
    at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    idle, other = at.open_table(uri), at.open_table(uri)
    first = idle.append(_rows("B1"))
    assert first is not None and first.id == 1
    for i in range(11):
        other.append(_rows(f"o{i}"))
    expired = other.expire_snapshots(retain_min=10, older_than_ms=int(time.time() * 1000) + 1)
    assert expired.expired_snapshots == [1, 2]
    second = idle.append(_rows("B2"))
    assert second is not None and second.id == 13 and second.parent_id == 12
    table = at.open_table(uri)
    assert sorted(table.scan().to_arrow()["w"].to_pylist()) == sorted(
        ["B1", "B2"] + [f"o{i}" for i in range(11)]
    )


class _CommitAfterMiss(LocalStorage):
    """A reader's storage: another writer commits the snapshot the reader waits for right
    after the reader's first look for it missed, while the reader checks whether that
    snapshot is missing because it expired."""

    def __init__(self, root: str, other: at.Table, waited: int) -> None:
        super().__init__(root, fsync=False)
        self.other, self.waited = other, f"snapshot/snapshot-{waited}"
        self.armed = False
        self.looks = 0

    def exists(self, path: str) -> bool:
        found = super().exists(path)
        if self.armed and path == self.waited:
            self.looks += 1
            if self.looks == 1:
                assert not found
                self.other.append(_rows("A"))
        return found


@pytest.mark.parametrize("waited", [1, 2])
def test_snapshot_landing_during_the_expiry_check_is_not_reported_expired(
    tmp_path: Path, waited: int
) -> None:
    """Regression: a snapshot committed between a reader's miss and its check for expiration
    made poll() raise SnapshotExpiredError although nothing had expired. Snapshot 1 has no
    snapshot before it, so the check asks for the latest id; for a later one the snapshot
    before it is still there."""
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    if waited == 2:
        other.append(_rows("first"))
    storage = _CommitAfterMiss(uri, other, waited)
    reader = Table(TableState(storage, other._state.schema)).stream(
        mode="from-snapshot", snapshot_id=1
    )
    if waited == 2:
        unit = reader.poll()
        assert unit is not None and unit.snapshot_id == 1
    storage.armed = True
    assert reader.poll() is None  # missed the snapshot, which landed during the check
    assert storage.looks >= 2 if waited == 1 else storage.looks == 1
    unit = reader.poll()
    assert unit is not None and unit.snapshot_id == waited


class _ExpiredAround(LocalStorage):
    """Storage of writer B: right after (``after``) or right before its snapshot publish,
    another writer commits ``commits`` times and expires all but the latest snapshot. After a
    publish, B's own snapshot, its parent and its successor are then all expired before B checks
    that its snapshot continues the log; before, B's publish re-creates an expired id whose
    successor has expired too. ``forget_records``: the expiration left no records (a writer of
    an older version, or records pruned)."""

    def __init__(
        self, root: str, other: at.Table, *, after: bool, commits: int, forget_records: bool
    ) -> None:
        super().__init__(root, fsync=False)
        self.other, self.after, self.commits = other, after, commits
        self.forget_records = forget_records
        self.fired = False

    def _interleave(self) -> None:
        self.fired = True
        for i in range(self.commits):
            self.other.append(_rows(f"o{i}"))
        self.other.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1)
        if self.forget_records:
            super().delete_tree("snapshot/expired")
        clear_metadata_caches()

    def put_if_absent(self, path: str, data: bytes) -> bool:
        publish = path.startswith("snapshot/snapshot-") and not self.fired
        if publish and not self.after:
            self._interleave()
        created = super().put_if_absent(path, data)
        if publish and self.after and created:
            self._interleave()
        return created


def _writer_b(tmp_path: Path, **interleaving: Any) -> tuple[str, Table]:
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    other.append(_rows("first"))  # snapshot 1: B's base
    storage = _ExpiredAround(uri, other, **interleaving)
    return uri, Table(TableState(storage, other._state.schema))


def test_a_snapshot_expired_with_its_parent_and_successor_before_its_check_is_kept(
    tmp_path: Path,
) -> None:
    """Regression (found by the torture test): B published snapshot 2, then 3 and 4 landed on
    it and expiration removed 1 to 3 before B checked that 2 continues the log. B took the
    missing successor for a sign of a re-created id, took its snapshot "back" (deleting the
    manifests 3 and 4 carry forward) and committed its rows a second time."""
    uri, b = _writer_b(tmp_path, after=True, commits=2, forget_records=False)
    snapshot = b.append(_rows("B"))
    assert snapshot is not None and snapshot.id == 2
    table = at.open_table(uri)
    assert [s.id for s in table.snapshots()] == [4]
    assert sorted(table.scan().to_arrow()["w"].to_pylist()) == ["B", "first", "o0", "o1"]


def test_a_publish_under_an_id_expired_with_its_successor_is_outside_the_log(
    tmp_path: Path,
) -> None:
    """B stalled before publishing on base 1 while 2, 3 and 4 landed and 1 to 3 expired: its
    publish re-creates id 2, with no parent and no successor left to compare with. The
    expiration's record of 3 names 3's parent, the original 2, so B takes its snapshot back
    and commits again on 4 (the record decides before B's own file is looked at)."""
    uri, b = _writer_b(tmp_path, after=False, commits=3, forget_records=False)
    snapshot = b.append(_rows("B"))
    assert snapshot is not None and snapshot.id == 5 and snapshot.parent_id == 4
    table = at.open_table(uri)
    assert [s.id for s in table.snapshots()] == [4, 5]
    assert sorted(table.scan().to_arrow()["w"].to_pylist()) == ["B", "first", "o0", "o1", "o2"]


def test_a_re_created_id_is_told_without_an_expiration_record(tmp_path: Path) -> None:
    """With no expiration record, B's re-created snapshot 2 is still there while its successor
    3 has expired: a snapshot of the log would have expired first, so B takes its back."""
    uri, b = _writer_b(tmp_path, after=False, commits=3, forget_records=True)
    snapshot = b.append(_rows("B"))
    assert snapshot is not None and snapshot.id == 5 and snapshot.parent_id == 4
    rows = sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist())
    assert rows == ["B", "first", "o0", "o1", "o2"]


def test_without_an_expiration_record_the_outcome_is_reported_unknown(tmp_path: Path) -> None:
    """With no record of who held id 2 when it expired (an expiration by an older version), B
    cannot tell whether its snapshot was part of the log: it says the outcome is unknown and
    deletes nothing, rather than guess (its rows are in the table, once)."""
    uri, b = _writer_b(tmp_path, after=True, commits=2, forget_records=True)
    with pytest.raises(at.CommitStateUnknownError, match="no expiration record"):
        b.append(_rows("B"))
    rows = sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist())
    assert rows == ["B", "first", "o0", "o1"]


class _ReCreationExpiredByAListing(LocalStorage):
    """Writer B, stalled on base 1 (found by a review of the expiration records). Before its
    publish: 2 and 3 land, 1 and 2 expire, and (``prune``) that expiration's record is pruned
    as an expiration an hour later would. B's publish re-creates id 2. Before B checks: 4 lands
    and a second expiration runs; its EARLIEST hint (3) fails its check, as snapshot-2 exists
    again, so it lists, starts at B's 2, records B's own nonce for id 2 and deletes 2 and 3."""

    def __init__(self, root: str, other: at.Table, *, prune: bool) -> None:
        super().__init__(root, fsync=False)
        self.other, self.prune = other, prune
        self.fired = False
        self.second: list[int] = []

    def put_if_absent(self, path: str, data: bytes) -> bool:
        publish = path.startswith("snapshot/snapshot-") and not self.fired
        if publish:
            self.fired = True
            self.other.append(_rows("o0"))
            self.other.append(_rows("o1"))
            assert _expire_all(self.other) == [1, 2]
            if self.prune:
                later = int(time.time() * 1000) + RECORD_RETENTION_MS + 60_000
                assert prune_records(LocalStorage(self.root), earliest=3, now_ms=later)
            clear_metadata_caches()
        created = super().put_if_absent(path, data)
        if publish:
            assert created and path == "snapshot/snapshot-2"
            self.other.append(_rows("o2"))
            self.second = _expire_all(self.other)
            clear_metadata_caches()
        return created


def _expire_all(table: at.Table) -> list[int]:
    cut = int(time.time() * 1000) + 1
    return table.expire_snapshots(retain_min=1, older_than_ms=cut).expired_snapshots


@pytest.mark.parametrize("prune", [False, True], ids=["records-kept", "first-record-pruned"])
def test_a_re_creation_expired_by_a_listing_is_not_taken_for_the_log(
    tmp_path: Path, prune: bool
) -> None:
    """B's re-created 2 expired with 3 before B checked, and the only record of id 2 left may
    name B's own nonce: the record of 3 (built on the original 2) decides that B's snapshot
    was outside the log. Taking it for part of the log lost B's acknowledged rows."""
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    other.append(_rows("first"))
    storage = _ReCreationExpiredByAListing(uri, other, prune=prune)
    snapshot = Table(TableState(storage, other._state.schema)).append(_rows("B"))
    assert storage.second == [2, 3]
    assert snapshot is not None and snapshot.id == 5 and snapshot.parent_id == 4
    rows = sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist())
    assert rows == ["B", "first", "o0", "o1", "o2"]


_WAIT_S = 30


class _StalledWriter(LocalStorage):
    """Writer S: pauses at its first publish (snapshot 2, on base 1) until ``go``; after
    publishing, pauses until ``check`` before checking its snapshot."""

    def __init__(self, root: str) -> None:
        super().__init__(root, fsync=False)
        self.ready, self.go, self.published, self.check = (Event() for _ in range(4))
        self.fired = False

    def put_if_absent(self, path: str, data: bytes) -> bool:
        first = path.startswith("snapshot/snapshot-") and not self.fired
        if first:
            self.fired = True
            self.ready.set()
            assert self.go.wait(_WAIT_S)
        created = super().put_if_absent(path, data)
        if first:
            self.published.set()
            assert self.check.wait(_WAIT_S)
        return created


class _ParentReCreated(LocalStorage):
    """Writer B (base 2, publishes 3). Right after its publish, 1 and 2 expire and S publishes
    its re-creation of 2; when B reads snapshot-2 to check its parent, S finishes first (it
    takes its 2 back and commits 4 on B's 3)."""

    def __init__(self, root: str, other: at.Table, s: _StalledWriter, s_thread: Thread) -> None:
        super().__init__(root, fsync=False)
        self.other, self.s, self.s_thread = other, s, s_thread
        self.published = self.checked = False

    def put_if_absent(self, path: str, data: bytes) -> bool:
        created = super().put_if_absent(path, data)
        if path.startswith("snapshot/snapshot-") and created and not self.published:
            self.published = True
            assert path == "snapshot/snapshot-3"
            assert _expire_all(self.other) == [1, 2]
            clear_metadata_caches()
            self.s.go.set()
            assert self.s.published.wait(_WAIT_S)
        return created

    def read(self, path: str) -> bytes:
        data = super().read(path)
        if path == "snapshot/snapshot-2" and self.published and not self.checked:
            self.checked = True
            self.s.check.set()
            self.s_thread.join(_WAIT_S)
            clear_metadata_caches()
        return data


def test_a_snapshot_is_kept_when_its_expired_parents_id_is_re_created(tmp_path: Path) -> None:
    """Regression (found by review): B's parent 2 expired and a stalled writer S re-created
    id 2 just before B checked its parent: B took "another nonce at my parent's id" for "my
    snapshot is outside the log", deleted snapshot 3 and the manifests S's snapshot 4 carries
    forward, and committed its rows again. Another nonce at the parent's id only says the
    parent expired; B's successor decides."""
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    other.append(_rows("first"))  # 1
    s_storage = _StalledWriter(uri)
    s_table = Table(TableState(s_storage, other._state.schema))
    outcome: dict[str, object] = {}

    def run_s() -> None:
        try:
            outcome["S"] = s_table.append(_rows("S"))
        except at.AppendTableError as exc:
            outcome["S"] = exc

    s_thread = Thread(target=run_s, daemon=True)
    s_thread.start()
    assert s_storage.ready.wait(_WAIT_S)  # S prepared 2 on base 1
    other.append(_rows("A"))  # 2
    b = Table(TableState(_ParentReCreated(uri, other, s_storage, s_thread), other._state.schema))
    snapshot = b.append(_rows("B"))
    s_thread.join(_WAIT_S)
    assert snapshot is not None and snapshot.id == 3
    landed = outcome["S"]
    assert isinstance(landed, Snapshot) and landed.id == 4 and landed.parent_id == 3
    clear_metadata_caches()
    rows = sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist())
    assert rows == ["A", "B", "S", "first"]


class _FreshWriterDuringTheCheck(LocalStorage):
    """Writer T, stalled on base 1 (found by a review): before its publish, 2, 3 and 4 land
    and 1 to 3 expire, so its publish re-creates id 2. As T starts checking its snapshot, a
    fresh reader scans and a fresh writer W appends (each a process of its own: nothing
    cached)."""

    def __init__(self, root: str, other: at.Table) -> None:
        super().__init__(root, fsync=False)
        self.other = other
        self.fired = self.published = self.checked = False
        self.seen: list[str] = []
        self.w: Snapshot | None = None

    def put_if_absent(self, path: str, data: bytes) -> bool:
        first = path.startswith("snapshot/snapshot-") and not self.fired
        if first:
            self.fired = True
            for value in ("o0", "o1", "o2"):
                self.other.append(_rows(value))
            assert _expire_all(self.other) == [1, 2, 3]
            clear_metadata_caches()
        created = super().put_if_absent(path, data)
        self.published = self.published or (first and created)
        return created

    def read(self, path: str) -> bytes:
        if self.published and not self.checked and path == "snapshot/snapshot-1":
            self.checked = True  # T checks its parent: the first step of its check
            flush_hints()
            clear_metadata_caches()
            self.seen = sorted(at.open_table(self.root).scan().to_arrow()["w"].to_pylist())
            self.w = at.open_table(self.root).append(_rows("W"))
            clear_metadata_caches()
        return super().read(path)


def test_no_writer_builds_on_a_re_created_id_before_its_commit_checked_it(tmp_path: Path) -> None:
    """Regression: T's publish pointed the LATEST hint at its re-created 2 before T checked it.
    A fresh reader then saw ["T", "first"], and a fresh writer W followed the hint, found 3
    missing (expired) and built 3 on T's 2. W's parent was there, T's successor named T: both
    were acknowledged, and the table holds neither. The hint now waits for the check."""
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    other.append(_rows("first"))
    storage = _FreshWriterDuringTheCheck(uri, other)
    t = Table(TableState(storage, other._state.schema)).append(_rows("T"))
    assert storage.seen == ["first", "o0", "o1", "o2"]
    assert storage.w is not None and storage.w.id == 5 and storage.w.parent_id == 4
    assert t is not None and t.id == 6 and t.parent_id == 5
    flush_hints()
    clear_metadata_caches()
    rows = sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist())
    assert rows == ["T", "W", "first", "o0", "o1", "o2"]


def test_a_snapshot_whose_parent_expired_with_nothing_after_it_is_kept(tmp_path: Path) -> None:
    """Once B has published 2, its parent 1 is no longer the latest and may expire before B
    checks: with nothing after 2, B's snapshot is the latest of the log (taking it back would
    leave the table without a snapshot)."""
    uri, b = _writer_b(tmp_path, after=True, commits=0, forget_records=False)
    snapshot = b.append(_rows("B"))
    assert snapshot is not None and snapshot.id == 2
    table = at.open_table(uri)
    assert [s.id for s in table.snapshots()] == [2]
    assert sorted(table.scan().to_arrow()["w"].to_pylist()) == ["B", "first"]


class _SuccessorOfAnOlderVersion(_ExpiredAround):
    """``_ExpiredAround`` after B's publish, with one commit whose snapshot (3) is then
    rewritten as a version without parent nonces writes it (``parent_nonce`` empty)."""

    def _interleave(self) -> None:
        super()._interleave()
        name = "snapshot/snapshot-3"
        stored = decode_snapshot(LocalStorage.read(self, name), name)
        older = msgspec.structs.replace(stored, parent_nonce="")
        LocalStorage.write(self, name, codec.encode(older, codec.Kind.SNAPSHOT))
        clear_metadata_caches()


def test_a_successor_without_a_parent_nonce_counts_as_built_on_the_snapshot(
    tmp_path: Path,
) -> None:
    """A successor written by an older version names no parent: it cannot say B's snapshot
    is outside the log, and B's snapshot is kept (as before parent nonces existed)."""
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"write-only": True, "commit.fsync": False})
    other.append(_rows("first"))
    storage = _SuccessorOfAnOlderVersion(uri, other, after=True, commits=1, forget_records=False)
    snapshot = Table(TableState(storage, other._state.schema)).append(_rows("B"))
    assert snapshot is not None and snapshot.id == 2
    table = at.open_table(uri)
    assert [s.id for s in table.snapshots()] == [3]
    assert sorted(table.scan().to_arrow()["w"].to_pylist()) == ["B", "first", "o0"]


def test_an_expiration_whose_window_another_one_expired_meanwhile_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one expiration read the commit times that set its window, another expired the
    snapshots it was about to read: it raised SnapshotExpiredError (found by a user running
    an expirer beside writers whose maintenance expires too). A snapshot expired meanwhile is
    old enough: the expiration goes on and removes what its own rules allow."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={"write-only": True})
    for n in range(5):
        table.append(_rows(str(n)))
    late = at.open_table(uri)  # (nothing cached)
    real_get = late._state.snapshots.get
    other: list[list[int]] = []

    def expire_then_get(snapshot_id: int) -> Snapshot:
        if snapshot_id < 5 and not other:  # the first commit time it reads
            expired = at.open_table(uri).expire_snapshots(retain_min=2, older_than_ms=2**62)
            other.append(list(expired.expired_snapshots))
        return real_get(snapshot_id)

    monkeypatch.setattr(late._state.snapshots, "get", expire_then_get)
    result = late.expire_snapshots(retain_min=1, older_than_ms=2**62)
    assert other == [[1, 2, 3]]
    assert result.expired_snapshots == [4]
    assert [s.id for s in at.open_table(uri).snapshots()] == [5]
    assert sorted(at.open_table(uri).scan().to_arrow().column("w").to_pylist()) == list("01234")


class _ExpireBeforeManifestRead(LocalStorage):
    """A reader's storage: another handle commits and expires the reader's snapshot just
    before the reader's first read of a manifest list (after its snapshot was checked)."""

    def __init__(self, root: str, other: at.Table) -> None:
        super().__init__(root, fsync=False)
        self.other, self.armed, self.fired = other, False, False

    def read(self, path: str) -> bytes:
        if self.armed and not self.fired and path.startswith("manifest/manifest-list-"):
            self.fired = True
            self.other.append(_rows("later"))
            self.other.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1)
        return super().read(path)


@pytest.mark.parametrize("how", ["plan", "count", "to_arrow"])
def test_a_scan_whose_snapshot_expires_while_it_plans_says_expired(
    tmp_path: Path, how: str
) -> None:
    """Found by a docs-only hunt: a scan whose snapshot expired between its retention check
    and the read of its manifest list raised ObjectNotFoundError naming a manifest list, not
    SnapshotExpiredError as errors.md promises for a pinned snapshot that left the log."""
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"commit.fsync": False, "write-only": True})
    other.append(_rows("first"))
    clear_metadata_caches()  # nothing cached: the reader reads its manifests from storage
    storage = _ExpireBeforeManifestRead(uri, other)
    scan = Table(TableState(storage, other._state.schema)).scan()
    assert scan.snapshot is not None and scan.snapshot.id == 1
    storage.armed = True
    with pytest.raises(at.SnapshotExpiredError, match="snapshot 1"):
        getattr(scan, how)()
    assert storage.fired
    assert sorted(at.open_table(uri).scan().to_arrow()["w"].to_pylist()) == ["first", "later"]


def test_a_stream_whose_snapshot_expires_while_it_plans_says_expired(tmp_path: Path) -> None:
    """The stream's snapshot existed when it looked, then expired before its manifests were
    read: SnapshotExpiredError naming it (it was ObjectNotFoundError), and the stream moves
    on once seeked past it."""
    uri = str(tmp_path / "t")
    other = at.create_table(uri, SCHEMA, options={"commit.fsync": False, "write-only": True})
    other.append(_rows("first"))
    storage = _ExpireBeforeManifestRead(uri, other)
    reader = Table(TableState(storage, other._state.schema)).stream(
        mode="from-snapshot", snapshot_id=1
    )
    unit = reader.poll()
    assert unit is not None and unit.snapshot_id == 1
    other.append(_rows("second"))  # snapshot 2, expired while the reader plans it
    clear_metadata_caches()
    storage.armed = True
    with pytest.raises(at.SnapshotExpiredError, match="positioned on snapshot 2"):
        reader.poll()
    assert storage.fired
    reader.seek(at.StreamPosition(3, full=True))
    unit = reader.poll()
    assert unit is not None and unit.snapshot_id == 3
    rows = [r["w"] for b in reader.read(unit) for r in b.to_pylist()]
    assert sorted(rows) == ["first", "later", "second"]


def test_a_stream_unit_whose_files_expire_before_it_is_read_says_expired(tmp_path: Path) -> None:
    """A unit planned, then its snapshot compacted away and expired (files deleted) before
    its files were read: SnapshotExpiredError naming the snapshot, not a missing file."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={"commit.fsync": False, "write-only": True})
    table.append(_rows("first"))
    reader = at.open_table(uri).stream(mode="from-snapshot", snapshot_id=1)
    unit = reader.poll()
    assert unit is not None and unit.snapshot_id == 1
    other = at.open_table(uri)
    other.append(_rows("second"))
    other.compact(full=True)
    other.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1)
    with pytest.raises(at.SnapshotExpiredError, match="reading a unit of snapshot 1, which"):
        list(reader.read(unit))
