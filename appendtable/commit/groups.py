"""The files of one consumer group: generations, leases and progress records.

Guarantees (the storage's put-if-absent is the only primitive that races, as for snapshots):

* **One generation per number.** ``publish`` creates ``generation-<n>`` only if absent. Only
  generations at least ``GENERATIONS_KEPT`` behind the newest are pruned, so a writer that
  finds one that many newer than its own after winning knows it created a pruned number
  again: it removes its file and reports the publish lost.
* **One chain of progress records per unit.** Record ``seq`` is created only if absent, by a
  member that knows record ``seq - 1``. The records from one claim to the next are a
  *tenure*: only the member that claimed appends to it, so the only names two members can
  race for are "the newest record + 1", and a member whose unit was claimed by another loses
  exactly the name of that claim. Which is why claim records are never pruned (except after
  ``CLAIMS_KEPT_MS``, a week), while the other records of a tenure are: each append removes
  the record before it, and a claim removes the previous tenure's last record. A name that
  nobody can race for any more may be removed and can never be created again by mistake.
* **Leases** are small files rewritten in place by their member only (atomically: readers see
  the old or the new one), with no durability demanded: a lost lease costs a rebalance.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from appendtable.errors import ObjectNotFoundError, StorageError
from appendtable.metadata import codec
from appendtable.metadata.groups import (
    GROUPS_DIR,
    GroupGeneration,
    MemberLease,
    UnitProgress,
    generation_id,
    generation_path,
    group_dir,
    lease_member,
    lease_path,
    progress_dir,
    progress_key,
    progress_path,
    unit_dir,
)
from appendtable.metadata.layout import validate_consumer_id
from appendtable.storage import Storage

__all__ = [
    "CLAIMS_KEPT_MS",
    "GENERATIONS_KEPT",
    "GroupPosition",
    "GroupStore",
    "delete_group",
    "expire_groups",
    "groups_floor",
    "list_groups",
    "wall_ms",
]

#: Progress records written at once (one request each on object stores).
_PARALLEL_WRITES = 8
_pool: ThreadPoolExecutor | None = None
#: Generations kept behind the newest (older ones are pruned by whoever publishes).
GENERATIONS_KEPT = 8
#: Claim records older than this are pruned: a member stopped for longer than a week between
#: its last check of the group and a write cannot be told from a live one by names alone.
CLAIMS_KEPT_MS = 7 * 24 * 3600 * 1000
_MAX_RELISTS = 10
#: A unit's claims are pruned (when older than ``CLAIMS_KEPT_MS``) once it has this many.
_CLAIMS_BEFORE_PRUNING = 32


def _writer_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(_PARALLEL_WRITES, thread_name_prefix="appendtable-group")
    return _pool


def list_groups(storage: Storage) -> list[str]:
    """The names of the groups of a table, sorted."""
    names = set()
    for info in storage.walk(GROUPS_DIR):
        relative = info.path[len(GROUPS_DIR) + 1 :] if info.path.startswith(GROUPS_DIR) else ""
        name = relative.split("/", 1)[0]
        if name and not name.startswith(".") and _valid_name(name):
            names.add(name)
    return sorted(names)


def _valid_name(name: str) -> bool:
    try:
        validate_consumer_id(name)
    except ValueError:
        return False
    return True


def delete_group(storage: Storage, group: str) -> None:
    """Remove a group and all its progress (its snapshots are no longer protected)."""
    storage.delete_tree(group_dir(group))


@dataclass(frozen=True)
class GroupPosition:
    """Where a unit of a group continues: its newest progress record, or the group's start
    when it has none yet (``record`` None)."""

    unit: int
    next_snapshot: int
    full: bool
    record: UnitProgress | None


class GroupStore:
    """Reads and writes the files of the group ``group`` of one table."""

    def __init__(self, storage: Storage, group: str) -> None:
        self.storage = storage
        self.group = validate_consumer_id(group)

    # ---- generations ---------------------------------------------------------------------------

    def generation_ids(self) -> list[int]:
        ids = (generation_id(n) for n in self.storage.listnames(group_dir(self.group)))
        return sorted(i for i in ids if i is not None)

    def has_generation(self, generation: int) -> bool:
        return self.storage.exists(generation_path(self.group, generation))

    def generation(self, generation: int) -> GroupGeneration | None:
        path = generation_path(self.group, generation)
        try:
            data = self.storage.read(path)
        except ObjectNotFoundError:
            return None
        return codec.decode(
            data, GroupGeneration, codec.Kind.GROUP_GENERATION, self.storage.uri(path)
        )

    def latest(self) -> GroupGeneration | None:
        """The newest generation (a listing, then probes for newer ones), None if the group
        has none."""
        for _ in range(_MAX_RELISTS):
            ids = self.generation_ids()
            if not ids:
                return None
            newest = ids[-1]
            while self.has_generation(newest + 1):
                newest += 1
            found = self.generation(newest)
            if found is not None:
                return found
        raise StorageError(
            f"consumer group '{self.group}': its generations keep disappearing while read",
            path=self.storage.uri(group_dir(self.group)),
            operation="list",
        )

    def publish(self, generation: GroupGeneration) -> bool:
        """Create the generation's file if its number is free (and was never pruned); True if
        this call did. Prunes generations ``GENERATIONS_KEPT`` or more behind it."""
        number = generation.generation
        path = generation_path(self.group, number)
        if not self.storage.put_if_absent(
            path, codec.encode(generation, codec.Kind.GROUP_GENERATION)
        ):
            return False
        ids = self.generation_ids()
        if any(i >= number + GENERATIONS_KEPT for i in ids):
            self._delete_quietly(path)  # a pruned number created again
            return False
        for old in ids:
            if old <= number - GENERATIONS_KEPT:
                self._delete_quietly(generation_path(self.group, old))
        return True

    # ---- leases -------------------------------------------------------------------------------

    def lease(self, member: str) -> MemberLease | None:
        path = lease_path(self.group, member)
        try:
            data = self.storage.read(path)
        except ObjectNotFoundError:
            return None
        return codec.decode(data, MemberLease, codec.Kind.GROUP_LEASE, self.storage.uri(path))

    def leases(self) -> dict[str, MemberLease]:
        found = {}
        for name in self.storage.listnames(group_dir(self.group)):
            member = lease_member(name)
            if member is None or not _valid_name(member):
                continue
            lease = self.lease(member)
            if lease is not None:
                found[member] = lease
        return found

    def renew(self, member: str, lease: MemberLease) -> None:
        self.storage.write_hint(
            lease_path(self.group, member), codec.encode(lease, codec.Kind.GROUP_LEASE)
        )

    def drop_lease(self, member: str) -> None:
        self.storage.delete(lease_path(self.group, member))

    # ---- progress records ----------------------------------------------------------------------

    def unit_seqs(self, unit: int) -> list[int]:
        """The sequence numbers of ``unit``'s records present, ascending."""
        names = self.storage.listnames(unit_dir(self.group, unit))
        return sorted(int(n) for n in names if n.isdigit())

    def record(self, unit: int, seq: int) -> UnitProgress | None:
        path = progress_path(self.group, unit, seq)
        try:
            data = self.storage.read(path)
        except ObjectNotFoundError:
            return None
        return codec.decode(data, UnitProgress, codec.Kind.GROUP_PROGRESS, self.storage.uri(path))

    def tail(self, unit: int, seqs: Sequence[int] | None = None) -> UnitProgress | None:
        """The newest record of ``unit`` (None if it has none). ``seqs``: its sequence numbers
        from a recent listing, to save one."""
        for _ in range(_MAX_RELISTS):
            known = self.unit_seqs(unit) if seqs is None else seqs
            seqs = None
            if not known:
                return None
            newest = known[-1]
            while self.storage.exists(progress_path(self.group, unit, newest + 1)):
                newest += 1
            found = self.record(unit, newest)
            if found is not None:
                return found
        raise StorageError(
            f"consumer group '{self.group}': the progress records of unit {unit} keep "
            "disappearing while read",
            path=self.storage.uri(unit_dir(self.group, unit)),
            operation="list",
        )

    def tails(self) -> dict[int, UnitProgress]:
        """The newest record of every unit that has one (one recursive listing, then a read
        per unit)."""
        listing: dict[int, list[int]] = {}
        for info in self.storage.walk(progress_dir(self.group)):
            key = progress_key(info.path)
            if key is not None:
                listing.setdefault(key[0], []).append(key[1])
        found = {}
        for unit, seqs in sorted(listing.items()):
            tail = self.tail(unit, sorted(seqs))
            if tail is not None:
                found[unit] = tail
        return found

    def positions(self, generation: GroupGeneration | None) -> dict[int, GroupPosition]:
        """Where each unit continues: its newest record, else the group's start."""
        positions = {
            unit: GroupPosition(unit, record.next_snapshot, record.full, record)
            for unit, record in self.tails().items()
        }
        if generation is not None:
            for unit in range(generation.units):
                positions.setdefault(
                    unit,
                    GroupPosition(unit, generation.start_snapshot, generation.start_full, None),
                )
        return positions

    def create(self, record: UnitProgress) -> bool:
        """Create one record if its name is free; True if this call did. Raises StorageError
        when the outcome stays unknown."""
        path = progress_path(self.group, record.unit, record.seq)
        data = codec.encode(record, codec.Kind.GROUP_PROGRESS)
        try:
            return self.storage.put_if_absent(path, data)
        except StorageError:
            stored = self.record(record.unit, record.seq)  # the outcome was unknown: look
            if stored is None:
                raise
            return stored == record

    def create_all(self, records: Sequence[UnitProgress]) -> list[bool | StorageError]:
        """``create`` for each record, several at once; a failure is returned in its place."""

        def attempt(record: UnitProgress) -> bool | StorageError:
            try:
                return self.create(record)
            except StorageError as exc:
                return exc

        if len(records) <= 1:
            return [attempt(r) for r in records]
        return list(_writer_pool().map(attempt, records))

    def claim(
        self,
        unit: int,
        *,
        generation: int,
        member: str,
        session: str,
        start: tuple[int, bool],
    ) -> UnitProgress | None:
        """Take ``unit`` over for ``member`` in ``generation``: create the record after its
        newest one, at the same position (the group's ``start`` when it has none). From then
        on, whoever held it before cannot append to its chain. Returns the claim record, or
        None when a newer generation already holds the unit (the caller is behind)."""
        for _ in range(_MAX_RELISTS):
            seqs = self.unit_seqs(unit)
            tail = self.tail(unit, seqs)
            if tail is not None and tail.generation > generation:
                return None
            if tail is not None and tail.session == session and tail.generation == generation:
                return tail  # ours already (a claim whose outcome was unknown)
            position = (tail.next_snapshot, tail.full) if tail is not None else start
            record = UnitProgress(
                unit=unit,
                seq=tail.seq + 1 if tail is not None else 1,
                generation=generation,
                member=member,
                session=session,
                next_snapshot=position[0],
                full=position[1],
                time_ms=wall_ms(),
                claim=True,
            )
            if not self.create(record):
                continue  # the previous holder appended meanwhile: claim after that
            if tail is not None and not tail.claim:
                self.remove_record(unit, tail.seq)  # no longer raced for (see above)
            if len(seqs) > _CLAIMS_BEFORE_PRUNING:
                self.prune_old_claims(unit, record.seq)
            return record
        raise StorageError(
            f"consumer group '{self.group}': could not claim unit {unit}: its progress keeps "
            "changing",
            path=self.storage.uri(unit_dir(self.group, unit)),
            operation="publish",
        )

    def claim_all(
        self,
        units: Sequence[int],
        *,
        generation: int,
        member: str,
        session: str,
        start: tuple[int, bool],
    ) -> dict[int, UnitProgress | StorageError | None]:
        """``claim`` for each unit, several at once; a failure is returned in its place."""

        def attempt(unit: int) -> UnitProgress | StorageError | None:
            try:
                return self.claim(
                    unit, generation=generation, member=member, session=session, start=start
                )
            except StorageError as exc:
                return exc

        if len(units) <= 1:
            return {unit: attempt(unit) for unit in units}
        return dict(zip(units, _writer_pool().map(attempt, units), strict=True))

    def remove_record(self, unit: int, seq: int) -> None:
        """Remove a record nobody can race for any more (see the module docstring)."""
        self._delete_quietly(progress_path(self.group, unit, seq))

    def prune_old_claims(self, unit: int, below: int) -> None:
        """Remove records of ``unit`` older than seq ``below`` written more than
        ``CLAIMS_KEPT_MS`` ago (by their files' modification times)."""
        cutoff = wall_ms() - CLAIMS_KEPT_MS
        for info in self.storage.listdir(unit_dir(self.group, unit)):
            key = progress_key(info.path)
            if key is not None and key[1] < below and info.mtime_ms < cutoff:
                self._delete_quietly(info.path)

    def _delete_quietly(self, path: str) -> None:
        try:
            self.storage.delete(path)
        except StorageError:
            pass  # a leftover older record or generation is harmless; a later one retries


