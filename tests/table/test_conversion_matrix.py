"""Every (input type, table type) pair a user can send, from Arrow, pandas and Polars, with the
boundary values of the input type: an append either stores every value exactly or is refused
with SchemaMismatchError naming the column (and nothing committed), never silently changed.

"Exactly" is checked against an oracle built from the input's own values (never through
appendtable): numbers as exact fractions (signed zeros, NaN and infinities apart), text, bytes,
and temporal values as integers of nanoseconds or days. The one documented rounding: a value
stored into a narrower float (float64 -> float32, a decimal -> a float) becomes the nearest
value of that float, as every engine's cast does; a finite value that would become infinite is
refused. pandas' missing value in a float column (NaN) is stored as null, as pandas means it.

A refused input is split and its halves appended again, down to single rows, so the values of
a pair that do fit are checked too. The Spark rows of the matrix are in
tests/spark/test_conversion_matrix_spark.py."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import uuid
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import fsspec
import hypothesis.strategies as st
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pytest
from hypothesis import HealthCheck, given, settings

import appendtable as at
from tests.helpers import strategies

#: Types a table column can have, for the matrix (every scalar type, and float16).
TABLE_TYPES = [*strategies.SCALAR_TYPES, pa.float16()]
#: Arrow input types: every table type and the types Arrow producers also send.
ARROW_INPUTS = [
    *TABLE_TYPES,
    pa.string_view(),
    pa.binary_view(),
    pa.decimal256(40, 2),
    pa.decimal128(5, 2),
    pa.timestamp("us", tz="Europe/Paris"),
    pa.dictionary(pa.int32(), pa.string()),
    pa.dictionary(pa.int16(), pa.int64()),
    pa.dictionary(pa.uint32(), pa.string_view()),
    pa.dictionary(pa.int16(), pa.float64()),
    pa.dictionary(pa.int32(), pa.decimal128(38, 10)),
    pa.dictionary(pa.int32(), pa.timestamp("ns")),
]
_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}

Canon = Any


# ---- the oracle -------------------------------------------------------------------------------


def _number(value: Any) -> Canon:
    """A number as an exact fraction; NaN, infinities and zeros (with their sign, for floats)
    apart. Integers are marked as such: they are never rounded (see ``expected_stored``)."""
    if isinstance(value, int) and not isinstance(value, bool) and value != 0:
        return ("int", Fraction(value))
    if isinstance(value, float):
        if math.isnan(value):
            return ("nan",)
        if math.isinf(value):
            return ("inf", value > 0)
        if value == 0:
            return ("zero", math.copysign(1.0, value) < 0)
        return ("num", Fraction(value))
    number = Fraction(value)
    return ("zero", False) if number == 0 else ("num", number)


def canon_array(array: pa.Array) -> list[Canon]:
    """The exact values of an Arrow array, from Arrow's own buffers and conversions."""
    dtype = array.type
    if pa.types.is_dictionary(dtype):
        dictionary = canon_array(array.dictionary)
        return [None if i is None else dictionary[i] for i in array.indices.to_pylist()]
    if pa.types.is_string_view(dtype):
        return canon_array(array.cast(pa.large_string()))
    if pa.types.is_binary_view(dtype):
        return canon_array(array.cast(pa.large_binary()))
    valid = array.is_valid().to_pylist()
    if pa.types.is_timestamp(dtype) or pa.types.is_duration(dtype) or pa.types.is_time(dtype):
        ticks = array.view(pa.int64() if dtype.bit_width == 64 else pa.int32()).to_pylist()
        kind = (
            "ts"
            if pa.types.is_timestamp(dtype)
            else "dur"
            if pa.types.is_duration(dtype)
            else "time"
        )
        zoned = pa.types.is_timestamp(dtype) and dtype.tz is not None
        return [
            (kind, t * _NS[dtype.unit], zoned) if ok else None
            for t, ok in zip(ticks, valid, strict=True)
        ]
    if pa.types.is_date32(dtype):
        days = array.view(pa.int32()).to_pylist()
        return [("date", d) if ok else None for d, ok in zip(days, valid, strict=True)]
    if pa.types.is_date64(dtype):
        millis = array.view(pa.int64()).to_pylist()
        return [
            (("date", m // 86_400_000) if m % 86_400_000 == 0 else ("date-ms", m)) if ok else None
            for m, ok in zip(millis, valid, strict=True)
        ]
    if pa.types.is_float16(dtype):
        halves = array.to_numpy(zero_copy_only=False)
        return [_number(float(h)) if ok else None for h, ok in zip(halves, valid, strict=True)]
    out: list[Canon] = []
    for value in array.to_pylist():
        if value is None:
            out.append(None)
        elif isinstance(value, bool):
            out.append(("bool", value))
        elif isinstance(value, int | float | decimal.Decimal):
            out.append(_number(value))
        elif isinstance(value, str):
            out.append(("text", value))
        elif isinstance(value, bytes):
            out.append(("bytes", value))
        else:
            raise AssertionError(f"unexpected value {value!r} of {dtype}")
    return out


def _nearest(value: Fraction, dtype: pa.DataType) -> Canon:
    """The nearest value of a float type to an exact number (ties to even), as a canon."""
    width = {16: np.float16, 32: np.float32, 64: np.float64}[dtype.bit_width]
    with np.errstate(over="ignore"):
        guess = width(float(value))
        candidates = [
            guess,
            np.nextafter(guess, width(np.inf)),
            np.nextafter(guess, width(-np.inf)),
        ]
    finite = [c for c in candidates if np.isfinite(c)]
    best = min(
        finite, key=lambda c: (abs(Fraction(float(c)) - value), int(c.view(f"u{c.itemsize}")) & 1)
    )
    largest = np.finfo(width).max
    ulp = Fraction(float(largest)) - Fraction(float(np.nextafter(largest, width(0))))
    if abs(value) >= Fraction(float(largest)) + ulp / 2:
        return REFUSE  # a finite value that would become infinite
    if best == 0:
        return ("zero", value < 0)
    return ("num", Fraction(float(best)))


#: What ``expected_stored`` says of a value no column of the type may hold: refuse it.
REFUSE = ("must be refused",)


def expected_stored(sent: Canon, table_type: pa.DataType) -> Canon:
    """What a column of ``table_type`` must hold for a sent value (``REFUSE``: none). Floats
    and decimals into a float column may round to the nearest float; integers never round:
    stored exactly or refused (as Arrow refuses int64 beyond 2^24 into float32)."""
    if sent is None or not pa.types.is_floating(table_type):
        return plain_number(sent)
    if sent[0] == "int":
        exact = ("num", sent[1])
        return exact if _nearest(sent[1], table_type) == exact else REFUSE
    if sent[0] == "num":
        return _nearest(sent[1], table_type)
    return sent


def plain_number(value: Canon) -> Canon:
    """A canon with integers as plain numbers (a stored value is compared by value)."""
    if isinstance(value, tuple) and value and value[0] == "int":
        return ("num", value[1])
    return value


# ---- appending with splitting -----------------------------------------------------------------


class Matrix:
    """One table per table type; inputs appended with keys, refused inputs split, and every
    input's values checked at the end in one scan (each key remembers its input's label)."""

    def __init__(self, root: str, table_type: pa.DataType) -> None:
        self.type = table_type
        self.schema = pa.schema([("k", pa.int64()), ("c", table_type)])
        self.table = at.create_table(root, self.schema, options={"write-only": True})
        self.sent: dict[int, Canon] = {}
        self.labels: dict[int, str] = {}
        self.next_key = 0

    def send(
        self,
        label: str,
        values: list[Canon],
        build: Callable[[list[int], slice], object],
        count: int,
    ) -> None:
        """Append ``build(keys, part)`` for the whole input, splitting refused parts."""
        keys = list(range(self.next_key, self.next_key + count))
        self.next_key += count
        for key, value in zip(keys, values, strict=True):
            self.sent[key] = value
            self.labels[key] = label
        self._send(keys, build, 0, count)

    def _send(
        self, keys: list[int], build: Callable[[list[int], slice], object], start: int, end: int
    ) -> None:
        before = self.table.latest_snapshot()
        try:
            self.table.append(build(keys[start:end], slice(start, end)))
        except at.SchemaMismatchError as exc:
            assert exc.column == "c", exc
            assert "'c" in str(exc), exc
            assert self.table.latest_snapshot() == before  # nothing committed
            for key in keys[start:end]:
                self.sent[key] = ("refused", self.sent[key])
            if end - start > 1 and not self._type_refused(str(exc)):
                middle = (start + end) // 2
                for key in keys[start:end]:
                    self.sent[key] = self.sent[key][1]
                self._send(keys, build, start, middle)
                self._send(keys, build, middle, end)

    @staticmethod
    def _type_refused(message: str) -> bool:
        return "cannot be safely cast" in message

    def check(self) -> None:
        """Every accepted value is stored exactly (or as the nearest float), and no refused
        one is stored."""
        rows = self.table.scan().to_arrow().sort_by("k")
        stored = dict(
            zip(
                rows.column("k").to_pylist(),
                canon_array(rows.column("c").combine_chunks()),
                strict=True,
            )
        )
        for key, sent in self.sent.items():
            if isinstance(sent, tuple) and sent and sent[0] == "refused":
                assert key not in stored
                continue
            label = self.labels[key]
            assert key in stored, (label, key, sent)
            want = expected_stored(sent, self.type)
            assert plain_number(stored[key]) == want, (label, self.type, sent, stored[key])


def _arrow_array(dtype: pa.DataType) -> pa.Array:
    value_type = dtype.value_type if pa.types.is_dictionary(dtype) else dtype
    values = strategies.edges(value_type)
    if pa.types.is_float16(value_type):
        array = pa.array(np.array(values, np.float16), value_type)
    else:
        array = pa.array(values, value_type)
    if pa.types.is_dictionary(dtype):  # each value twice, and a null
        indices = pa.array([*range(len(array)), None, *range(len(array))], dtype.index_type)
        return pa.DictionaryArray.from_arrays(indices, array)
    return pa.concat_arrays([array, pa.nulls(1, value_type)])


@pytest.fixture(params=TABLE_TYPES, ids=str)
def matrix(request: pytest.FixtureRequest) -> Iterator[Matrix]:
    root = f"memory://matrix-{uuid.uuid4().hex}"
    yield Matrix(root, request.param)
    fsspec.filesystem("memory").rm(root.removeprefix("memory://"), recursive=True)


def test_arrow_inputs_are_stored_exactly_or_refused(matrix: Matrix) -> None:
    for dtype in ARROW_INPUTS:
        array = _arrow_array(dtype)

        def build(keys: list[int], part: slice, array: pa.Array = array) -> pa.Table:
            return pa.table({"k": pa.array(keys, pa.int64()), "c": array[part]})

        matrix.send(f"arrow {dtype}", canon_array(array), build, len(array))
    matrix.check()


# ---- pandas -----------------------------------------------------------------------------------


def _pandas_value(value: Any) -> Canon:
    """The exact value of one pandas element (no Arrow involved); NaN and NaT are missing."""
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, pd.Timestamp):
        ticks = int(value.asm8.view("i8"))  # in the Timestamp's own unit
        return ("ts", ticks * _NS[value.unit], value.tzinfo is not None)
    if isinstance(value, pd.Timedelta):
        return ("dur", int(value.asm8.view("i8")) * _NS[value.unit], False)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None  # pandas' missing value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float | decimal.Decimal):
        return _number(value)
    if isinstance(value, str):
        return ("text", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return ("date", (value - dt.date(1970, 1, 1)).days)
    raise AssertionError(f"unexpected pandas value {value!r}")


def _pandas_columns() -> dict[str, pd.Series]:
    ints = {
        name: pd.Series(strategies.edges(pa.from_numpy_dtype(np.dtype(name))), dtype=name)
        for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    }
    floats = {
        name: pd.Series(np.array(strategies.edges(pa.from_numpy_dtype(np.dtype(name))), dtype=name))
        for name in ("float32", "float64")
    }
    ns_edges = [v for v in strategies.edges(pa.timestamp("ns")) if v != -(2**63)]  # NaT's value
    return {
        **ints,
        **floats,
        "bool": pd.Series([True, False]),
        "Int64": pd.Series([*strategies.edges(pa.int64()), None], dtype="Int64"),
        "UInt64": pd.Series([*strategies.edges(pa.uint64()), None], dtype="UInt64"),
        "Float64": pd.Series([0.1, -0.0, 1e300, None], dtype="Float64"),
        "boolean": pd.Series([True, None], dtype="boolean"),
        "object-str": pd.Series([*strategies.edges(pa.string()), None], dtype=object),
        "string": pd.Series([*strategies.edges(pa.string()), None], dtype="string"),
        "object-bytes": pd.Series([*strategies.edges(pa.binary()), None], dtype=object),
        "object-decimal": pd.Series([*strategies.edges(pa.decimal128(38, 10)), None], dtype=object),
        "object-date": pd.Series(
            [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1), None], dtype=object
        ),
        "datetime64[ns]": pd.Series(
            pd.to_datetime(np.array([*ns_edges, "NaT"], dtype="datetime64[ns]"))
        ),
        "datetime64[ns, UTC]": pd.Series(
            pd.to_datetime(np.array(ns_edges, dtype="datetime64[ns]"))
        ).dt.tz_localize("UTC"),
        "datetime64[us]": pd.Series(
            np.array(
                [v for v in strategies.edges(pa.timestamp("us")) if v != -(2**63)],
                dtype="datetime64[us]",
            )
        ),
        "timedelta64[ns]": pd.Series(
            np.array(
                [v for v in strategies.edges(pa.duration("ns")) if v != -(2**63)],
                dtype="timedelta64[ns]",
            )
        ),
        "category": pd.Series(["a", "é", None, "a", "x" * 300], dtype="category"),
    }


def test_pandas_inputs_are_stored_exactly_or_refused(matrix: Matrix) -> None:
    for name, series in _pandas_columns().items():
        series = series.reset_index(drop=True)
        sent = [_pandas_value(v) for v in series]

        def build(keys: list[int], part: slice, series: pd.Series = series) -> pd.DataFrame:
            return pd.DataFrame(
                {"k": np.array(keys, np.int64), "c": series.iloc[part].reset_index(drop=True)}
            )

        matrix.send(f"pandas {name}", sent, build, len(series))
    matrix.check()


# ---- Polars -----------------------------------------------------------------------------------


def _polars_columns() -> dict[str, pl.Series]:
    def edges(dtype: pa.DataType) -> list[Any]:
        return strategies.edges(dtype)

    ints = {
        name: pl.Series(name, edges(arrow), dtype=polars)
        for name, arrow, polars in (
            ("Int8", pa.int8(), pl.Int8),
            ("Int16", pa.int16(), pl.Int16),
            ("Int32", pa.int32(), pl.Int32),
            ("Int64", pa.int64(), pl.Int64),
            ("UInt8", pa.uint8(), pl.UInt8),
            ("UInt16", pa.uint16(), pl.UInt16),
            ("UInt32", pa.uint32(), pl.UInt32),
            ("UInt64", pa.uint64(), pl.UInt64),
        )
    }
    texts = [*edges(pa.string()), None]
    return {
        **ints,
        "Float32": pl.Series(np.array(edges(pa.float32()), np.float32)),
        "Float64": pl.Series(edges(pa.float64()), dtype=pl.Float64),
        "Boolean": pl.Series([True, False, None]),
        "String": pl.Series(texts, dtype=pl.String),
        "Binary": pl.Series([*edges(pa.binary()), None], dtype=pl.Binary),
        "Decimal(38,10)": pl.Series(
            [*edges(pa.decimal128(38, 10)), None], dtype=pl.Decimal(38, 10)
        ),
        "Categorical": pl.Series(texts, dtype=pl.Categorical),
        "Enum": pl.Series(texts, dtype=pl.Enum(sorted({t for t in texts if t is not None}))),
        "Date": pl.from_arrow(pa.array(edges(pa.date32()), pa.date32())),
        "Datetime(ns)": pl.from_arrow(pa.array(edges(pa.timestamp("ns")), pa.timestamp("ns"))),
        "Datetime(ms, UTC)": pl.from_arrow(
            pa.array(edges(pa.timestamp("ms", "UTC")), pa.timestamp("ms", "UTC"))
        ),
        "Datetime(us)": pl.from_arrow(pa.array(edges(pa.timestamp("us")), pa.timestamp("us"))),
        "Time": pl.from_arrow(pa.array(edges(pa.time64("ns")), pa.time64("ns"))),
        "Duration(us)": pl.from_arrow(pa.array(edges(pa.duration("us")), pa.duration("us"))),
    }


def test_polars_inputs_are_stored_exactly_or_refused(matrix: Matrix) -> None:
    for name, series in _polars_columns().items():
        exported = series.to_arrow()  # Polars' own export: the values it sends

        def build(keys: list[int], part: slice, series: pl.Series = series) -> pl.DataFrame:
            return pl.DataFrame({"k": pl.Series(keys, dtype=pl.Int64), "c": series[part]})

        matrix.send(f"polars {name}", canon_array(exported), build, len(series))
    matrix.check()


# ---- the reported cases -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table_type", "column"),
    [
        (pa.float32(), pa.array([1e300, -1e300], pa.float64())),
        (pa.float16(), pa.array([1e5], pa.float32())),
        (pa.list_(pa.float32()), pa.array([[1.0], None, [2.0, -1e39]], pa.list_(pa.float64()))),
        (
            pa.struct([("x", pa.float32())]),
            pa.array([{"x": 1.0}, {"x": 3e38 * 10}], pa.struct([("x", pa.float64())])),
        ),
        (
            pa.map_(pa.string(), pa.float32()),
            pa.array([[("a", 1e300)]], pa.map_(pa.string(), pa.float64())),
        ),
        (pa.float32(), pa.array([decimal.Decimal("1E+60")], pa.decimal256(70, 0))),
    ],
    ids=["float64", "float32-to-16", "list", "struct", "map", "decimal256"],
)
def test_a_float_that_would_become_infinite_is_refused_naming_the_column(
    tmp_path: Path, table_type: pa.DataType, column: pa.Array
) -> None:
    """float64 [1e300, -1e300] into a float32 column was stored as [inf, -inf]."""
    table = at.create_table(str(tmp_path / "t"), pa.schema([("c", table_type)]))
    with pytest.raises(at.SchemaMismatchError, match=r"column 'c[.'].*infinite") as caught:
        table.append(pa.table({"c": column}))
    assert caught.value.column == "c"
    assert table.latest_snapshot() is None
    # NaN, infinities and values that merely round are stored (as the nearest float32)
    table = at.create_table(str(tmp_path / "u"), pa.schema([("f", pa.float32())]))
    table.append(pa.table({"f": [0.1, math.inf, -math.inf, math.nan, 3.4028235e38, 1e-46, -0.0]}))
    stored = table.scan().to_arrow().column("f").to_pylist()
    want = np.array([0.1, math.inf, -math.inf, math.nan, 3.4028235e38, 1e-46, -0.0], np.float32)
    assert np.array_equal(np.array(stored, np.float32), want, equal_nan=True)
    assert math.copysign(1.0, stored[-1]) == -1.0


