"""Every filter operator, on every column type, gives the rows a plain Arrow compute filter
gives over the same data, however the rows are split into files (statistics pruning, bucket
pruning and row-group pruning must never change a result).

Semantics: SQL's. ``in`` is the OR of ``=`` (so ``-0.0 in [0.0]``, ``NaN in [NaN]`` is false
as ``NaN = NaN`` is), ``not in`` its negation, and a null matches only ``is null``. Filter
values a column cannot hold exactly (beyond its range, finer than its scale or unit, NaN for an
integer column) compare as the exact numbers they are: there the reference is exact Python
arithmetic, everywhere else Arrow compute."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import hypothesis.strategies as st
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from appendtable.planning.bucket import unsupported_bucket_key_reason
from appendtable.planning.filters import parse_filter
from tests.helpers import strategies

UTC = dt.UTC
D = decimal.Decimal
OPS = ["=", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]
COMPARE = {
    "=": pc.equal,
    "==": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
PY_COMPARE = {
    "=": lambda a, b: a == b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _whole(dtype: pa.DataType) -> st.SearchStrategy[Any]:
    """Values over the whole domain of ``dtype`` (the shared strategies: edges, full-precision
    decimals, subnormal and signed-zero floats, NaN, long and non-ASCII text, the ends of each
    timestamp unit Python can name)."""
    return strategies.python_values(dtype)


TIMES = st.datetimes(
    min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=st.none()
)
#: pandas Timestamps to the nanosecond (what pandas users filter with), naive.
NANOS = st.integers(-(2**63) + 1, 2**63 - 1).map(pd.Timestamp)
#: One float and NaN, so files whose statistics show one value (min = max) while they also
#: hold NaN are common: where row-group pruning once lost NaN rows for != and not in.
FEW_FLOATS = st.sampled_from([2.5, math.nan])


# (arrow type, values of the column, extra filter values a column cannot hold exactly)
KINDS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "int8": (
        pa.int8(),
        _whole(pa.int8()),
        st.sampled_from([128, -129, 2**70, 0.5, -1.5, float("nan"), float("inf")]),
    ),
    "int32": (
        pa.int32(),
        _whole(pa.int32()),
        st.sampled_from([2**31, -(2**31) - 1, 2.5, float("-inf")]),
    ),
    "int64": (
        pa.int64(),
        _whole(pa.int64()),
        st.sampled_from([2**63, -(2**63) - 1, 2**70, -(2**70), 7.25]),
    ),
    "uint8": (pa.uint8(), _whole(pa.uint8()), st.sampled_from([-1, 256, 0.5, 255.5])),
    "uint64": (
        pa.uint64(),
        _whole(pa.uint64()),
        st.sampled_from([-1, 2**64, 2**63, 2**64 - 1, 2**70]),
    ),
    "float32": (pa.float32(), _whole(pa.float32()), st.sampled_from([0.1, 1e300, -1e-300])),
    "float64": (pa.float64(), _whole(pa.float64()), st.sampled_from([0.1, 5e-324])),
    "float64 (one value and NaN)": (pa.float64(), FEW_FLOATS, st.sampled_from([2.5, 0.0])),
    "float32 (one value and NaN)": (pa.float32(), FEW_FLOATS, st.sampled_from([2.5, -0.0])),
    "decimal(10,2)": (
        pa.decimal128(10, 2),
        _whole(pa.decimal128(10, 2)),
        st.sampled_from(
            [D("12.495"), D("-0.001"), D("1e8"), D("-1e8"), D("99999999.995"), D("1e30")]
        ),
    ),
    "decimal(38,10)": (
        pa.decimal128(38, 10),
        _whole(pa.decimal128(38, 10)),
        st.sampled_from([D("1e-11"), D("1e28"), D("-1e28")]),
    ),
    "string": (pa.string(), _whole(pa.string()), st.sampled_from(["", "\x00", "zz"])),
    "binary": (pa.binary(), _whole(pa.binary()), st.sampled_from([b"", b"\xff"])),
    "bool": (pa.bool_(), st.booleans(), st.sampled_from([True, False])),
    "date32": (
        pa.date32(),
        _whole(pa.date32()),
        # an instant between two days compares as the instant it is (as pyarrow, DuckDB and
        # Spark compare a date with a timestamp)
        st.one_of(st.sampled_from([dt.date(1, 1, 1)]), TIMES, TIMES.map(pd.Timestamp)),
    ),
    "timestamp[s]": (pa.timestamp("s"), _whole(pa.timestamp("s")), TIMES),
    "timestamp[ms,UTC]": (
        pa.timestamp("ms", tz="UTC"),
        _whole(pa.timestamp("ms", tz="UTC")),
        TIMES.map(lambda t: t.replace(tzinfo=UTC)),
    ),
    "timestamp[us]": (pa.timestamp("us"), _whole(pa.timestamp("us")), st.one_of(TIMES, NANOS)),
    "timestamp[ns,UTC]": (
        pa.timestamp("ns", tz="UTC"),
        _whole(pa.timestamp("ns", tz="UTC")),
        st.one_of(
            TIMES.map(lambda t: t.replace(tzinfo=UTC)), NANOS.map(lambda t: t.tz_localize(UTC))
        ),
    ),
    "timestamp[ns]": (
        pa.timestamp("ns"),
        st.one_of(_whole(pa.timestamp("ns")), NANOS),
        st.one_of(NANOS, NANOS.map(lambda t: t.to_datetime64())),
    ),
    "time64[us]": (pa.time64("us"), _whole(pa.time64("us")), st.times()),
    "time32[s]": (
        pa.time32("s"),
        _whole(pa.time32("s")),
        st.times(),  # finer than the unit
    ),
    "large_string": (pa.large_string(), _whole(pa.large_string()), st.sampled_from(["", "zz"])),
    "large_binary": (pa.large_binary(), _whole(pa.large_binary()), st.sampled_from([b"\xff"])),
    "int16": (pa.int16(), _whole(pa.int16()), st.sampled_from([2**15, -(2**15) - 1, 0.25])),
    "uint32": (pa.uint32(), _whole(pa.uint32()), st.sampled_from([-1, 2**32, 1.5])),
    "date64": (
        pa.date64(),
        _whole(pa.date64()),
        st.one_of(st.sampled_from([dt.date(9999, 12, 31)]), TIMES),
    ),
    "time64[ns]": (pa.time64("ns"), _whole(pa.time64("ns")), st.times()),
    "fixed_size_binary[3]": (pa.binary(3), _whole(pa.binary(3)), st.sampled_from([b"", b"ab"])),
}


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, list[Any], list[int], Any, str, Any, bool, str | None]:
    kind = draw(st.sampled_from([*sorted(KINDS), "decimal(p,s)"]))
    if kind == "decimal(p,s)":  # every precision and scale
        dtype = draw(strategies.decimal_types())
        digits, scale = dtype.precision - dtype.scale, dtype.scale
        beyond, finer = D(f"1E{digits}"), D(f"1E-{scale + 1}")  # strings: exact, no context
        largest_finer = D(f"{'9' * digits or '0'}.{'9' * scale}5")
        odd = st.sampled_from([finer, -finer, beyond, -beyond, largest_finer, -largest_finer])
        values = _whole(dtype)
    else:
        dtype, values, odd = KINDS[kind]
    column = draw(st.lists(st.one_of(st.none(), values), min_size=1, max_size=40))
    cuts = sorted(draw(st.lists(st.integers(1, len(column)), max_size=5, unique=True)))
    op = draw(st.sampled_from(OPS))
    present = [v for v in column if v is not None]
    one = st.one_of(values, odd)
    if present:  # a stored value, also as numpy hands it out (numpy.int16, numpy.bool_, ...)
        stored = st.sampled_from(present)
        one |= stored | stored.map(lambda v: pa.array([v], dtype).to_numpy(False)[0])
    if op in ("in", "not in"):
        value: Any = draw(st.lists(one, min_size=0, max_size=4))
    else:
        value = draw(one)
    bucketed = draw(st.booleans())
    nested = draw(st.sampled_from([None, None, "plain", "nulls"]))
    return kind, column, cuts, dtype, op, value, bucketed, nested


def _exact_scalar(value: Any, dtype: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of ``dtype`` if the column type holds it exactly, else None."""
    if isinstance(value, float) and math.isnan(value):
        return pa.scalar(value, dtype) if pa.types.is_floating(dtype) else None
    if isinstance(value, np.datetime64):
        value = pd.Timestamp(value)
    if pa.types.is_date(dtype) and isinstance(value, dt.datetime):
        return None  # compared as instants (see _comparable)
    try:
        scalar = pa.scalar(value, dtype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None
    back = scalar.as_py()
    if isinstance(value, dt.datetime):
        same = isinstance(back, dt.datetime) and _comparable(back) == _comparable(value)
    else:
        same = back == value and isinstance(back, bool) == isinstance(value, bool)
    return scalar if same else None


def _comparable(value: Any) -> Any:
    """Python values compared exactly: timestamps without their zone (which is always UTC)
    and as pandas Timestamps (to the nanosecond), dates as the instant of their midnight."""
    if isinstance(value, np.datetime64):
        value = pd.Timestamp(value)
    if isinstance(value, dt.datetime):
        return pd.Timestamp(value.replace(tzinfo=None))
    if isinstance(value, dt.date):
        return pd.Timestamp(dt.datetime.combine(value, dt.time()))
    return value


def _mask(column: pa.Array, op: str, value: Any) -> pa.Array:
    """The reference: which rows satisfy ``column op value`` (null where SQL says unknown)."""
    if op == "is null":
        return column.is_null()
    if op == "is not null":
        return column.is_valid()
    if op in ("in", "not in"):
        unknown = pc.if_else(column.is_null(), pa.scalar(None, pa.bool_()), False)
        found = functools.reduce(pc.or_kleene, [_mask(column, "=", v) for v in value], unknown)
        return found if op == "in" else pc.invert(found)
    scalar = _exact_scalar(value, column.type)
    if scalar is not None:
        return COMPARE[op](column, scalar)
    target = _comparable(value)
    return pa.array(
        [
            None if v is None else bool(PY_COMPARE[op](_comparable(v), target))
            for v in column.to_pylist()
        ],
        pa.bool_(),
    )


def _rows(ids: pa.Array | pa.ChunkedArray) -> list[int]:
    return sorted(ids.to_pylist())


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_every_operator_agrees_with_arrow_compute(
    case: tuple[str, list[Any], list[int], Any, str, Any, bool, str | None],
) -> None:
    """``nested``: the values are a field of a struct column (``s.c``), the struct itself
    null in some rows (``nulls``: where the field reads as null). Float columns are also
    written by pyarrow's own writer and adopted, as files of other engines and of older
    versions are: their Parquet statistics hold float minimums and maximums (without NaN)."""
    kind, values, cuts, dtype, op, value, bucketed, nested = case
    column = pa.array(values, dtype)
    keys = pa.array(range(len(values)), pa.int64())
    name: str = "c"
    if nested is None:
        data = pa.table({"k": keys, "c": column})
    else:
        hidden = pa.array([nested == "nulls" and k % 3 == 1 for k in range(len(values))])
        struct = pa.StructArray.from_arrays([column], names=["c"], mask=hidden)
        data = pa.table({"k": keys, "s": struct})
        column = pc.if_else(hidden, pa.scalar(None, dtype), column)  # the field reads null
        name = "s.c"
    expected = _rows(data.filter(_mask(column, op, value)).column("k"))
    term = (name, op) if op in ("is null", "is not null") else (name, op, value)
    adopted = not bucketed and pa.types.is_floating(dtype) and len(values) % 2 == 0
    with tempfile.TemporaryDirectory() as root:
        options: dict[str, object] = {"write-only": True}
        if bucketed:
            hashable = nested is None and unsupported_bucket_key_reason(dtype) is None
            options |= {"bucket": 3, "bucket-key": "c" if hashable else "k"}
        table = at.create_table(f"{root}/t", data.schema, options=options)
        for start, end in zip([0, *cuts], [*cuts, len(values)], strict=True):
            if end <= start:
                continue
            part = data.slice(start, end - start)
            if adopted:
                with table.staging_area() as area:
                    pq.write_table(part, f"{area.uri}/part.parquet")
                    table.committer().commit(area.adopt(area.files()))
            else:
                table.append(part)
        scan = table.scan(filter=[term])
        assert _rows(scan.to_arrow().column("k")) == expected, (kind, op, value)
        assert table.scan(filter=[term]).count() == len(expected), (kind, op, value)
        by_split = [
            k
            for split in scan.plan()
            for b in table.read(split, filter=[term])
            for k in b.column("k").to_pylist()
        ]
        assert sorted(by_split) == expected, (kind, op, value)
        if pa.types.is_floating(dtype):  # a dataset handed to DuckDB, filtered by Arrow
            handed = table.scan(filter=[term]).to_duckdb(duckdb.connect()).to_arrow_table()
            assert _rows(handed.column("k")) == expected, (kind, op, value)
        flush_hints()  # the LATEST hint is written in the background: before the removal


@pytest.mark.parametrize(
    ("value", "op", "expected"),
    [
        (0.0, "in", 4),  # the reported case: min -0.0, max 0.0
        (-0.0, "in", 4),
        (0.0, "=", 4),
        (float("nan"), "in", 0),
        (float("nan"), "=", 0),
        (float("nan"), "!=", 6),
        (0.0, "not in", 2),
    ],
)
def test_signed_zeros_and_nan_in_and_equal_agree(value: float, op: str, expected: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        table = at.create_table(f"{root}/t", pa.schema([("f", pa.float64())]))
        table.append(pa.table({"f": [0.0, 0.0, 0.0]}))
        table.append(pa.table({"f": [-0.0, float("nan"), 1.0]}))
        term = ("f", op, [value] if "in" in op.split() else value)
        assert table.scan(filter=[term]).count() == expected
        flush_hints()


def test_decimal_statistics_are_complete_and_truncated_old_ones_prune_nothing() -> None:
    """Statistics of long decimals were once truncated like strings: a max such as
    ``711889661300914:`` crashed pruning, and a truncated negative min pruned files wrongly."""
    schema = pa.schema([("d", pa.decimal128(38, 10)), ("e", pa.decimal128(30, 0))])
    values = [D("-711889661300914900000.0000000001"), D("711889661300914900000.5")]
    with tempfile.TemporaryDirectory() as root:
        table = at.create_table(f"{root}/t", schema)
        table.append(pa.table({"d": values, "e": [D(-(10**25)), D(10**25)]}, schema=schema))
        entry = table._state.manifests.live_files(table.latest_snapshot())[0]
        assert entry.file.min_values == ("-711889661300914900000.0000000001", str(-(10**25)))
        assert entry.file.max_values == ("711889661300914900000.5000000000", str(10**25))
        assert table.scan(filter=[("d", "<", D("-7e20"))]).count() == 1
        assert table.scan(filter=[("e", ">", 10**24)]).count() == 1
        flush_hints()
    state_type = table._state.column_types
    old = [  # (min, max) as truncate(16) left them
        ("-711889661300914", "711889661300914:"),
        ("-711889661300914", "7118896613009150"),
    ]
    for low, high in old:
        predicate = parse_filter([("d", "<", D("-7e20"))], state_type).clauses[0][0]  # type: ignore[union-attr]
        assert predicate.may_match(low, high, 0, 2, 16)  # not trusted: kept
    scale_zero = parse_filter([("e", ">", 10**24)], state_type).clauses[0][0]  # type: ignore[union-attr]
    assert scale_zero.may_match("-100000000000000", "1000000000000001", 0, 2, 16)


@pytest.mark.parametrize("origin", ["append", "adopted"])
@pytest.mark.parametrize("name", ["x", "p.x"])
def test_nan_rows_match_not_equal_and_not_in_however_the_files_were_written(
    tmp_path: Path, origin: str, name: str
) -> None:
    """A file [1.0, NaN, 1.0] has min = max = 1.0 in its statistics (which leave NaN out):
    ``x != 1.0`` and ``x not in (1.0)`` skipped it, losing the NaN row (NaN != 1.0 is true),
    on a top-level column and on a struct field alike, for files of this writer and for files
    of other engines (adopted, with Parquet float statistics)."""
    values = [[1.0, math.nan, 1.0], [2.0, math.nan]]
    schema = pa.schema(
        [("k", pa.int64()), ("x", pa.float64()), ("p", pa.struct([("x", pa.float64())]))]
    )
    table = at.create_table(str(tmp_path / "t"), schema)
    start = 0
    for part in values:
        keys = list(range(start, start + len(part)))
        start += len(part)
        batch = pa.table({"k": keys, "x": part, "p": [{"x": v} for v in part]}, schema=schema)
        if origin == "adopted":
            with table.staging_area() as area:
                pq.write_table(batch, f"{area.uri}/part.parquet")
                table.committer().commit(area.adopt(area.files()))
        else:
            table.append(batch)
    whole = [v for part in values for v in part]
    want = [k for k, v in enumerate(whole) if v != 1.0]  # NaN rows too
    for term in ((name, "!=", 1.0), (name, "not in", [1.0]), (name, "not in", [1.0, math.nan])):
        assert _rows(table.scan(filter=[term]).to_arrow().column("k")) == want, term
        assert table.scan(filter=[term]).count() == len(want), term
        assert (
            sorted(
                k
                for s in table.scan(filter=[term]).plan()
                for b in table.read(s, filter=[term])
                for k in b.column("k").to_pylist()
            )
            == want
        ), term
        duck = table.scan(filter=[term]).to_duckdb(duckdb.connect()).to_arrow_table()
        assert _rows(duck.column("k")) == want, term
        flush_hints()


def test_data_files_carry_no_float_statistics(tmp_path: Path) -> None:
    """Other readers of the data files (pyiceberg through the mirror, DuckDB, Spark) prune
    row groups by their statistics too: float columns get none, so a filter ``x != 1.0`` on a
    file of [1.0, NaN] reads the group (pyarrow's own dataset scan is the witness)."""
    table = at.create_table(
        str(tmp_path / "t"), pa.schema([("x", pa.float64()), ("i", pa.int64())])
    )
    table.append(pa.table({"x": [1.0, math.nan, 1.0], "i": [1, 2, 3]}))
    (path,) = [str(p) for p in (tmp_path / "t").rglob("*.parquet")]
    metadata = pq.read_metadata(path)
    stats = {
        metadata.schema.column(i).path: metadata.row_group(0).column(i).is_stats_set
        for i in range(2)
    }
    assert stats == {"x": False, "i": True}
    found = pq.read_table(path, filters=[("x", "!=", 1.0)]).column("i").to_pylist()
    assert found == [2]


NS_VALUES = [1_700_000_000_123_456_789, 1_700_000_000_123_456_000, 1_700_000_000_123_457_000]


@pytest.mark.parametrize("unit", ["ns", "us"])
@pytest.mark.parametrize("tz", [None, "UTC"])
@pytest.mark.parametrize(
    "literal",
    [
        pd.Timestamp(NS_VALUES[0]),
        np.datetime64(NS_VALUES[0], "ns"),
        "2023-11-14T22:13:20.123456789",
        "2023-11-14T22:13:20.123456789+00:00",
    ],
    ids=["pandas", "numpy", "iso", "iso-offset"],
)
def test_nanosecond_filter_values_compare_exactly(
    tmp_path: Path, unit: str, tz: str | None, literal: Any
) -> None:
    """A nanosecond pandas Timestamp was truncated to microseconds: ``=`` matched the row at
    ...456000 instead of ...456789, ``>=`` both. Every form of the value compares exactly,
    on nanosecond columns and (as a value between two microseconds) on microsecond ones."""
    dtype = pa.timestamp(unit, tz)
    ticks = [v // (1000 if unit == "us" else 1) for v in NS_VALUES]
    column = pa.array(ticks, pa.int64()).cast(dtype)
    table = at.create_table(str(tmp_path / "t"), pa.schema([("k", pa.int64()), ("ts", dtype)]))
    table.append(pa.table({"k": [0, 1, 2], "ts": column}))
    for op, want in PY_ORACLE_NS.items():
        expected = [
            k for k, v in enumerate(NS_VALUES) if want(v if unit == "ns" else v // 1000 * 1000)
        ]
        got = _rows(table.scan(filter=[("ts", op, literal)]).to_arrow().column("k"))
        assert got == expected, (op, literal)
    got_in = table.scan(filter=[("ts", "in", [literal])]).to_arrow().column("k")
    assert _rows(got_in) == ([0] if unit == "ns" else [])
    flush_hints()


PY_ORACLE_NS = {
    "=": lambda v: v == NS_VALUES[0],
    "!=": lambda v: v != NS_VALUES[0],
    "<": lambda v: v < NS_VALUES[0],
    "<=": lambda v: v <= NS_VALUES[0],
    ">": lambda v: v > NS_VALUES[0],
    ">=": lambda v: v >= NS_VALUES[0],
}


@pytest.mark.parametrize("dtype", [pa.date32(), pa.date64()], ids=str)
def test_an_instant_on_a_date_column_compares_as_the_instant(
    tmp_path: Path, dtype: pa.DataType
) -> None:
    """``day = datetime(2024, 5, 1, 12)`` matched 2024-05-01 (the value was cut to its date).
    A naive instant compares exactly, as the date's midnight onwards (as pyarrow, DuckDB and
    Spark compare a date with a timestamp); an instant with a time zone is refused, naming
    the column (a date has none)."""
    days = [dt.date(2024, 5, 1), dt.date(2024, 5, 2)]
    table = at.create_table(str(tmp_path / "t"), pa.schema([("k", pa.int64()), ("day", dtype)]))
    table.append(pa.table({"k": [0, 1], "day": pa.array(days, dtype)}))
    noon = dt.datetime(2024, 5, 1, 12)
    for literal in (noon, pd.Timestamp(noon), np.datetime64(noon), noon.isoformat()):
        for op, want in (
            ("=", []),
            ("!=", [0, 1]),
            ("<", [0]),
            ("<=", [0]),
            (">", [1]),
            (">=", [1]),
        ):
            got = _rows(table.scan(filter=[("day", op, literal)]).to_arrow().column("k"))
            assert got == want, (literal, op)
        assert table.scan(filter=[("day", "in", [literal])]).count() == 0
    midnight = dt.datetime(2024, 5, 2)
    assert _rows(table.scan(filter=[("day", "=", midnight)]).to_arrow().column("k")) == [1]
    for aware in (noon.replace(tzinfo=UTC), pd.Timestamp(noon, tz="UTC"), "2024-05-01T12:00Z"):
        with pytest.raises(at.InvalidFilterError, match=r"column 'day'.*time zone"):
            table.scan(filter=[("day", "=", aware)])
    flush_hints()


#: Stored integers at the ends of what each temporal type stores (Parquet writes seconds as
#: milliseconds in 64 bits, so a seconds column ends a thousand times sooner), and near zero.
_SECONDS_END = (2**63 - 1) // 1000
EXTREME_TEMPORALS: list[tuple[pa.DataType, str, list[int]]] = [
    (pa.timestamp("s"), "s", [-_SECONDS_END, -1, 0, 1, _SECONDS_END]),
    (pa.timestamp("ms", "UTC"), "ms", [-(2**63) + 1, -1, 0, 1, 2**63 - 1]),
    (pa.timestamp("us"), "us", [-(2**63) + 1, 0, 7, 2**63 - 1]),
    (pa.timestamp("ns", "UTC"), "ns", [-(2**63) + 1, 0, 7, 2**63 - 1]),
    (pa.date32(), "D", [-(2**31), -1, 0, 1, 2**31 - 1]),
    (pa.date64(), "D", [-(2**31), 0, 1, 2**31 - 1]),
]
EXTREME_OPS = {
    "=": lambda v, x: v == x,
    "!=": lambda v, x: v != x,
    "<": lambda v, x: v < x,
    "<=": lambda v, x: v <= x,
    ">": lambda v, x: v > x,
    ">=": lambda v, x: v >= x,
}


@pytest.mark.parametrize("bloom", [False, True], ids=["plain", "bloom"])
@pytest.mark.parametrize(
    ("dtype", "unit", "stored"), EXTREME_TEMPORALS, ids=[str(t[0]) for t in EXTREME_TEMPORALS]
)
def test_numpy_literals_over_the_whole_range_compare_exactly(
    tmp_path: Path, dtype: pa.DataType, unit: str, stored: list[int], bloom: bool
) -> None:
    """numpy.datetime64 literals reach where Python's datetime stops (year 9999): each end of
    what a column stores, one step either side of it, and for seconds the int64 values that
    Parquet cannot store (milliseconds overflow). Found by a user: ``=`` and ``in`` raised
    OverflowError (literals turned into Python dates for the bloom probe and the ``in`` list),
    and ``<`` beyond the stored seconds failed the scan as a corrupt file. Compared with
    integer arithmetic on the stored values, on a table holding the ends and on one holding
    only values near zero (whose statistics cannot settle the comparison)."""
    ticks = pa.int32() if pa.types.is_date32(dtype) else pa.int64()
    per_day = 86_400_000 if pa.types.is_date64(dtype) else 1

    def column(values: list[int | None]) -> pa.Array:
        return pa.array([None if v is None else v * per_day for v in values], ticks).cast(dtype)

    options = {"file-index.bloom-filter.columns": "c"} if bloom else {}
    near_zero = [v for v in stored if abs(v) <= 7]
    literals = sorted(
        {v + d for v in stored for d in (-1, 0, 1)}
        | ({_SECONDS_END + 1, -_SECONDS_END - 1, 2**63 - 1} if unit == "s" else set())
    )
    literals = [v for v in literals if -(2**63) < v < 2**63]  # -2**63 is NaT in numpy
    for name, rows in (("ends", stored), ("near-zero", near_zero)):
        table = at.create_table(
            str(tmp_path / name), pa.schema([("k", pa.int64()), ("c", dtype)]), options=options
        )
        with_null: list[int | None] = [*rows, None]
        for k, value in enumerate(with_null):  # a file each: statistics prune per file
            table.append(pa.table({"k": [k], "c": column([value])}))
        for literal in literals:
            value = np.datetime64(literal, unit)
            for op, holds in EXTREME_OPS.items():
                expected = [
                    k for k, v in enumerate(with_null) if v is not None and holds(v, literal)
                ]
                got = _rows(table.scan(filter=[("c", op, value)]).to_arrow().column("k"))
                assert got == expected, (name, op, literal)
            expected_in = [k for k, v in enumerate(with_null) if v == literal]
            got_in = table.scan(filter=[("c", "in", [value, value])]).to_arrow().column("k")
            assert _rows(got_in) == expected_in, (name, "in", literal)
            got_out = table.scan(filter=[("c", "not in", [value])]).count()
            assert got_out == sum(v is not None and v != literal for v in with_null)
    flush_hints()
