"""Row filters in pyarrow's DNF form, and pruning with them before any data file is opened.

A filter is ``[(column, op, value), ...]`` (all must hold) or a list of such lists (any of them
holds). Ops: ``=``, ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``, ``is null``,
``is not null``. Values are converted once to the stored form of the column (dates to days,
timestamps to integers in the column's unit, decimals exactly), so pruning compares like with
like; a value between two stored values (a nanosecond ``pandas.Timestamp`` on a microsecond
column, a datetime at noon on a date column, a decimal finer than the scale) is compared
exactly, as the number it is. Floats compare as IEEE does: NaN equals nothing and differs from
everything. Pruning is conservative: a partition, bucket or file is skipped only when no row in
it can match; the exact row filter is applied when reading.

A column is a top-level column or a field of a struct, named by a string or a path:

* a string that is exactly the name of a top-level column names that column (so a column
  called ``a.b`` stays addressable as ``"a.b"``); any other string containing dots is split at
  every dot into a path of struct fields (``"payload.x"``): the rule ``update_schema()``
  follows for dotted column names;
* a tuple (or list) of names is a path taken as given, one name per level, never split:
  ``("payload", "x")``, or ``("a.b",)`` for the top-level column ``a.b``, or
  ``("payload", "x.y")`` for a struct field whose own name has a dot.

A struct field reads as null where a struct above it is null. Files prune on a struct field by
its statistics when their metadata records them (``DataFileMeta.nested_stats``, by field id);
files without them are read and filtered exactly.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import itertools
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

import numpy as np

from appendtable.errors import InvalidFilterError
from appendtable.metadata.models import DataFileMeta, FieldStats, PartitionValues, StatValue
from appendtable.metadata.types import INTEGER_KINDS, TypeSpec
from appendtable.planning.operators import (
    FilterOp,
    FilterOperands,
    filter_operator,
    operator_spellings,
)

__all__ = ["Filter", "Predicate", "filter_clauses", "parse_filter", "to_stored"]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MAX_BUCKET_COMBINATIONS = 4096


@dataclass(frozen=True)
class Predicate:
    """One comparison; ``values`` are in the column's stored form (one, or several for in).
    ``column`` is a top-level column; a predicate on a struct field below it has the names
    leading to the field in ``path`` and the field's id in ``field_id`` (``type`` is the
    field's)."""

    column: str
    op: FilterOp
    values: tuple[StatValue, ...]
    type: TypeSpec
    path: tuple[str, ...] = ()
    field_id: int | None = None
    #: the values as sort keys, in the form the operator takes them (derived)
    _operand: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        operands = filter_operator(self.op).operands
        operand: Any
        match operands:
            case FilterOperands.NONE:
                operand = None
            case FilterOperands.ONE:
                operand = _sort_key(self.values[0], self.type)
            case FilterOperands.LIST:
                operand = [_sort_key(v, self.type) for v in self.values]
            case _:
                assert_never(operands)
        object.__setattr__(self, "_operand", operand)

    @property
    def name(self) -> str:
        """The column or field as a dotted name (for messages)."""
        return ".".join((self.column, *self.path))

    def test(self, value: StatValue) -> bool:
        """Exact evaluation on one stored value (SQL semantics: null matches only is null)."""
        rule = filter_operator(self.op)
        if value is None:
            return rule.matches_null
        return bool(rule.test(_sort_key(value, self.type), self._operand))

    def may_match(
        self,
        low: StatValue,
        high: StatValue,
        nulls: int | None,
        rows: int,
        stats_truncate: int | None = None,
    ) -> bool:
        """False only if no row of a file with these statistics can satisfy the predicate
        (``stats_truncate``: the table's statistics truncation, see ``_trusted``)."""
        spec = self.type
        if low is None or high is None or not _trusted(low, high, spec, stats_truncate):
            low_key = high_key = None
        else:
            low_key, high_key = _sort_key(low, spec), _sort_key(high, spec)
        floating = spec.kind in ("float16", "float32", "float64")
        rule = filter_operator(self.op)
        return rule.may_match(low_key, high_key, nulls, rows, self._operand, floating)