def test_decimals_become_the_nearest_float(tmp_path: Path) -> None:
    """Arrow's decimal-to-float cast is off by one unit in the last place for many values
    (12.34 came out as 12.340000000000002): decimals go through their exact text."""
    values = [decimal.Decimal(f"{n}E-2") for n in range(-5000, 5000, 7)]
    schema = pa.schema([("f", pa.float64()), ("g", pa.float32())])
    table = at.create_table(str(tmp_path / "t"), schema)
    column = pa.array(values, pa.decimal128(10, 2))
    table.append(pa.table({"f": column, "g": column}))
    stored = table.scan().to_arrow()
    assert stored.column("f").to_pylist() == [float(v) for v in values]
    want32 = [_nearest(Fraction(v), pa.float32()) for v in values]
    assert canon_array(stored.column("g").combine_chunks()) == [
        ("zero", False) if w[0] == "zero" else w for w in want32
    ]


def test_a_decimal_rescale_that_overflows_is_refused(tmp_path: Path) -> None:
    """decimal(1, 0) 7 into decimal(38, 38) overflowed Arrow's 128-bit rescale unnoticed."""
    table = at.create_table(str(tmp_path / "t"), pa.schema([("d", pa.decimal128(38, 38))]))
    with pytest.raises(at.SchemaMismatchError, match="column 'd'") as caught:
        table.append(pa.table({"d": pa.array([decimal.Decimal(7)], pa.decimal128(1, 0))}))
    assert caught.value.column == "d"
    table.append(pa.table({"d": pa.array([decimal.Decimal(0)], pa.decimal128(1, 0))}))
    assert table.scan().to_arrow().column("d").to_pylist() == [decimal.Decimal(0)]


