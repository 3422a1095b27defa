"""The Iceberg mirror over the whole domain of every mirrorable type, checked with pyiceberg:
its own planner prunes files with the mirror's bounds, so a wrong bound (a decimal rounded to
28 digits, a timestamp scaled out of range) shows as a missing row. Values come from the
shared whole-domain strategies (tests/helpers/strategies.py); the reference is pyarrow compute
over the appended data."""

from __future__ import annotations

import contextlib
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
from appendtable.metadata.types import TypeSpec
from appendtable.planning.iceberg_metadata import encode_bound
from tests.helpers import strategies

MIRROR = {"metadata.iceberg.storage": "table-location", "write-only": True}


def _refused_by_docs(dtype: pa.DataType) -> bool:
    """What docs/format.md §13 says the mirror refuses (naming the column): float16, uint64,
    uint32, time32, durations, nanosecond timestamps and times."""
    text = str(dtype)
    return any(
        name in text for name in ("halffloat", "uint64", "uint32", "time32", "duration")
    ) or (getattr(dtype, "unit", None) == "ns")


#: Scalar types the mirror holds (see ``_refused_by_docs``).
MIRRORED = [t for t in strategies.FILTER_TYPES if not _refused_by_docs(t)]
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


def _expressible(dtype: pa.DataType, value: Any) -> bool:
    """Whether pyiceberg takes ``value`` as a literal of a ``dtype`` column exactly: it refuses
    NaN, and binds an infinite literal on a float32 column as "above/below the type's range",
    which turns ``c < inf`` into an always-true expression that returns null rows too."""
    if not isinstance(value, float):
        return True
    return not math.isnan(value) and not (pa.types.is_float32(dtype) and math.isinf(value))


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
        if _expressible(dtype, value.as_py())
    ]
    present = [v for v in present if _expressible(dtype, v)]
    drawn = strategies.python_values(dtype).filter(lambda v: _expressible(dtype, v))
    literal = st.one_of(drawn, *(st.sampled_from(v) for v in (present, extremes, extremes) if v))
    op = draw(st.sampled_from(OPS))
    value: Any = None
    if op in ("in", "not in"):
        # pyiceberg evaluates an ``In`` of two or more values with Arrow's ``is_in``, which
        # hashes -0.0 and 0.0 apart (IEEE equality, ours and the oracle's, has them equal)
        unsigned = literal.filter(lambda v: not (isinstance(v, float) and v == 0.0))
        value = draw(st.lists(unsigned, min_size=1, max_size=3))
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
        not any(name in str(t) for name in ("uint64", "uint32", "ns", "duration", "time32"))
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


# ---- every type, at the edges of its domain -------------------------------------------------

_PER_MICRO = {"s": 1_000_000, "ms": 1_000, "us": 1}


def _literal(value: Any, dtype: pa.DataType) -> Any:
    """A stored value (as ``strategies.edges`` gives it) as a pyiceberg literal: temporal
    values as integers in Iceberg's units (days, microseconds)."""
    if pa.types.is_date64(dtype):
        return value // 86_400_000
    if pa.types.is_timestamp(dtype) or pa.types.is_time(dtype):
        return value * _PER_MICRO[dtype.unit]
    return value


def _iceberg_values(array: pa.Array) -> list[Any]:
    """Values in Iceberg's units, compared across readers: dates as days, timestamps and
    times as microseconds (integers: the edges lie beyond Python's dates), NaN as text."""
    dtype = array.type
    if pa.types.is_date64(dtype):
        array, dtype = array.cast(pa.date32()), pa.date32()
    if pa.types.is_temporal(dtype):
        ticks = array.view(pa.int64() if dtype.bit_width == 64 else pa.int32()).to_pylist()
        per = _PER_MICRO.get(getattr(dtype, "unit", ""), 1)
        return [None if t is None else t * per for t in ticks]
    return [_normal(v, dtype) for v in array.to_pylist()]


EDGE_TYPES = [*strategies.SCALAR_TYPES, pa.float16()]


