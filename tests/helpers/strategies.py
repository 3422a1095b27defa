"""Hypothesis strategies for values over the whole domain of each Arrow type.

Every strategy here is built from Python, hypothesis and pyarrow alone (never through
appendtable), and reaches the edges of its type's domain, not only its middle:

* integers: the type's minimum and maximum, their neighbours, powers of two and their
  neighbours, 0 and -1, and uniform draws;
* floats: NaN, infinities, signed zeros, the largest finite values, the smallest normal and
  subnormal values (of the type's width), and hypothesis' float draws (which include
  subnormals);
* decimals: full-precision values of every precision and scale, built from their digits (no
  decimal context rounds them), down to one unit of the last place and up to the largest
  value the precision holds;
* strings and binaries: empty, long (hundreds of characters), NUL, non-ASCII and astral
  characters, invalid UTF-8 for binaries;
* temporal types: the ends of each unit's range (as stored integers; ``date64`` any
  millisecond of int64, not only whole days), and Python values at the ends of what Python's
  ``datetime`` can hold;
* nested types (lists, large lists, fixed-size lists, structs, maps) with nulls at every level.

``values(dtype)`` draws one Python value accepted exactly by ``pa.array([v], type=dtype)``;
``arrays(dtype)`` draws a whole array; ``python_values(dtype)`` draws values a user passes
as filter literals (Python ``date``, ``datetime``, ``time`` objects for temporal types).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random
import struct
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa

__all__ = [
    "BLOOM_TYPES",
    "FILTER_TYPES",
    "SCALAR_TYPES",
    "arrays",
    "decimal_types",
    "decimals",
    "edges",
    "floats",
    "integers",
    "nested_types",
    "python_values",
    "scalar_types",
    "values",
]

D = decimal.Decimal
UTC = dt.UTC

#: The primitive types a table column can have (decimals of several shapes; more are drawn by
#: ``decimal_types``).
SCALAR_TYPES: list[pa.DataType] = [
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(1, 0),
    pa.decimal128(9, 9),
    pa.decimal128(18, 4),
    pa.decimal128(19, 0),
    pa.decimal128(38, 0),
    pa.decimal128(38, 10),
    pa.decimal128(38, 38),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(3),
    pa.date32(),
    pa.date64(),
    pa.timestamp("s"),
    pa.timestamp("ms", tz="UTC"),
    pa.timestamp("us"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ns"),
    pa.timestamp("ns", tz="UTC"),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    pa.duration("s"),
    pa.duration("ns"),
]
#: The types filters compare (every scalar type but durations).
FILTER_TYPES = [t for t in SCALAR_TYPES if not pa.types.is_duration(t)]
#: The types Parquet bloom filters support (no booleans, no durations).
BLOOM_TYPES = [t for t in SCALAR_TYPES if not (pa.types.is_boolean(t) or pa.types.is_duration(t))]

_INT_RANGES = {
    8: (-(2**7), 2**7 - 1),
    16: (-(2**15), 2**15 - 1),
    32: (-(2**31), 2**31 - 1),
    64: (-(2**63), 2**63 - 1),
}
#: Units per second of the temporal units.
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)


def _edges(low: int, high: int) -> list[int]:
    """The ends of ``[low, high]``, their neighbours, 0, ±1 and the powers of two (and their
    neighbours) inside the range."""
    points = {low, low + 1, high, high - 1, 0, 1, -1}
    for bits in range(1, 129):
        for power in (2**bits, -(2**bits)):
            points.update({power - 1, power, power + 1})
    return sorted(p for p in points if low <= p <= high)


def bounded_integers(low: int, high: int) -> st.SearchStrategy[int]:
    """Integers of ``[low, high]``: edges (see ``_edges``), hypothesis' draws, and numbers of
    random digits up to the width of the range's ends."""
    most = max(len(str(abs(low))), len(str(abs(high))))
    digits = _digit_strings(most).map(int).filter(lambda n: low <= n <= high)
    return st.one_of(st.sampled_from(_edges(low, high)), st.integers(low, high), digits)


