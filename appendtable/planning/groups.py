"""Pure rules of consumer groups: which member reads which unit, which file is in which slot,
and when a lease has run out.

A group shares *units*: the buckets of a bucketed table, or the file slots of a table with
``bucket = -1`` (a file's slot is a hash of its name, so every member agrees without asking).

The assignment is

* **a partition**: every unit has exactly one owner (when there is a member at all);
* **balanced**: member unit counts differ by at most one;
* **sticky**: among balanced assignments, members keep as many of their previous units as
  possible (the members that held most get the larger shares), so a rebalance moves only
  the units it must;
* **deterministic**: the same inputs give the same result, whoever computes it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["UnitSelection", "assign_units", "lease_expired", "slot_of"]


def assign_units(
    units: int, previous: Mapping[str, Iterable[int]], members: Sequence[str]
) -> dict[str, tuple[int, ...]]:
    """Units ``0..units-1`` shared among ``members`` (see the module docstring). ``previous``
    is the last assignment (members no longer listed are gone; units outside the range, or
    claimed twice, are ignored: the first member by name keeps a unit claimed twice)."""
    names = sorted(set(members))
    if not names:
        return {}
    taken: set[int] = set()
    candidates: dict[str, list[int]] = {}
    for name in names:
        mine = sorted({u for u in previous.get(name, ()) if 0 <= u < units} - taken)
        taken.update(mine)
        candidates[name] = mine
    share, extra = divmod(units, len(names))
    # The larger shares go to the members that held most: that keeps the most units in place.
    by_holding = sorted(names, key=lambda n: (-len(candidates[n]), n))
    target = {name: share + (1 if rank < extra else 0) for rank, name in enumerate(by_holding)}
    kept = {name: candidates[name][: target[name]] for name in names}
    used = {u for held in kept.values() for u in held}
    free = iter(u for u in range(units) if u not in used)
    result: dict[str, tuple[int, ...]] = {}
    for name in names:
        missing = target[name] - len(kept[name])
        result[name] = tuple(sorted([*kept[name], *(next(free) for _ in range(missing))]))
    return result


def slot_of(file_name: str, slots: int) -> int:
    """The slot of a data file of a ``bucket = -1`` table, from its name alone (CRC-32 of the
    base name: stable across processes, machines and Python versions)."""
    base = file_name.rsplit("/", 1)[-1]
    return zlib.crc32(base.encode()) % slots


def lease_expired(renewed_ms: int, lease_ms: int, now_ms: int) -> bool:
    """Whether a lease renewed at ``renewed_ms`` (the holder's clock) has run out at ``now_ms``
    (the observer's clock). Clock skew between the two shifts the answer by the skew; the
    group stays correct whatever the answer (see docs/queue.md), only its timing changes."""
    return now_ms - renewed_ms > lease_ms


@dataclass(frozen=True)
class UnitSelection:
    """Which units a stream plans: buckets of a bucketed table, or file slots (``by_file``,
    with ``slots`` slots) of a ``bucket = -1`` table."""

    units: frozenset[int]
    by_file: bool = False
    slots: int = 0

    def buckets(self) -> set[int] | None:
        """The buckets to plan (None: every bucket, then filter by :meth:`selects`)."""
        return None if self.by_file else set(self.units)

    def selects(self, bucket: int, file_name: str) -> bool:
        if self.by_file:
            return slot_of(file_name, self.slots) in self.units
        return bucket in self.units