@pytest.mark.parametrize("dtype", EDGE_TYPES, ids=str)
def test_every_type_is_mirrored_readably_or_refused(tmp_path: Path, dtype: pa.DataType) -> None:
    """Every scalar type, with the edge values of its whole domain: either turning the mirror
    on refuses the column (naming it), or each value is appended or refused naming the
    column, the mirror stays current (one timestamp[ms] beyond Iceberg's microseconds once
    stopped it for good), pyiceberg reads exactly the table's rows, and pyiceberg's ``=``
    finds every value's rows (uint32 values from 2^31 on read as negative ints and were
    never found; time32 made the mirror unreadable)."""
    schema = pa.schema([("k", pa.int64()), ("c", dtype)])
    try:
        table = at.create_table(str(tmp_path / "t"), schema, options=MIRROR)
    except at.InvalidSchemaError as exc:
        assert exc.column == "c", exc
        assert _refused_by_docs(dtype), (dtype, exc)
        return
    assert not _refused_by_docs(dtype), dtype
    edges = strategies.edges(dtype)
    values = pa.array(edges, dtype) if not pa.types.is_float16(dtype) else pa.array(edges)
    data = pa.table({"k": pa.array(range(len(edges)), pa.int64()), "c": values}, schema=schema)
    try:
        table.append(data)
    except at.SchemaMismatchError as exc:
        assert exc.column == "c", exc
        for row in range(data.num_rows):  # one at a time: the ones that fit are taken
            with contextlib.suppress(at.SchemaMismatchError):
                table.append(data.slice(row, 1))
    ours = table.scan().to_arrow().sort_by("k")
    assert ours.num_rows > 0
    location = table.iceberg_metadata_location()
    assert location is not None
    iceberg = StaticTable.from_metadata(location)
    assert iceberg.metadata.current_snapshot_id == table.latest_snapshot().id  # current
    theirs = iceberg.scan().to_arrow().sort_by("k")
    assert _iceberg_values(theirs.column("c").combine_chunks()) == _iceberg_values(
        ours.column("c").combine_chunks()
    )
    stored = ours.column("c").combine_chunks()
    raw = (
        stored.view(pa.int64() if dtype.bit_width == 64 else pa.int32())
        if pa.types.is_temporal(dtype)
        else stored
    )
    for index, value in enumerate(raw.to_pylist()):
        if value is None or _is_nan(value):
            continue
        if pa.types.is_float32(dtype) and math.isinf(value):
            continue  # pyiceberg 0.12 makes float('inf') for a float column "above max"
        want = sorted(ours.filter(pc.equal(stored, stored[index])).column("k").to_pylist())
        found = iceberg.scan(row_filter=EqualTo("c", _literal(value, dtype))).to_arrow()
        assert sorted(found.column("k").to_pylist()) == want, (dtype, value)
    flush_hints()


