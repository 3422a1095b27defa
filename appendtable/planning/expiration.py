"""Which snapshots may expire (pure).

Keep at least ``retain_min`` snapshots and at most ``retain_max``. Among the rest, snapshot ``i``
expires only when its successor ``i + 1`` was committed before ``older_than_ms`` (so ``i`` stopped
being the latest long enough ago), and never when a consumer still needs it (``i >=`` the
smallest ``next_snapshot`` of the consumers). At most ``limit`` snapshots expire per run, oldest
first.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["expire_until"]


def expire_until(
    *,
    earliest: int,
    latest: int,
    retain_min: int,
    retain_max: int,
    limit: int,
    consumer_floor: int | None,
    older_than_ms: int,
    committed_at: Callable[[int], int],
) -> int:
    """The id of the oldest snapshot to keep: snapshots ``[earliest, result)`` expire."""
    keep_from_count = max(latest - retain_max + 1, earliest)  # beyond retain_max: expire anyway
    end = latest - retain_min + 1  # never touch the newest retain_min
    if consumer_floor is not None:
        end = min(end, consumer_floor)
    end = min(end, earliest + limit)
    if end <= earliest:
        return earliest
    # Snapshots below keep_from_count expire regardless of age; above it, only when their
    # successor is older than the threshold. Expire the prefix up to the first one to keep.
    for candidate in range(keep_from_count, end):
        if committed_at(candidate + 1) >= older_than_ms:
            return candidate
    return end
