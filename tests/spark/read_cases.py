"""Random tables and random query sequences for the differential test of Spark reads
(tests/spark/test_read_differential.py). A case is a pure function of its seed.

A table has a unique ``seq`` column, a key ``k`` (the bucket key when bucketed), maybe a
partition column ``p``, and columns of random types whose values reach the edges of each type's
domain as Spark holds it (full-precision decimals, extreme integers, NaN, ±0.0, infinities,
subnormals, the first and last instants and days Spark can represent, unicode and empty
strings, nulls). Between appends the schema may evolve (add, rename, drop, widen). The model of
the rows is kept by column name here, independently of the table's field ids.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

__all__ = ["Evolution", "ReadCase", "literal", "make_case", "predicate"]

_UTC = dt.UTC
# Spark holds instants from 0001-01-01 to 9999-12-31; PySpark's collect() turns them into local
# datetimes, which overflow on the first and last day: one day in from each end.
_FIRST_US = (-62135596800 + 86_400) * 1_000_000  # 0001-01-02T00:00:00
_LAST_US = (253402300799 - 86_400) * 1_000_000 + 999_999  # 9999-12-30T23:59:59.999999
_FIRST_DAY, _LAST_DAY = dt.date(1, 1, 1), dt.date(9999, 12, 31)
_STRINGS = [
    "",
    " ",
    "a",
    "A",
    "ä",
    "日本語",
    "😀 emoji",
    "line\nbreak",
    "quote'\"",
    "back\\slash",
    "%_like",
    "nul\x00byte",
    "z" * 120,
]


def _decimal_type(rng: random.Random) -> pa.DataType:
    precision = rng.choice([1, 5, 18, 19, 28, 29, 38, rng.randint(1, 38)])
    return pa.decimal128(precision, rng.randint(0, precision))


def _int_value(rng: random.Random, bits: int) -> int:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return rng.choice([low, high, low + 1, high - 1, 0, -1, 1, rng.randint(low, high)])


def _float_value(rng: random.Random, single: bool) -> float:
    edges = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0, -1.5]
    edges += (
        [1.401298464324817e-45, 3.4028234663852886e38]
        if single
        else [5e-324, 1.7976931348623157e308, 2.2250738585072014e-308]
    )
    value = rng.choice([*edges, rng.uniform(-1e6, 1e6), rng.uniform(-1, 1)])
    if single:  # representable exactly in float32
        return float(pa.scalar(value, pa.float32()).as_py())
    return value


def _decimal_value(rng: random.Random, dtype: pa.Decimal128Type) -> decimal.Decimal:
    digits = rng.choice([dtype.precision, rng.randint(1, dtype.precision)])
    unscaled = rng.choice([10**digits - 1, rng.randint(0, 10**digits - 1), 0, 1])
    sign = rng.choice(["", "-"])
    text = str(unscaled).rjust(dtype.scale + 1, "0")
    if dtype.scale:
        text = text[: -dtype.scale] + "." + text[-dtype.scale :]
    return decimal.Decimal(sign + text)  # exact: no context rounding


def _value(rng: random.Random, dtype: pa.DataType) -> object:
    if pa.types.is_boolean(dtype):
        return rng.random() < 0.5
    if pa.types.is_integer(dtype):
        return _int_value(rng, dtype.bit_width)
    if pa.types.is_floating(dtype):
        return _float_value(rng, dtype.bit_width == 32)
    if pa.types.is_decimal(dtype):
        return _decimal_value(rng, dtype)
    if pa.types.is_string(dtype):
        return rng.choice(
            [*_STRINGS, "".join(rng.choice("abcé😀") for _ in range(rng.randint(1, 8)))]
        )
    if pa.types.is_date(dtype):
        return rng.choice(
            [
                _FIRST_DAY,
                _LAST_DAY,
                dt.date(1970, 1, 1),
                dt.date(1969, 12, 31),
                _FIRST_DAY + dt.timedelta(days=rng.randint(0, 3_652_058)),
            ]
        )
    if pa.types.is_timestamp(dtype):
        micros = rng.choice([_FIRST_US, _LAST_US, 0, -1, 1, rng.randint(_FIRST_US, _LAST_US)])
        return micros
    raise AssertionError(dtype)


_TYPES: list[Callable[[random.Random], pa.DataType]] = [
    lambda rng: pa.bool_(),
    lambda rng: pa.int8(),
    lambda rng: pa.int32(),
    lambda rng: pa.int64(),
    lambda rng: pa.float32(),
    lambda rng: pa.float64(),
    _decimal_type,
    lambda rng: pa.string(),
    lambda rng: pa.date32(),
    lambda rng: pa.timestamp("us", tz="UTC"),
    lambda rng: pa.timestamp("us"),
]


@dataclass(frozen=True)
class Evolution:
    """A schema change between two appends: ``kind`` add / rename / drop / widen."""

    kind: str
    column: str
    to: str = ""
    dtype: pa.DataType | None = None


@dataclass
class ReadCase:
    seed: int
    schema: pa.Schema
    partition: str | None
    buckets: int
    #: per append: the schema change before it (if any) and its row count
    steps: list[tuple[Evolution | None, int]] = field(default_factory=list)

    def describe(self) -> str:
        changes = [e for e, _ in self.steps if e is not None]
        return (
            f"case {self.seed}: {self.schema}, partition={self.partition}, "
            f"buckets={self.buckets}, appends={[n for _, n in self.steps]}, changes={changes}"
        )

    def options(self) -> dict[str, object]:
        return {"bucket": self.buckets, "bucket-key": "k"} if self.buckets > 0 else {}


def make_case(seed: int) -> ReadCase:
    rng = random.Random(seed)
    fields = [pa.field("seq", pa.int64(), nullable=False)]
    fields.append(pa.field("k", rng.choice([pa.int64(), pa.string()])))
    partition = None
    if rng.random() < 0.5:
        partition = "p"
        fields.append(pa.field("p", rng.choice([pa.string(), pa.int32(), pa.date32()])))
    used: set[str] = set()
    for index in range(rng.randint(2, 6)):
        fields.append(pa.field(f"c{index}", rng.choice(_TYPES)(rng)))
        used.add(f"c{index}")
    case = ReadCase(seed, pa.schema(fields), partition, rng.choice([0, 0, 1, 2, 4]))
    columns = sorted(used)
    for index in range(rng.randint(1, 4)):
        change = None
        if index and rng.random() < 0.4:
            change = _evolution(rng, columns, index)
        case.steps.append((change, rng.choice([0, 1, 3, 8, 25])))
    return case


def _evolution(rng: random.Random, columns: list[str], index: int) -> Evolution:
    kind = rng.choice(["add", "rename", "drop", "widen"]) if columns else "add"
    if kind == "add":
        name = f"n{index}"
        columns.append(name)
        return Evolution("add", name, dtype=rng.choice(_TYPES)(rng))
    column = rng.choice(columns)
    columns.remove(column)
    if kind == "rename":
        columns.append(f"{column}_r{index}")
        return Evolution("rename", column, to=f"{column}_r{index}")
    if kind == "drop":
        return Evolution("drop", column)
    columns.append(column)
    return Evolution("widen", column)


def _partition_value(rng: random.Random, dtype: pa.DataType) -> object:
    """A value of the partition column: any value but text with a NUL byte, which cannot name
    a directory (the table refuses it, naming the column)."""
    value = _value(rng, dtype)
    while isinstance(value, str) and "\x00" in value:
        value = _value(rng, dtype)
    return value


def rows(case: ReadCase, schema: pa.Schema, step: int, count: int) -> pa.Table:
    """The rows of one append, in ``schema`` (the table's current one)."""
    rng = random.Random(case.seed * 1000 + step)
    data: dict[str, list[object]] = {}
    for f in schema:
        if f.name == "seq":
            data["seq"] = [step * 1000 + i for i in range(count)]
        elif f.name == "k":
            keys = [rng.randint(0, 6) for _ in range(count)]
            data["k"] = keys if pa.types.is_integer(f.type) else [f"k{k}" for k in keys]
        else:
            value = _partition_value if f.name == case.partition else _value
            data[f.name] = [
                None if rng.random() < 0.15 else value(rng, f.type) for _ in range(count)
            ]
    return pa.table({n: pa.array(v, schema.field(n).type) for n, v in data.items()}, schema=schema)


def literal(value: object, dtype: pa.DataType) -> str:
    """``value`` as a Spark SQL literal of (a type comparable with) ``dtype``."""
    if value is None:
        return "NULL"
    if pa.types.is_boolean(dtype):
        return "TRUE" if value else "FALSE"
    if pa.types.is_integer(dtype):
        return f"CAST('{value}' AS {_SPARK_INTS[dtype.bit_width]})"
    if pa.types.is_floating(dtype):
        assert isinstance(value, float)
        kind = "FLOAT" if dtype.bit_width == 32 else "DOUBLE"
        text = _FLOAT_WORDS.get(repr(value), repr(value))
        return f"CAST('{text}' AS {kind})"
    if pa.types.is_decimal(dtype):
        assert isinstance(value, decimal.Decimal)
        return f"CAST('{value:f}' AS DECIMAL({dtype.precision}, {dtype.scale}))"
    if pa.types.is_string(dtype):
        escaped = str(value).replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
        escaped = escaped.replace("\x00", "\\u0000")
        return f"'{escaped}'"
    if pa.types.is_date(dtype):
        assert isinstance(value, dt.date)
        return f"DATE'{value.isoformat()}'"
    if pa.types.is_timestamp(dtype):
        stamp = value if isinstance(value, dt.datetime) else None
        assert stamp is not None
        text = stamp.replace(tzinfo=None).isoformat(sep=" ")
        return f"TIMESTAMP'{text}+00:00'" if dtype.tz else f"TIMESTAMP_NTZ'{text}'"
    raise AssertionError(dtype)


_SPARK_INTS = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}
_FLOAT_WORDS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def predicate(rng: random.Random, schema: pa.Schema, sample: list[dict[str, Any]]) -> str:
    """A random Spark SQL condition over ``schema``'s columns, its literals often taken from
    ``sample`` (rows of the table) so that it selects some rows: comparisons, IN, IS [NOT]
    NULL, NOT, OR, LIKE, arithmetic and functions."""
    f = rng.choice(list(schema))
    name = f"`{f.name}`"
    values = [r[f.name] for r in sample if f.name in r] or [None]
    pick = rng.choice(values)
    kind = rng.random()
    if pick is None or kind < 0.1:
        return f"{name} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
    text = literal(pick, f.type)
    if kind < 0.45:
        op = rng.choice(["=", "<", "<=", ">", ">=", "!=", "<=>"])
        return f"{name} {op} {text}"
    if kind < 0.6:
        more = [
            literal(v, f.type) for v in rng.sample(values, min(3, len(values))) if v is not None
        ]
        return f"{name} IN ({', '.join([text, *more])})"
    if kind < 0.7:
        return f"NOT ({name} = {text})"
    if kind < 0.8:
        other = predicate(rng, schema, sample)
        return f"({name} = {text} OR {other})"
    if kind < 0.9 and pa.types.is_string(f.type):
        return f"{name} LIKE '{rng.choice(['%', 'a%', '%é%', '_', 'k%'])}'"
    if pa.types.is_integer(f.type):
        return f"({name} % 3) = {rng.randint(-2, 2)}"
    if pa.types.is_string(f.type):
        return f"length({name}) > {rng.randint(0, 5)}"
    return f"coalesce({name} = {text}, FALSE) OR `seq` % 2 = 0"