@pytest.mark.parametrize(
    "dtype",
    [
        pa.timestamp("ms"),
        pa.timestamp("s", tz="UTC"),
        pa.struct([("t", pa.timestamp("ms"))]),
        pa.list_(pa.timestamp("s")),
        pa.map_(pa.string(), pa.timestamp("ms")),
    ],
    ids=str,
)
def test_timestamps_beyond_icebergs_range_never_stop_the_mirror(
    tmp_path: Path, dtype: pa.DataType
) -> None:
    """One timestamp[ms] of 2**62 (valid: year 146,140,482) made every later publication fail
    (struct.error encoding its bound): Iceberg readers stayed on the old snapshot for good,
    and ``appendtable iceberg --repair`` printed a traceback. With the mirror on such values
    are refused naming the column; a table that holds them cannot turn the mirror on."""
    unit = dtype.unit if pa.types.is_timestamp(dtype) else "ms" if "ms" in str(dtype) else "s"
    huge = 2**62 if unit == "ms" else 2**50  # beyond microseconds, within milliseconds
    flat = pa.timestamp(unit, getattr(dtype, "tz", None))

    def column(ticks: int) -> pa.Array:
        scalar = pa.array([ticks], pa.int64()).cast(flat)
        if pa.types.is_struct(dtype):
            return pa.StructArray.from_arrays([scalar], names=["t"])
        if pa.types.is_map(dtype):
            return pa.MapArray.from_arrays([0, 1], pa.array(["k"]), scalar)
        if pa.types.is_list(dtype):
            return pa.ListArray.from_arrays([0, 1], scalar)
        return scalar

    schema = pa.schema([("k", pa.int64()), ("c", dtype)])
    table = at.create_table(str(tmp_path / "t"), schema, options=MIRROR)
    table.append(pa.table({"k": [1], "c": column(0)}, schema=schema))
    with pytest.raises(at.SchemaMismatchError, match=r"column 'c[.\[]?.*Iceberg") as caught:
        table.append(pa.table({"k": [2], "c": column(huge)}, schema=schema))
    assert caught.value.column == "c"
    table.append(pa.table({"k": [3], "c": column(5)}, schema=schema))
    location = table.iceberg_metadata_location()
    assert location is not None
    iceberg = StaticTable.from_metadata(location)
    assert iceberg.metadata.current_snapshot_id == table.latest_snapshot().id
    assert sorted(iceberg.scan().to_arrow().column("k").to_pylist()) == [1, 3]
    # without the mirror the value is taken; then the mirror cannot be turned on
    plain = at.create_table(str(tmp_path / "u"), schema)
    plain.append(pa.table({"k": [2], "c": column(huge)}, schema=schema))
    with pytest.raises(at.SchemaChangeError, match=r"column 'c[.\[]?.*Iceberg") as refused:
        plain.set_options({"metadata.iceberg.storage": "table-location"})
    assert refused.value.column == "c"
    assert plain.iceberg_metadata_location() is None
    assert plain.option("metadata.iceberg.storage") == "disabled"
    flush_hints()


@pytest.mark.parametrize(
    ("old", "path", "values"),
    [
        (pa.uint32(), "c", [0, 2**31, 2**32 - 1]),
        (pa.struct([("u", pa.uint32())]), "c.u", [{"u": 2**32 - 1}, None, {"u": None}]),
    ],
    ids=str,
)
def test_files_of_a_widened_uint32_keep_the_mirror_off(
    tmp_path: Path, old: pa.DataType, path: str, values: list[Any]
) -> None:
    """A uint32 column widened to int64 keeps its files' unsigned 32-bit Parquet integers,
    which pyiceberg filters as a signed int (values from 2^31 on were never found): turning
    the mirror on over them is refused naming the column, and allowed once they are
    rewritten."""
    table = at.create_table(str(tmp_path / "t"), pa.schema([("k", pa.int64()), ("c", old)]))
    table.append(pa.table({"k": range(len(values)), "c": pa.array(values, old)}))
    with table.update_schema() as update:
        update.update_column(path.split("."), type=pa.int64())
    with pytest.raises(at.SchemaChangeError, match=r"column 'c'.*uint32") as refused:
        table.set_options({"metadata.iceberg.storage": "table-location"})
    assert refused.value.column == "c"
    table.overwrite(table.scan().to_arrow())
    table.set_options({"metadata.iceberg.storage": "table-location"})
    location = table.iceberg_metadata_location()
    assert location is not None
    iceberg = StaticTable.from_metadata(location)
    assert iceberg.scan().to_arrow().sort_by("k").to_pylist() == (
        table.scan().to_arrow().sort_by("k").to_pylist()
    )
    flush_hints()


def test_a_bound_iceberg_cannot_hold_is_left_out() -> None:
    """Bounds are optional: a statistic beyond Iceberg's microseconds (a table that holds one
    from before the mirror refused them) is published without a bound, never failing."""
    spec = TypeSpec(kind="timestamp", unit="ms")
    assert encode_bound(2**62, spec) is None
    assert encode_bound(-(2**62), spec) is None
    assert encode_bound(2**53, spec) == (2**53 * 1000).to_bytes(8, "little", signed=True)
    assert encode_bound((2**63 - 1) // 1000, spec) is not None