def test_seconds_beyond_what_parquet_stores_are_refused_naming_the_column(tmp_path: Path) -> None:
    """Parquet stores timestamp[s] as milliseconds: an append of 2**62 seconds failed while
    writing the file with a raw ArrowInvalid."""
    table = at.create_table(str(tmp_path / "t"), pa.schema([("ts", pa.timestamp("s"))]))
    for value in (2**62, -(2**63)):
        with pytest.raises(at.SchemaMismatchError, match="column 'ts'") as caught:
            table.append(pa.table({"ts": pa.array([value], pa.timestamp("s"))}))
        assert caught.value.column == "ts"
    limit = (2**63 - 1) // 1000
    table.append(pa.table({"ts": pa.array([limit, -limit], pa.timestamp("s"))}))
    assert table.scan().to_arrow().column("ts").cast(pa.int64()).to_pylist() == [limit, -limit]


def test_polars_categorical_and_enum_columns_are_appended(tmp_path: Path) -> None:
    """``Function 'array_take' has no kernel matching input types (string_view, uint32)``."""
    frame = pl.DataFrame(
        {
            "cat": pl.Series(["b", None, "a", "b"], dtype=pl.Categorical),
            "enum": pl.Series(["x", "y", None, "x"], dtype=pl.Enum(["x", "y", "unused"])),
            "nested": pl.Series(
                [{"c": "p"}, None, {"c": None}, {"c": "q"}],
                dtype=pl.Struct({"c": pl.Categorical}),
            ),
            "listed": pl.Series([["a", "b"], None, [], [None]], dtype=pl.List(pl.Categorical)),
            "text": pl.Series(["é", "", None, "x" * 100], dtype=pl.String),
        }
    )
    schema = pa.schema(
        [
            ("cat", pa.string()),
            ("enum", pa.large_string()),
            ("nested", pa.struct([("c", pa.string())])),
            ("listed", pa.list_(pa.string())),
            ("text", pa.string()),
        ]
    )
    table = at.create_table(str(tmp_path / "t"), schema)
    table.append(frame)
    assert table.scan().to_arrow().to_pylist() == frame.to_arrow().cast(schema).to_pylist()
    # a table created from the frame's own schema takes it too
    created = at.create_table(str(tmp_path / "u"), frame.to_arrow().schema)
    created.append(frame)
    assert created.scan().count() == 4


