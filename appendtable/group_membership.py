"""Membership of one process in a consumer group: its lease, the generation it follows, and the
changes it makes (joining, leaving, removing members whose lease ran out).

A member renews its lease (a small file only it writes) every third of the lease time while it
is used (polled, read, committed, or ``heartbeat``). Every poll it checks whether the next
generation exists (one existence check) and, when the lease of another member may have run out
(as that member last said), reads that member's lease again: a member whose lease has run out
is removed from the group by the next generation, which whoever notices first publishes.
Generations are created put-if-absent: of two members changing the group at once one wins and
the other re-reads and decides again. Nothing here needs the clocks of different machines to
agree for the group to stay correct: fencing of progress records does that (see
``appendtable.group``); the clocks only decide *when* a rebalance happens.
"""

from __future__ import annotations

import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from appendtable.commit.groups import GroupStore
from appendtable.errors import ConsumerFencedError, StorageError
from appendtable.metadata.groups import GroupGeneration, GroupMember, MemberLease
from appendtable.planning.groups import assign_units, lease_expired

__all__ = ["GroupTemplate", "Membership"]

_MAX_CHANGE_ATTEMPTS = 64


@dataclass(frozen=True)
class GroupTemplate:
    """What a new group is created with: its units and where they start."""

    units: int
    by_file: bool
    start_snapshot: int
    start_full: bool


def _wall_ms() -> int:
    return int(time.time() * 1000)


