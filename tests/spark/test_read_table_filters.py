"""``read_table(spark, uri, filter=...)`` returns exactly the rows of ``table.scan(filter=...)``:
the core prunes, Spark filters, and both must agree on every operator and edge value (NaN,
±0.0, infinities, nulls, long decimals, struct fields, a top-level name with a dot)."""

from __future__ import annotations

import datetime
import decimal
import itertools
import math
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

appendtable_spark = pytest.importorskip("appendtable_spark")

NAN, INF = float("nan"), float("inf")
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("f", pa.float64()),
        ("g", pa.float32()),
        ("d", pa.decimal128(38, 10)),
        ("s", pa.string()),
        ("a.b", pa.int32()),
        ("st", pa.struct([("x", pa.float64()), ("y", pa.string())])),
    ]
)
FLOATS = [NAN, INF, -INF, 0.0, -0.0, 1.0, 1.5, None]
DECIMALS = [
    decimal.Decimal("1234567890123456789012345678.0123456789"),
    decimal.Decimal("-0.0000000001"),
    decimal.Decimal("0E-10"),
    None,
]
STRINGS = ["", "a", "é", None]


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> at.Table:
    created = at.create_table(str(tmp_path_factory.mktemp("filters") / "t"), SCHEMA)
    for offset, values in enumerate(itertools.permutations(FLOATS, 3)):
        if offset % 7:
            continue
        n = len(values)
        start = offset * 10
        created.append(  # small files, so that statistics prune some of them
            pa.table(
                {
                    "id": list(range(start, start + n)),
                    "f": list(values),
                    "g": [None if v is None else v for v in reversed(values)],
                    "d": [DECIMALS[(start + i) % 4] for i in range(n)],
                    "s": [STRINGS[(start + i) % 4] for i in range(n)],
                    "a.b": [(start + i) % 3 for i in range(n)],
                    "st": [
                        None if v is None else {"x": v, "y": STRINGS[i % 4]}
                        for i, v in enumerate(values)
                    ],
                },
                schema=SCHEMA,
            )
        )
    return created


def _key(row: dict[str, Any]) -> str:
    return repr([("nan" if isinstance(v, float) and math.isnan(v) else v) for v in row.values()])


def _terms() -> list[tuple[object, ...]]:
    terms: list[tuple[object, ...]] = []
    ops = ["=", "!=", "<", "<=", ">", ">="]
    for column, values in (("f", FLOATS), ("g", FLOATS), ("st.x", FLOATS)):
        for op, value in itertools.product(ops, [v for v in values if v is not None]):
            terms.append((column, op, value))
        terms += [(column, "in", [NAN, 1.0]), (column, "not in", [NAN, 1.5])]
        terms += [(column, "is null"), (column, "is not null")]
    for op, value in itertools.product(ops, [v for v in DECIMALS if v is not None]):
        terms.append(("d", op, value))
    terms += [("s", "in", ["", "é"]), ("s", "not in", ["a"]), ("s", ">", ""), ("s", "!=", "")]
    terms += [("a.b", "=", 1), (("st", "y"), "=", "a"), ("st.y", "is null")]
    return terms


@pytest.mark.parametrize("term", _terms(), ids=repr)
def test_read_table_filters_as_the_core_does(spark_at: Any, table: at.Table, term: Any) -> None:
    expected = table.scan(filter=[term]).to_arrow().to_pylist()
    got = appendtable_spark.read_table(spark_at, table.uri, filter=[term]).toArrow().to_pylist()
    assert Counter(map(_key, got)) == Counter(map(_key, expected)), term


@pytest.mark.parametrize(
    "term",
    [
        ("f", " IN ", [NAN, 1.0]),
        ("g", "Not In", [1.5]),
        ("st.y", "IS NULL"),
        ("f", "is NOT null"),
        ("f", "==", 1.0),
        ("d", " >= ", 0),
    ],
    ids=repr,
)
def test_read_table_takes_every_spelling_of_an_operator_the_core_takes(
    spark_at: Any, table: at.Table, term: Any
) -> None:
    """Operators are matched ignoring case and surrounding spaces, ``==`` is ``=``: as the
    core's ``scan(filter=...)`` reads them."""
    expected = table.scan(filter=[term]).to_arrow().to_pylist()
    got = appendtable_spark.read_table(spark_at, table.uri, filter=[term]).toArrow().to_pylist()
    assert expected and Counter(map(_key, got)) == Counter(map(_key, expected)), term


@pytest.mark.parametrize(
    "dnf",
    [
        [["id", "<", 30]],  # pyarrow's flat form after a JSON round trip: one term
        [[("st", "y"), "=", "a"]],  # one term whose column is a path
        [[["id", "<", 30], ["s", "=", "a"]]],  # one clause of two terms, as lists
        (("id", ">=", 30), ("f", "!=", 1.0)),  # a flat filter as a tuple
    ],
    ids=repr,
)
def test_read_table_reads_every_shape_of_filter_the_core_reads(
    spark_at: Any, table: at.Table, dnf: Any
) -> None:
    expected = table.scan(filter=dnf).to_arrow().to_pylist()
    got = appendtable_spark.read_table(spark_at, table.uri, filter=dnf).toArrow().to_pylist()
    assert expected and Counter(map(_key, got)) == Counter(map(_key, expected))


def test_or_of_and_clauses(spark_at: Any, table: at.Table) -> None:
    dnf = [[("f", ">", 1.0), ("g", "!=", 1.5)], [("d", "<", 0)], [("st.x", "=", -0.0)]]
    expected = table.scan(filter=dnf).to_arrow().to_pylist()
    got = appendtable_spark.read_table(spark_at, table.uri, filter=dnf).toArrow().to_pylist()
    assert expected and Counter(map(_key, got)) == Counter(map(_key, expected))


