"""The Iceberg mirror over the whole domain of every mirrorable type, checked with pyiceberg:
its own planner prunes files with the mirror's bounds, so a wrong bound (a decimal rounded to
28 digits, a timestamp scaled out of range) shows as a missing row. Values come from the
shared whole-domain strategies (tests/helpers/strategies.py); the reference is pyarrow compute
over the appended data."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, reject, settings
from pyiceberg.expressions import (
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    NotEqualTo,
    NotIn,
    NotNull,
)
from pyiceberg.table import StaticTable

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from tests.helpers import strategies

MIRROR = {"metadata.iceberg.storage": "table-location", "write-only": True}
#: Scalar types with an Iceberg v2 type (no uint64, no nanoseconds, no durations), but
#: time32, which pyiceberg cannot read (Parquet TIME(MILLIS): Iceberg's time is microseconds).
MIRRORED = [
    t
    for t in strategies.FILTER_TYPES
    if not (pa.types.is_uint64(t) or pa.types.is_time32(t) or getattr(t, "unit", None) == "ns")
]
COMPARE = {
    "=": (EqualTo, pc.equal),
    "!=": (NotEqualTo, pc.not_equal),
    "<": (LessThan, pc.less),
    "<=": (LessThanOrEqual, pc.less_equal),
    ">": (GreaterThan, pc.greater),
    ">=": (GreaterThanOrEqual, pc.greater_equal),
}
OPS = [*COMPARE, "in", "not in", "is null", "is not null"]


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


@st.composite
def cases(draw: st.DrawFn) -> tuple[pa.DataType, list[pa.Array], str, Any]:
    dtype = draw(st.one_of(st.sampled_from(MIRRORED), strategies.decimal_types()))
    batches = draw(
        st.lists(
            strategies.arrays(dtype, min_size=1, max_size=12, python=True), min_size=1, max_size=4
        )
    )
    present = [v for b in batches for v in b.to_pylist() if v is not None and not _is_nan(v)]
    # each file's lowest and highest values: where a wrong bound shows
    extremes = [
        value.as_py()
        for b in batches
        if b.null_count < len(b) and not pa.types.is_boolean(dtype)
        for value in pc.min_max(b).values()
    ]
    drawn = strategies.python_values(dtype).filter(lambda v: not _is_nan(v))
    literal = st.one_of(drawn, *(st.sampled_from(v) for v in (present, extremes, extremes) if v))
    op = draw(st.sampled_from(OPS))
    value: Any = None
    if op in ("in", "not in"):
        value = draw(st.lists(literal, min_size=1, max_size=3))
    elif op in COMPARE:
        value = draw(literal)
    return dtype, batches, op, value


def _expression(op: str, value: Any) -> BooleanExpression:
    if op == "is null":
        return IsNull("c")
    if op == "is not null":
        return NotNull("c")
    if op == "in":
        return In("c", set(value))
    if op == "not in":
        return NotIn("c", set(value))
    return COMPARE[op][0]("c", value)


def _mask(column: pa.Array, op: str, value: Any) -> pa.Array:
    """Rows matching: NaN compares false (and unequal); a null matches ``is null``, never a
    comparison or ``in`` (whether it matches ``!=`` and ``not in`` differs between Iceberg
    readers: the test leaves null rows of those out)."""
    if op == "is null":
        return column.is_null()
    if op == "is not null":
        return column.is_valid()
    if op in ("in", "not in"):
        equal = [pc.fill_null(pc.equal(column, pa.scalar(v, column.type)), False) for v in value]
        found = functools.reduce(pc.or_, equal)
        return found if op == "in" else pc.invert(found)
    return pc.fill_null(COMPARE[op][1](column, pa.scalar(value, column.type)), False)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_pyiceberg_prunes_with_the_mirror_bounds_and_finds_every_row(
    case: tuple[pa.DataType, list[pa.Array], str, Any],
) -> None:
    dtype, batches, op, value = case
    schema = pa.schema([("k", pa.int64()), ("c", dtype)])
    start = 0
    tables = []
    for batch in batches:
        keys = pa.array(range(start, start + len(batch)), pa.int64())
        tables.append(pa.table({"k": keys, "c": batch}, schema=schema))
        start += len(batch)
    data = pa.concat_tables(tables)
    column = data.column("c").combine_chunks()
    want = sorted(data.filter(_mask(column, op, value)).column("k").to_pylist())
    with tempfile.TemporaryDirectory() as root:
        table = at.create_table(f"{root}/t", schema, options=MIRROR)
        for batch_table in tables:
            table.append(batch_table)
        location = table.iceberg_metadata_location()
        assert location is not None
        iceberg = StaticTable.from_metadata(location)
        whole = iceberg.scan().to_arrow()
        assert sorted(whole.column("k").to_pylist()) == list(range(start))
        got = iceberg.scan(row_filter=_expression(op, value)).to_arrow().column("k").to_pylist()
        if op in ("!=", "not in"):  # see _mask
            nulls = set(data.filter(column.is_null()).column("k").to_pylist())
            got, want = [k for k in got if k not in nulls], [k for k in want if k not in nulls]
        assert sorted(got) == want, (dtype, op, value)
        flush_hints()


@pytest.mark.parametrize(
    ("dtype", "text"),
    [
        (pa.decimal128(38, 0), "1234567890123456789012345678901"),
        (pa.decimal128(38, 0), "-99999999999999999999999999999999999999"),
        (pa.decimal128(38, 10), "1234567890123456789012345.0123456789"),
        (pa.decimal128(29, 0), "-99999999999999999999999999999"),
    ],
)
@pytest.mark.parametrize("partitioned", [False, True])
def test_long_decimal_bounds_are_exact(
    tmp_path: Path, dtype: pa.DataType, text: str, partitioned: bool
) -> None:
    """Bounds and partition values were rounded to 28 digits: pyiceberg pruned the file
    holding the value."""
    value = decimal.Decimal(text)
    schema = pa.schema([("k", pa.int64()), ("c", dtype)])
    table = at.create_table(
        str(tmp_path / "t"), schema, partition_by=["c"] if partitioned else [], options=MIRROR
    )
    table.append(pa.table({"k": [1], "c": pa.array([value], dtype)}, schema=schema))
    table.append(pa.table({"k": [2], "c": pa.array([decimal.Decimal(0)], dtype)}, schema=schema))
    location = table.iceberg_metadata_location()
    assert location is not None
    iceberg = StaticTable.from_metadata(location)
    for expression in (
        EqualTo("c", value),
        GreaterThanOrEqual("c", value),
        LessThanOrEqual("c", value),
    ):
        got = iceberg.scan(row_filter=expression).to_arrow().column("k").to_pylist()
        assert 1 in got, expression


def _normal(value: Any, dtype: pa.DataType) -> Any:
    """A value comparable across readers: maps as sorted pairs, instants in UTC, NaN as text.
    pyiceberg 0.12 reads a null list or map whose elements are structs as empty: such a null
    compares as empty (the data file holds the null: pyarrow and the table read it back)."""
    if value is None:
        if (pa.types.is_map(dtype) and pa.types.is_struct(dtype.item_type)) or (
            _is_list(dtype) and pa.types.is_struct(dtype.value_type)
        ):
            return ()
        return None
    if pa.types.is_struct(dtype):
        return tuple(
            (f.name, _normal(value[f.name], f.type))
            for f in (dtype.field(i) for i in range(dtype.num_fields))
        )
    if pa.types.is_map(dtype):
        return tuple(sorted(((k, _normal(v, dtype.item_type)) for k, v in value), key=repr))
    if _is_list(dtype):
        return tuple(_normal(v, dtype.value_type) for v in value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    if _is_nan(value):
        return "NaN"
    return value


def _fixed_list_of_structs(dtype: pa.DataType) -> bool:
    """pyiceberg 0.12 cannot read a fixed-size list of structs (it asks it for offsets)."""
    if pa.types.is_fixed_size_list(dtype) and pa.types.is_struct(dtype.value_type):
        return True
    return any(_fixed_list_of_structs(dtype.field(i).type) for i in range(dtype.num_fields))


MIRRORED_NESTED = strategies.nested_types().filter(
    lambda t: (
        not any(name in str(t) for name in ("uint64", "ns", "duration", "time32"))
        and not _fixed_list_of_structs(t)
    )
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    MIRRORED_NESTED.flatmap(
        lambda t: st.tuples(st.just(t), strategies.arrays(t, min_size=1, max_size=8, python=True))
    )
)
def test_pyiceberg_reads_nested_values_with_nulls_at_every_level(
    case: tuple[pa.DataType, pa.Array],
) -> None:
    dtype, values = case
    schema = pa.schema([("k", pa.int64()), ("c", dtype)])
    data = pa.table({"k": pa.array(range(len(values)), pa.int64()), "c": values}, schema=schema)
    with tempfile.TemporaryDirectory() as root:
        table = at.create_table(f"{root}/t", schema, options=MIRROR)
        try:
            table.append(data)
        except at.SchemaMismatchError as exc:  # see test_conversion_matrix's unreadable files
            assert "fixed-size list" in str(exc)
            reject()
        location = table.iceberg_metadata_location()
        assert location is not None
        theirs = StaticTable.from_metadata(location).scan().to_arrow().sort_by("k")
        assert [_normal(v, dtype) for v in theirs.column("c").to_pylist()] == [
            _normal(v, dtype) for v in values.to_pylist()
        ]
        flush_hints()


def _is_list(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
    )