@pytest.mark.parametrize(
    "value_type", [t for t in strategies.SCALAR_TYPES if not pa.types.is_boolean(t)], ids=str
)
def test_dictionary_and_view_columns_of_every_value_type_are_appended(
    tmp_path: Path, value_type: pa.DataType
) -> None:
    edges = strategies.edges(value_type)
    if value_type == pa.timestamp("s"):  # Parquet stores seconds as milliseconds
        edges = [v for v in edges if abs(v) <= (2**63 - 1) // 1000]
    if value_type == pa.date64():  # only whole days of 32 bits: the rest is refused
        edges = [v for v in edges if v % 86_400_000 == 0 and abs(v) < 2**31 * 86_400_000]
    values = pa.array(edges, value_type)
    indices = pa.array([*range(len(values)), None, 0], pa.int32())
    encoded = pa.DictionaryArray.from_arrays(indices, values)
    table = at.create_table(str(tmp_path / "t"), pa.schema([("c", value_type)]))
    table.append(pa.table({"c": encoded}))
    assert canon_array(table.scan().to_arrow().column("c").combine_chunks()) == canon_array(encoded)


@pytest.mark.parametrize(
    ("view", "table_type"),
    [
        (pa.string_view(), pa.string()),
        (pa.string_view(), pa.large_string()),
        (pa.binary_view(), pa.binary()),
        (pa.binary_view(), pa.large_binary()),
    ],
    ids=str,
)
def test_view_columns_are_appended(
    tmp_path: Path, view: pa.DataType, table_type: pa.DataType
) -> None:
    values = strategies.edges(view)
    column = pa.array([*values, None], view)
    nested = pa.array([{"v": v} for v in values], pa.struct([("v", view)]))
    schema = pa.schema(
        [("c", table_type), ("d", table_type), ("s", pa.struct([("v", table_type)]))]
    )
    table = at.create_table(str(tmp_path / "t"), schema)
    rows = len(values)
    table.append(
        pa.table(
            {
                "c": column.slice(0, rows),
                "d": pa.DictionaryArray.from_arrays(
                    pa.array([i % 3 for i in range(rows)], pa.uint32()),
                    pa.array([values[0], values[-1], None], view),
                ),
                "s": nested,
            }
        )
    )
    stored = table.scan().to_arrow()
    assert stored.column("c").to_pylist() == values
    assert stored.column("s").to_pylist() == [{"v": v} for v in values]
    assert stored.column("d").to_pylist() == [
        [values[0], values[-1], None][i % 3] for i in range(rows)
    ]


def test_a_file_no_reader_can_open_is_never_written(tmp_path: Path) -> None:
    """A null struct with a non-nullable fixed-size list field was appended, and then no scan
    could read the file back (pyarrow: "Expected all lists to be of size=2")."""
    field = pa.field("f", pa.list_(pa.field("item", pa.bool_(), nullable=False), 2), nullable=False)
    dtype = pa.struct([field])
    table = at.create_table(str(tmp_path / "t"), pa.schema([("s", dtype)]))
    with pytest.raises(at.SchemaMismatchError, match=r"'s\.f'") as caught:
        table.append(pa.table({"s": pa.array([{"f": [True, False]}, None], dtype)}))
    assert caught.value.column == "s"
    table.append(pa.table({"s": pa.array([{"f": [True, False]}], dtype)}))  # no null struct
    assert table.scan().to_arrow().column("s").to_pylist() == [{"f": [True, False]}]
    # deeper: the null struct is two levels up
    outer = pa.struct([pa.field("inner", dtype, nullable=False)])
    deep = at.create_table(str(tmp_path / "u"), pa.schema([("o", outer)]))
    with pytest.raises(at.SchemaMismatchError, match=r"'o\.inner\.f'"):
        deep.append(pa.table({"o": pa.array([None], outer)}))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    strategies.nested_types().flatmap(
        lambda t: st.tuples(st.just(t), strategies.arrays(t, min_size=1, max_size=8, python=True))
    )
)
def test_nested_values_with_nulls_at_every_level_read_back_exactly(
    case: tuple[pa.DataType, pa.Array],
) -> None:
    """Lists, structs and maps of every scalar type, nulls at every level: what is appended
    is what every read returns, or the append is refused naming the column. The same values
    are also sent as other producers send them, and must be taken alike: as a slice of a
    longer batch in sibling types that need a cast (``string`` for ``large_string``, ``list``
    for ``large_list``, ...), and with every field of a null struct null too and every field
    nullable (Polars and Spark)."""
    dtype, values = case
    schema = pa.schema([("k", pa.int64()), ("c", dtype)])
    count = len(values)
    data = pa.table({"k": pa.array(range(count), pa.int64()), "c": values}, schema=schema)
    root = f"memory://nested-{uuid.uuid4().hex}"
    try:
        table = at.create_table(root, schema, options={"write-only": True})
        try:
            table.append(data)
        except at.SchemaMismatchError as exc:
            assert exc.column == "c"
            assert table.latest_snapshot() is None
            return
        doubled = pa.concat_arrays([values, values])
        try:
            sibling = doubled.cast(_sibling(dtype)).slice(count)
        except pa.ArrowInvalid:  # pyarrow cannot cast a null fixed-size list of required items
            sibling = doubled.slice(count)
        hidden = _hidden_nulls(values)
        for form, start in ((sibling, count), (hidden, 2 * count)):
            keys = pa.array(range(start, start + count), pa.int64())
            table.append(pa.table({"k": keys, "c": form}))
        stored = table.scan().to_arrow().sort_by("k").column("c").combine_chunks()
        assert _no_nan(stored.to_pylist()) == _no_nan(values.to_pylist()) * 3, dtype
    finally:
        fsspec.filesystem("memory").rm(root.removeprefix("memory://"), recursive=True)