@dataclass(frozen=True)
class Filter:
    """An OR of ANDs of predicates (disjunctive normal form)."""

    clauses: tuple[tuple[Predicate, ...], ...]

    @property
    def columns(self) -> set[str]:
        """The top-level columns the filter reads (a struct, for a filter on its fields)."""
        return {p.column for clause in self.clauses for p in clause}

    def matches_partition(self, keys: Sequence[str], values: PartitionValues) -> bool:
        """False only if no row of this partition can match (predicates on partition keys are
        decided exactly, others are assumed to match)."""
        position = {key: i for i, key in enumerate(keys)}
        return any(
            all(
                p.test(values[position[p.column]])
                for p in clause
                if p.column in position and not p.path
            )
            for clause in self.clauses
        )

    def may_match_file(
        self,
        file: DataFileMeta,
        column_positions: Mapping[str, int | None],
        stats_truncate: int | None = None,
        field_ids: Collection[int] | None = None,
    ) -> bool:
        """False only if the file's statistics prove that no row matches (``stats_truncate``:
        the table's ``metadata.stats-mode`` truncation). ``column_positions`` maps a column to
        the position of its statistics in the file, or to None when the file predates the
        column (written before it was added: every value reads as null); columns it does not
        list are not pruned on. ``field_ids``: every field id of the file's schema, at any
        depth (a struct field whose id is not there reads as null); without it, predicates on
        struct fields prune nothing."""
        if not file.min_values and not file.null_counts and not file.nested_stats:
            return True
        return any(
            self._clause_may_match(clause, file, column_positions, stats_truncate, field_ids)
            for clause in self.clauses
        )

    @staticmethod
    def _clause_may_match(
        clause: tuple[Predicate, ...],
        file: DataFileMeta,
        positions: Mapping[str, int | None],
        stats_truncate: int | None,
        field_ids: Collection[int] | None,
    ) -> bool:
        for predicate in clause:
            nulls: int | None
            if predicate.path:
                if field_ids is None or predicate.field_id is None:
                    continue
                if predicate.field_id not in field_ids:  # the file predates the field
                    nulls, low, high = file.row_count, None, None
                else:
                    found = _field_stats(file, predicate.field_id)
                    if found is None:
                        continue  # no statistics for it: not pruned on
                    nulls, low, high = found.null_count, found.min_value, found.max_value
            elif predicate.column not in positions:
                continue
            else:
                index = positions[predicate.column]
                if index is None:  # the file predates the column: all null
                    nulls, low, high = file.row_count, None, None
                else:
                    nulls = file.null_counts[index] if index < len(file.null_counts) else None
                    low = file.min_values[index] if index < len(file.min_values) else None
                    high = file.max_values[index] if index < len(file.max_values) else None
            if not predicate.may_match(low, high, nulls, file.row_count, stats_truncate):
                return False
        return True

    def buckets(
        self,
        bucket_key: Sequence[str],
        bucket_of: Callable[[tuple[StatValue, ...]], int | None],
    ) -> set[int] | None:
        """The only buckets that can hold matching rows, or None when the filter does not pin
        every bucket-key column with ``=`` / ``in`` in every clause."""
        if not bucket_key:
            return None
        result: set[int] = set()
        for clause in self.clauses:
            choices: list[tuple[StatValue, ...]] = []
            for column in bucket_key:
                pinned = [
                    p
                    for p in clause
                    if p.column == column and not p.path and filter_operator(p.op).pins_values
                ]
                if not pinned:
                    return None
                # Intersect by value, not spelling: decimals 1.0 and 1.00 are the same key.
                allowed = list(pinned[0].values)
                for extra in pinned[1:]:
                    keys = {_sort_key(v, extra.type) for v in extra.values}
                    allowed = [v for v in allowed if _sort_key(v, extra.type) in keys]
                distinct = {_sort_key(v, pinned[0].type): v for v in allowed}
                choices.append(tuple(distinct.values()))
            combinations = 1
            for options in choices:
                combinations *= len(options)
            if combinations > _MAX_BUCKET_COMBINATIONS:
                return None
            for combo in itertools.product(*choices):
                bucket = bucket_of(combo)
                if bucket is not None:  # None: no row of the key column can hold it
                    result.add(bucket)
        return result


