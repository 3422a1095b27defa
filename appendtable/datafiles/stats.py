"""Column statistics and partition values as stored in manifests.

A stored value (``StatValue``) is a plain MessagePack-friendly value: integers for integer, date
(days), timestamp, time and duration columns (in the column's unit), floats, booleans, strings,
bytes, and decimals as canonical decimal strings (all the column's fractional digits). String and
binary statistics are truncated to ``truncate`` characters/bytes: the min keeps a prefix (a lower
bound); the max keeps a prefix whose last character is incremented (an upper bound), or is
dropped (None) when that is impossible. Decimals are never truncated (format version 1 writers
before this rule did truncate them: readers do not trust a decimal statistic that lacks digits,
see ``planning.filters``). Float statistics ignore NaN.

Struct fields below the top level (reached through structs only, at any depth) get the same
statistics, by field id (``FieldStats``): a field reads as null where any struct above it is
null, and its null count counts those rows too.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.metadata.models import FieldStats, StatValue
from appendtable.metadata.types import NESTED_KINDS, STATS_KINDS, FieldSpec

__all__ = [
    "StatsCollector",
    "StructLeaf",
    "scalar_to_stat",
    "stat_less",
    "stored_stats",
    "struct_leaves",
]

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


@dataclass(frozen=True)
class StructLeaf:
    """A struct field below the top level that statistics are kept for: its field id, the
    position of its top-level column, the child positions leading to it, and its kind."""

    field_id: int
    column: int
    children: tuple[int, ...]
    kind: str


def struct_leaves(fields: Sequence[FieldSpec]) -> list[StructLeaf]:
    """The fields below the top level reached through structs only (not through lists or
    maps, whose fields hold several values per row), that are not themselves nested."""
    found: list[StructLeaf] = []

    def visit(children: Sequence[FieldSpec], column: int, path: tuple[int, ...]) -> None:
        for index, child in enumerate(children):
            kind = child.type.kind
            if kind == "struct":
                visit(child.type.fields, column, (*path, index))
            elif kind not in NESTED_KINDS and child.id is not None:
                found.append(StructLeaf(child.id, column, (*path, index), kind))

    for position, field in enumerate(fields):
        if field.type.kind == "struct":
            visit(field.type.fields, position, ())
    return found


class _Extremes:
    """Null counts and min/max of a set of columns, accumulated chunk by chunk."""

    def __init__(self, kinds: Sequence[str]) -> None:
        self.kinds = list(kinds)
        count = len(self.kinds)
        self.nulls: list[int] = [0] * count
        self.mins: list[StatValue] = [None] * count
        self.maxs: list[StatValue] = [None] * count

    def update(self, index: int, column: pa.Array | pa.ChunkedArray, minmax: bool) -> None:
        kind = self.kinds[index]
        self.nulls[index] += column.null_count
        if not minmax or kind not in STATS_KINDS or column.null_count == len(column):
            return
        result = pc.min_max(column)
        low = scalar_to_stat(result["min"], kind)
        high = scalar_to_stat(result["max"], kind)
        if low is None or high is None:  # e.g. an all-NaN float column
            return
        current_low, current_high = self.mins[index], self.maxs[index]
        if current_low is None or stat_less(low, current_low, kind):
            self.mins[index] = low
        if current_high is None or stat_less(current_high, high, kind):
            self.maxs[index] = high


class StatsCollector:
    """Accumulates null counts and min/max per top-level column, and per struct field below
    the top level (``struct_leaves``), over the chunks of one file.

    ``mode`` is the table's ``metadata.stats-mode``: ``none`` records nothing, ``counts`` only
    null counts, ``full`` and ``truncate(N)`` also min/max.
    """

    def __init__(self, fields: Sequence[FieldSpec], mode: str, truncate: int | None) -> None:
        self._mode = mode
        self._truncate = truncate
        self._columns = _Extremes([field.type.kind for field in fields])
        self._leaves = struct_leaves(fields)
        self._fields = _Extremes([leaf.kind for leaf in self._leaves])

    def update(self, table: pa.Table | pa.RecordBatch) -> None:
        if self._mode == "none" or table.num_rows == 0:
            return
        minmax = self._mode != "counts"
        for index in range(len(self._columns.kinds)):
            self._columns.update(index, table.column(index), minmax)
        for index, leaf in enumerate(self._leaves):
            # struct_field nulls a field wherever a struct above it is null
            values = pc.struct_field(table.column(leaf.column), list(leaf.children))
            self._fields.update(index, values, minmax)

    def result(
        self,
    ) -> tuple[tuple[int | None, ...], tuple[StatValue, ...], tuple[StatValue, ...]]:
        """(null_counts, min_values, max_values) aligned with the fields; () when disabled."""
        found = self._columns
        return stored_stats(
            self._mode, self._truncate, found.nulls, found.mins, found.maxs, found.kinds
        )

    def nested_result(self) -> tuple[FieldStats, ...]:
        """The statistics of the struct fields below the top level; () when disabled."""
        found = self._fields
        nulls, mins, maxs = stored_stats(
            self._mode, self._truncate, found.nulls, found.mins, found.maxs, found.kinds
        )
        if not nulls:
            return ()
        return tuple(
            FieldStats(
                leaf.field_id,
                nulls[index],
                mins[index] if mins else None,
                maxs[index] if maxs else None,
            )
            for index, leaf in enumerate(self._leaves)
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