def integers(dtype: pa.DataType) -> st.SearchStrategy[int]:
    """Every value of an Arrow integer type, edges first."""
    bits = dtype.bit_width
    if pa.types.is_unsigned_integer(dtype):
        return bounded_integers(0, 2**bits - 1)
    low, high = _INT_RANGES[bits]
    return bounded_integers(low, high)


def _float_edges(width: int) -> list[float]:
    """NaN, infinities, signed zeros, the largest finite, smallest normal and smallest
    subnormal values of a float of ``width`` bits (both signs), and a few plain numbers."""
    if width == 32:
        largest = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
        normal = struct.unpack("<f", struct.pack("<I", 0x00800000))[0]
        subnormal = struct.unpack("<f", struct.pack("<I", 0x00000001))[0]
        below_normal = struct.unpack("<f", struct.pack("<I", 0x007FFFFF))[0]
    else:
        largest = struct.unpack("<d", struct.pack("<Q", 0x7FEFFFFFFFFFFFFF))[0]
        normal = struct.unpack("<d", struct.pack("<Q", 0x0010000000000000))[0]
        subnormal = struct.unpack("<d", struct.pack("<Q", 0x0000000000000001))[0]
        below_normal = struct.unpack("<d", struct.pack("<Q", 0x000FFFFFFFFFFFFF))[0]
    magnitudes = [largest, normal, subnormal, below_normal, 1.0, 0.1, 1.5, 2.0**24 + 2]
    edges = [math.nan, math.inf, -math.inf, 0.0, -0.0]
    return edges + [sign * m for m in magnitudes for sign in (1.0, -1.0)]


def floats(dtype: pa.DataType) -> st.SearchStrategy[float]:
    """Every value of a float32 or float64 type, edges first (see ``_float_edges``)."""
    width = 32 if pa.types.is_float32(dtype) else 64
    return st.one_of(
        st.sampled_from(_float_edges(width)),
        st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True),
    )


def decimals(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal]:
    """Every value of ``decimal(precision, scale)``, built exactly from its unscaled integer
    (a Decimal made from a string is exact whatever the context's precision)."""
    limit = 10**precision - 1
    edges = sorted({limit, -limit, limit - 1, -limit + 1, 1, -1, 0, 10 ** (precision - 1)})
    digits = _digit_strings(precision).map(int)  # every digit drawn, most often all of them
    # most values of a decimal type have all its digits: so do most draws
    unscaled = st.one_of(st.sampled_from(edges), st.integers(-limit, limit), digits, digits)
    return unscaled.map(lambda n: D(f"{n}E-{scale}"))


def _digit_strings(most: int) -> st.SearchStrategy[str]:
    """Signed integers written with 1..``most`` random digits, ``most`` of them half the time
    (hypothesis' integer draws favour small numbers: these do not)."""
    count = st.one_of(st.just(most), st.integers(1, most))
    return count.flatmap(
        lambda n: st.tuples(
            st.sampled_from(["", "-"]),
            st.sampled_from("123456789"),
            st.text("0123456789", min_size=n - 1, max_size=n - 1),
        )
    ).map("".join)


def decimal_types() -> st.SearchStrategy[pa.Decimal128Type]:
    """``decimal128(p, s)`` of every precision 1..38 and scale 0..p."""
    return st.integers(1, 38).flatmap(
        lambda p: st.integers(0, p).map(lambda s: pa.decimal128(p, s))
    )


_CHARACTERS = st.characters(codec="utf-8")  # every code point but surrogates
_SPECIAL_TEXT = ["", "\x00", "a\x00b", "é", "日本語", "😀", "\U0010ffff", " ", "NULL", "nan"]


