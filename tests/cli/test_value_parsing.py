"""The command line's small languages: filters, partitions, durations, key=value options."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from appendtable.cli.input_errors import UsageError
from appendtable.cli.value_parsing import (
    parse_buckets,
    parse_duration,
    parse_filter,
    parse_options,
    parse_partition,
    parse_storage_options,
)

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("score", pa.float64()),
        ("ok", pa.bool_()),
        ("at", pa.time64("us")),
        ("raw", pa.binary()),
        ("tags", pa.list_(pa.string())),
        ("my col", pa.int32()),
    ]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id = 7", ("id", "=", 7)),
        ("id==7", ("id", "=", 7)),
        ("id <> 7", ("id", "!=", 7)),
        ("id != -3", ("id", "!=", -3)),
        ("id>=10", ("id", ">=", 10)),
        ("score < 2.5", ("score", "<", 2.5)),
        ("name = bob", ("name", "=", "bob")),
        ("name = 'two words'", ("name", "=", "two words")),
        ('name = "it\'s"', ("name", "=", "it's")),
        ("name = 'it''s'", ("name", "=", "it's")),
        ("name = 'null'", ("name", "=", "null")),
        ("name = '7'", ("name", "=", "7")),
        ("day >= 2024-05-01", ("day", ">=", dt.date(2024, 5, 1))),
        ("ts < '2024-05-01T10:00:00Z'", ("ts", "<", dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC))),
        ("amount = 12.50", ("amount", "=", decimal.Decimal("12.50"))),
        ("ok = true", ("ok", "=", True)),
        ("ok = 0", ("ok", "=", False)),
        ("at > 10:30", ("at", ">", dt.time(10, 30))),
        ("raw = 0x00ff", ("raw", "=", b"\x00\xff")),
        ("raw = abc", ("raw", "=", b"abc")),
        ("raw = '0x00ff'", ("raw", "=", b"0x00ff")),  # quoted: text, not hex
        ("raw in (0x41, '0x41')", ("raw", "in", [b"A", b"0x41"])),
        ("id in (1, 2,3)", ("id", "in", [1, 2, 3])),
        ("id IN (1)", ("id", "in", [1])),
        ("name not in ('a,b', c)", ("name", "not in", ["a,b", "c"])),
        ("name is null", ("name", "is null")),
        ("name IS NOT NULL", ("name", "is not null")),
        ("`my col` = 1", ("my col", "=", 1)),
        ('"my col" in (1, 2)', ("my col", "in", [1, 2])),
    ],
)
def test_filters_are_typed_by_the_column(text: str, expected: tuple[object, ...]) -> None:
    assert parse_filter(text, SCHEMA) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "unknown column 'nope'"),
        ("id = x", "value 'x' is not a valid int64 (column 'id')"),
        ("day = 2024-13-01", "not a valid date32[day]"),
        ("ok = maybe", "not a valid bool"),
        ("amount = NaN", "not a valid decimal128(10, 2)"),
        ("id ~ 3", "unknown operator '~'"),
        ("id", "no operator after column 'id'"),
        ("id =", "'=' needs a value"),
        ("id = null", "compare with null using 'is null'"),
        ("id in 1, 2", "'in' needs a list in parentheses"),
        ("id in (1, , 2)", "empty value in list"),
        ("name = 'open", "unterminated quoted value"),
        ("name is null please", "unexpected 'please' after 'is null'"),
        ("tags = a", "column 'tags' has type list<item: string>, which cannot be compared"),
        ("`id = 1", "unterminated quoted column name"),
    ],
)
def test_filter_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_filter(text, SCHEMA)
    assert message in str(info.value)


def test_partition_specs() -> None:
    keys = ["day", "name"]
    assert parse_partition("day=2024-05-01", SCHEMA, keys) == {"day": dt.date(2024, 5, 1)}
    assert parse_partition("day=2024-05-01, name=eu", SCHEMA, keys) == {
        "day": dt.date(2024, 5, 1),
        "name": "eu",
    }
    assert parse_partition("name=null", SCHEMA, keys) == {"name": None}
    with pytest.raises(UsageError, match="'id' is not a partition key"):
        parse_partition("id=1", SCHEMA, keys)
    with pytest.raises(UsageError, match="expects KEY=VALUE"):
        parse_partition("day", SCHEMA, keys)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("name='a b'", "a b"),
        ("name=a b", "a b"),
        ("name='a,b'", "a,b"),
        ('name="it\'s"', "it's"),
        ("name='it''s'", "it's"),
        ("name='q'", "q"),
        ("name='null'", "null"),
        ("name=NULL", None),
        ("name=''", ""),
    ],
)
def test_partition_values_are_quoted_as_in_filters(text: str, value: object) -> None:
    """Found by a docs-only hunt: ``--partition "p='a b'"`` looked for the value with its
    quotes (a silent no-op), ``p='q'`` compacted the partition literally named ``'q'``, and a
    value with a comma could not be given; cli.md says values are typed like filter values."""
    keys = ["day", "name"]
    assert parse_partition(f"day=2024-05-01, {text}", SCHEMA, keys) == {
        "day": dt.date(2024, 5, 1),
        "name": value,
    }
    with pytest.raises(UsageError, match="unterminated"):
        parse_partition("name='a", SCHEMA, keys)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30), ("30s", 30), ("500ms", 0.5), ("5 m", 300), ("5min", 300), ("1h", 3600)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "--poll") == seconds


def test_duration_days_weeks_and_errors() -> None:
    assert parse_duration("1.5d", "x") == 1.5 * 86400
    assert parse_duration("2w", "x") == 14 * 86400
    with pytest.raises(UsageError, match=r"--older-than: not a duration: '1 fortnight'"):
        parse_duration("1 fortnight", "--older-than")
    with pytest.raises(UsageError, match="not a duration"):
        parse_duration("-1s", "x")


def test_key_value_options() -> None:
    assert parse_options(["bucket=4", "bucket-key = user_id", "a=b=c"], "--option") == {
        "bucket": "4",
        "bucket-key": "user_id",
        "a": "b=c",
    }
    with pytest.raises(UsageError, match="--option expects KEY=VALUE, got 'bucket'"):
        parse_options(["bucket"], "--option")


def test_storage_options_are_typed() -> None:
    assert parse_storage_options(
        ["anon=true", "use_ssl=False", "retries=3", "endpoint_url=http://x:8333", 'kw={"a": 1}']
    ) == {
        "anon": True,
        "use_ssl": False,
        "retries": 3,
        "endpoint_url": "http://x:8333",
        "kw": {"a": 1},
    }
    with pytest.raises(UsageError, match="not valid JSON"):
        parse_storage_options(["kw={oops"])


def test_buckets() -> None:
    assert parse_buckets("0, 2") == [0, 2]
    with pytest.raises(UsageError, match="bucket numbers"):
        parse_buckets("0,x")
