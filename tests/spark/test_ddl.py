"""Spark SQL column definitions parsed without a JVM, checked against Spark's own parser."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    _parse_datatype_string,
)

import appendtable as at
from appendtable_spark.ddl import parse_columns

_SIMPLE = [
    "BOOLEAN",
    "TINYINT",
    "byte",
    "SMALLINT",
    "short",
    "INT",
    "Integer",
    "BIGINT",
    "long",
    "FLOAT",
    "real",
    "DOUBLE",
    "STRING",
    "BINARY",
    "DATE",
    "TIMESTAMP",
    "timestamp_ltz",
    "TIMESTAMP_NTZ",
    "DECIMAL",
    "NUMERIC(38, 38)",
    "DEC(5)",
]
_NAMES = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
        lambda n: n.upper() not in ("NOT", "COMMENT")
    ),
    st.text("ab c`é.-", min_size=1, max_size=6).map(lambda n: "`" + n.replace("`", "``") + "`"),
)


def _types() -> st.SearchStrategy[str]:
    decimals = st.tuples(st.integers(1, 38), st.integers(0, 38)).map(
        lambda ps: f"DECIMAL({ps[0]}, {min(ps)})"
    )
    leaves = st.one_of(st.sampled_from(_SIMPLE), decimals)
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            inner.map(lambda t: f"ARRAY<{t}>"),
            st.tuples(leaves, inner).map(lambda kv: f"MAP<{kv[0]}, {kv[1]}>"),
            st.lists(st.tuples(_NAMES, inner, st.booleans()), min_size=1, max_size=3).map(
                lambda fields: (
                    "STRUCT<"
                    + ", ".join(f"{n}: {t}{' NOT NULL' if nn else ''}" for n, t, nn in fields)
                    + ">"
                )
            ),
        ),
        max_leaves=6,
    )


_COLUMNS = st.lists(
    st.tuples(_NAMES, _types(), st.booleans(), st.booleans()), min_size=1, max_size=5
).map(
    lambda columns: ", ".join(
        f"{name} {dtype}{' NOT NULL' if not_null else ''}{' COMMENT ' + repr('c') if doc else ''}"
        for name, dtype, not_null, doc in columns
    )
)


def _plain(value: Any) -> Any:
    """A type's JSON without field metadata (Spark keeps comments there)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "metadata"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def test_columns_parse_to_spark_types() -> None:
    parsed = parse_columns(
        "day DATE, `user id` BIGINT NOT NULL COMMENT 'the id', tags ARRAY<STRING>, "
        "attrs map<string, decimal(20, 4)>, point STRUCT<x: DOUBLE, y DOUBLE NOT NULL>, "
        "at TIMESTAMP, local timestamp_ntz, name VARCHAR(10)"
    )
    assert parsed.names == ["day", "user id", "tags", "attrs", "point", "at", "local", "name"]
    assert parsed["user id"] == StructField("user id", LongType(), False)
    assert parsed["tags"].dataType == ArrayType(StringType(), True)
    assert parsed["attrs"].dataType == MapType(StringType(), DecimalType(20, 4), True)
    assert isinstance(parsed["point"].dataType, StructType)
    assert not parsed["point"].dataType["y"].nullable
    assert parsed["at"].dataType == TimestampType()
    assert parsed["local"].dataType == TimestampNTZType()
    assert parsed["name"].dataType == StringType()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected word"),
        ("a", "expected word, found the end"),
        ("a INTEGR", "expected a Spark SQL type"),
        ("a INT,", "expected word, found the end"),
        ("a INT b INT", "expected ',' or the end"),
        ("a DECIMAL(39, 0)", "precision 1-38"),
        ("a DECIMAL(5, 6)", "scale of at most 5"),
        ("a VARCHAR", r"VARCHAR\(length\)"),
        ("a ARRAY<INT", "expected >"),
        ("a MAP<INT>", "expected ,"),
        ("a INT NOT", "expected NULL"),
        ("a INT; DROP TABLE x", "cannot parse column definitions at character 5"),
        ("a INTERVAL DAY", "a Spark SQL type"),
    ],
)
def test_bad_definitions_are_refused_naming_the_place(text: str, message: str) -> None:
    with pytest.raises(at.InvalidSchemaError, match=message):
        parse_columns(text)


@pytest.mark.spark
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_COLUMNS)
def test_definitions_parse_as_spark_parses_them(spark: Any, text: str) -> None:
    expected = _parse_datatype_string(text)
    assert isinstance(expected, StructType)
    assert _plain(parse_columns(text).jsonValue()) == _plain(expected.jsonValue()), text