class Membership:
    """One member's view of its group. Not thread-safe (one per reader)."""

    def __init__(
        self,
        store: GroupStore,
        member: str,
        *,
        lease_ms: int,
        template: Callable[[], GroupTemplate],
    ) -> None:
        self.store = store
        self.member = member
        self.session = uuid.uuid4().hex
        self.lease_ms = lease_ms
        self._template = template
        self._renew_every_s = lease_ms / 3000
        self.generation: GroupGeneration | None = None
        self._renewed_at = float("-inf")  # monotonic
        self._relisted_at = float("-inf")
        #: When (wall ms) to look at another member's lease again: when it would run out.
        self._due: dict[str, int] = {}
        self.polled_ms = 0
        self.committed_ms = 0
        self._host = socket.gethostname()
        self._left = False
        #: Set by ``tick`` when the group followed was removed or created again since: what
        #: this member held of it is void (``take_recreated`` reads and clears it).
        self._recreated = False

    # ---- the lease ---------------------------------------------------------------------------

    def keep_alive(self) -> None:
        """Renew the lease if a third of it has passed since the last renewal (a clock read
        otherwise). After a pause past the whole lease, only if no other process took the
        member's name meanwhile (one look at the latest generation): renewing a name another
        process holds would keep it alive for one more lease after that process stopped."""
        elapsed = time.monotonic() - self._renewed_at
        if elapsed < self._renew_every_s:
            return
        if elapsed * 1000 >= self.lease_ms and self._name_taken():
            return  # the next tick raises ConsumerFencedError
        self.renew()

    def _name_taken(self) -> bool:
        latest = self.store.latest()
        entry = latest.members.get(self.member) if latest is not None else None
        return entry is not None and entry.session != self.session

    def renew(self) -> None:
        if self._left:
            return
        self._renewed_at = time.monotonic()
        self.store.renew(
            self.member,
            MemberLease(
                session=self.session,
                generation=self.generation.generation if self.generation else 0,
                renewed_ms=_wall_ms(),
                lease_ms=self.lease_ms,
                polled_ms=self.polled_ms,
                committed_ms=self.committed_ms,
                host=self._host,
                pid=os.getpid(),
            ),
        )

    # ---- following the group -------------------------------------------------------------------

    def join(self) -> GroupGeneration:
        """Become a member (taking over the name from any other process that held it)."""
        self._left = False
        self.renew()
        return self._change("join", include_me=True, take_name=True)

    def leave(self) -> None:
        """Leave the group: the others take the units over at once. Idempotent."""
        if self._left:
            return
        try:
            current = self.generation
            mine = current is not None and self._holds_name(current)
            if mine:
                self._change("leave", include_me=False)
        finally:
            self._left = True
            self.store.drop_lease(self.member)

    def tick(self) -> bool:
        """Follow a newer generation, renew the lease when due, rejoin after being removed, and
        remove members whose lease ran out. True if the generation changed. Raises
        ConsumerFencedError when another process took over this member's name, without
        renewing the lease: that process holds it now, and a renewal here would keep the name
        alive for one more lease after that process stopped."""
        before = self.generation
        assert before is not None
        # One existence check per poll: generations are numbered without gaps, so while the
        # next number is free nothing changed. A listing every third of the lease also finds a
        # group that was deleted and created again (numbered from 1 again).
        relist = time.monotonic() - self._relisted_at >= self._renew_every_s
        if relist or self.store.has_generation(before.generation + 1):
            self._relisted_at = time.monotonic()
            latest = self.store.latest()
            if latest is None or _replaced(before, latest):
                # removed (deleted, expired), or created again by another member: start again
                self.generation = latest
                self._recreated = True
            elif latest.generation > before.generation:
                self.generation = latest
        current = self.generation
        if current is None or self.member not in current.members:
            self.renew()  # before the generation naming it appears, lest it look expired
            self._change("rejoin", include_me=True)
        elif not self._holds_name(current):
            raise ConsumerFencedError(
                f"consumer group '{self.store.group}': member '{self.member}' was taken over "
                f"by another process (session {current.members[self.member].session[:12]}); "
                "this reader stops",
                group=self.store.group,
                member=self.member,
            )
        else:
            self.keep_alive()
            if self._expired_members(current, only_due=True):
                self._change("expired", include_me=True)
        assert self.generation is not None
        return self.generation.generation != before.generation

    def group_gone(self) -> bool:
        """Whether the group this member follows was removed or created again (one read of its
        generation; a listing when that generation was pruned meanwhile). Progress written
        into a group created again would start a chain of the old one in it."""
        current = self.generation
        if current is None:
            return True
        found = self.store.generation(current.generation)
        if found is not None:
            return found != current
        latest = self.store.latest()
        return latest is None or _replaced(current, latest)

    def forget_group(self) -> None:
        """Look for the group again at the next ``tick`` (it was found removed or replaced)."""
        self._relisted_at = float("-inf")

    def take_recreated(self) -> bool:
        """Whether the group was removed or created again since the last call."""
        recreated, self._recreated = self._recreated, False
        return recreated

    def _holds_name(self, generation: GroupGeneration) -> bool:
        entry = generation.members.get(self.member)
        return entry is not None and entry.session == self.session

    def units(self) -> frozenset[int]:
        current = self.generation
        if current is None or not self._holds_name(current):
            return frozenset()
        return frozenset(current.members[self.member].units)

    # ---- changing the group -----------------------------------------------------------------

    def _expired_members(self, generation: GroupGeneration, *, only_due: bool) -> set[str]:
        """Other members whose lease has run out now. ``only_due``: look only at those whose
        lease, as last seen, would have run out by now (no read otherwise)."""
        now = _wall_ms()
        expired = set()
        for name in generation.members:
            if name == self.member:
                continue
            if only_due and now < self._due.get(name, 0):
                continue
            lease = self.store.lease(name)
            if lease is None or lease_expired(lease.renewed_ms, lease.lease_ms, now):
                expired.add(name)
                self._due.pop(name, None)
            else:
                self._due[name] = lease.renewed_ms + lease.lease_ms + 1
        return expired

    def _change(self, reason: str, *, include_me: bool, take_name: bool = False) -> GroupGeneration:
        """Publish the next generation if the members should change; adopt the latest."""
        for attempt in range(_MAX_CHANGE_ATTEMPTS):
            latest = self.store.latest()
            current = {n: m.session for n, m in latest.members.items()} if latest else {}
            wanted = {n: s for n, s in current.items() if n != self.member}
            gone = self._expired_members(latest, only_due=False) if latest else set()
            wanted = {n: s for n, s in wanted.items() if n not in gone}
            if include_me:
                held_by_other = current.get(self.member, self.session) != self.session
                if held_by_other and not take_name and latest is not None:
                    self.generation = latest  # another process took the name: tick() says so
                    return latest
                wanted[self.member] = self.session
            if latest is not None and wanted == current:
                self.generation = latest
                return latest
            proposal = self._next(latest, wanted, self._reason(reason, gone))
            if self.store.publish(proposal):
                self.generation = proposal
                self.renew()
                return proposal
            time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 20)))
        raise StorageError(
            f"consumer group '{self.store.group}': could not publish a new generation after "
            f"{_MAX_CHANGE_ATTEMPTS} attempts (too many members changing it at once)",
            path=self.store.storage.uri(""),
            operation="publish",
        )

    def _reason(self, reason: str, gone: set[str]) -> str:
        text = f"{reason} {self.member}"
        return f"{text}; expired {', '.join(sorted(gone))}" if gone else text

    def _next(
        self, latest: GroupGeneration | None, members: dict[str, str], reason: str
    ) -> GroupGeneration:
        if latest is not None:
            template = GroupTemplate(
                latest.units, latest.by_file, latest.start_snapshot, latest.start_full
            )
        else:  # creating the group: where its creator's start mode starts now
            template = self._template()
        previous = {n: m.units for n, m in latest.members.items()} if latest else {}
        assignment = assign_units(template.units, previous, list(members))
        return GroupGeneration(
            incarnation=latest.incarnation if latest else uuid.uuid4().hex,
            generation=(latest.generation if latest else 0) + 1,
            units=template.units,
            by_file=template.by_file,
            start_snapshot=template.start_snapshot,
            start_full=template.start_full,
            members={
                name: GroupMember(session=session, units=assignment[name])
                for name, session in sorted(members.items())
            },
            time_ms=_wall_ms(),
            reason=reason,
            writer=self.session,
        )


def _replaced(before: GroupGeneration, latest: GroupGeneration) -> bool:
    """Whether ``latest`` belongs to another group of the same name than ``before`` (the group
    was removed and created again): another incarnation, or a number not after ``before``'s
    that is not ``before`` itself (groups of versions that recorded no incarnation)."""
    if latest.incarnation != before.incarnation:
        return True
    return latest.generation < before.generation or (
        latest.generation == before.generation and latest != before
    )
