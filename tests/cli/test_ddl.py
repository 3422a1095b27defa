"""The schema DDL of ``appendtable create --schema``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from appendtable import format_schema, format_type
from appendtable.cli.ddl import DdlError, parse_schema, parse_type

EXAMPLE = (
    "id int64 not null, name string, ts timestamp[us, UTC], amount decimal(10,2), tags list<string>"
)


def test_the_documented_example() -> None:
    assert parse_schema(EXAMPLE) == pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("name", pa.string()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("amount", pa.decimal128(10, 2)),
            ("tags", pa.list_(pa.string())),
        ]
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bool", pa.bool_()),
        ("BOOLEAN", pa.bool_()),
        ("tinyint", pa.int8()),
        ("smallint", pa.int16()),
        ("int", pa.int32()),
        ("integer", pa.int32()),
        ("bigint", pa.int64()),
        ("long", pa.int64()),
        ("uint8", pa.uint8()),
        ("uint64", pa.uint64()),
        ("halffloat", pa.float16()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("float64", pa.float64()),
        ("varchar", pa.string()),
        ("utf8", pa.string()),
        ("large_utf8", pa.large_string()),
        ("bytes", pa.binary()),
        ("large_binary", pa.large_binary()),
        ("fixed_size_binary[16]", pa.binary(16)),
        ("fixed_size_binary(4)", pa.binary(4)),
        ("date", pa.date32()),
        ("date32[day]", pa.date32()),
        ("date64", pa.date64()),
        ("timestamp", pa.timestamp("us")),
        ("timestamp[ms]", pa.timestamp("ms")),
        ("timestamp(ns)", pa.timestamp("ns")),
        ("timestamp[us, tz=UTC]", pa.timestamp("us", tz="UTC")),
        ("timestamp[s, Europe/Paris]", pa.timestamp("s", tz="Europe/Paris")),
        ("timestamp[ms, +01:00]", pa.timestamp("ms", tz="+01:00")),
        ("time", pa.time64("us")),
        ("time[ms]", pa.time32("ms")),
        ("time32[s]", pa.time32("s")),
        ("time64[ns]", pa.time64("ns")),
        ("duration", pa.duration("us")),
        ("duration[s]", pa.duration("s")),
        ("decimal(10, 2)", pa.decimal128(10, 2)),
        ("decimal(7)", pa.decimal128(7, 0)),
        ("numeric(38,10)", pa.decimal128(38, 10)),
        ("decimal128(5, 1)", pa.decimal128(5, 1)),
        ("list<int32>", pa.list_(pa.int32())),
        ("array<string>", pa.list_(pa.string())),
        ("list<item: string not null>", pa.list_(pa.field("item", pa.string(), nullable=False))),
        ("list<element: int8>", pa.list_(pa.field("element", pa.int8()))),
        ("large_list<double>", pa.large_list(pa.float64())),
        ("fixed_size_list<int32>[3]", pa.list_(pa.int32(), 3)),
        ("fixed_size_list<float, 2>", pa.list_(pa.float32(), 2)),
        (
            "struct<a int32, b: string not null>",
            pa.struct([("a", pa.int32()), pa.field("b", pa.string(), nullable=False)]),
        ),
        ("struct<>", pa.struct([])),
        ("map<string, int64>", pa.map_(pa.string(), pa.int64())),
        ("map<int32, list<date>>", pa.map_(pa.int32(), pa.list_(pa.date32()))),
        (
            "list<struct<x decimal(5,2), y map<string, timestamp[ms, UTC]>>>",
            pa.list_(
                pa.struct(
                    [
                        ("x", pa.decimal128(5, 2)),
                        ("y", pa.map_(pa.string(), pa.timestamp("ms", tz="UTC"))),
                    ]
                )
            ),
        ),
    ],
)
def test_types(text: str, expected: pa.DataType) -> None:
    assert parse_type(text) == expected


ROUND_TRIP_TYPES = [
    pa.bool_(),
    pa.int8(),
    pa.uint32(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(8),
    pa.date32(),
    pa.date64(),
    pa.timestamp("ns"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ms", tz="America/New_York"),
    pa.time32("s"),
    pa.time64("ns"),
    pa.duration("ms"),
    pa.decimal128(38, 9),
    pa.decimal256(50, 3),
    pa.list_(pa.string()),
    pa.list_(pa.field("element", pa.int64(), nullable=False)),
    pa.large_list(pa.date32()),
    pa.list_(pa.int16(), 4),
    pa.struct([("a", pa.int32()), pa.field("b", pa.list_(pa.string()), nullable=False)]),
    pa.map_(pa.string(), pa.float64()),
    pa.map_(pa.string(), pa.int64(), keys_sorted=True),
]


@pytest.mark.parametrize("dtype", ROUND_TRIP_TYPES, ids=str)
def test_format_and_pyarrow_spelling_round_trip(dtype: pa.DataType) -> None:
    assert parse_type(format_type(dtype)) == dtype
    assert parse_type(str(dtype)) == dtype  # what pyarrow prints parses back


def test_schema_round_trip_with_awkward_names() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("my column", pa.string()),
            ("not", pa.int8()),  # a keyword as a name
            ("dotted.name", pa.struct([("inner field", pa.date32())])),
        ]
    )
    text = format_schema(schema)
    assert "`my column` string" in text
    assert parse_schema(text) == schema


def test_pyarrow_schema_text_and_new_lines() -> None:
    flat = pa.schema([pa.field("a", pa.int32(), nullable=False), ("b", pa.timestamp("ms"))])
    assert parse_schema(str(flat)) == flat  # "a: int32 not null\nb: timestamp[ms]"
    schema = pa.schema([pa.field("a", pa.int32(), nullable=False), ("b", pa.list_(pa.string()))])
    assert parse_schema("a int32 not null\n\n  b list<string>\n") == schema
    assert parse_schema("a int32 not null, b list<string>,") == schema


def test_quoted_names() -> None:
    schema = parse_schema('`order` int32, "user id" string')
    assert schema.names == ["order", "user id"]
    doubled = parse_schema('`a``b` int32, "c""d" string, `e""f` int8, "``" int16')
    assert doubled.names == ["a`b", 'c"d', 'e""f', "``"]


@pytest.mark.parametrize(
    "name", ['we`ird"name', '`"', '"`', "``", 'a``""b', "`", '"', "not", "x y", 'ü`é"n']
)
def test_any_name_round_trips_both_kinds_of_quotes_included(name: str) -> None:
    """A name holding both a backtick and a double quote made ``schema`` and ``info`` fail on
    the table (found by a docs-only hunt): it is quoted with backticks, each doubled."""
    schema = pa.schema([(name, pa.int32()), ("s", pa.struct([(name, pa.string())]))])
    text = format_schema(schema)
    assert parse_schema(text) == schema, text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id int64, name strng", "unknown type 'strng' at position 16 (did you mean 'string'?)"),
        ("id", "expected a type, found end of input at position 3"),
        ("id int64 name string", "expected ',' between columns, found 'name' at position 10"),
        ("tags list<string", "expected '>', found end of input at position 17"),
        ("tags list<string)", "expected '>', found ')' at position 17"),
        ("ts timestamp[hours]", "expected a time unit (s, ms, us, ns), found 'hours'"),
        ("t time32[us]", "expected a time unit (s, ms), found 'us'"),
        ("ts timestamp[us, Mars/Olympus]", "unknown time zone 'Mars/Olympus'"),
        ("a decimal", "'decimal' needs a precision"),
        ("a decimal(x)", "expected a precision, found 'x'"),
        ("a decimal(39, 2)", "decimal(39, 2): "),
        ("a int32, a int64", "column 'a' is defined twice"),
        ("", "no columns given"),
        ("a int32 not nul", "expected ',' between columns, found 'not'"),
        ("`a int32", "unterminated quoted name"),
        ("s struct<a int32 b int32>", "expected ',' or '>' in struct<...>, found 'b'"),
        ("f fixed_size_list<int32>", "'fixed_size_list' needs a size"),
        ("m map<string>", "expected ',', found '>'"),
        ("x 123", "expected a type, found '123'"),
    ],
)
def test_errors_name_the_bad_token(text: str, message: str) -> None:
    with pytest.raises(DdlError) as info:
        parse_schema(text)
    assert message in str(info.value)
    assert str(info.value).startswith("schema: ")


def test_trailing_text_after_a_type() -> None:
    with pytest.raises(DdlError, match="expected the end of the type, found 'x'"):
        parse_type("int32 x")
