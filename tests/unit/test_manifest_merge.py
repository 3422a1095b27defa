"""Size-tiered manifest merging: tiers, the choice of a merge, and a long commit simulation."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.errors import InvalidArgumentError
from appendtable.metadata.models import ManifestFileMeta
from appendtable.planning.manifest_merge import (
    TIER_BASE_BYTES,
    MergeChoice,
    choose_merge,
    tier_of,
)

BASE = TIER_BASE_BYTES
MiB = 1024**2


def meta(size: int, deleted: int = 0, name: str = "m") -> ManifestFileMeta:
    return ManifestFileMeta(name, size, 1, deleted, 0, 0, 0, (), (), ())


# ---- tiers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fan_out", [2, 3, 4, 5, 7, 10, 30, 100])
def test_tier_boundaries_are_exact_powers(fan_out: int) -> None:
    assert tier_of(0, fan_out) == 0
    assert tier_of(1, fan_out) == 0
    assert tier_of(BASE - 1, fan_out) == 0
    for tier in range(1, 10):
        low = BASE * fan_out ** (tier - 1)  # the smallest size of this tier
        assert tier_of(low, fan_out) == tier, (fan_out, tier)
        assert tier_of(low - 1, fan_out) == tier - 1, (fan_out, tier)
        assert tier_of(low * fan_out - 1, fan_out) == tier, (fan_out, tier)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**50), st.integers(0, 2**50), st.integers(2, 64))
def test_tier_is_monotonic_and_matches_its_definition(a: int, b: int, fan_out: int) -> None:
    low, high = sorted((a, b))
    assert tier_of(low, fan_out) <= tier_of(high, fan_out)
    tier = tier_of(a, fan_out)
    if tier == 0:
        assert a < BASE
    else:
        assert BASE * fan_out ** (tier - 1) <= a < BASE * fan_out**tier


def test_tier_needs_a_fan_out_of_two() -> None:
    for fan_out in (0, 1):
        with pytest.raises(InvalidArgumentError, match="fan_out"):
            tier_of(BASE * 10, fan_out)


# ---- choose_merge -------------------------------------------------------------------------------


def choose(
    manifests: list[ManifestFileMeta],
    *,
    target: int = 8 * MiB,
    count: int = 4,
    full: int = 16 * MiB,
) -> MergeChoice | None:
    return choose_merge(manifests, target_size=target, merge_min_count=count, full_threshold=full)


def test_no_merge_below_the_count() -> None:
    assert choose([]) is None
    assert choose([meta(100)] * 3) is None
    # three per tier in three tiers: still nothing to do
    assert choose([meta(100), meta(BASE), meta(BASE * 4)] * 3) is None


def test_merges_exactly_the_members_of_a_full_tier() -> None:
    manifests = [meta(BASE * 4), meta(100), meta(BASE), meta(200), meta(300), meta(50)]
    assert choose(manifests) == MergeChoice((1, 3, 4, 5), full=False)


def test_lowest_full_tier_first() -> None:
    tier2 = [meta(BASE * 4 + i) for i in range(5)]
    tier1 = [meta(BASE + i) for i in range(4)]
    manifests = tier2 + tier1
    assert choose(manifests) == MergeChoice(tuple(range(5, 9)), full=False)
    assert choose(tier2) == MergeChoice(tuple(range(5)), full=False)  # all of a tier, even > F


def test_never_merges_a_manifest_at_or_above_the_target() -> None:
    target = BASE * 4
    big = [meta(target), meta(target + 1), meta(target * 10)] * 3
    assert choose(big, target=target) is None
    mixed = [meta(target - 1)] * 2 + [meta(target)] * 5 + [meta(target - 2)] * 2
    choice = choose(mixed, target=target)
    assert choice == MergeChoice((0, 1, 7, 8), full=False)


def test_full_merge_when_manifests_with_deletes_reach_the_threshold() -> None:
    full = 1000
    manifests = [meta(600, deleted=1), meta(10 * MiB), meta(100), meta(399, deleted=3)]
    assert choose(manifests, full=full) is None  # 999 bytes of deletes
    manifests.append(meta(1, deleted=1))
    assert choose(manifests, full=full) == MergeChoice((0, 1, 2, 3, 4), full=True)
    assert choose([meta(full, deleted=1)], full=full) == MergeChoice((0,), full=True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4 * BASE * 9), st.integers(0, 2)), max_size=40),
    st.integers(2, 9),
    st.integers(BASE, 4 * BASE * 9),
    st.integers(1, 10 * BASE),
)
def test_choice_invariants(
    sizes: list[tuple[int, int]], count: int, target: int, full: int
) -> None:
    manifests = [meta(size, deleted) for size, deleted in sizes]
    choice = choose(manifests, target=target, count=count, full=full)
    with_deletes = sum(size for size, deleted in sizes if deleted)
    if with_deletes >= full:
        assert choice == MergeChoice(tuple(range(len(manifests))), full=True)
        return
    tiers: dict[int, list[int]] = {}
    for index, (size, _) in enumerate(sizes):
        if size < target:
            tiers.setdefault(tier_of(size, count), []).append(index)
    full_tiers = sorted(t for t, members in tiers.items() if len(members) >= count)
    if not full_tiers:
        assert choice is None
        return
    assert choice is not None
    assert not choice.full
    assert list(choice.indices) == tiers[full_tiers[0]]
    assert all(sizes[i][0] < target for i in choice.indices)
    assert list(choice.indices) == sorted(set(choice.indices))


# ---- a long history -----------------------------------------------------------------------------


@dataclass
class History:
    manifests: list[ManifestFileMeta] = field(default_factory=list)
    commits: int = 0
    added: int = 0
    rewritten: int = 0
    most_manifests: int = 0
    largest_merge: int = 0
    full_merges: int = 0
    rewritten_at: dict[int, int] = field(default_factory=dict)


def simulate(
    commits: int,
    *,
    count: int,
    target: int,
    full: int = 16 * MiB,
    delete_every: int = 0,
    seed: int = 0,
) -> History:
    """Each commit merges what ``choose_merge`` picks (merged size = sum of sizes; a full merge
    folds deletes away), then adds its own ~300-byte delta manifest, as the committer does."""
    rng = random.Random(seed)
    history = History()
    for commit in range(1, commits + 1):
        choice = choose_merge(
            history.manifests, target_size=target, merge_min_count=count, full_threshold=full
        )
        if choice is not None:
            chosen = set(choice.indices)
            merged = [history.manifests[i] for i in sorted(chosen)]
            size = sum(m.file_size for m in merged)
            assert choice.full or all(m.file_size < target for m in merged)
            if choice.full:
                history.full_merges += 1
            else:
                history.largest_merge = max(history.largest_merge, len(merged))
            history.rewritten += size
            deleted = 0 if choice.full else sum(m.num_deleted for m in merged)
            rest = [m for i, m in enumerate(history.manifests) if i not in chosen]
            history.manifests = [meta(size, deleted), *rest]
        size = rng.randint(250, 350)
        deletes = 1 if delete_every and commit % delete_every == 0 else 0
        history.manifests.append(meta(size, deletes))
        history.added += size
        history.commits = commit
        history.most_manifests = max(history.most_manifests, len(history.manifests))
        if commit in (1000, 2000, 5000):
            history.rewritten_at[commit] = history.rewritten
    return history


@pytest.mark.parametrize(
    ("count", "target"),
    [(30, 8 * MiB), (8, 1 * MiB), (4, 256 * 1024), (3, 64 * 1024)],
    ids=["default", "F8", "F4", "F3"],
)
def test_five_thousand_commits_stay_bounded(count: int, target: int) -> None:
    history = simulate(5000, count=count, target=target)
    assert sum(m.file_size for m in history.manifests) == history.added  # nothing lost
    tiers = tier_of(target - 1, count) + 1  # tiers that are ever merged
    full_size = sum(1 for m in history.manifests if m.file_size >= target)
    assert full_size <= history.added // target + 1
    # At most F - 1 waiting per tier after a merge, plus the one just added and a merge output.
    assert history.most_manifests <= count * tiers + full_size + 2
    assert len(history.manifests) <= count * tiers + full_size + 2
    # Without deletes a merge takes exactly one full tier: never more than F manifests.
    assert history.largest_merge == count
    assert history.full_merges == 0
    # Amortised cost: each byte is rewritten about once per tier it climbs (log), plus the
    # merges inside tier 0 of manifests much smaller than its bound (a constant).
    per_byte = history.rewritten / history.added
    snowball = TIER_BASE_BYTES / ((count - 1) * 250)
    assert per_byte <= tiers + snowball + 1
    assert per_byte <= 2 * math.log(history.commits, count) + snowball
    # ... so the bytes rewritten grow like n log n, not n^2: five times the history costs at
    # most about five times the rewriting (plus a log factor), not twenty-five.
    early, late = history.rewritten_at[1000], history.rewritten_at[5000]
    assert late <= 5 * early * 2


def test_default_settings_rewrite_little() -> None:
    history = simulate(5000, count=30, target=8 * MiB)
    assert history.most_manifests <= 90
    assert history.rewritten / history.added < 3
    assert history.largest_merge == 30


def test_commits_with_deletes_trigger_full_merges_and_stay_bounded() -> None:
    full = 64 * 1024
    history = simulate(5000, count=30, target=8 * MiB, full=full, delete_every=3)
    assert history.full_merges > 0
    # Between full merges the delete-holding bytes stay below the threshold.
    assert sum(m.file_size for m in history.manifests if m.num_deleted) < full
    assert len(history.manifests) <= 30 * 3 + 2
    assert history.largest_merge <= 30
    assert sum(m.file_size for m in history.manifests) == history.added