def _field_stats(file: DataFileMeta, field_id: int) -> FieldStats | None:
    for found in file.nested_stats:
        if found.field_id == field_id:
            return found
    return None


def parse_filter(raw: object, column_types: Mapping[str, TypeSpec]) -> Filter | None:
    """Validate and normalise a DNF filter. Raises InvalidFilterError naming the problem."""
    if raw is None:
        return None
    if isinstance(raw, Filter):
        return raw
    clauses = tuple(
        tuple(_predicate(item, column_types) for item in clause) for clause in filter_clauses(raw)
    )
    return Filter(clauses)


def filter_clauses(raw: object) -> list[Sequence[object]]:
    """The clauses (OR'ed lists of AND'ed terms) of a filter in pyarrow's DNF form, as given:
    a flat list of terms is one clause. InvalidFilterError if it has no such shape."""
    if not isinstance(raw, list | tuple) or not raw:
        raise InvalidFilterError(
            "a filter is a list of (column, op, value) tuples, or a list of such lists"
        )
    first = raw[0]
    # As in pyarrow, a flat filter is told apart by its first term starting with a column name:
    # [["a", "=", 1]] (a flat filter that went through JSON) is one term, not one clause. A term
    # whose column is a path, (("p", "x"), "=", 1), has its operator second; a clause has a
    # second term there, or nothing.
    nested = (
        isinstance(first, list | tuple)
        and bool(first)
        and isinstance(first[0], list | tuple)
        and not (len(first) in (2, 3) and isinstance(first[1], str))
    )
    return [_as_clause(clause) for clause in (raw if nested else [raw])]


def _as_clause(clause: object) -> Sequence[object]:
    if not isinstance(clause, list | tuple) or not clause:
        raise InvalidFilterError(f"filter clause {clause!r} must be a non-empty list of tuples")
    return clause


@dataclass(frozen=True)
class _Target:
    """What a filter term's column resolves to (see the module doc)."""

    column: str
    path: tuple[str, ...]
    type: TypeSpec
    field_id: int | None

    @property
    def name(self) -> str:
        return ".".join((self.column, *self.path))

    def predicate(self, op: FilterOp, values: tuple[StatValue, ...]) -> Predicate:
        return Predicate(self.column, op, values, self.type, self.path, self.field_id)


def _resolve(column: object, column_types: Mapping[str, TypeSpec]) -> _Target:
    """A term's column as a top-level column or a path of struct fields (the module doc)."""
    parts: tuple[str, ...]
    if isinstance(column, str):
        if column in column_types:
            return _Target(column, (), column_types[column], None)
        parts = tuple(column.split(".")) if "." in column else (column,)
    elif (
        isinstance(column, list | tuple)
        and column
        and all(isinstance(part, str) and part for part in column)
    ):
        parts = tuple(column)
    else:
        parts = ()
    if not parts or parts[0] not in column_types:
        raise InvalidFilterError(
            f"filter names unknown column {column!r} (columns: {', '.join(column_types)})"
        )
    type_spec, field_id = column_types[parts[0]], None
    for depth, name in enumerate(parts[1:], start=1):
        above = ".".join(parts[:depth])
        if type_spec.kind != "struct":
            raise InvalidFilterError(
                f"filter names '{'.'.join(parts)}', but '{above}' is a {type_spec.kind}, not a "
                "struct: filters reach into struct fields only"
            )
        child = next((f for f in type_spec.fields if f.name == name), None)
        if child is None:
            known = ", ".join(f.name for f in type_spec.fields)
            raise InvalidFilterError(
                f"filter names unknown field '{name}' of struct '{above}' (its fields: {known})"
            )
        type_spec, field_id = child.type, child.id
    return _Target(parts[0], parts[1:], type_spec, field_id)


