"""The table of filter operators (``appendtable.planning.operators``): complete, its text forms
round-trip through the parsers, and each operator's row test, statistics rule and Arrow
expression agree with pyarrow compute over values of several types, nulls and NaN included.

The reference is built here from pyarrow compute's comparison kernels alone, with SQL
semantics: a null satisfies only ``is null``; ``in`` is the OR of ``=`` (so NaN is in no list)
and ``not in`` its negation.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import appendtable as at
from appendtable.cli.value_parsing import parse_filter as parse_cli_filter
from appendtable.datafiles.arrow_schema import type_spec
from appendtable.datafiles.expressions import pushdown_expression, to_expression
from appendtable.display import filter_text
from appendtable.metadata.models import DataFileMeta
from appendtable.planning.filters import Filter, parse_filter
from tests.helpers import strategies

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EPOCH = dt.date(1970, 1, 1)

#: The reference for an operator comparing with values: pyarrow compute's kernel.
KERNELS: dict[str, Callable[[Any, Any], Any]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
TYPES = [
    pa.int64(),
    pa.int8(),
    pa.float64(),
    pa.float32(),
    pa.string(),
    pa.binary(),
    pa.bool_(),
    pa.decimal128(10, 2),
    pa.date32(),
]


def reference(column: pa.Array, op: str, operand: Any) -> list[bool]:
    """Which rows of ``column`` satisfy ``op`` with ``operand``, by pyarrow compute."""
    if op == "is null":
        mask = pc.is_null(column)
    elif op == "is not null":
        mask = pc.is_valid(column)
    elif op in ("in", "not in"):
        equal = [pc.equal(column, pa.scalar(v)) for v in operand]
        found = functools.reduce(pc.or_kleene, equal, pa.repeat(False, len(column)))
        mask = found if op == "in" else pc.and_kleene(pc.invert(found), pc.is_valid(column))
    else:
        mask = KERNELS[op](column, pa.scalar(operand))
    return [bool(v) for v in pc.fill_null(mask, False).to_pylist()]


def stored(value: Any, dtype: pa.DataType) -> Any:
    """A Python value in the stored form a predicate compares (decimals as text of the scale,
    dates as days since 1970)."""
    if value is None:
        return None
    if pa.types.is_decimal(dtype):
        return format(value, "f")
    if pa.types.is_date(dtype):
        return (value - EPOCH).days
    return value


def not_nan(value: Any) -> bool:
    return not (isinstance(value, float) and math.isnan(value))


@st.composite
def cases(draw: st.DrawFn, op: at.FilterOp) -> tuple[pa.DataType, list[Any], Any]:
    """(column type, column values with nulls, an operand of ``op`` in the filter's form)."""
    dtype = draw(st.sampled_from(TYPES))
    value = strategies.python_values(dtype)
    if pa.types.is_floating(dtype):  # mostly a few values, NaN among them, so they repeat
        few = st.sampled_from([math.nan, 0.0, -0.0, 1.5])
        value = st.one_of(few, few, few, value)
    rows = draw(st.lists(st.one_of(st.none(), value), max_size=12))
    operands = at.filter_operator(op).operands
    if operands is at.FilterOperands.NONE:
        operand = None
    elif operands is at.FilterOperands.LIST:
        present = [v for v in rows if v is not None]
        pick = st.sampled_from(present) if present else value
        operand = draw(st.lists(st.one_of(value, pick), max_size=4))
    else:
        present = [v for v in rows if v is not None]
        operand = draw(st.one_of(value, st.sampled_from(present)) if present else value)
    return dtype, rows, operand


def _term(op: at.FilterOp, operand: Any) -> tuple[Any, ...]:
    if at.filter_operator(op).operands is at.FilterOperands.NONE:
        return ("x", op.value)
    return ("x", op.value, operand)


# ---- the table is complete ---------------------------------------------------------------------


@pytest.mark.parametrize("op", list(at.FilterOp), ids=str)
def test_every_operator_has_every_column(op: at.FilterOp) -> None:
    rule = at.filter_operator(op)
    assert rule.op is op
    assert isinstance(rule.operands, at.FilterOperands)
    for flag in (rule.matches_null, rule.matches_nan, rule.pins_values):
        assert isinstance(flag, bool)
    operand: Any = {
        at.FilterOperands.NONE: None,
        at.FilterOperands.ONE: 1,
        at.FilterOperands.LIST: [1, 2],
    }[rule.operands]
    assert isinstance(rule.test(1, operand), bool)
    assert isinstance(rule.may_match(0, 3, 0, 4, operand, False), bool)
    arrow_operand: Any = {
        at.FilterOperands.NONE: None,
        at.FilterOperands.ONE: pa.scalar(1),
        at.FilterOperands.LIST: pa.array([1, 2]),
    }[rule.operands]
    expression = rule.arrow(pc.field("x"), arrow_operand)
    assert isinstance(expression, pc.Expression)
    # the two flags agree with the row test where they describe it
    nan_operand: Any = {
        at.FilterOperands.NONE: None,
        at.FilterOperands.ONE: 1.0,
        at.FilterOperands.LIST: [1.0, math.nan],
    }[rule.operands]
    assert rule.matches_nan == bool(rule.test(math.nan, nan_operand))


def test_operators_have_distinct_spellings() -> None:
    spellings = [s for op in at.FilterOp for s in (op.value, *at.filter_operator(op).aliases)]
    assert len(spellings) == len(set(spellings))
    assert all(s == s.lower().strip() for s in spellings)


@pytest.mark.parametrize(
    "spelled",
    [s for op in at.FilterOp for s in (op.value, *at.filter_operator(op).aliases)],
)
def test_every_spelling_parses_to_its_operator_in_any_case(spelled: str) -> None:
    op = next(o for o in at.FilterOp if spelled in (o.value, *at.filter_operator(o).aliases))
    for text in (spelled, spelled.upper(), f"  {spelled.title()} "):
        assert at.FilterOp.parse(text) is op
    assert at.FilterOp.parse(spelled + "x") is None


ROUND_TRIP_SCHEMA = pa.schema([("x", pa.int64()), ("s", pa.string())])
COLUMN_TYPES = {f.name: type_spec(f.type) for f in ROUND_TRIP_SCHEMA}


@pytest.mark.parametrize("op", list(at.FilterOp), ids=str)
@pytest.mark.parametrize(("column", "operand"), [("x", 7), ("s", "it's")])
def test_text_form_round_trips_through_the_command_line(
    op: at.FilterOp, column: str, operand: object
) -> None:
    """A predicate shown as text (``explain``) and read back by ``--filter`` is the same
    predicate; so is the term written with every spelling of its operator."""
    operands = at.filter_operator(op).operands
    value: Any = [operand] if operands is at.FilterOperands.LIST else operand
    term = (column, op.value) if operands is at.FilterOperands.NONE else (column, op.value, value)
    parsed = parse_filter([term], COLUMN_TYPES)
    assert parsed is not None
    text = filter_text(parsed)
    again = parse_filter([parse_cli_filter(text, ROUND_TRIP_SCHEMA)], COLUMN_TYPES)
    assert again == parsed, text
    (predicate,) = parsed.clauses[0]
    assert predicate.op is op
    for spelled in (op.value, *at.filter_operator(op).aliases):
        written = text.replace(f" {op.value}", f" {spelled.upper()}", 1)
        from_cli = parse_filter([parse_cli_filter(written, ROUND_TRIP_SCHEMA)], COLUMN_TYPES)
        from_python = parse_filter([(term[0], spelled, *term[2:])], COLUMN_TYPES)
        assert from_cli == from_python == parsed, written


# ---- the table's behaviour agrees with pyarrow compute -----------------------------------------


@pytest.mark.parametrize("op", list(at.FilterOp), ids=str)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_row_test_statistics_rule_and_arrow_expression_agree_with_arrow_compute(
    op: at.FilterOp, data: st.DataObject
) -> None:
    dtype, rows, operand = data.draw(cases(op))
    check_against_arrow_compute(dtype, rows, op, operand)


@pytest.mark.parametrize(
    ("dtype", "rows", "op", "operand"),
    [
        (pa.float64(), [1.5, math.nan], at.FilterOp.NE, 1.5),
        (pa.float32(), [math.nan, 1.5, None], at.FilterOp.NOT_IN, [1.5]),
        (pa.float64(), [-0.0, math.nan, 0.0], at.FilterOp.NE, 0.0),
        (pa.float64(), [math.nan], at.FilterOp.IN, [math.nan]),
        (pa.float64(), [-0.0, None], at.FilterOp.IN, [0.0]),
    ],
    ids=repr,
)
def test_nan_and_signed_zeros_agree_with_arrow_compute(
    dtype: pa.DataType, rows: list[Any], op: at.FilterOp, operand: Any
) -> None:
    """A file whose statistics show one value may hold NaN rows, which != and not in match;
    NaN is in no list; -0.0 equals 0.0."""
    check_against_arrow_compute(dtype, rows, op, operand)


def check_against_arrow_compute(
    dtype: pa.DataType, rows: list[Any], op: at.FilterOp, operand: Any
) -> None:
    column = pa.array(rows, type=dtype)
    rows = column.to_pylist()  # as stored: a float32 column rounds 0.1
    expected = reference(column, op.value, operand)
    spec = type_spec(dtype)
    parsed = parse_filter([_term(op, operand)], {"x": spec})
    assert parsed is not None
    (predicate,) = parsed.clauses[0]
    assert predicate.op is op

    # the row test, on each stored value
    assert [predicate.test(stored(v, dtype)) for v in rows] == expected

    # the Arrow expression, exactly; the scanner's pushdown expression keeps every such row
    table = pa.table({"x": column})
    indices = pa.array(range(len(rows)), pa.int64())
    numbered = table.append_column("i", indices)
    exact = to_expression(parsed)
    assert exact is not None
    got = numbered.filter(exact).column("i").to_pylist()
    assert got == [i for i, hit in enumerate(expected) if hit]
    pushed = pushdown_expression(parsed)
    assert pushed is not None
    assert set(got) <= set(numbered.filter(pushed).column("i").to_pylist())

    # the statistics rule never rules out a file holding a matching row (statistics leave
    # NaN out, as Parquet's do)
    values = [v for v in rows if v is not None and not_nan(v)]
    low = stored(min(values), dtype) if values else None
    high = stored(max(values), dtype) if values else None
    nulls = sum(v is None for v in rows)
    if any(expected):
        assert predicate.may_match(low, high, nulls, len(rows))
        assert Filter(((predicate,),)).may_match_file(_file(low, high, nulls, len(rows)), {"x": 0})


def _file(low: Any, high: Any, nulls: int, rows: int) -> DataFileMeta:
    return DataFileMeta(
        path="f.parquet",
        file_size=1,
        row_count=rows,
        min_seq=0,
        max_seq=0,
        schema_id=0,
        creation_time_ms=0,
        source=0,
        null_counts=(nulls,),
        min_values=(low,),
        max_values=(high,),
    )


@PROPERTY
@given(
    st.sampled_from([t for t in TYPES if not pa.types.is_boolean(t)]),
    st.data(),
)
def test_statistics_rule_prunes_files_of_other_values(dtype: pa.DataType, data: Any) -> None:
    """Not only sound: a file whose values all lie above the operand is ruled out for ``=``,
    ``<``, ``<=`` and ``in``, and a file of nulls only for every operator comparing values."""
    value = strategies.python_values(dtype).filter(not_nan)
    below, low, high = sorted(data.draw(st.lists(value, min_size=3, max_size=3, unique=True)))
    spec = type_spec(dtype)
    for op in ("=", "<", "<=", "in"):
        term = ("x", op, [below] if op == "in" else below)
        parsed = parse_filter([term], {"x": spec})
        assert parsed is not None
        (predicate,) = parsed.clauses[0]
        assert not predicate.may_match(stored(low, dtype), stored(high, dtype), 0, 3), op
    for op in at.FilterOp:
        rule = at.filter_operator(op)
        if rule.operands is at.FilterOperands.NONE:
            continue
        operand = [below] if rule.operands is at.FilterOperands.LIST else below
        parsed = parse_filter([("x", op.value, operand)], {"x": spec})
        assert parsed is not None
        assert not parsed.clauses[0][0].may_match(None, None, 3, 3), op
