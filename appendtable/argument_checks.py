"""Checking and normalising the arguments of the public API (snapshot ids, instants, durations,
lists of names), so that a wrong type gives one clear error naming the argument instead of a
failure deep inside (a ``'1'`` read as a corrupt snapshot, a column name split into letters).

Errors: ``InvalidArgumentError`` (a ``TypeError`` and ``ValueError`` too) naming the argument.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from appendtable.errors import InvalidArgumentError

__all__ = [
    "age_cut",
    "bucket_ids",
    "epoch_ms",
    "maybe_epoch_ms",
    "maybe_snapshot_id",
    "maybe_thread_count",
    "names",
    "overwrite_specs",
    "snapshot_id",
]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _described(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def snapshot_id(value: object, name: str = "snapshot_id") -> int:
    """A snapshot id: an integer (``numpy`` integers too), not a bool or a string."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InvalidArgumentError(
            f"{name} must be an integer snapshot id, got {_described(value)}"
        )
    return int(value.__index__())


def maybe_snapshot_id(value: object, name: str = "snapshot_id") -> int | None:
    return None if value is None else snapshot_id(value, name)


def epoch_ms(value: object, name: str) -> int:
    """An instant as epoch milliseconds: an integer (epoch ms) or a ``datetime`` (naive ones are
    taken as UTC) or a ``date`` (its midnight, UTC)."""
    if isinstance(value, dt.datetime):
        instant = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        delta = instant - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if isinstance(value, dt.date):
        return (value - _EPOCH.date()).days * 86_400_000
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InvalidArgumentError(
            f"{name} must be epoch milliseconds (an integer) or a datetime, got {_described(value)}"
        )
    return int(value.__index__())


def age_cut(value: object, name: str, now_ms: int) -> int:
    """An ``older_than`` cut-off as epoch milliseconds: a ``timedelta`` before ``now_ms`` (a
    negative one reaches past now, so files written this instant count too), or an instant as
    ``epoch_ms`` takes it."""
    if isinstance(value, dt.timedelta):
        return now_ms - value // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.datetime | dt.date) or (
        not isinstance(value, bool) and hasattr(value, "__index__")
    ):
        return epoch_ms(value, name)
    raise InvalidArgumentError(
        f"{name} must be a timedelta (before now), a datetime or epoch milliseconds (an "
        f"integer), got {_described(value)}"
    )


def maybe_epoch_ms(value: object, name: str) -> int | None:
    return None if value is None else epoch_ms(value, name)


def names(value: object, name: str) -> list[str] | None:
    """Column names: a list of strings, or one string (one name, never split into letters)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence | set | frozenset) or isinstance(value, bytes):
        raise InvalidArgumentError(
            f"{name} must be a list of column names, got {_described(value)}"
        )
    listed = list(value)
    wrong = [item for item in listed if not isinstance(item, str)]
    if wrong:
        raise InvalidArgumentError(
            f"{name} must hold column names (strings), got {_described(wrong[0])}"
        )
    return listed


def bucket_ids(value: object, name: str) -> frozenset[int]:
    """Bucket numbers: a non-empty collection of integers (not bools, text or floats: ``"1"``
    and ``1.0`` are refused rather than read as bucket 1)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
        raise InvalidArgumentError(
            f"{name} must be a list of bucket numbers, got {_described(value)}"
        )
    listed = list(value)
    wrong = [b for b in listed if isinstance(b, bool) or not hasattr(b, "__index__")]
    if wrong:
        raise InvalidArgumentError(
            f"{name} must hold bucket numbers (integers), got {_described(wrong[0])}"
        )
    if not listed:
        raise InvalidArgumentError(f"{name} names no bucket: give at least one, or leave it out")
    return frozenset(int(b.__index__()) for b in listed)


def overwrite_specs(
    specs: Sequence[Mapping[str, object]] | None,
) -> Sequence[Mapping[str, object]] | None:
    """An overwrite's static partition specs: None (replace every row) or at least one spec,
    each naming at least one partition column. An empty list, or an empty spec ``{}``, names
    no partition and is refused: read as "every row", either replaced the whole table."""
    if specs is not None and len(specs) == 0:
        raise InvalidArgumentError(
            "partitions: an empty list names no partition to replace; pass None (the default) "
            "to replace every row"
        )
    if specs is not None and any(len(spec) == 0 for spec in specs):
        raise InvalidArgumentError(
            "partitions: an empty spec {} names no partition column (it would replace every "
            "row); pass None (the default) to replace every row"
        )
    return specs


def flag(value: object, name: str) -> bool:
    """A yes/no argument: True or False only (a string such as "false" is refused)."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be True or False, got {_described(value)}")
    return value


def maybe_thread_count(value: object, name: str = "parallelism") -> int | None:
    """A number of threads: a positive integer, or None (the table's default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__") or value.__index__() < 1:
        raise InvalidArgumentError(
            f"{name} must be a positive number of threads (or None for the table's "
            f"'write.parallelism'), got {_described(value)}"
        )
    return int(value.__index__())
