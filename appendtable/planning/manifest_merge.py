"""Which manifests a commit should merge (pure).

Every commit adds one small delta manifest, so without merging a table after N commits has N
manifests and planning a scan reads N files. Merging all small manifests whenever enough pile up
(Paimon's minor compaction) rewrites the whole history each time, so commit latency grows. Here
manifests are merged in **size tiers**, like a size-tiered LSM:

* a manifest below ``target`` bytes belongs to tier ``t = 1 + floor(log_F(size / base))``
  (tier 0 below ``base``), with fan-out ``F = merge_min_count``;
* when one tier holds ``merge_min_count`` manifests, exactly those are merged (lowest tier first,
  one tier per commit), producing one manifest about ``F`` times larger, i.e. of the next tier.

Each entry is therefore rewritten about ``log_F(target / base)`` times in its life, a merge never
touches more than ``F`` manifests of one tier, and the number of manifests stays below
``F x tiers`` plus the full-size ones, whatever the history length.

Deletes (compaction, overwrite) leave DELETE entries that cancel ADDs in older manifests. When the
manifests holding deletes reach ``full_threshold`` bytes, all manifests are merged once, which
folds every ADD/DELETE pair away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from appendtable.errors import InvalidArgumentError
from appendtable.metadata.models import ManifestFileMeta

__all__ = ["MergeChoice", "choose_merge", "tier_of"]

#: Manifests below this size are tier 0.
TIER_BASE_BYTES = 16 * 1024


@dataclass(frozen=True)
class MergeChoice:
    """Indices (into the manifest list) to merge, and whether this is a full merge."""

    indices: tuple[int, ...]
    full: bool


def tier_of(size: int, fan_out: int) -> int:
    """0 below ``TIER_BASE_BYTES``, else ``t`` with ``base * F**(t-1) <= size < base * F**t``.

    Integer arithmetic: a float logarithm puts exact powers of ``F`` in the tier below (for
    example ``math.log(1000, 10)`` is ``2.9999999999999996``)."""
    if fan_out < 2:
        raise InvalidArgumentError(f"fan_out must be at least 2, got {fan_out}")
    tier, bound = 0, TIER_BASE_BYTES
    while size >= bound:
        tier += 1
        bound *= fan_out
    return tier


def choose_merge(
    manifests: Sequence[ManifestFileMeta],
    *,
    target_size: int,
    merge_min_count: int,
    full_threshold: int,
) -> MergeChoice | None:
    """The merge to run before this commit, or None."""
    with_deletes = sum(m.file_size for m in manifests if m.num_deleted > 0)
    if with_deletes >= full_threshold:
        return MergeChoice(tuple(range(len(manifests))), full=True)
    tiers: dict[int, list[int]] = {}
    for index, manifest in enumerate(manifests):
        if manifest.file_size < target_size:
            tiers.setdefault(tier_of(manifest.file_size, merge_min_count), []).append(index)
    for tier in sorted(tiers):
        members = tiers[tier]
        if len(members) >= merge_min_count:
            return MergeChoice(tuple(members), full=False)
    return None