_SIBLING_TYPES = {
    pa.string(): pa.large_string(),
    pa.large_string(): pa.string(),
    pa.binary(): pa.large_binary(),
    pa.large_binary(): pa.binary(),
}


def _sibling(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with the other offset width at every level (``string`` <-> ``large_string``,
    ``list`` <-> ``large_list``, ...): the same values, in a type that needs a cast."""
    if pa.types.is_struct(dtype):
        return pa.struct([f.with_type(_sibling(f.type)) for f in dtype])
    if pa.types.is_map(dtype):
        return pa.map_(
            dtype.key_field.with_type(_sibling(dtype.key_type)),
            dtype.item_field.with_type(_sibling(dtype.item_type)),
        )
    if pa.types.is_fixed_size_list(dtype):
        return pa.list_(dtype.value_field.with_type(_sibling(dtype.value_type)), dtype.list_size)
    if pa.types.is_list(dtype):
        return pa.large_list(dtype.value_field.with_type(_sibling(dtype.value_type)))
    if pa.types.is_large_list(dtype):
        return pa.list_(dtype.value_field.with_type(_sibling(dtype.value_type)))
    return _SIBLING_TYPES.get(dtype, dtype)


def _hidden_nulls(array: pa.Array) -> pa.Array:
    """``array`` as Polars and Spark send it: every field of a null struct null as well (Arrow
    leaves those slots undefined; pyarrow fills them with values), every field nullable."""
    dtype = array.type
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(dtype):
        valid = array.is_valid()
        children = [_hidden_nulls(array.field(i)) for i in range(dtype.num_fields)]
        hidden = [pc.if_else(valid, child, pa.scalar(None, child.type)) for child in children]
        fields = [pa.field(dtype.field(i).name, c.type) for i, c in enumerate(hidden)]
        return pa.StructArray.from_arrays(hidden, fields=fields, mask=mask)
    if pa.types.is_map(dtype):
        items = _hidden_nulls(array.items)
        return pa.MapArray.from_arrays(array.offsets, array.keys, items, mask=mask)
    if pa.types.is_fixed_size_list(dtype):
        values = _hidden_nulls(array.values)
        return pa.FixedSizeListArray.from_arrays(values, dtype.list_size, mask=mask)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        builder = pa.ListArray if pa.types.is_list(dtype) else pa.LargeListArray
        return builder.from_arrays(array.offsets, _hidden_nulls(array.values), mask=mask)
    return array


def _no_nan(value: Any) -> Any:
    """``value`` with NaN as text (NaN != NaN), lists and tuples alike."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    return value


_STRICT_FSL = pa.list_(pa.field("item", pa.bool_(), nullable=False), 2)


@pytest.mark.parametrize(
    ("dtype", "values", "path"),
    [
        # beside a field read with a cast (date64 is stored as date32), a null struct
        (pa.struct([("f0", pa.date64()), ("f1", _STRICT_FSL)]), [None], "c.f1"),
        (pa.struct([("f0", pa.time32("s")), ("f1", _STRICT_FSL)]), [{"f0": 1, "f1": None}], "c.f1"),
        (pa.list_(pa.list_(_STRICT_FSL)), [[[None]]], "c[][]"),
        (
            pa.map_(pa.string(), pa.struct([("f0", pa.date64()), ("f1", _STRICT_FSL)])),
            [[("k", None)]],
            "c.value.f1",
        ),
    ],
)
def test_null_fixed_size_lists_of_required_elements_are_refused(
    dtype: pa.DataType, values: list[Any], path: str
) -> None:
    """pyarrow writes these, then fails to read the file back ("nulls in input cannot be
    viewed as non-nullable"): every later scan of the table would fail. Found by the nested
    whole-domain property test above."""
    root = f"memory://strict-fsl-{uuid.uuid4().hex}"
    try:
        table = at.create_table(root, pa.schema([("c", dtype)]))
        with pytest.raises(at.SchemaMismatchError, match=re.escape(path)) as caught:
            table.append(pa.table({"c": pa.array(values, type=dtype)}))
        assert caught.value.column == "c"
        assert table.latest_snapshot() is None
    finally:
        fsspec.filesystem("memory").rm(root.removeprefix("memory://"), recursive=True)


# ---- decimals ---------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    strategies.decimal_types().flatmap(
        lambda source: st.tuples(
            st.just(source),
            st.one_of(strategies.decimal_types(), st.just(pa.decimal128(38, 38))),
            st.lists(strategies.decimals(source.precision, source.scale), min_size=1, max_size=6),
        )
    )
)
def test_decimal_rescaling_is_exact_or_refused(
    case: tuple[pa.DataType, pa.DataType, list[decimal.Decimal]],
) -> None:
    """Every decimal shape into every other: stored exactly (the same number) or refused
    naming the column, never wrapped by a rescale that overflows 128 bits."""
    source, target, values = case
    stored = _stored_or_refused(target, pa.array(values, source))
    if stored is None:
        fits = [
            abs(v) < decimal.Decimal(f"1E{target.precision - target.scale}")
            and v == v.quantize(decimal.Decimal(f"1E-{target.scale}"), context=_WIDE)
            for v in values
        ]
        assert not all(fits), (source, target, values)  # refused only for a reason
        return
    assert [Fraction(v) for v in stored] == [Fraction(v) for v in values]