def wall_ms() -> int:
    """Now, in epoch milliseconds (this machine's clock)."""
    return int(time.time() * 1000)


def groups_floor(storage: Storage, *, skip: Sequence[str] = ()) -> int | None:
    """The oldest snapshot any unit of any group (but ``skip``) still needs: expiration keeps
    it and everything after. Positions only move forward, so a floor read while members
    commit is never too high."""
    floor: int | None = None
    for name in list_groups(storage):
        if name in skip:
            continue
        store = GroupStore(storage, name)
        for position in store.positions(store.latest()).values():
            if floor is None or position.next_snapshot < floor:
                floor = position.next_snapshot
    return floor


def expire_groups(storage: Storage, older_than_ms: int, *, dry_run: bool) -> list[str]:
    """Remove groups abandoned since ``older_than_ms``: no lease renewed, no progress
    committed and no generation published since then (``<group>`` in the result), and the
    leases of former members not renewed since then (``<group>/<member>``)."""
    expired: list[str] = []
    for name in list_groups(storage):
        store = GroupStore(storage, name)
        latest = store.latest()
        leases = store.leases()
        activity = max(
            [
                latest.time_ms if latest is not None else 0,
                *(lease.renewed_ms for lease in leases.values()),
                *(record.time_ms for record in store.tails().values()),
            ]
        )
        if activity < older_than_ms:
            expired.append(name)
            if not dry_run:
                delete_group(storage, name)
            continue
        for member, lease in sorted(leases.items()):
            member_of_latest = latest is not None and member in latest.members
            if not member_of_latest and lease.renewed_ms < older_than_ms:
                expired.append(f"{name}/{member}")
                if not dry_run:
                    store.drop_lease(member)
    return expired
