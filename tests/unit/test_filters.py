"""Row filters: parsing, conversion to stored values, exact SQL semantics, and sound pruning.

Soundness is the property that matters: pruning (``may_match``, ``may_match_file``,
``matches_partition``, ``buckets``) may keep too much, but whenever it says "no", no row may
satisfy the filter. The exact semantics of ``Predicate.test`` are checked against plain Python
comparisons of the original (unstored) values.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appendtable.datafiles.stats import StatsCollector
from appendtable.errors import InvalidFilterError
from appendtable.metadata.models import DataFileMeta, StatValue
from appendtable.metadata.types import FieldSpec, TypeSpec
from appendtable.planning.filters import Filter, Predicate, parse_filter, to_stored

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EPOCH_DAY = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)

TYPES: dict[str, TypeSpec] = {
    "i": TypeSpec(kind="int64"),
    "i8": TypeSpec(kind="int8"),
    "s": TypeSpec(kind="string"),
    "d": TypeSpec(kind="decimal", precision=10, scale=2),
    "day": TypeSpec(kind="date32"),
    "day64": TypeSpec(kind="date64"),
    "f": TypeSpec(kind="float64"),
    "f32": TypeSpec(kind="float32"),
    "b": TypeSpec(kind="bool"),
    "bin": TypeSpec(kind="binary"),
    "ts": TypeSpec(kind="timestamp", unit="us"),
    "ts_s": TypeSpec(kind="timestamp", unit="s"),
    "ts_ms": TypeSpec(kind="timestamp", unit="ms"),
    "ts_ns": TypeSpec(kind="timestamp", unit="ns"),
    "tz": TypeSpec(kind="timestamp", unit="ms", tz="UTC"),
    "t": TypeSpec(kind="time64", unit="us"),
    "t_s": TypeSpec(kind="time32", unit="s"),
    "t_ms": TypeSpec(kind="time32", unit="ms"),
    "t_ns": TypeSpec(kind="time64", unit="ns"),
}
ALL_OPS = ["=", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]
COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def only(raw: object) -> Predicate:
    parsed = parse_filter(raw, TYPES)
    assert parsed is not None
    assert len(parsed.clauses) == 1
    assert len(parsed.clauses[0]) == 1
    return parsed.clauses[0][0]


def model(op: str, value: object, target: object) -> bool:
    """SQL semantics on Python values: a null satisfies only ``is null``."""
    if op == "is null":
        return value is None
    if op == "is not null":
        return value is not None
    if value is None:
        return False
    if op == "in":
        return any(value == t for t in target)  # type: ignore[attr-defined]
    if op == "not in":
        return all(value != t for t in target)  # type: ignore[attr-defined]
    return COMPARE[op](value, target)


# ---- parsing ------------------------------------------------------------------------------------


def test_none_and_filter_pass_through() -> None:
    assert parse_filter(None, TYPES) is None
    parsed = parse_filter([("i", "=", 1)], TYPES)
    assert parse_filter(parsed, TYPES) is parsed


def test_flat_filter_is_one_clause() -> None:
    parsed = parse_filter([("i", "=", 1), ("s", "!=", "x")], TYPES)
    assert parsed == Filter(
        (
            (
                Predicate("i", "=", (1,), TYPES["i"]),
                Predicate("s", "!=", ("x",), TYPES["s"]),
            ),
        )
    )
    assert parsed.columns == {"i", "s"}


@pytest.mark.parametrize(
    "raw",
    [
        [("i", "=", 1), ("s", "!=", "x")],
        (("i", "=", 1), ("s", "!=", "x")),
        [["i", "=", 1], ["s", "!=", "x"]],  # pyarrow's flat form after a JSON round trip
        [[("i", "=", 1), ("s", "!=", "x")]],
        [[["i", "=", 1], ["s", "!=", "x"]]],
        ((("i", "=", 1), ("s", "!=", "x")),),
    ],
)
def test_flat_and_nested_spellings_of_one_clause(raw: object) -> None:
    parsed = parse_filter(raw, TYPES)
    assert parsed is not None
    assert [[(p.column, p.op, p.values) for p in c] for c in parsed.clauses] == [
        [("i", "=", (1,)), ("s", "!=", ("x",))]
    ]


def test_nested_filter_is_an_or_of_ands() -> None:
    parsed = parse_filter([[("i", ">", 1), ("i", "<", 5)], [("s", "in", ["a", "b"])]], TYPES)
    assert parsed is not None
    assert [[(p.column, p.op, p.values) for p in c] for c in parsed.clauses] == [
        [("i", ">", (1,)), ("i", "<", (5,))],
        [("s", "in", ("a", "b"))],
    ]


@pytest.mark.parametrize("op", ALL_OPS)
def test_every_operator_is_accepted(op: str) -> None:
    value: object = [1, 2] if op in ("in", "not in") else 1
    term = ("i", op) if op in ("is null", "is not null") else ("i", op, value)
    predicate = only([term])
    assert predicate.op == ("=" if op == "==" else op)  # == is another spelling of =
    assert predicate.type == TYPES["i"]


@pytest.mark.parametrize(
    ("spelled", "op"),
    [(" IN ", "in"), ("Not In", "not in"), ("IS NULL", "is null"), ("is NOT null", "is not null")],
)
def test_operators_are_case_and_space_insensitive(spelled: str, op: str) -> None:
    value: object = [1] if "in" in op.split() else None
    term = ("i", spelled, value) if value is not None else ("i", spelled)
    assert only([term]).op == op


def test_is_null_takes_no_value_but_tolerates_none() -> None:
    assert only([("i", "is null")]).values == ()
    assert only([("i", "is not null", None)]).values == ()


@pytest.mark.parametrize("value", [False, True, 0, "x"])
def test_is_null_with_a_value_is_refused(value: object) -> None:
    """A user's ("x", "is null", False) returned the null rows: the value was ignored, though
    it could only mean something else ("is not null"?)."""
    for op in ("is null", "is not null"):
        with pytest.raises(InvalidFilterError, match=f"'{op}' on column 'i' takes no value"):
            only([("i", op, value)])


@pytest.mark.parametrize(
    ("raw", "column"),
    [
        ([("nope", "=", 1)], "nope"),
        ([[("i", "=", 1)], [("ghost", "<", 2)]], "ghost"),
        ([("i", "<>", 1)], "i"),
        ([("i", "like", 1)], "i"),
        ([("i", "=", None)], "i"),
        ([("i", "!=", None)], "i"),
        ([("i", "in", [1, None])], "i"),
        ([("i", "=")], "i"),
        ([("i", "in", "abc")], "i"),
        ([("s", "in", "abc")], "s"),
        ([("bin", "in", b"abc")], "bin"),
        ([("i", "in", 5)], "i"),
        ([("i", "=", "1")], "i"),
        ([("i", "=", True)], "i"),
        ([("i", "=", [1])], "i"),
        ([("i8", "<", Decimal("1"))], "i8"),
        ([("f", "=", "1.5")], "f"),
        ([("f", "=", False)], "f"),
        ([("s", "=", 1)], "s"),
        ([("s", "=", b"x")], "s"),
        ([("b", "=", 1)], "b"),
        ([("b", "=", "true")], "b"),
        ([("bin", "=", "x")], "bin"),
        ([("bin", "=", bytearray(b"x"))], "bin"),
        ([("d", "=", 1.5)], "d"),
        ([("d", "=", "abc")], "d"),
        ([("d", "=", True)], "d"),
        ([("d", "=", Decimal("NaN"))], "d"),
        ([("d", "<", Decimal("Infinity"))], "d"),
        ([("d", "in", ["1", "-inf"])], "d"),
        ([("day", "=", "2024-13-01")], "day"),
        ([("day", "=", 19_000)], "day"),
        ([("day", "=", 1.0)], "day"),
        ([("ts", "=", "yesterday")], "ts"),
        ([("ts", "=", 1_700_000_000)], "ts"),
        ([("t", "=", "10:00")], "t"),
        ([("t", "=", dt.datetime(2024, 1, 1))], "t"),
        # "not a time" matched nothing, as NaN does (found by a docs-only hunt)
        ([("ts", "=", pd.NaT)], "ts"),
        ([("ts", "in", [dt.datetime(2024, 1, 1), pd.NaT])], "ts"),
        ([("ts", "!=", pd.NaT)], "ts"),
        ([("tz", "<", pd.NaT)], "tz"),
        ([("day", "=", pd.NaT)], "day"),
        ([("ts", "=", np.datetime64("NaT"))], "ts"),
        ([("ts_ns", "=", np.datetime64("NaT", "ns"))], "ts_ns"),
        # beyond every finite float64: there is no nearest float64 (was a bare OverflowError)
        ([("f", "<", 10**400)], "f"),
        ([("f32", ">", -(10**400))], "f32"),
        ([("f", "in", [1, 10**400])], "f"),
    ],
)
def test_invalid_terms_name_the_column(raw: object, column: str) -> None:
    with pytest.raises(InvalidFilterError) as info:
        parse_filter(raw, TYPES)
    assert repr(column) in str(info.value) or f"'{column}'" in str(info.value)


@pytest.mark.parametrize(
    "raw",
    [
        [],
        (),
        "i = 1",
        5,
        [()],
        [[]],
        [("i",)],
        [("i", "=", 1, 2)],
        ["i"],
        [[("i", "=", 1)], []],
        [[("i", "=", 1)], "x"],
        [(1, "=", 1)],
    ],
)
def test_malformed_filters_are_rejected(raw: object) -> None:
    with pytest.raises(InvalidFilterError):
        parse_filter(raw, TYPES)


# ---- conversion to stored values ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value", "stored"),
    [
        ("i", 5, 5),
        ("i", -(2**63), -(2**63)),
        ("f", 3, 3.0),
        ("f", -1.25, -1.25),
        ("f32", 0.5, 0.5),
        ("b", True, True),
        ("s", "héllo", "héllo"),
        ("bin", b"\x00\xff", b"\x00\xff"),
        ("day", dt.date(2024, 1, 31), 19_753),
        ("day", "2024-01-31", 19_753),
        ("day", dt.date(1969, 12, 31), -1),
        ("day64", dt.date(2024, 1, 31), 19_753),  # date64 statistics are days too
        ("ts", dt.datetime(2024, 1, 31, 10, 20, 30, 123_456), 1_706_696_430_123_456),
        ("ts", "2024-01-31T10:20:30.123456", 1_706_696_430_123_456),
        ("ts", "2024-01-31T12:20:30.123456+02:00", 1_706_696_430_123_456),
        ("ts", "2024-01-31T10:20:30.123456Z", 1_706_696_430_123_456),
        (
            "ts",
            dt.datetime(
                2024, 1, 31, 5, 20, 30, 123_456, tzinfo=dt.timezone(dt.timedelta(hours=-5))
            ),
            1_706_696_430_123_456,
        ),
        ("ts", dt.date(2024, 1, 31), 1_706_659_200_000_000),  # midnight
        ("ts", dt.datetime(1969, 12, 31, 23, 59, 59, 999_999), -1),
        ("ts_s", dt.datetime(2024, 1, 31, 10, 20, 30), 1_706_696_430),
        ("ts_ms", dt.datetime(2024, 1, 31, 10, 20, 30, 123_000), 1_706_696_430_123),
        ("ts_ns", dt.datetime(2024, 1, 31, 10, 20, 30, 123_456), 1_706_696_430_123_456_000),
        ("tz", dt.datetime(2024, 1, 31, 10, 20, 30), 1_706_696_430_000),  # naive means UTC
        (
            "tz",
            dt.datetime(2024, 1, 31, 11, 20, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            1_706_696_430_000,
        ),
        ("t", dt.time(10, 20, 30, 500_000), 37_230_500_000),
        ("t_s", dt.time(10, 20, 30), 37_230),
        ("t_ms", dt.time(10, 20, 30, 500_000), 37_230_500),
        ("t_ns", dt.time(0, 0, 0, 1), 1_000),
        ("d", Decimal("1.50"), "1.50"),  # decimals as their text at the column's scale
        ("d", Decimal("-0.5"), "-0.50"),
        ("d", 3, "3.00"),
        ("d", "2.25", "2.25"),
        ("d", Decimal("1E+2"), "100.00"),
        ("d", "1e-2", "0.01"),
        ("ts_ns", "2024-01-31T10:20:30.123456789", 1_706_696_430_123_456_789),
        ("day", dt.datetime(2024, 1, 31), 19_753),  # a datetime at midnight is that date
        # numpy scalars, as pandas and numpy hand them out, hold Python values exactly
        ("i", np.int64(-(2**63)), -(2**63)),
        ("i", np.uint8(7), 7),
        ("f", np.float32(0.1), float(np.float32(0.1))),  # widened exactly, not re-rounded
        ("f32", np.float16(0.5), 0.5),
        ("f", np.int32(3), 3.0),
        ("b", np.bool_(True), True),
        ("s", np.str_("héllo"), "héllo"),
        ("bin", np.bytes_(b"\x00\xff"), b"\x00\xff"),
        ("d", np.int64(3), "3.00"),
        ("day", np.datetime64("2024-01-31"), 19_753),
    ],
)
def test_to_stored(column: str, value: object, stored: StatValue) -> None:
    result = to_stored(value, TYPES[column], column)
    assert result == stored
    assert type(result) is type(stored)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("i", 2.5),  # a fraction: no integer equals it
        ("i8", 128),
        ("day", dt.datetime(2024, 1, 31, 23, 59)),  # once cut to its date
        ("ts_s", dt.datetime(2024, 1, 31, 10, 20, 30, 1)),
        ("d", Decimal("1.005")),
        ("i8", np.int64(128)),
        ("d", np.float64(1.5)),  # a float is inexact for a decimal, from numpy too
        ("b", np.int64(1)),
        ("i", np.timedelta64(1, "s")),
    ],
)
def test_to_stored_refuses_a_value_the_column_cannot_hold_exactly(
    column: str, value: object
) -> None:
    """What a partition spec names must be a value of the column: a value between two
    stored values (or beyond them) would name no partition, or the wrong one."""
    with pytest.raises(InvalidFilterError, match=f"column '{column}'"):
        to_stored(value, TYPES[column], column)


def test_to_stored_rejects_none_naming_the_column() -> None:
    with pytest.raises(InvalidFilterError, match=r"'col'.*is null"):
        to_stored(None, TYPES["i"], "col")


# ---- exact semantics ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("term", "value", "expected"),
    [
        (("i", "=", 1), 1, True),
        (("i", "=", 1), 2, False),
        (("i", "=", 1), None, False),
        (("i", "!=", 1), 2, True),
        (("i", "!=", 1), 1, False),
        (("i", "!=", 1), None, False),  # null != 1 is unknown: not a match
        (("i", "<", 1), 0, True),
        (("i", "<", 1), 1, False),
        (("i", "<", 1), None, False),
        (("i", "<=", 1), 1, True),
        (("i", ">", 1), 2, True),
        (("i", ">", 1), 1, False),
        (("i", ">=", 1), 1, True),
        (("i", ">=", 1), None, False),
        (("i", "in", [1, 3]), 3, True),
        (("i", "in", [1, 3]), 2, False),
        (("i", "in", [1, 3]), None, False),
        (("i", "in", []), 1, False),
        (("i", "not in", [1, 3]), 2, True),
        (("i", "not in", [1, 3]), 1, False),
        (("i", "not in", [1, 3]), None, False),  # null not in (...) is unknown
        (("i", "not in", []), 5, True),
        (("i", "is null"), None, True),
        (("i", "is null"), 0, False),
        (("i", "is not null"), 0, True),
        (("i", "is not null"), None, False),
        (("i", "=", 2.5), 2, False),
        (("i", "<", 2.5), 2, True),
        (("i", ">", 2.5), 2, False),
        (("d", ">", Decimal("9.1")), "10.50", True),  # numeric, not string, order
        (("d", "<", Decimal("-1")), "-2.00", True),
        (("d", "=", Decimal("1.5")), "1.50", True),
        (("d", "in", [Decimal("1.500"), 2]), "1.50", True),
        (("d", "in", ["2"]), "2.00", True),
        (("d", "not in", ["2"]), "2.00", False),
        (("s", "<", "b"), "a", True),
        (("s", "<", "b"), "ab", True),
        (("s", "<", "b"), "b", False),
        (("s", ">", ""), "", False),
        (("s", "=", "É"), "É", True),
        (("bin", "<", b"\x80"), b"\x7f\xff", True),
        (("b", "=", True), True, True),
        (("b", "=", True), False, False),
        (("b", "!=", True), None, False),
        (("day", "=", dt.date(2024, 1, 31)), 19_753, True),
        (("day", "<", "2024-01-31"), 19_752, True),
        (("ts", ">=", "2024-01-31"), 1_706_659_200_000_000, True),
        (("f", "=", 0.0), -0.0, True),
    ],
)
def test_predicate_test(term: tuple[Any, ...], value: StatValue, expected: bool) -> None:
    assert only([term]).test(value) is expected


def _unit_value(moment: dt.datetime, unit: str) -> int:
    delta = moment - EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros * {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit] // 10**6


def _truncate(moment: dt.datetime, unit: str) -> dt.datetime:
    if unit == "s":
        return moment.replace(microsecond=0)
    if unit == "ms":
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    return moment


def test_filter_value_finer_than_the_column_unit_is_compared_exactly() -> None:
    # ts_s holds whole seconds; 10:00:00 < 10:00:00.5 is true, 10:00:00 = 10:00:00.5 is not.
    row = dt.datetime(2024, 1, 1, 10)
    stored = _unit_value(row, "s")
    probe = dt.datetime(2024, 1, 1, 10, 0, 0, 500_000)
    for op in ("=", "!=", "<", "<=", ">", ">="):
        predicate = only([("ts_s", op, probe)])
        assert predicate.test(stored) is COMPARE[op](row, probe), op
        if not predicate.may_match(stored, stored, 0, 1):
            assert not predicate.test(stored), op
    assert only([("ts_s", "in", [probe, row])]).test(stored)
    assert not only([("ts_s", "in", [probe])]).test(stored)
    assert only([("ts_s", "not in", [probe])]).test(stored)
    assert only([("t_ms", "<", dt.time(0, 0, 0, 1500))]).test(1)  # 1 ms < 1.5 ms


moments = st.datetimes(
    min_value=dt.datetime(2024, 1, 1), max_value=dt.datetime(2024, 1, 1, 0, 0, 5)
)


@PROPERTY
@given(
    st.sampled_from(["s", "ms", "us"]),
    st.lists(st.none() | moments, min_size=1, max_size=6),
    st.sampled_from(ALL_OPS),
    st.lists(moments, min_size=1, max_size=3),
    st.booleans(),
)
def test_timestamp_and_time_predicates_match_python_comparisons(
    unit: str,
    rows: list[dt.datetime | None],
    op: str,
    probes: list[dt.datetime],
    as_time: bool,
) -> None:
    data = [None if r is None else _truncate(r, unit) for r in rows]
    midnight = _unit_value(dt.datetime(2024, 1, 1), unit)
    if as_time:
        column = {"s": "t_s", "ms": "t_ms", "us": "t"}[unit]
        python: list[Any] = [None if r is None else r.time() for r in data]
        targets: list[Any] = [p.time() for p in probes]
        stored = [None if r is None else _unit_value(r, unit) - midnight for r in data]
    else:
        column = {"s": "ts_s", "ms": "ts_ms", "us": "ts"}[unit]
        python, targets = list(data), list(probes)
        stored = [None if r is None else _unit_value(r, unit) for r in data]
    target: object = targets if op in ("in", "not in") else targets[0]
    term = (column, op) if op in ("is null", "is not null") else (column, op, target)
    predicate = only([term])
    for value, stored_value in zip(python, stored, strict=True):
        assert predicate.test(stored_value) is model(op, value, target), (value, stored_value)
    assert_sound(predicate, stored, python, target)


# ---- soundness of pruning -----------------------------------------------------------------------

DATA_DAYS = st.dates(min_value=dt.date(2023, 12, 28), max_value=dt.date(2024, 1, 6))
DATA_DECIMALS = st.integers(-1500, 1500).map(lambda n: Decimal(n).scaleb(-2))


#: column -> (data values as Python, filter values as Python, Python value -> stored value)
DOMAINS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any], Callable[[Any], Any]]] = {
    "i": (
        st.integers(-20, 20),
        st.integers(-22, 22) | st.sampled_from([-2.5, 0.5, 3.25, 1e30, -1e30]),
        lambda v: v,
    ),
    "s": (
        st.text(alphabet="ab\u00e9\U0001f600", max_size=3),
        st.text(alphabet="ab\u00e9\U0001f600", max_size=4),
        lambda v: v,
    ),
    "d": (
        DATA_DECIMALS,
        DATA_DECIMALS
        | st.integers(-16000, 16000).map(lambda n: Decimal(n).scaleb(-3))
        | st.integers(-16, 16),
        lambda v: format(v, "f"),
    ),
    "day": (
        DATA_DAYS,
        st.dates(min_value=dt.date(2023, 12, 26), max_value=dt.date(2024, 1, 8)),
        lambda v: (v - EPOCH_DAY).days,
    ),
}


def stats_of(stored: Sequence[Any], python: Sequence[Any]) -> tuple[Any, Any, int]:
    present = [(p, s) for p, s in zip(python, stored, strict=True) if p is not None]
    if not present:
        return None, None, len(stored)
    low = min(present, key=lambda pair: pair[0])[1]
    high = max(present, key=lambda pair: pair[0])[1]
    return low, high, len(stored) - len(present)


def assert_sound(
    predicate: Predicate, stored: Sequence[Any], python: Sequence[Any], target: object
) -> None:
    """Whatever subset of the statistics is known, a "no" from may_match is never wrong."""
    low, high, nulls = stats_of(stored, python)
    rows = len(stored)
    matching = [v for v in stored if predicate.test(v)]
    for known_low, known_high, known_nulls in (
        (low, high, nulls),
        (None, None, nulls),
        (low, high, None),
        (None, None, None),
        (low, None, nulls),
    ):
        if not predicate.may_match(known_low, known_high, known_nulls, rows):
            assert not matching, (predicate, known_low, known_high, known_nulls, matching)


@st.composite
def predicates_on(draw: st.DrawFn, column: str) -> tuple[tuple[Any, ...], str, object]:
    _, probes, _ = DOMAINS[column]
    op = draw(st.sampled_from(ALL_OPS))
    if op in ("is null", "is not null"):
        return (column, op), op, None
    if op in ("in", "not in"):
        target: object = draw(st.lists(probes, max_size=4))
    else:
        target = draw(probes)
    return (column, op, target), op, target


@st.composite
def columns_with_values(draw: st.DrawFn) -> tuple[str, list[Any]]:
    column = draw(st.sampled_from(sorted(DOMAINS)))
    values, _, _ = DOMAINS[column]
    return column, draw(st.lists(st.none() | values, min_size=0, max_size=8))


@PROPERTY
@given(st.data(), columns_with_values())
def test_may_match_is_sound(data: st.DataObject, column_values: tuple[str, list[Any]]) -> None:
    column, python = column_values
    term, op, target = data.draw(predicates_on(column))
    _, _, store = DOMAINS[column]
    stored = [None if v is None else store(v) for v in python]
    predicate = only([term])
    for value, stored_value in zip(python, stored, strict=True):  # exact semantics
        assert predicate.test(stored_value) is model(op, value, target)
    assert_sound(predicate, stored, python, target)


def test_may_match_prunes_what_it_can() -> None:
    assert not only([("i", "=", 5)]).may_match(1, 4, 0, 10)
    assert only([("i", "=", 4)]).may_match(1, 4, 0, 10)
    assert not only([("i", "<", 1)]).may_match(1, 4, 0, 10)
    assert not only([("i", ">", 4)]).may_match(1, 4, 0, 10)
    assert not only([("i", "in", [0, 5])]).may_match(1, 4, 0, 10)
    assert not only([("i", "!=", 3)]).may_match(3, 3, 2, 10)
    assert not only([("i", "not in", [3, 7])]).may_match(3, 3, 0, 10)
    assert only([("f", "!=", 3.0)]).may_match(3.0, 3.0, 0, 10)  # NaN rows are not in stats
    assert only([("f", "not in", [3.0])]).may_match(3.0, 3.0, 0, 10)
    assert not only([("i", "is null")]).may_match(1, 4, 0, 10)
    assert only([("i", "is null")]).may_match(1, 4, None, 10)
    assert not only([("i", "is not null")]).may_match(None, None, 10, 10)
    assert not only([("i", "=", 1)]).may_match(None, None, 10, 10)  # all null
    assert not only([("d", ">", Decimal("10.5"))]).may_match("9.00", "10.50", 0, 3)
    assert only([("d", ">", Decimal("10.49"))]).may_match("9.00", "10.50", 0, 3)


@PROPERTY
@given(
    st.lists(st.none() | st.text(alphabet="ab\u00ff\U0010ffff", max_size=5), max_size=6),
    st.integers(1, 3),
    st.data(),
)
def test_may_match_is_sound_with_truncated_string_statistics(
    python: list[str | None], limit: int, data: st.DataObject
) -> None:
    term, _, _ = data.draw(
        predicates_on("s").filter(lambda t: t[1] not in ("is null", "is not null"))
    )
    collector = StatsCollector([FieldSpec(name="s", type=TYPES["s"])], f"truncate({limit})", limit)
    collector.update(pa.table({"s": pa.array(python, pa.string())}))
    nulls, mins, maxs = collector.result()
    predicate = only([term])
    low = mins[0] if mins else None
    high = maxs[0] if maxs else None
    if not predicate.may_match(low, high, nulls[0], len(python)):
        assert not any(predicate.test(v) for v in python), (low, high)


# ---- whole filters over files and partitions ----------------------------------------------------

FILE_COLUMNS = ("i", "s", "d", "day")
POSITIONS = {name: index for index, name in enumerate(FILE_COLUMNS)}


@st.composite
def dnf_filters(draw: st.DrawFn, columns: Sequence[str]) -> list[list[tuple[Any, ...]]]:
    clauses = []
    for _ in range(draw(st.integers(1, 3))):
        terms = [draw(predicates_on(draw(st.sampled_from(columns))))[0] for _ in range(3)]
        clauses.append(terms[: draw(st.integers(1, 3))])
    return clauses


@st.composite
def row_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(0, 6))
    return [{c: draw(st.none() | DOMAINS[c][0]) for c in FILE_COLUMNS} for _ in range(count)]


def stored_row(row: dict[str, Any]) -> dict[str, Any]:
    return {c: None if v is None else DOMAINS[c][2](v) for c, v in row.items()}


def satisfies(parsed: Filter, row: dict[str, Any]) -> bool:
    stored = stored_row(row)
    return any(all(p.test(stored[p.column]) for p in clause) for clause in parsed.clauses)


def file_of(rows: list[dict[str, Any]], *, drop_stats: bool) -> DataFileMeta:
    nulls, mins, maxs = [], [], []
    for column in FILE_COLUMNS:
        python = [r[column] for r in rows]
        stored = [None if v is None else DOMAINS[column][2](v) for v in python]
        low, high, null_count = stats_of(stored, python)
        nulls.append(null_count)
        mins.append(low)
        maxs.append(high)
    return DataFileMeta(
        path="f",
        file_size=1,
        row_count=len(rows),
        min_seq=0,
        max_seq=max(0, len(rows) - 1),
        schema_id=0,
        creation_time_ms=0,
        source=0,
        null_counts=() if drop_stats else tuple(nulls),
        min_values=() if drop_stats else tuple(mins),
        max_values=() if drop_stats else tuple(maxs),
    )


@PROPERTY
@given(row_sets(), dnf_filters(FILE_COLUMNS), st.booleans())
def test_may_match_file_is_sound(
    rows: list[dict[str, Any]], raw: list[list[tuple[Any, ...]]], drop_stats: bool
) -> None:
    parsed = parse_filter(raw, TYPES)
    assert parsed is not None
    file = file_of(rows, drop_stats=drop_stats)
    if drop_stats:
        assert parsed.may_match_file(file, POSITIONS)
    if not parsed.may_match_file(file, POSITIONS):
        assert not any(satisfies(parsed, r) for r in rows)
    # Columns the file has no statistics for (e.g. added later) never prune.
    assert parsed.may_match_file(file, {})


def test_may_match_file_examples() -> None:
    rows = [
        {"i": 1, "s": "a", "d": Decimal("1.00"), "day": dt.date(2024, 1, 1)},
        {"i": 5, "s": "b", "d": None, "day": dt.date(2024, 1, 2)},
    ]
    file = file_of(rows, drop_stats=False)

    def keeps(raw: object) -> bool:
        parsed = parse_filter(raw, TYPES)
        assert parsed is not None
        return parsed.may_match_file(file, POSITIONS)

    assert keeps([("i", "=", 3)])
    assert not keeps([("i", "=", 6)])
    assert not keeps([("i", "=", 3), ("s", ">", "b")])  # AND: one impossible term
    assert keeps([[("i", "=", 6)], [("s", "=", "a")]])  # OR: one possible clause
    assert not keeps([[("i", "=", 6)], [("s", "=", "c")]])
    assert keeps([("d", "is null")])
    assert not keeps([("day", "is null")])
    assert not keeps([("day", ">", dt.date(2024, 1, 2))])


PARTITION_KEYS = ("day", "s")


@PROPERTY
@given(
    st.none() | DOMAINS["day"][0],
    st.none() | DOMAINS["s"][0],
    st.lists(st.none() | DOMAINS["i"][0], max_size=4),
    dnf_filters(("day", "s", "i")),
)
def test_matches_partition_is_sound_and_exact_on_partition_columns(
    day: dt.date | None, s: str | None, others: list[int | None], raw: list[list[tuple[Any, ...]]]
) -> None:
    parsed = parse_filter(raw, TYPES)
    assert parsed is not None
    stored_partition = (
        None if day is None else DOMAINS["day"][2](day),
        s,
    )
    rows = [{"day": day, "s": s, "i": i, "d": None} for i in others]
    decision = parsed.matches_partition(PARTITION_KEYS, stored_partition)
    if not decision:
        assert not any(satisfies(parsed, r) for r in rows)
    # With only partition columns in the filter, the decision is exact.
    partition_only = parse_filter(
        [[t for t in clause if t[0] != "i"] or [("day", "is null")] for clause in raw], TYPES
    )
    assert partition_only is not None
    assert partition_only.matches_partition(PARTITION_KEYS, stored_partition) == satisfies(
        partition_only, {"day": day, "s": s, "i": None, "d": None}
    )


def test_matches_partition_examples() -> None:
    parsed = parse_filter([[("day", "=", "2024-01-01"), ("i", ">", 3)], [("s", "=", "x")]], TYPES)
    assert parsed is not None
    jan1 = (dt.date(2024, 1, 1) - EPOCH_DAY).days
    assert parsed.matches_partition(PARTITION_KEYS, (jan1, "y"))
    assert parsed.matches_partition(PARTITION_KEYS, (jan1 + 1, "x"))
    assert not parsed.matches_partition(PARTITION_KEYS, (jan1 + 1, "y"))
    assert not parsed.matches_partition(PARTITION_KEYS, (None, None))
    assert parsed.matches_partition((), ())  # unpartitioned: nothing to decide


# ---- buckets ------------------------------------------------------------------------------------

BUCKET_TYPES = {
    "a": TypeSpec(kind="int64"),
    "k": TypeSpec(kind="decimal", precision=10, scale=2),
    "x": TypeSpec(kind="int64"),
    "s": TypeSpec(kind="string"),
}


def fake_bucket_of(values: tuple[StatValue, ...], key: Sequence[str] = ("a",)) -> int:
    """A bucket function that, like the real one, sees a decimal as a number."""
    canonical = tuple(
        Decimal(str(v)) if BUCKET_TYPES[column].kind == "decimal" else v
        for v, column in zip(values, key, strict=True)
    )
    return hash(canonical) % 16


def pinned(raw: object, key: Sequence[str] = ("a",)) -> set[int] | None:
    parsed = parse_filter(raw, BUCKET_TYPES)
    assert parsed is not None

    def bucket_of(values: tuple[StatValue, ...]) -> int:
        assert len(values) == len(key)
        return fake_bucket_of(values, key)

    return parsed.buckets(key, bucket_of)


def b(*values: StatValue, key: Sequence[str] = ("a",)) -> int:
    return fake_bucket_of(tuple(values), key)


def test_buckets_pinned_by_equality_and_in() -> None:
    assert pinned([("a", "=", 3)]) == {b(3)}
    assert pinned([("a", "==", 3)]) == {b(3)}
    assert pinned([("a", "in", [1, 2, 3])]) == {b(1), b(2), b(3)}
    assert pinned([("a", "in", [])]) == set()  # matches nothing: reads nothing
    assert pinned([("a", "=", 3), ("x", ">", 1)]) == {b(3)}
    assert pinned([[("a", "=", 1)], [("a", "in", [2, 3])]]) == {b(1), b(2), b(3)}


def test_buckets_multi_column_key_takes_the_product() -> None:
    key = ("a", "s")
    assert pinned([("a", "in", [1, 2]), ("s", "in", ["x", "y"])], key) == {
        b(1, "x", key=key),
        b(1, "y", key=key),
        b(2, "x", key=key),
        b(2, "y", key=key),
    }
    assert pinned([("s", "=", "x"), ("a", "=", 1)], key) == {b(1, "x", key=key)}


@pytest.mark.parametrize(
    "raw",
    [
        [("x", "=", 1)],  # another column
        [("a", ">", 1)],
        [("a", "!=", 1)],
        [("a", "not in", [1])],
        [("a", "is null")],  # nulls hash too, but `is null` is not a pin here
        [[("a", "=", 1)], [("x", "=", 1)]],  # one clause does not pin
    ],
)
def test_buckets_give_up_unless_every_clause_pins(raw: object) -> None:
    assert pinned(raw) is None


def test_buckets_need_every_key_column() -> None:
    assert pinned([("a", "=", 1)], ("a", "s")) is None
    assert pinned([("a", "=", 1)], ()) is None


def test_buckets_intersect_several_pins_of_one_column() -> None:
    assert pinned([("a", "in", [1, 2, 3]), ("a", "in", [2, 3, 4]), ("a", "=", 3)]) == {b(3)}
    assert pinned([("a", "=", 1), ("a", "=", 2)]) == set()
    assert pinned([("a", "=", 2), ("a", "=", 2.0)]) == {b(2)}


def test_buckets_intersect_decimals_by_value_not_spelling() -> None:
    # 1.0 and 1.00 are the same number: a row with k = 1.00 matches both terms.
    k = ("k",)
    assert pinned([("k", "=", Decimal("1.0")), ("k", "in", [Decimal("1.00")])], k) == {
        b("1.00", key=k)
    }
    assert pinned([("k", "in", ["2", "2.0", "2.000"])], k) == {b("2", key=k)}
    assert pinned([("k", "in", ["2", "3"]), ("k", "in", ["3.0", "2.00", "4"])], k) == {
        b("2", key=k),
        b("3", key=k),
    }


def test_buckets_give_up_above_the_combination_cap() -> None:
    key = ("a", "x")
    at_cap = pinned([("a", "in", list(range(64))), ("x", "in", list(range(64)))], key)
    assert at_cap is not None
    assert at_cap == {b(i, j, key=key) for i in range(64) for j in range(64)}
    assert pinned([("a", "in", list(range(65))), ("x", "in", list(range(64)))], key) is None
    # The cap applies per clause.
    assert pinned([[("a", "in", list(range(4000)))], [("a", "in", list(range(4000)))]]) is not None


KEY_DECIMALS = st.tuples(
    st.sampled_from([0, 1, 2]), st.sampled_from([0, -1]), st.sampled_from([0, 1, 2, 3])
).map(lambda t: Decimal(t[0]).scaleb(t[1]).quantize(Decimal(1).scaleb(-max(t[2], -t[1]))))


@st.composite
def pinning_clauses(draw: st.DrawFn) -> list[tuple[str, str, Any]]:
    """Mostly clauses that pin both key columns, often several times (to intersect)."""
    terms: list[tuple[str, str, Any]] = [
        ("a", draw(st.sampled_from(["=", "in"])), draw(st.integers(0, 2)))
    ]
    for _ in range(draw(st.integers(1, 3))):
        terms.append(("k", draw(st.sampled_from(["=", "in", "=", "in", ">"])), draw(KEY_DECIMALS)))
    if draw(st.booleans()):
        terms.append(("a", draw(st.sampled_from(["<", "!=", "in"])), draw(st.integers(0, 2))))
    return draw(st.permutations(terms))


@settings(PROPERTY, max_examples=250)
@given(
    st.lists(st.tuples(st.integers(0, 2), KEY_DECIMALS), max_size=12),
    st.lists(pinning_clauses(), min_size=1, max_size=3),
)
def test_buckets_are_sound(
    rows: list[tuple[int, Decimal]], clauses: list[list[tuple[str, str, Any]]]
) -> None:
    key = ("a", "k")
    raw = [[(c, op, [v, v + 1] if op == "in" else v) for c, op, v in clause] for clause in clauses]
    parsed = parse_filter(raw, BUCKET_TYPES)
    assert parsed is not None
    buckets = parsed.buckets(key, lambda values: fake_bucket_of(values, key))
    if buckets is None:
        return
    for a, k in rows:
        stored = {"a": a, "k": format(k.quantize(Decimal("0.01")), "f")}
        if any(all(p.test(stored[p.column]) for p in clause) for clause in parsed.clauses):
            assert fake_bucket_of((stored["a"], stored["k"]), key) in buckets