_WIDE = decimal.Context(prec=100)

_INTEGER_TYPES = [
    pa.int8(), pa.int16(), pa.int32(), pa.int64(),
    pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
]  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(_INTEGER_TYPES).flatmap(
        lambda source: st.tuples(
            st.just(source),
            strategies.decimal_types(),
            st.lists(strategies.integers(source), min_size=1, max_size=6),
        )
    )
)
def test_integers_into_decimals_are_stored_exactly_when_they_fit(
    case: tuple[pa.DataType, pa.DataType, list[int]],
) -> None:
    """Every integer type into every decimal shape: stored exactly when every value fits the
    decimal's precision, refused naming the column only when one does not (Arrow alone refuses
    int64 into decimal(10, 2) whatever the values: int64's widest value needs precision 21)."""
    source, target, values = case
    fits = all(abs(v) < 10 ** (target.precision - target.scale) for v in values)
    stored = _stored_or_refused(target, pa.array(values, source))
    if stored is None:
        assert not fits, (source, target, values)  # refused only for a reason
        return
    assert fits, (source, target, values)
    assert [Fraction(v) for v in stored] == [Fraction(v) for v in values]


@pytest.mark.parametrize("reader", ["csv", "json"])
def test_decimals_beyond_their_declared_precision_are_refused(tmp_path: Path, reader: str) -> None:
    """pyarrow's CSV and JSON readers parse ``1000`` into a ``decimal(5, 2)`` array without a
    word (the array does not validate); appended through the API it was stored as 1000.00,
    and ``99999`` as -67773.16. Such values are refused naming the column; the same values
    into a column wide enough are stored exactly."""
    texts = ["1.5", "1000", "99999", "-99999", "0"]
    fractions = ["0.5", "1.5", "0", "-1.5", "0.125"]  # 1.5 needs decimal(4, 3)
    pairs = list(zip(texts, fractions, strict=True))
    types = {"d": pa.decimal128(5, 2), "g": pa.decimal128(3, 3)}
    if reader == "csv":
        source = pacsv.read_csv(
            pa.BufferReader(("d,g\n" + "".join(f"{t},{f}\n" for t, f in pairs)).encode()),
            convert_options=pacsv.ConvertOptions(column_types=types),
        )
    else:
        lines = "".join(f'{{"d": "{t}", "g": "{f}"}}\n' for t, f in pairs)
        source = pajson.read_json(
            pa.BufferReader(lines.encode()),
            parse_options=pajson.ParseOptions(explicit_schema=pa.schema(types)),
        )
    with pytest.raises(pa.ArrowInvalid):
        source.validate(full=True)  # what pyarrow made does not hold its own type
    for column in ("d", "g"):
        table = at.create_table(
            str(tmp_path / f"{reader}-{column}"), pa.schema([(column, types[column])])
        )
        with pytest.raises(at.SchemaMismatchError, match=f"column '{column}'") as caught:
            table.append(source.select([column]))
        assert caught.value.column == column
        assert table.latest_snapshot() is None
    wide = at.create_table(
        str(tmp_path / f"{reader}-wide"), pa.schema([("d", pa.decimal128(38, 10))])
    )
    wide.append(source.select(["d"]))
    assert wide.scan().to_arrow().column("d").to_pylist() == [decimal.Decimal(t) for t in texts]