def _predicate(item: object, column_types: Mapping[str, TypeSpec]) -> Predicate:
    if not isinstance(item, list | tuple) or len(item) not in (2, 3):
        raise InvalidFilterError(f"filter term {item!r} must be (column, op, value)")
    target = _resolve(item[0], column_types)
    op = FilterOp.parse(item[1])
    if op is None:
        raise InvalidFilterError(
            f"unknown filter operator {item[1]!r} on column '{target.name}' (use one of "
            f"{', '.join(sorted(operator_spellings()))})"
        )
    operands = filter_operator(op).operands
    match operands:
        case FilterOperands.NONE:
            if len(item) == 3 and item[2] is not None:  # (a None third item is harmless)
                raise InvalidFilterError(
                    f"'{op}' on column '{target.name}' takes no value, got {item[2]!r}"
                )
            return target.predicate(op, ())
        case FilterOperands.LIST:
            return _listed(target, op, _operand(item, target, op))
        case FilterOperands.ONE:
            return _compared(target, op, _operand(item, target, op))
        case _:
            assert_never(operands)


def _operand(item: list[object] | tuple[object, ...], target: _Target, op: FilterOp) -> object:
    if len(item) != 3:
        raise InvalidFilterError(f"filter term on column '{target.name}' with '{op}' needs a value")
    return item[2]


def _listed(target: _Target, op: FilterOp, raw_values: object) -> Predicate:
    if isinstance(raw_values, str | bytes) or not isinstance(raw_values, Iterable):
        raise InvalidFilterError(f"'{op}' on column '{target.name}' needs a list of values")
    # ``in`` is the OR of ``=``: a value no stored value can equal (between two steps of the
    # column's unit or scale, beyond its range, NaN) matches nothing: drop it.
    placed = [_placed(v, target.type, target.name) for v in raw_values]
    return target.predicate(op, tuple(v for v, where in placed if where is _Where.EXACT))


def _compared(target: _Target, op: FilterOp, raw_value: object) -> Predicate:
    value, where = _placed(raw_value, target.type, target.name)
    match where:
        case _Where.EXACT:
            return target.predicate(op, (value,))
        case _Where.BETWEEN:
            return _between_steps(target, op, value)
        case _Where.ABOVE:
            return _beyond(target, op, 1)
        case _Where.BELOW:
            return _beyond(target, op, -1)
        case _Where.UNORDERED:
            return _beyond(target, op, math.nan)
        case _:
            assert_never(where)


class _Where(enum.Enum):
    """Where a filter value lies among the values a column can store (see ``_placed``)."""

    EXACT = "exact"
    BETWEEN = "between"
    ABOVE = "above"
    BELOW = "below"
    UNORDERED = "unordered"


