"""The assignment planner of consumer groups (``planning.groups.assign_units``): a partition of
the units, balanced, as sticky as a balanced assignment can be, deterministic.

Stickiness is checked against an independent oracle: the best number of units any balanced
assignment can leave in place, found by trying every choice of which members get the larger
share (small groups only)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import hypothesis.strategies as st
from hypothesis import given, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from appendtable.planning.groups import assign_units, lease_expired, slot_of

NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=3)


def _check_partition(units: int, result: Mapping[str, Sequence[int]], members: set[str]) -> None:
    assert set(result) == members
    owned = [u for held in result.values() for u in held]
    assert len(owned) == len(set(owned)), "a unit has two owners"
    if members:
        assert sorted(owned) == list(range(units)), "a unit has no owner"
        counts = [len(held) for held in result.values()]
        assert max(counts) - min(counts) <= 1, f"unbalanced: {counts}"
    for held in result.values():
        assert list(held) == sorted(held)


def _best_kept(units: int, previous: Mapping[str, Sequence[int]], members: list[str]) -> int:
    """The most units a balanced assignment of ``members`` can leave where they were
    (previous ownership deduplicated as the planner documents: first name wins)."""
    taken: set[int] = set()
    candidates = {}
    for name in sorted(members):
        mine = {u for u in previous.get(name, ()) if 0 <= u < units} - taken
        taken |= mine
        candidates[name] = len(mine)
    share, extra = divmod(units, len(members))
    best = 0
    for larger in itertools.combinations(sorted(members), extra):
        kept = sum(min(candidates[n], share + (n in larger)) for n in members)
        best = max(best, kept)
    return best


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, dict[str, list[int]], list[str]]:
    units = draw(st.integers(0, 40))
    old_members = draw(st.lists(NAMES, max_size=7, unique=True))
    previous: dict[str, list[int]] = {name: [] for name in old_members}
    if old_members:
        for unit in range(units):
            owner = draw(st.sampled_from([*old_members, None]))
            if owner is not None:
                previous[owner].append(unit)
        # sometimes damaged input: a unit claimed twice, or out of range
        if draw(st.booleans()):
            previous[old_members[0]].extend(draw(st.lists(st.integers(-3, units + 3), max_size=4)))
    kept = draw(st.lists(st.sampled_from(old_members), unique=True)) if old_members else []
    new = draw(st.lists(NAMES, max_size=5, unique=True))
    members = sorted(set(kept) | set(new))
    return units, previous, members


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_a_partition_balanced_and_as_sticky_as_possible(
    scenario: tuple[int, dict[str, list[int]], list[str]],
) -> None:
    units, previous, members = scenario
    result = assign_units(units, previous, members)
    _check_partition(units, result, set(members))
    if not members:
        assert result == {}
        return
    taken: set[int] = set()
    kept = 0
    for name in sorted(members):
        mine = {u for u in previous.get(name, ()) if 0 <= u < units} - taken
        taken |= mine
        kept += len(mine & set(result[name]))
    assert kept == _best_kept(units, previous, members)
    # deterministic, and independent of the order members are listed in
    assert assign_units(units, previous, list(reversed(members))) == result


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.lists(NAMES, min_size=1, max_size=8, unique=True))
def test_an_unchanged_group_keeps_its_assignment(units: int, members: list[str]) -> None:
    first = assign_units(units, {}, members)
    assert assign_units(units, first, members) == first


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.lists(NAMES, min_size=2, max_size=8, unique=True), st.data())
def test_a_member_leaving_moves_only_its_units(
    units: int, members: list[str], data: st.DataObject
) -> None:
    before = assign_units(units, {}, members)
    gone = data.draw(st.sampled_from(members))
    after = assign_units(units, before, [m for m in members if m != gone])
    moved = {u for m, held in after.items() for u in held if u not in before[m]}
    # from a balanced group, the survivors' shares only grow: only the leaver's units move
    assert moved == set(before[gone])
    for name, held in after.items():
        assert set(before[name]) <= set(held)


def test_lease_expiry_and_slots() -> None:
    assert not lease_expired(1000, 500, 1500)
    assert lease_expired(1000, 500, 1501)
    names = [f"data-{i:04d}-0.parquet" for i in range(2000)]
    slots = [slot_of(f"p=1/bucket-0/{n}", 16) for n in names]
    assert slots == [slot_of(n, 16) for n in names]  # by base name only
    counts = [slots.count(s) for s in range(16)]
    assert min(counts) > 60  # spread over every slot (2000 / 16 = 125 on average)


class GroupChurn(RuleBasedStateMachine):
    """Members join, leave and die in any order; each change is planned from the previous
    generation's assignment, as the members do."""

    def __init__(self) -> None:
        super().__init__()
        self.units = 12
        self.assignment: dict[str, tuple[int, ...]] = {}
        self.generations = 0

    def _replan(self, members: list[str]) -> None:
        previous = self.assignment
        result = assign_units(self.units, previous, members)
        # sticky: a survivor gives up units only when it holds more than the larger share
        share = self.units // max(1, len(members))
        for name in members:
            if name in previous:
                kept = set(previous[name]) & set(result[name])
                assert len(kept) >= min(len(previous[name]), share)
        self.assignment = result
        self.generations += 1

    @rule(name=NAMES)
    def join(self, name: str) -> None:
        self._replan(sorted({*self.assignment, name}))

    @precondition(lambda self: bool(self.assignment))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        gone = data.draw(st.sampled_from(sorted(self.assignment)))
        self._replan([m for m in self.assignment if m != gone])

    @precondition(lambda self: len(self.assignment) > 1)
    @rule(data=st.data())
    def two_die_at_once(self, data: st.DataObject) -> None:
        gone = data.draw(
            st.lists(st.sampled_from(sorted(self.assignment)), min_size=2, max_size=2, unique=True)
        )
        self._replan([m for m in self.assignment if m not in gone])

    @rule()
    def nothing_changes(self) -> None:
        before = dict(self.assignment)
        self._replan(list(self.assignment))
        assert self.assignment == before

    @invariant()
    def one_owner_per_unit_and_balanced(self) -> None:
        _check_partition(self.units, self.assignment, set(self.assignment))


GroupChurn.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_group_churn = GroupChurn.TestCase
