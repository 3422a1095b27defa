"""``read_table(spark, uri, filter=...)`` returns exactly the rows of ``table.scan(filter=...)``:
the core prunes, Spark filters, and both must agree on every operator and edge value (NaN,
±0.0, infinities, nulls, long decimals, struct fields, a top-level name with a dot)."""

from __future__ import annotations

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


def test_or_of_and_clauses(spark_at: Any, table: at.Table) -> None:
    dnf = [[("f", ">", 1.0), ("g", "!=", 1.5)], [("d", "<", 0)], [("st.x", "=", -0.0)]]
    expected = table.scan(filter=dnf).to_arrow().to_pylist()
    got = appendtable_spark.read_table(spark_at, table.uri, filter=dnf).toArrow().to_pylist()
    assert expected and Counter(map(_key, got)) == Counter(map(_key, expected))