_INTEGER_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    # integer-backed kinds, in their stored unit
    "timestamp": (-(2**63), 2**63 - 1),
    # Parquet stores seconds as milliseconds in 64 bits (writes refuse anything beyond)
    "timestamp[s]": (-((2**63 - 1) // 1000), (2**63 - 1) // 1000),
    "date32": (-(2**31), 2**31 - 1),
    "date64": (-(2**31), 2**31 - 1),  # stored as days, as date32
    "time32": (-(2**31), 2**31 - 1),
    "time64": (-(2**63), 2**63 - 1),
}


def _placed(value: object, type_spec: TypeSpec, column: str) -> tuple[StatValue, _Where]:
    """``value`` in the column's stored form, and where it lies: ``exact`` (a value the column
    can hold), ``between`` (strictly between the returned stored value and the next one: a
    timestamp, date or time finer than the column's unit, a decimal finer than the scale, a
    fraction for an integer column), ``above`` / ``below`` (beyond every value the column can
    hold) or ``unordered`` (NaN for an integer column: equal to nothing, unequal to
    everything). Temporal values are placed exactly, to the nanosecond."""
    kind = type_spec.kind
    value = _python_scalar(value)
    if kind in INTEGER_KINDS and isinstance(value, float) and not isinstance(value, bool):
        if math.isnan(value):
            return None, _Where.UNORDERED
        if math.isinf(value):
            return None, _Where.ABOVE if value > 0 else _Where.BELOW
        floor = math.floor(value)
        return _in_range(floor, kind, _Where.EXACT if floor == value else _Where.BETWEEN)
    if kind in _TEMPORAL_KINDS:
        nanos = _temporal_nanos(value, type_spec, column)
        ticks, rest = divmod(nanos, _step_nanos(type_spec))
        seconds = kind == "timestamp" and type_spec.unit == "s"
        return _in_range(
            ticks, "timestamp[s]" if seconds else kind, _Where.BETWEEN if rest else _Where.EXACT
        )
    plain = _plain_stored(value, type_spec, column)
    if kind == "decimal":
        return _decimal_placed(decimal.Decimal(str(plain)), type_spec)
    return _in_range(plain, kind, _Where.EXACT)


def _python_scalar(value: object) -> object:
    """A numpy scalar (``numpy.int64``, ``numpy.float32``, ``numpy.bool_``, ``numpy.str_``:
    what pandas and numpy hand out) as the Python value it holds exactly; ``numpy.datetime64``
    is kept, as the temporal path reads it to the nanosecond. Anything else as it is."""
    if isinstance(value, np.generic) and not isinstance(value, np.datetime64 | np.timedelta64):
        return value.item()
    return value


def _in_range(stored: StatValue, kind: str, where: _Where) -> tuple[StatValue, _Where]:
    """``stored`` and ``where``, or beyond the range of ``kind`` (a key of
    ``_INTEGER_RANGES``) when it lies there."""
    bounds = _INTEGER_RANGES.get(kind)
    if bounds is None or not isinstance(stored, int) or isinstance(stored, bool):
        return stored, where
    low, high = bounds
    if stored > high or (stored == high and where == _Where.BETWEEN):
        return None, _Where.ABOVE
    if stored < low:
        return None, _Where.BELOW
    return stored, where


def _decimal_placed(number: decimal.Decimal, type_spec: TypeSpec) -> tuple[StatValue, _Where]:
    scale, precision = type_spec.scale or 0, type_spec.precision or 38
    step = decimal.Decimal(1).scaleb(-scale)
    with decimal.localcontext() as context:
        context.prec = max(context.prec, len(number.as_tuple().digits) + scale + 2)
        floor = number.quantize(step, rounding=decimal.ROUND_FLOOR)
        limit = decimal.Decimal(10) ** (precision - scale)
    if floor >= limit:  # storable: -limit < x < limit
        return None, _Where.ABOVE
    if floor <= -limit:
        return None, _Where.BELOW
    return format(floor, "f"), _Where.EXACT if floor == number else _Where.BETWEEN


def _beyond(target: _Target, op: FilterOp, side: float) -> Predicate:
    """The predicate equivalent to comparing with a value beyond every value the column can
    hold (``side`` 1: above them, -1: below, NaN: unordered, as NaN compares false with
    everything and unequal to everything): it holds for every stored value or for none, as it
    holds for 0 compared with ``side``."""
    return _all_or_nothing(target, bool(filter_operator(op).test(0, side)))


def _between_steps(target: _Target, op: FilterOp, floor: StatValue) -> Predicate:
    """The predicate on stored values equivalent to comparing with a value strictly between
    ``floor`` and the next storable value: it holds for the stored values up to ``floor``
    when it holds for 0 compared with 0.5, and for those above when it holds for 1."""
    test = filter_operator(op).test
    below, above = bool(test(0, 0.5)), bool(test(1, 0.5))
    if below == above:
        return _all_or_nothing(target, below)
    if below:
        return target.predicate(FilterOp.LE, (floor,))
    return target.predicate(FilterOp.GT, (floor,))


def _all_or_nothing(target: _Target, everything: bool) -> Predicate:
    """Every non-null value, or nothing (``in`` an empty list)."""
    if everything:
        return target.predicate(FilterOp.IS_NOT_NULL, ())
    return target.predicate(FilterOp.IN, ())


def to_stored(value: object, type_spec: TypeSpec, column: str) -> StatValue:
    """A value in the stored form of the column (see ``datafiles.stats``): what a partition
    spec names. InvalidFilterError naming the column for a value the column cannot hold
    exactly (beyond its range, finer than its unit or scale)."""
    stored, where = _placed(value, type_spec, column)
    if where is not _Where.EXACT:
        why = "finer than its unit or scale" if where is _Where.BETWEEN else "out of range"
        raise InvalidFilterError(
            f"value {value!r} is not a value column '{column}' of type {type_spec.kind} can "
            f"hold ({why})"
        )
    return stored


def _plain_stored(value: object, type_spec: TypeSpec, column: str) -> StatValue:
    """A non-temporal filter value in the stored form of the column (a decimal as its exact
    text, placed by ``_decimal_placed``)."""
    kind = type_spec.kind
    if value is None:
        raise InvalidFilterError(
            f"filter on column '{column}' compares with None: use 'is null' / 'is not null'"
        )
    try:
        if kind in INTEGER_KINDS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError
            return value
        if kind in ("float16", "float32", "float64"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError
            return float(value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind in ("string", "large_string"):
            if not isinstance(value, str):
                raise TypeError
            return value
        if kind in ("binary", "large_binary", "fixed_size_binary"):
            if not isinstance(value, bytes):
                raise TypeError
            return value
        if kind == "decimal":
            if isinstance(value, bool) or not isinstance(value, int | str | decimal.Decimal):
                raise TypeError
            number = decimal.Decimal(str(value))
            if not number.is_finite():  # NaN and infinities fit no decimal column
                raise ValueError
            return format(number, "f")
    except (TypeError, ValueError, decimal.InvalidOperation):
        pass
    except OverflowError:  # an integer beyond every finite float64: no nearest value
        raise _does_not_fit(value, column, kind, "beyond the float64 range") from None
    raise _does_not_fit(value, column, kind)


def _does_not_fit(value: object, column: str, kind: str, why: str = "") -> InvalidFilterError:
    return InvalidFilterError(
        f"filter value {value!r} does not fit column '{column}' of type {kind}"
        + (f": {why}" if why else "")
    )


_TEMPORAL_KINDS = frozenset({"timestamp", "date32", "date64", "time32", "time64"})
_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_NANOS_PER_DAY = 86_400 * 1_000_000_000
#: numpy datetime64 units of fixed length, in nanoseconds (years and months are converted to
#: days first).
_NUMPY_NANOS = {"W": 7 * _NANOS_PER_DAY, "D": _NANOS_PER_DAY, "h": 3_600 * 10**9, "m": 60 * 10**9}
_NUMPY_NANOS.update(_NANOS)
#: An ISO time's fraction of a second, to keep digits beyond microseconds that Python's
#: ``datetime.fromisoformat`` drops.
_ISO_FRACTION = re.compile(r"(?<=:\d\d)[.,](\d+)")


def _step_nanos(type_spec: TypeSpec) -> int:
    """Nanoseconds between two consecutive values of a temporal column."""
    if type_spec.kind in ("date32", "date64"):
        return _NANOS_PER_DAY
    return _NANOS[type_spec.unit or "us"]


def _temporal_nanos(value: object, type_spec: TypeSpec, column: str) -> int:
    """A filter value for a timestamp, date or time column, exactly, in nanoseconds (since
    the epoch, or since midnight for times). Timestamps and dates take ``datetime``, ``date``,
    ISO text (any number of fractional digits up to nanoseconds), ``numpy.datetime64`` and
    ``pandas.Timestamp`` (its nanoseconds too); a naive instant is UTC for a column with a
    time zone. A date column is compared with an instant as the midnight starting the date
    (a date has no time zone: an aware instant is refused). Times take ``datetime.time``."""
    kind = type_spec.kind
    if value is None or (isinstance(value, dt.date | np.datetime64) and value != value):
        # (None, or "not a time": pandas.NaT and numpy's NaT, which equal nothing)
        raise InvalidFilterError(
            f"filter on column '{column}' compares with {value!r}: use 'is null' / 'is not null'"
        )
    try:
        if kind in ("time32", "time64"):
            if not isinstance(value, dt.time):
                raise TypeError
            micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000
            return (micros + value.microsecond) * 1_000
        nanos, aware = _instant_nanos(value)
    except (TypeError, ValueError, OverflowError):
        raise _does_not_fit(value, column, kind) from None
    if aware and kind in ("date32", "date64"):
        raise _does_not_fit(
            value,
            column,
            kind,
            "a date has no time zone; compare with a date, or a datetime without a time zone "
            "(taken as the date's midnight onwards)",
        )
    return nanos


def _instant_nanos(value: object) -> tuple[int, bool]:
    """Nanoseconds since 1970-01-01 (UTC for an aware value) of a date or instant, and
    whether it was aware of a time zone. TypeError / ValueError for anything else."""
    if isinstance(value, str):
        return _iso_nanos(value)
    if isinstance(value, np.datetime64):
        return _datetime64_nanos(value), False
    if isinstance(value, dt.datetime):
        aware = value.tzinfo is not None
        delta = (value if aware else value.replace(tzinfo=dt.UTC)) - _EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        # pandas.Timestamp: a datetime holding nanoseconds below its microseconds
        extra = getattr(value, "nanosecond", 0)
        return micros * 1_000 + (extra if isinstance(extra, int) else 0), aware
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days * _NANOS_PER_DAY, False
    raise TypeError


def _iso_nanos(text: str) -> tuple[int, bool]:
    """An ISO date or date-time text as nanoseconds since 1970-01-01 (UTC when it has an
    offset), exactly, and whether it had an offset. ValueError for anything else, or digits
    finer than nanoseconds (Python's ``fromisoformat`` drops those beyond microseconds)."""
    found = _ISO_FRACTION.search(text)
    extra = 0
    if found is not None and len(found.group(1)) > 6:
        digits = found.group(1)
        if len(digits) > 9 and digits[9:].strip("0"):
            raise ValueError("finer than nanoseconds")
        extra = int(digits[6:9].ljust(3, "0"))
        text = text[: found.start(1)] + digits[:6] + text[found.end(1) :]
    try:
        parsed: dt.date = dt.datetime.fromisoformat(text)
    except ValueError:
        parsed = dt.date.fromisoformat(text)
    nanos, aware = _instant_nanos(parsed)
    return nanos + extra, aware


def _datetime64_nanos(value: np.datetime64) -> int:
    if np.isnat(value):
        raise ValueError("NaT")
    unit, count = np.datetime_data(value.dtype)
    if unit in ("Y", "M"):
        value, unit, count = value.astype("datetime64[D]"), "D", 1
    if unit not in _NUMPY_NANOS:
        raise TypeError  # finer than nanoseconds
    return int(value.astype(np.int64)) * int(count) * _NUMPY_NANOS[unit]


def _trusted(low: StatValue, high: StatValue, type_spec: TypeSpec, truncate: int | None) -> bool:
    """Whether file statistics can be compared. Decimal statistics must be complete decimal
    texts of the column's scale: writers of format version 1 before 0.1.1 truncated them like
    strings (to ``truncate`` characters), which leaves digits out, or a character that is not a
    digit in a maximum; such statistics prune nothing."""
    if type_spec.kind != "decimal":
        return True
    scale = type_spec.scale or 0
    for text in (low, high):
        if not isinstance(text, str):
            return False
        try:
            if not decimal.Decimal(text).is_finite():
                return False
        except decimal.InvalidOperation:
            return False
        fraction = text.partition(".")[2]
        if len(fraction) != scale or (
            scale == 0 and truncate is not None and len(text) >= truncate
        ):
            return False
    return True


def _sort_key(value: StatValue, type_spec: TypeSpec) -> Any:
    if type_spec.kind == "decimal":
        return decimal.Decimal(str(value))
    return value
