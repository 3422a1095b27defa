"""Consumer groups: members that share a table's buckets, with leases, rebalancing and fenced,
exactly-once progress per bucket (``table.stream(group=..., member=...)``).

The units a group shares are the buckets of a bucketed table (a member holding bucket ``b``
reads bucket ``b`` of every partition), or the file slots of a ``bucket = -1`` table
(``consumer.group.file-slots``; each data file is in the slot its name hashes to).

Guarantees:

* **One owner per unit per generation**, balanced and sticky (``planning.groups``). A member
  that stops renewing its lease (``consumer.group.lease-time``) is removed by the next
  generation, and the survivors take its units over, resuming from each unit's committed
  position. A member that joins or leaves rebalances the group at once.
* **Fencing.** A member takes a unit over by *claiming* it: creating the next record of the
  unit's chain of progress records. From then on the previous holder cannot commit progress
  for it: ``commit()`` raises ConsumerFencedError for that unit (after committing the others),
  and the member stops reading it. A member also stops reading a unit at its next poll once a
  generation gives the unit to another member.
* **At-least-once delivery, exactly-once commits.** Each unit's committed positions form one
  chain, each link written by a member that read exactly the rows between the link before it
  and itself. So after any crash or rebalance every row is delivered to the group at least
  once, committed exactly once, and within a bucket in write order. Rows handed out but not
  committed when a unit moves are delivered again to its new owner.
* **Expiration** keeps every snapshot a group still needs (the oldest position of any unit).
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import time
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from appendtable._state import TableState
from appendtable.commit.groups import GroupStore, list_groups, wall_ms
from appendtable.errors import (
    ConsumerFencedError,
    InvalidArgumentError,
    ObjectNotFoundError,
    SnapshotNotFoundError,
    StorageError,
)
from appendtable.group_membership import GroupTemplate, Membership
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.groups import GroupGeneration, UnitProgress
from appendtable.planning.groups import UnitSelection
from appendtable.stream import (
    END_OF_STREAM,
    StreamConfig,
    StreamPosition,
    StreamReader,
    StreamUnit,
    calling_on_failure,
)

__all__ = [
    "ConsumerGroup",
    "GroupReader",
    "default_member_name",
    "describe_groups",
    "open_member",
]

_CLAIMED = "another member claimed them"
_GROUP_GONE = (
    "the group was removed (delete_consumer_group, or consumer.expiration-time) or created "
    "again since this member last looked; it joins the group again at its next poll"
)


@dataclass
class _Held:
    """A unit this member reads: where it continues, what it committed, and its newest
    progress record (its own, or its claim)."""

    position: StreamPosition
    committed: StreamPosition
    seq: int
    claim_seq: int
    generation: int
    ended: bool = False


def _position_of(record: UnitProgress) -> StreamPosition:
    return StreamPosition(record.next_snapshot, record.full)


class GroupReader:
    """One member of a consumer group: ``poll()`` units of the buckets it holds, ``read(unit)``
    their rows, ``commit()`` its progress; or iterate for record batches. Not thread-safe.
    ``close()`` (or a ``with`` block) leaves the group, handing its buckets over at once."""

    def __init__(
        self,
        state: TableState,
        config: StreamConfig,
        *,
        group: str,
        member: str,
        lease_ms: int,
        file_slots: int,
        columns: Sequence[str] | None = None,
        filter: object = None,
    ) -> None:
        if config.alignment_group is not None:
            raise InvalidArgumentError(
                "a consumer group member cannot also be in a watermark-alignment group "
                "('scan.watermark.alignment.group')"
            )
        if lease_ms <= 0:
            raise InvalidArgumentError(
                f"option 'consumer.group.lease-time' must be positive, got {lease_ms} ms"
            )
        if file_slots <= 0:
            raise InvalidArgumentError(
                f"option 'consumer.group.file-slots' must be positive, got {file_slots}"
            )
        self._config = config
        self._store = GroupStore(state.storage, group)
        existing = self._store.latest()
        position = (
            StreamPosition(existing.start_snapshot, existing.start_full) if existing else None
        )
        self._reader = StreamReader(
            state,
            config,
            columns=columns,
            filter=filter,
            position=position,
            kept_by=f"consumer group '{group}'",
        )
        self.view = self._reader.view
        self.columns = self._reader.columns
        bucket = self.view.options.bucket

        def template() -> GroupTemplate:
            """The group this member creates (when there is none): its start mode, now."""
            start = self._reader.start_mode_position()
            return GroupTemplate(
                units=bucket if bucket > 0 else file_slots,
                by_file=bucket <= 0,
                start_snapshot=start.next_snapshot or 1,
                start_full=start.full or start.next_snapshot is None,
            )

        self._membership = Membership(self._store, member, lease_ms=lease_ms, template=template)
        self._held: dict[int, _Held] = {}
        self._draining: dict[int, _Held] = {}
        #: Units lost with uncommitted progress and claimed again since: the next ``commit``
        #: reports them fenced (what was read of them before is void) and commits nothing of
        #: them, so their rows since the last commit are delivered again.
        self._voided: set[int] = set()
        self._resync = False
        self._closed = False
        self._finished_when_closed = False
        self._synced = 0
        self._membership.join()
        self._sync()

    # ---- the group ---------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self._store.group

    @property
    def member(self) -> str:
        return self._membership.member

    @property
    def generation(self) -> int:
        """The number of the group generation this member follows."""
        return self._current().generation

    @property
    def members(self) -> dict[str, tuple[int, ...]]:
        """Every member of that generation and the buckets (file slots) it holds."""
        return {name: m.units for name, m in self._current().members.items()}

    @property
    def assignment(self) -> frozenset[int]:
        """The buckets (file slots of a ``bucket = -1`` table) this member reads now."""
        return frozenset(self._held)

    @property
    def positions(self) -> dict[int, StreamPosition]:
        """By bucket: the position after the last unit handed out (what ``commit`` saves),
        including buckets just handed over whose progress was not committed yet."""
        return {u: h.position for u, h in sorted([*self._draining.items(), *self._held.items()])}

    @property
    def committed(self) -> dict[int, StreamPosition]:
        """By bucket: the position this member last committed (or took the bucket over at)."""
        return {u: h.committed for u, h in sorted([*self._draining.items(), *self._held.items()])}

    @property
    def finished(self) -> bool:
        """True once every bucket this member holds ended at ``bounded_watermark``; after
        ``close`` it stays what it was when the member left."""
        if self._closed:
            return self._finished_when_closed
        if self._config.bounded_watermark is None or not self._held:
            return False
        return all(h.ended for h in self._held.values())

    def _current(self) -> GroupGeneration:
        current = self._membership.generation
        assert current is not None
        return current

    def heartbeat(self) -> None:
        """Renew the lease and follow rebalances without reading: call it while processing a
        unit takes longer than a third of the lease (``read`` and iteration do it
        themselves)."""
        self._check_open()
        self._follow()

    def _follow(self) -> None:
        changed = self._membership.tick()
        if self._membership.take_recreated():
            self._void_all()
            changed = True
        if changed or self._resync:
            self._resync = False
            self._sync()

    def _void_all(self) -> None:
        """The group was removed (and perhaps created again): every bucket this member held
        is dropped, and those it read since its last commit are void (the next ``commit``
        reports them fenced: their rows will be delivered again)."""
        for unit, held in [*self._draining.items(), *self._held.items()]:
            if held.position != held.committed:
                self._voided.add(unit)
        self._held.clear()
        self._draining.clear()

    def _sync(self) -> None:
        """Drop the units the generation gave to others (their uncommitted progress stays for
        one more ``commit`` attempt), and claim the ones it gave to this member."""
        generation = self._current()
        mine = self._membership.units()
        kept = mine - self._lost_meanwhile(generation)
        for unit in [u for u in self._held if u not in kept]:
            held = self._held.pop(unit)
            if held.position != held.committed:
                self._draining[unit] = held
        self._synced = generation.generation
        wanted = sorted(mine - self._held.keys())
        if not wanted:
            return
        claims = self._store.claim_all(
            wanted,
            generation=generation.generation,
            member=self.member,
            session=self._membership.session,
            start=(generation.start_snapshot, generation.start_full),
        )
        failure: StorageError | None = None
        for unit, outcome in claims.items():
            if isinstance(outcome, UnitProgress):
                if self._draining.pop(unit, None) is not None:
                    self._voided.add(unit)  # taken again: its old progress is void
                position = _position_of(outcome)
                self._held[unit] = _Held(
                    position=position,
                    committed=position,
                    seq=outcome.seq,
                    claim_seq=outcome.seq,
                    generation=generation.generation,
                )
            else:
                self._resync = True  # behind (a newer generation holds it) or failed: retry
                if isinstance(outcome, StorageError):
                    failure = outcome
        if failure is not None:
            raise failure

    def _lost_meanwhile(self, generation: GroupGeneration) -> set[int]:
        """Units held since the last sync that a generation in between (which this member
        did not see) gave to someone else: claimed by them, so to be claimed again. All of
        them when those generations were pruned already."""
        lost: set[int] = set()
        if not self._held:
            return lost
        session = self._membership.session
        for number in range(self._synced + 1, generation.generation):
            between = self._store.generation(number)
            if between is None:
                return set(self._held)
            entry = between.members.get(self.member)
            still = set(entry.units) if entry is not None and entry.session == session else set()
            lost |= set(self._held) - still
        return lost

    # ---- reading -------------------------------------------------------------------------------

    def poll(self) -> StreamUnit | None:
        """The next unit with rows of this member's buckets, advancing past it; None if there
        is none yet (or the bounded stream ended). Renews the lease and follows rebalances
        first. Within a bucket units come in write order; buckets that are behind (taken over
        from another member) catch up unit by unit."""
        self._check_open()
        self._follow()
        self._membership.polled_ms = wall_ms()
        while True:
            active = self._next_active()
            if active is None:
                return None
            position, units = active
            selection = UnitSelection(
                frozenset(units), by_file=self._current().by_file, slots=self._current().units
            )
            try:
                unit = self._reader.next_unit(position, select=selection)
            except (ObjectNotFoundError, SnapshotNotFoundError):
                # Expired under it: only if someone else took these buckets over meanwhile
                # (this member was paused past its lease) and moved the group's floor on, or
                # the group was removed (then it starts again from its start mode)
                if self._drop_claimed(units):
                    continue
                if not self._membership.group_gone():
                    raise
                self._membership.forget_group()
                self._follow()
                continue
            if unit is None:
                return None
            if unit is END_OF_STREAM:
                for u in units:
                    self._held[u].ended = True
                continue
            assert isinstance(unit, StreamUnit)
            for u in units:
                self._held[u].position = unit.next_position
            if unit.splits:
                return dataclasses.replace(unit, group_units=tuple(units))

    def _drop_claimed(self, units: Sequence[int]) -> bool:
        """Stop reading those of ``units`` another member claimed after this one's newest
        record (their progress will be refused); True if there was any."""
        claimed = []
        for unit in units:
            tail = self._store.tail(unit)
            held = self._held[unit]
            if tail is not None and tail.seq > held.seq:
                claimed.append(unit)
        for unit in claimed:
            held = self._held.pop(unit)
            if held.position != held.committed:
                self._draining[unit] = held  # its commit is refused: the caller learns of it
            self._resync = True  # claim them again if the generation still says they are ours
        return bool(claimed)

    def _next_active(self) -> tuple[StreamPosition, list[int]] | None:
        """The earliest position among the held buckets and the buckets at it (a full read
        before a delta of the same snapshot)."""
        live = [(u, h.position) for u, h in self._held.items() if not h.ended]
        if not live:
            return None
        position = min((p for _, p in live), key=StreamPosition.stream_order)
        return position, sorted(u for u, p in live if p == position)

    def read(self, unit: StreamUnit) -> Generator[pa.RecordBatch, None, None]:
        """The rows of a unit, in order; the lease is renewed between batches. A failed read
        moves the unit's buckets back to it, as ``StreamReader.read`` does. Raises
        ConsumerFencedError when the unit's files are gone because its buckets were taken over
        meanwhile (this member stalled past its lease, and the new holder's progress let
        expiration delete them): the rows it was given of them will be delivered again to
        their new holder, and its own progress for them is discarded."""
        if not isinstance(unit, StreamUnit):
            raise InvalidArgumentError(f"unit: expected a StreamUnit from poll(), got {unit!r}")
        return calling_on_failure(self._batches_of(unit), lambda: self._back_before(unit))

    def _back_before(self, unit: StreamUnit) -> None:
        """Move the unit's buckets back to it (its read failed), unless already before it."""
        start = StreamPosition(unit.snapshot_id, unit.full)
        for u in unit.group_units:
            held = self._held.get(u) or self._draining.get(u)
            if held is not None and held.position.stream_order() > start.stream_order():
                held.position = start

    def _batches_of(self, unit: StreamUnit) -> Generator[pa.RecordBatch, None, None]:
        try:
            for batch in self._reader.read(unit):
                self._membership.keep_alive()
                yield batch
        except (ObjectNotFoundError, SnapshotNotFoundError) as exc:
            units = unit.group_units
            self._drop_claimed([u for u in units if u in self._held])
            taken = sorted(u for u in units if u not in self._held)
            if not taken:
                raise
            for u in taken:
                self._draining.pop(u, None)  # its commit would be refused: told here instead
            raise self._fenced(taken, committed=[]) from exc

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        """Record batches of this member's buckets, blocking while there is nothing new; ends
        when a bounded stream ends. A bucket's position moves past a unit when the unit's last
        batch is taken (a ``commit()`` after it saves the unit), so ``commit()`` mid-unit
        re-delivers that unit."""
        return self.batches()

    def batches(self, *, timeout: float | None = None) -> Iterator[pa.RecordBatch]:
        """Like iteration, but stops once no new unit arrived for ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            unit = self.poll()
            if unit is None:
                if self.finished or (deadline is not None and time.monotonic() >= deadline):
                    return
                time.sleep(self._config.poll_interval_s)
                continue
            # Until the unit has been taken whole, its buckets stay where they were.
            units = unit.group_units
            earlier = {u: StreamPosition(unit.snapshot_id, unit.full) for u in units}
            later = dict.fromkeys(units, unit.next_position)
            self._move(units, to=earlier, expected=later)
            # Each batch is handed out once the next is known: the last one with the buckets
            # already past the unit, so a ``commit()`` right after it saves the unit.
            held: pa.RecordBatch | None = None
            for batch in self.read(unit):
                if held is not None:
                    yield held
                held = batch
            self._move(units, to=later, expected=earlier)
            if held is not None:
                yield held
            if timeout is not None:
                deadline = time.monotonic() + timeout

    def _move(
        self,
        units: Sequence[int],
        *,
        to: Mapping[int, StreamPosition],
        expected: Mapping[int, StreamPosition],
    ) -> None:
        """Set the positions of ``units`` to ``to`` where they still are at ``expected`` (a
        bucket handed over and claimed again meanwhile continues from its claim)."""
        for u in units:
            held = self._held.get(u) or self._draining.get(u)
            if held is not None and held.position == expected[u]:
                held.position = to[u]

    # ---- progress ------------------------------------------------------------------------------

    def commit(self) -> None:
        """Commit the position of every bucket this member read since its last commit, each
        as the next record of that bucket's chain. Raises ConsumerFencedError naming the
        buckets whose progress was refused (another member claimed them since this member's
        last commit, even if it holds them again now; their rows since that commit will be
        delivered again) after committing the others."""
        self._check_open()
        self._membership.keep_alive()
        if self._membership.group_gone():
            # removed (deleted, expired) or created again since this member last looked: its
            # progress belongs to a group that is no more; the next poll joins the new one
            self._void_all()
            self._membership.forget_group()
            gone = sorted(self._voided)
            self._voided.clear()
            if gone:
                raise self._fenced(gone, committed=[], why=_GROUP_GONE)
            return
        voided = sorted(self._voided)
        self._voided.clear()
        for u in voided:
            self._draining.pop(u, None)
            if u in self._held:  # read again from where it was claimed
                self._held[u].position = self._held[u].committed
        pending = [
            (u, h)
            for u, h in [*self._draining.items(), *self._held.items()]
            if h.position != h.committed
        ]
        now = wall_ms()
        records = [self._record(u, h, now) for u, h in pending]
        outcomes = self._store.create_all(records)
        # A name taken by this member's own earlier commit (which failed here and reached the
        # store later) is still this member's chain: that record is adopted and the position
        # goes in the next one. Anyone else's record there means the unit was claimed.
        late = [
            i
            for i, outcome in enumerate(outcomes)
            if outcome is False and self._own_record(records[i])
        ]
        for i in late:
            unit, held = pending[i]
            self._advance(unit, held, records[i].seq)
            records[i] = self._record(unit, held, now)
        for i, outcome in zip(
            late, self._store.create_all([records[i] for i in late]), strict=True
        ):
            outcomes[i] = outcome
        committed: list[int] = []
        fenced: list[int] = []
        failure: StorageError | None = None
        for (u, held), record, outcome in zip(pending, records, outcomes, strict=True):
            if outcome is True:
                self._advance(u, held, record.seq)
                held.committed = _position_of(record)
                committed.append(u)
            elif outcome is False:
                fenced.append(u)
                if self._held.get(u) is held:
                    del self._held[u]
                    self._resync = True  # if the generation still says it is ours: claim again
            else:
                failure = outcome
        self._draining.clear()
        if committed:
            self._membership.committed_ms = now
        if fenced or voided:
            raise self._fenced([*fenced, *voided], committed=committed)
        if failure is not None:
            raise failure

    def _record(self, unit: int, held: _Held, now: int) -> UnitProgress:
        """The next progress record of ``unit``: its position now."""
        return UnitProgress(
            unit=unit,
            seq=held.seq + 1,
            generation=held.generation,
            member=self.member,
            session=self._membership.session,
            next_snapshot=held.position.next_snapshot or 1,
            full=held.position.full,
            time_ms=now,
        )

    def _own_record(self, record: UnitProgress) -> bool:
        """Whether the record stored under ``record``'s name is this member's own (this
        session's, of the same generation): an earlier commit of it that landed late."""
        stored = self._store.record(record.unit, record.seq)
        return (
            stored is not None
            and not stored.claim
            and (stored.member, stored.session, stored.generation)
            == (record.member, record.session, record.generation)
        )

    def _advance(self, unit: int, held: _Held, seq: int) -> None:
        """Record ``seq`` of ``unit``'s chain is this member's newest: the one before it goes
        (unless it is the claim, which stays)."""
        if held.seq != held.claim_seq:
            self._store.remove_record(unit, held.seq)
        held.seq = seq

    def _fenced(
        self, fenced: Sequence[int], *, committed: Sequence[int], why: str = _CLAIMED
    ) -> ConsumerFencedError:
        return ConsumerFencedError(
            f"consumer group '{self.group}': member '{self.member}' can no longer commit "
            f"bucket{'s' if len(fenced) > 1 else ''} {', '.join(map(str, sorted(fenced)))}: "
            f"{why}; their rows since the last commit will be delivered again",
            group=self.group,
            member=self.member,
            fenced=tuple(sorted(fenced)),
            committed=tuple(sorted(committed)),
        )

    # ---- lifecycle -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgumentError(
                f"consumer group member '{self.member}' has left group '{self.group}' (closed)"
            )

    def close(self) -> None:
        """Leave the group (without committing): the others take the buckets over at once."""
        if self._closed:
            return
        self._finished_when_closed = self.finished
        self._closed = True
        self._held.clear()
        self._draining.clear()
        self._voided.clear()
        self._membership.leave()

    def __enter__(self) -> GroupReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"generation {self._current().generation}"
        return (
            f"GroupReader(group={self.group!r}, member={self.member!r}, {state}, "
            f"buckets={sorted(self._held)})"
        )