def texts() -> st.SearchStrategy[str]:
    """Strings: empty, NUL, non-ASCII and astral characters, short draws and long ones."""
    return st.one_of(
        st.sampled_from(_SPECIAL_TEXT),
        st.text(_CHARACTERS, max_size=8),
        st.text(_CHARACTERS, min_size=200, max_size=400),
        st.text("ab", min_size=300, max_size=300),  # long and sharing long prefixes
    )


def binaries() -> st.SearchStrategy[bytes]:
    """Byte strings: empty, NUL, invalid UTF-8, 0xFF runs, short and long draws."""
    return st.one_of(
        st.sampled_from([b"", b"\x00", b"\xff", b"\xff" * 40, b"\x80abc"]),
        st.binary(max_size=8),
        st.binary(min_size=200, max_size=400),
    )


def _unit_range(unit: str) -> tuple[int, int]:
    """Stored integers of a timestamp or duration unit: the whole int64 range."""
    return _INT_RANGES[64]


def _python_datetime_range(unit: str) -> tuple[int, int]:
    """Stored integers of a timestamp unit that Python's ``datetime`` can hold exactly enough
    to name exactly (years 1..9999; for nanoseconds the int64 range, whole microseconds)."""
    per_second = _PER_SECOND[unit]
    low = (dt.datetime(1, 1, 1) - _EPOCH) // dt.timedelta(microseconds=1)
    high = (dt.datetime(9999, 12, 31, 23, 59, 59, 999999) - _EPOCH) // dt.timedelta(microseconds=1)
    low_units = -((-low * per_second) // 1_000_000)
    high_units = high * per_second // 1_000_000
    int_low, int_high = _INT_RANGES[64]
    low_units, high_units = max(low_units, int_low), min(high_units, int_high)
    step = max(1, per_second // 1_000_000)  # nanoseconds: whole microseconds, as Python holds
    return -(-low_units // step) * step, high_units // step * step


def _day_range(python: bool) -> tuple[int, int]:
    if python:
        return (dt.date(1, 1, 1) - _EPOCH_DATE).days, (dt.date(9999, 12, 31) - _EPOCH_DATE).days
    return _INT_RANGES[32]


def _time_range(unit: str) -> tuple[int, int]:
    """A time of day in ``unit``: 0 to the last unit before midnight."""
    return 0, 86_400 * _PER_SECOND[unit] - 1


def values(dtype: pa.DataType, *, python: bool = False) -> st.SearchStrategy[Any]:
    """One non-null value of ``dtype`` over its whole domain, as ``pa.array([v], dtype)``
    takes it: temporal values as stored integers (so the ends of every unit's range are
    reached), or with ``python`` as ``date``/``datetime``/``time`` objects (the range Python
    holds). Nested types take lists, dicts and lists of pairs, with nulls at every level."""
    if pa.types.is_boolean(dtype):
        return st.booleans()
    if pa.types.is_integer(dtype):
        return integers(dtype)
    if pa.types.is_floating(dtype):
        return floats(dtype)
    if pa.types.is_decimal(dtype):
        return decimals(dtype.precision, dtype.scale)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return texts()
    if pa.types.is_fixed_size_binary(dtype):
        return st.binary(min_size=dtype.byte_width, max_size=dtype.byte_width)
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return binaries()
    if pa.types.is_date(dtype):
        days = bounded_integers(*_day_range(python))
        if python:
            return days.map(lambda d: _EPOCH_DATE + dt.timedelta(days=d))
        if pa.types.is_date64(dtype):
            # mostly whole days (what a date column stores); also any millisecond of int64,
            # which a table refuses unless it is a whole day within ±2^31 days
            millis = bounded_integers(*_INT_RANGES[64])
            return st.one_of(days.map(lambda d: d * 86_400_000), millis)
        return days
    if pa.types.is_timestamp(dtype):
        if not python:
            return bounded_integers(*_unit_range(dtype.unit))
        low, high = _python_datetime_range(dtype.unit)
        return bounded_integers(low, high).map(lambda n: _datetime(n, dtype))
    if pa.types.is_time(dtype):
        ticks = bounded_integers(*_time_range(dtype.unit))
        if not python:
            return ticks
        return ticks.map(lambda n: _time(n, dtype.unit))
    if pa.types.is_duration(dtype):
        return bounded_integers(*_unit_range(dtype.unit))
    if pa.types.is_struct(dtype):
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        return st.fixed_dictionaries(
            {f.name: _maybe_null(values(f.type, python=python), f.nullable) for f in fields}
        )
    if pa.types.is_fixed_size_list(dtype):
        item = _maybe_null(values(dtype.value_type, python=python), dtype.value_field.nullable)
        return st.lists(item, min_size=dtype.list_size, max_size=dtype.list_size)
    if pa.types.is_map(dtype):
        key = values(dtype.key_type, python=python)
        item = _maybe_null(values(dtype.item_type, python=python), dtype.item_field.nullable)
        return st.lists(st.tuples(key, item), max_size=4, unique_by=lambda kv: _key(kv[0]))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        item = _maybe_null(values(dtype.value_type, python=python), dtype.value_field.nullable)
        return st.lists(item, max_size=4)
    raise NotImplementedError(f"no strategy for {dtype}")


def python_values(dtype: pa.DataType) -> st.SearchStrategy[Any]:
    """``values(dtype, python=True)``: what a user writes as a filter literal."""
    return values(dtype, python=True)


def _key(value: Any) -> Any:
    """A hashable identity for a map key (NaN keys compare unequal, so use their bits)."""
    if isinstance(value, float):
        return struct.pack("<d", value)
    return value


def _maybe_null(strategy: st.SearchStrategy[Any], nullable: bool) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy) if nullable else strategy


def _datetime(units: int, dtype: pa.TimestampType) -> dt.datetime:
    """The Python datetime of a stored timestamp (a whole number of microseconds)."""
    micros = units * 1_000_000 // _PER_SECOND[dtype.unit]
    moment = _EPOCH + dt.timedelta(microseconds=micros)
    return moment.replace(tzinfo=UTC) if dtype.tz is not None else moment


def _time(units: int, unit: str) -> dt.time:
    micros = units * 1_000_000 // _PER_SECOND[unit]
    return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()


def arrays(
    dtype: pa.DataType,
    *,
    min_size: int = 0,
    max_size: int = 30,
    nulls: bool = True,
    python: bool = False,
) -> st.SearchStrategy[pa.Array]:
    """An array of ``dtype`` whose values are drawn by ``values`` (nulls among them unless
    ``nulls`` is False)."""
    item = values(dtype, python=python)
    element = st.one_of(st.none(), item) if nulls else item
    return st.lists(element, min_size=min_size, max_size=max_size).map(
        lambda drawn: pa.array(drawn, type=dtype)
    )


def scalar_types(choices: list[pa.DataType] | None = None) -> st.SearchStrategy[pa.DataType]:
    """A primitive type from ``choices`` (default ``SCALAR_TYPES``) or any decimal shape."""
    listed = st.sampled_from(choices if choices is not None else SCALAR_TYPES)
    if choices is not None:
        return listed
    return st.one_of(listed, decimal_types())


def nested_types(depth: int = 2) -> st.SearchStrategy[pa.DataType]:
    """Lists, large lists, fixed-size lists, structs and maps (string or integer keys) of
    scalar or nested types, up to ``depth`` levels, every field nullable or not."""
    leaves = scalar_types([t for t in SCALAR_TYPES if not pa.types.is_duration(t)])

    def extend(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
        field = st.tuples(children, st.booleans())
        return st.one_of(
            field.map(lambda f: pa.list_(pa.field("item", f[0], nullable=f[1]))),
            field.map(lambda f: pa.large_list(pa.field("item", f[0], nullable=f[1]))),
            field.map(lambda f: pa.list_(pa.field("item", f[0], nullable=f[1]), 2)),
            st.lists(field, min_size=1, max_size=3).map(
                lambda fs: pa.struct(
                    [pa.field(f"f{i}", t, nullable=n) for i, (t, n) in enumerate(fs)]
                )
            ),
            st.tuples(st.sampled_from([pa.string(), pa.int32()]), field).map(
                lambda kv: pa.map_(kv[0], pa.field("value", kv[1][0], nullable=kv[1][1]))
            ),
        )

    return st.recursive(leaves, extend, max_leaves=depth * 2)


#: Powers of two where a conversion changes: integer widths and float mantissas.
_BOUNDARY_BITS = frozenset({7, 8, 11, 15, 16, 24, 31, 32, 53, 63, 64})


def _is_boundary(n: int) -> bool:
    """Whether ``n`` is within 1 of ± a power of two in ``_BOUNDARY_BITS`` (or 0, ±1)."""
    return abs(n) <= 1 or any(abs(abs(n) - 2**bits) <= 1 for bits in _BOUNDARY_BITS)


def edges(dtype: pa.DataType) -> list[Any]:
    """The boundary values of a primitive type (deterministic), as ``pa.array(values, dtype)``
    takes them (temporal values as stored integers, reaching the ends of each unit's range):
    what ``values`` draws most often, for tests that try every one."""
    if pa.types.is_boolean(dtype):
        return [True, False]
    if pa.types.is_integer(dtype):
        bits = dtype.bit_width
        low, high = (0, 2**bits - 1) if pa.types.is_unsigned_integer(dtype) else _INT_RANGES[bits]
        return [p for p in _edges(low, high) if _is_boundary(p)]
    if pa.types.is_float16(dtype):
        return [0.0, -0.0, 1.5, -2.0, 65504.0, -65504.0, 6.0e-8, math.nan, math.inf, -math.inf]
    if pa.types.is_floating(dtype):
        return _float_edges(dtype.bit_width)
    if pa.types.is_decimal(dtype):
        precision, scale = dtype.precision, dtype.scale
        limit = 10**precision - 1
        rng = random.Random(precision * 1000 + scale)
        full = [rng.randrange(10 ** (precision - 1), limit + 1) for _ in range(4)]
        unscaled = sorted(
            {0, 1, -1, limit, -limit, 10 ** (precision - 1), *full, *(-n for n in full)}
        )
        return [D(f"{n}E-{scale}") for n in unscaled]
    if (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
    ):
        return [*_SPECIAL_TEXT, "x" * 300, "é" * 200]
    if pa.types.is_fixed_size_binary(dtype):
        width = dtype.byte_width
        return [b"\x00" * width, b"\xff" * width, bytes(range(width))]
    if (
        pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or pa.types.is_binary_view(dtype)
    ):
        return [b"", b"\x00", b"\xff", b"\x80abc", b"y" * 300]
    if pa.types.is_date32(dtype):
        return sorted(
            {
                *_edges(*_INT_RANGES[32])[:6],
                *_edges(*_INT_RANGES[32])[-6:],
                *_day_range(True),
                0,
                -1,
            }
        )
    if pa.types.is_date64(dtype):
        whole = [d * 86_400_000 for d in edges(pa.date32())]
        # beyond ±2^31 days, and not whole days: values a date column cannot hold
        odd = [(2**31) * 86_400_000, -(2**31 + 1) * 86_400_000, 1, -1, 86_400_000 + 5]
        return sorted({*whole, *odd, *_edges(*_INT_RANGES[64])[:3], *_edges(*_INT_RANGES[64])[-3:]})
    if pa.types.is_time(dtype):
        low, high = _time_range(dtype.unit)
        return [low, low + 1, high // 2, high - 1, high]
    if pa.types.is_timestamp(dtype) or pa.types.is_duration(dtype):
        int64 = _edges(*_INT_RANGES[64])
        python = _python_datetime_range(dtype.unit) if pa.types.is_timestamp(dtype) else ()
        return sorted({*int64[:6], *int64[-6:], *python, 0, -1, 1, 1_700_000_000})
    raise NotImplementedError(f"no edges for {dtype}")