# ---- nested nulls and slices ------------------------------------------------------------------


def test_a_null_struct_hides_its_fields_from_every_producer(tmp_path: Path) -> None:
    """Polars sends a null struct with its fields null too: the table's ``struct<v int64 not
    null>`` refused it ("field 'v' has nulls") although the same rows from pyarrow were taken.
    A null in a field of a struct that is not null is still refused, naming the field."""
    dtype = pa.struct([pa.field("v", pa.int64(), nullable=False)])
    rows = pa.table({"id": [1, 2], "s": pa.array([{"v": 1}, None])})
    for name, data in (("pyarrow", rows), ("polars", pl.from_arrow(rows))):
        table = at.create_table(str(tmp_path / name), pa.schema([("id", pa.int64()), ("s", dtype)]))
        table.append(data)
        assert table.scan().to_arrow().to_pylist() == rows.to_pylist(), name
        with pytest.raises(at.SchemaMismatchError, match=r"'s\.v' is not nullable") as caught:
            table.append(pl.DataFrame({"id": [3], "s": [{"v": None}]}))
        assert caught.value.column == "s"


def test_a_sliced_batch_of_structs_holding_maps_is_taken(tmp_path: Path) -> None:
    """A sliced batch (struct of a map and a struct, in types that need a cast) was refused
    with Arrow's "Null bitmap with offsets slice not supported"; unsliced it was taken."""
    source = pa.struct(
        [
            ("m", pa.map_(pa.string(), pa.int64())),
            ("s", pa.struct([("x", pa.decimal128(10, 2)), ("y", pa.string())])),
        ]
    )
    target = pa.struct(
        [
            ("m", pa.map_(pa.string(), pa.int32())),
            ("s", pa.struct([("x", pa.decimal128(10, 2)), ("y", pa.large_string())])),
        ]
    )
    rows = [
        {"m": [("k", 1)], "s": {"x": None, "y": "z"}},
        None,
        {"m": None, "s": None},
        {"m": [], "s": {"x": decimal.Decimal("1.50"), "y": None}},
        {"m": [("", 5)], "s": {"x": None, "y": ""}},
    ]
    table = at.create_table(str(tmp_path / "t"), pa.schema([("c", target)]))
    table.append(pa.table({"c": pa.array(rows, source)}).slice(2))
    assert table.scan().to_arrow().column("c").to_pylist() == [
        {"m": None if r is None or r["m"] is None else r["m"], "s": r and r["s"]} if r else None
        for r in rows[2:]
    ]


def _stored_or_refused(target: pa.DataType, values: pa.Array) -> list[Any] | None:
    """``values`` appended to a fresh one-column table of ``target``: the values read back,
    or None when the append was refused naming the column with nothing committed."""
    root = f"memory://one-column-{uuid.uuid4().hex}"
    try:
        table = at.create_table(root, pa.schema([("d", target)]), options={"write-only": True})
        try:
            table.append(pa.table({"d": values}))
        except at.SchemaMismatchError as exc:
            assert exc.column == "d"
            assert table.latest_snapshot() is None
            return None
        return table.scan().to_arrow().column("d").to_pylist()
    finally:
        fsspec.filesystem("memory").rm(root.removeprefix("memory://"), recursive=True)