def default_member_name() -> str:
    """A fresh member name: host, process id and a random suffix (a restarted process joins
    as a new member; give a stable ``member=`` to take over its old buckets at once)."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip(".-_") or "host"
    return f"{host[:60]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def open_member(
    state: TableState,
    config: StreamConfig,
    read_options: Mapping[str, object] | None,
    *,
    group: str,
    member: str | None,
    columns: Sequence[str] | None,
    filter: object,
) -> GroupReader:
    """A member of ``group`` with the lease time and file slots of the read options, else the
    table's options."""
    options = state.options.with_overrides(read_options)
    return GroupReader(
        state,
        dataclasses.replace(config, consumer_id=None),
        group=layout.validate_consumer_id(group, "consumer group name"),
        member=layout.validate_consumer_id(member or default_member_name(), "member name"),
        lease_ms=options.get(opt.GROUP_LEASE_TIME),
        file_slots=options.get(opt.GROUP_FILE_SLOTS),
        columns=columns,
        filter=filter,
    )


@dataclass(frozen=True)
class ConsumerGroup:
    """A consumer group as its newest generation describes it."""

    name: str
    generation: int
    #: Each member and the buckets (file slots of a ``bucket = -1`` table) it holds.
    members: dict[str, tuple[int, ...]]
    #: Buckets of the table, or file slots (``by_file``).
    units: int
    by_file: bool
    #: Why the newest generation was published ("join m1", "expired m2", ...).
    reason: str


def describe_groups(state: TableState) -> dict[str, ConsumerGroup]:
    """Every consumer group of the table, by name."""
    found = {}
    for name in list_groups(state.storage):
        latest = GroupStore(state.storage, name).latest()
        if latest is None:
            continue
        found[name] = ConsumerGroup(
            name=name,
            generation=latest.generation,
            members={member: m.units for member, m in latest.members.items()},
            units=latest.units,
            by_file=latest.by_file,
            reason=latest.reason,
        )
    return found
