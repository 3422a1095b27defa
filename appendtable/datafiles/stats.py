"""Column statistics and partition values as stored in manifests.

A stored value (``StatValue``) is a plain MessagePack-friendly value: integers for integer, date
(days), timestamp, time and duration columns (in the column's unit), floats, booleans, strings,
bytes, and decimals as canonical decimal strings (all the column's fractional digits). String and
binary statistics are truncated to ``truncate`` characters/bytes: the min keeps a prefix (a lower
bound); the max keeps a prefix whose last character is incremented (an upper bound), or is
dropped (None) when that is impossible. Decimals are never truncated (format version 1 writers
before this rule did truncate them: readers do not trust a decimal statistic that lacks digits,
see ``planning.filters``). Float statistics ignore NaN.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.metadata.models import StatValue
from appendtable.metadata.types import STATS_KINDS, FieldSpec

__all__ = ["StatsCollector", "scalar_to_stat", "stat_less", "stored_stats"]

_MAX_CODE_POINT = 0x10FFFF
#: Kinds whose statistics are truncated (prefixes of text or bytes are bounds; of decimals not).
_TRUNCATED_KINDS = frozenset({"string", "large_string", "binary", "large_binary"})


def scalar_to_stat(scalar: pa.Scalar, kind: str) -> StatValue:
    """The stored form of one Arrow scalar of a column of ``kind``."""
    if not scalar.is_valid:
        return None
    if kind in ("date32", "timestamp", "time32", "time64", "duration"):
        value = scalar.value
        return int(value) if value is not None else None
    if kind == "date64":
        return int(scalar.value) // 86_400_000
    if kind == "decimal":
        return _decimal_text(scalar.as_py())
    python = scalar.as_py()
    if isinstance(python, bool | int | float | str | bytes):
        return python
    return str(python)


def _decimal_text(value: decimal.Decimal) -> str:
    return format(value, "f")


def _truncate_min(value: StatValue, limit: int | None) -> StatValue:
    if limit is None or not isinstance(value, str | bytes) or len(value) <= limit:
        return value
    return value[:limit]


def _truncate_max(value: StatValue, limit: int | None) -> StatValue:
    if limit is None or not isinstance(value, str | bytes) or len(value) <= limit:
        return value
    if isinstance(value, bytes):
        prefix = bytearray(value[:limit])
        while prefix:
            if prefix[-1] < 0xFF:
                prefix[-1] += 1
                return bytes(prefix)
            prefix.pop()
        return None
    chars = list(value[:limit])
    while chars:
        code = ord(chars[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:
            code = 0xE000
        if code <= _MAX_CODE_POINT:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


def stat_less(a: StatValue, b: StatValue, kind: str) -> bool:
    """``a < b`` for two stored values of a column of ``kind`` (decimals compare as numbers)."""
    if kind == "decimal":
        return decimal.Decimal(str(a)) < decimal.Decimal(str(b))
    return a < b  # type: ignore[operator]


class StatsCollector:
    """Accumulates null counts and min/max per top-level column over the chunks of one file.

    ``mode`` is the table's ``metadata.stats-mode``: ``none`` records nothing, ``counts`` only
    null counts, ``full`` and ``truncate(N)`` also min/max.
    """

    def __init__(self, fields: Sequence[FieldSpec], mode: str, truncate: int | None) -> None:
        self._kinds = [field.type.kind for field in fields]
        self._mode = mode
        self._truncate = truncate
        count = len(self._kinds)
        self._nulls: list[int] = [0] * count
        self._mins: list[StatValue] = [None] * count
        self._maxs: list[StatValue] = [None] * count
        self._minmax_known = [True] * count

    def update(self, table: pa.Table | pa.RecordBatch) -> None:
        if self._mode == "none" or table.num_rows == 0:
            return
        want_minmax = self._mode != "counts"
        for index, kind in enumerate(self._kinds):
            column = table.column(index)
            self._nulls[index] += column.null_count
            if not want_minmax or kind not in STATS_KINDS or not self._minmax_known[index]:
                continue
            if column.null_count == len(column):
                continue
            result = pc.min_max(column)
            low = scalar_to_stat(result["min"], kind)
            high = scalar_to_stat(result["max"], kind)
            if low is None or high is None:  # e.g. an all-NaN float column
                continue
            current_low, current_high = self._mins[index], self._maxs[index]
            if current_low is None or stat_less(low, current_low, kind):
                self._mins[index] = low
            if current_high is None or stat_less(current_high, high, kind):
                self._maxs[index] = high

    def result(
        self,
    ) -> tuple[tuple[int | None, ...], tuple[StatValue, ...], tuple[StatValue, ...]]:
        """(null_counts, min_values, max_values) aligned with the fields; () when disabled."""
        return stored_stats(
            self._mode, self._truncate, self._nulls, self._mins, self._maxs, self._kinds
        )


def stored_stats(
    mode: str,
    truncate: int | None,
    nulls: Sequence[int | None],
    mins: Sequence[StatValue],
    maxs: Sequence[StatValue],
    kinds: Sequence[str],
) -> tuple[tuple[int | None, ...], tuple[StatValue, ...], tuple[StatValue, ...]]:
    """Exact per-column null counts and extremes as a data file's metadata records them under
    ``metadata.stats-mode`` ``mode``: nothing, only null counts, or also min/max (strings and
    binaries truncated to ``truncate``; columns of ``kinds``)."""
    if mode == "none":
        return (), (), ()
    if mode == "counts":
        return tuple(nulls), (), ()
    limits = [truncate if kind in _TRUNCATED_KINDS else None for kind in kinds]
    return (
        tuple(nulls),
        tuple(_truncate_min(v, limit) for v, limit in zip(mins, limits, strict=True)),
        tuple(_truncate_max(v, limit) for v, limit in zip(maxs, limits, strict=True)),
    )