ZEROS = pa.schema([("id", pa.int64()), ("x", pa.float32()), ("day", pa.date32())])


@pytest.fixture(scope="module")
def zeros(tmp_path_factory: pytest.TempPathFactory) -> at.Table:
    """A file whose only zero is -0.0 (dictionary-encoded, with ±inf beside it), a file with
    +0.0 and NaN, and dates at the ends of the range."""
    created = at.create_table(str(tmp_path_factory.mktemp("zeros") / "t"), ZEROS)
    day = datetime.date(1, 1, 1)
    created.append(
        pa.table(
            {
                "id": list(range(30)),
                "x": pa.array([-0.0, -INF, 1.5] * 10, pa.float32()),
                "day": [day] * 30,
            },
            schema=ZEROS,
        )
    )
    created.append(
        pa.table(
            {
                "id": [100, 101, 102],
                "x": pa.array([0.0, NAN, INF], pa.float32()),
                "day": [datetime.date(9999, 12, 31), day, None],
            },
            schema=ZEROS,
        )
    )
    return created


@pytest.mark.parametrize(
    "term",
    [
        ("x", "=", 0.0),
        ("x", "=", -0.0),
        ("x", "in", [0.0]),
        ("x", "<=", -0.0),
        ("day", "=", datetime.date(1, 1, 1)),
        ("day", ">=", datetime.date(9999, 12, 31)),
    ],
    ids=repr,
)
def test_signed_zeros_and_extreme_dates_in_files_parquet_filters_would_skip(
    spark_at: Any, zeros: at.Table, term: Any
) -> None:
    expected = zeros.scan(filter=[term]).to_arrow().to_pylist()
    got = appendtable_spark.read_table(spark_at, zeros.uri, filter=[term]).toArrow().to_pylist()
    assert expected and Counter(map(_key, got)) == Counter(map(_key, expected)), term


@pytest.mark.parametrize(
    "condition", ["x = 0.0", "x = -0.0", "x = float('NaN')", "x IN (0.0, 7.0)", "x <= 0.0"]
)
def test_a_users_own_spark_filter_on_read_table_keeps_spark_semantics(
    spark_at: Any, zeros: at.Table, condition: str
) -> None:
    # the oracle: Spark's own semantics on the same rows, held in memory (no Parquet involved)
    # (from Python values: pandas would turn NaN into null)
    rows = zeros.scan().to_arrow().to_pylist()
    oracle = spark_at.createDataFrame(rows, "id BIGINT, x FLOAT, day DATE").filter(condition)
    oracle = oracle.count()
    got = appendtable_spark.read_table(spark_at, zeros.uri).filter(condition).count()
    assert oracle > 0 and got == oracle, condition


UTC = datetime.UTC
ANCIENT = [
    datetime.datetime(1, 1, 1, tzinfo=UTC),
    datetime.datetime(1200, 6, 1, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime.datetime(1582, 10, 4, 12, tzinfo=UTC),  # the last Julian day
    datetime.datetime(1582, 10, 15, tzinfo=UTC),  # the first Gregorian one
    datetime.datetime(2024, 1, 1, tzinfo=UTC),
    datetime.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
]
INSTANTS = pa.schema(
    [("id", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("ntz", pa.timestamp("us"))]
)


@pytest.fixture(scope="module")
def instants(tmp_path_factory: pytest.TempPathFactory) -> at.Table:
    created = at.create_table(str(tmp_path_factory.mktemp("instants") / "t"), INSTANTS)
    for i, value in enumerate(ANCIENT):  # a file each: statistics prune per file
        naive = value.replace(tzinfo=None)
        created.append(pa.table({"id": [i], "ts": [value], "ntz": [naive]}, schema=INSTANTS))
    return created


def test_timestamps_before_the_gregorian_cutover_filter_as_the_core_does(
    spark_at: Any, instants: at.Table
) -> None:
    """PySpark turned a datetime literal into a Java timestamp of the hybrid Julian calendar,
    so ``read_table`` pushed year 1 as 0001-01-03 and lost the row (found by a user; dates
    were right). Every comparison with every stored instant, one microsecond either side and
    in another offset, on a column with and without a time zone, against Python's own
    comparison of the values (Spark for some of them, the core for all)."""
    checks = {
        "=": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    step = datetime.timedelta(microseconds=1)
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    for value in ANCIENT[:4]:
        for literal in (value, value + step, value.astimezone(plus_two)):
            for op, holds in checks.items():
                for column, given in (("ts", literal), ("ntz", literal.replace(tzinfo=None))):
                    at_utc = literal.astimezone(UTC).replace(tzinfo=None)
                    expected = [
                        i for i, v in enumerate(ANCIENT) if holds(v.replace(tzinfo=None), at_utc)
                    ]
                    if column == "ntz":
                        naive = given.replace(tzinfo=None)
                        expected = [
                            i for i, v in enumerate(ANCIENT) if holds(v.replace(tzinfo=None), naive)
                        ]
                    term = (column, op, given)
                    core = instants.scan(filter=[term]).to_arrow().column("id").to_pylist()
                    assert sorted(core) == expected, term
                    spark_checks = ("=", ">=") if literal is value else ("=",)
                    if literal == value + step or op not in spark_checks:
                        continue  # (Spark queries cost: the calendar shift needs few)
                    got = appendtable_spark.read_table(spark_at, instants.uri, filter=[term])
                    assert sorted(r.id for r in got.select("id").collect()) == expected, term
    listed = ("ts", "in", ANCIENT[:4])
    got = appendtable_spark.read_table(spark_at, instants.uri, filter=[listed])
    assert sorted(r.id for r in got.select("id").collect()) == [0, 1, 2, 3]
