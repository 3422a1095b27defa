"""Hive-style partition directory names, and stored values back to Python values."""

from __future__ import annotations

import datetime as dt
import decimal
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.metadata.types import TypeSpec
from appendtable.metadata.values import to_python
from appendtable.planning.partitions import (
    escape_path_name,
    partition_path,
    render_partition_value,
)

DEFAULT = "__DEFAULT_PARTITION__"
SPECIAL = "\"#%'*/:=?\\\x7f{}[]^"
CONTROL = "".join(chr(c) for c in range(0x01, 0x20))
STRING = TypeSpec(kind="string")
INT = TypeSpec(kind="int64")


def unescape(text: str) -> str:
    """Decode ``%XX`` (two hex digits) as one character; everything else is literal."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


# ---- escaping -----------------------------------------------------------------------------------


@pytest.mark.parametrize("char", list(SPECIAL + CONTROL), ids=lambda c: f"U+{ord(c):04X}")
def test_every_special_character_is_escaped(char: str) -> None:
    expected = f"%{ord(char):02X}"
    assert escape_path_name(char) == expected
    assert escape_path_name(f"a{char}b") == f"a{expected}b"
    assert re.fullmatch(r"%[0-9A-F]{2}", escape_path_name(char))  # upper-case hex


def test_known_escapes() -> None:
    assert escape_path_name("a/b") == "a%2Fb"
    assert escape_path_name("k=v") == "k%3Dv"
    assert escape_path_name("100%") == "100%25"
    assert escape_path_name("10:30") == "10%3A30"
    assert escape_path_name("line\nbreak\ttab") == "line%0Abreak%09tab"
    assert escape_path_name("{[x]}^") == "%7B%5Bx%5D%7D%5E"
    assert escape_path_name('say "hi"') == "say %22hi%22"
    assert escape_path_name("C:\\dir") == "C%3A%5Cdir"
    assert escape_path_name("\x7f") == "%7F"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain",
        "with space",
        "a-b_c.d+e@f!g~h$i&j(k)l,m;n<o>p|q`r",
        "..",
        "é",
        "日本語",
        "Ελληνικά",
        "emoji 🎉",
        "\u00a0nbsp",
        "\u0080\u009f",  # C1 controls are not in the escape set
    ],
)
def test_other_characters_are_unchanged(text: str) -> None:
    assert escape_path_name(text) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(SPECIAL + CONTROL)))
def test_escaped_names_have_no_separators_and_unescape_back(text: str) -> None:
    escaped = escape_path_name(text)
    assert "/" not in escaped
    assert "=" not in escaped
    assert "\\" not in escaped
    assert not any(ch in escaped for ch in CONTROL)
    assert unescape(escaped) == text
    if not any(ch in SPECIAL + CONTROL for ch in text):
        assert escaped == text


# ---- rendering values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "type_spec", "expected"),
    [
        (None, STRING, None),
        ("", STRING, None),
        (None, INT, None),
        ("x", STRING, "x"),
        (" ", STRING, " "),
        (0, INT, "0"),
        (-42, INT, "-42"),
        (2**63 - 1, INT, "9223372036854775807"),
        (True, TypeSpec(kind="bool"), "true"),
        (False, TypeSpec(kind="bool"), "false"),
        (0, TypeSpec(kind="date32"), "1970-01-01"),
        (19_753, TypeSpec(kind="date32"), "2024-01-31"),
        (-1, TypeSpec(kind="date32"), "1969-12-31"),
        (19_753, TypeSpec(kind="date64"), "2024-01-31"),  # stored as days
        (1_706_696_430, TypeSpec(kind="timestamp", unit="s"), "2024-01-31T10:20:30"),
        (1_706_696_430_123, TypeSpec(kind="timestamp", unit="ms"), "2024-01-31T10:20:30.123000"),
        (
            1_706_696_430_123_456,
            TypeSpec(kind="timestamp", unit="us"),
            "2024-01-31T10:20:30.123456",
        ),
        (
            1_706_696_430_123_456_789,
            TypeSpec(kind="timestamp", unit="ns"),
            "2024-01-31T10:20:30.123456",
        ),
        (0, TypeSpec(kind="timestamp"), "1970-01-01T00:00:00"),  # unit defaults to us
        (-1, TypeSpec(kind="timestamp", unit="s"), "1969-12-31T23:59:59"),
        (
            1_706_696_430,
            TypeSpec(kind="timestamp", unit="s", tz="UTC"),
            "2024-01-31T10:20:30+00:00",
        ),
        (
            1_706_696_430_000,
            TypeSpec(kind="timestamp", unit="ms", tz="Europe/Paris"),  # stored as UTC
            "2024-01-31T10:20:30+00:00",
        ),
        (37_230, TypeSpec(kind="time32", unit="s"), "10:20:30"),
        (37_230_500, TypeSpec(kind="time32", unit="ms"), "10:20:30.500000"),
        (37_230_000_001, TypeSpec(kind="time64", unit="us"), "10:20:30.000001"),
        ("1.50", TypeSpec(kind="decimal", precision=10, scale=2), "1.50"),
        ("-0.001", TypeSpec(kind="decimal", precision=10, scale=3), "-0.001"),
        ("0.0000001", TypeSpec(kind="decimal", precision=10, scale=7), "0.0000001"),
        (
            "12345678901234567890",
            TypeSpec(kind="decimal", precision=38, scale=0),
            "12345678901234567890",
        ),
        ("1000", TypeSpec(kind="decimal", precision=10, scale=0), "1000"),
    ],
)
def test_render_partition_value(value: object, type_spec: TypeSpec, expected: str | None) -> None:
    assert render_partition_value(value, type_spec) == expected


def test_to_python() -> None:
    assert to_python(None, INT) is None
    assert to_python(5, INT) == 5
    assert to_python("s", STRING) == "s"
    assert to_python(b"b", TypeSpec(kind="binary")) == b"b"
    assert to_python(19_753, TypeSpec(kind="date32")) == dt.date(2024, 1, 31)
    assert to_python(1, TypeSpec(kind="date64")) == dt.date(1970, 1, 2)
    ts = to_python(1_500, TypeSpec(kind="timestamp", unit="ms"))
    assert ts == dt.datetime(1970, 1, 1, 0, 0, 1, 500_000)
    assert isinstance(ts, dt.datetime)
    assert ts.tzinfo is None
    aware = to_python(1, TypeSpec(kind="timestamp", unit="s", tz="America/New_York"))
    assert aware == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert to_python(-1, TypeSpec(kind="timestamp", unit="ns")) == dt.datetime(
        1969, 12, 31, 23, 59, 59, 999_999
    )
    assert to_python(3_661_000_000_000, TypeSpec(kind="time64", unit="ns")) == dt.time(1, 1, 1)
    assert to_python(3_661, TypeSpec(kind="time32", unit="s")) == dt.time(1, 1, 1)
    value = to_python("-12.340", TypeSpec(kind="decimal", precision=10, scale=3))
    assert value == decimal.Decimal("-12.340")
    assert isinstance(value, decimal.Decimal)
    assert str(value) == "-12.340"


@settings(max_examples=100, deadline=None)
@given(
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    st.sampled_from(["s", "ms", "us", "ns"]),
)
def test_timestamp_values_round_trip_to_their_unit(moment: dt.datetime, unit: str) -> None:
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    delta = moment - dt.datetime(1970, 1, 1)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    stored = micros * per_second // 1_000_000
    expected = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=stored * 1_000_000 // per_second)
    assert to_python(stored, TypeSpec(kind="timestamp", unit=unit)) == expected
    assert render_partition_value(stored, TypeSpec(kind="timestamp", unit=unit)) == (
        expected.isoformat()
    )


# ---- whole paths --------------------------------------------------------------------------------


def test_partition_path_single_and_multi_key() -> None:
    day = TypeSpec(kind="date32")
    assert partition_path((), (), (), DEFAULT) == ""
    assert partition_path(("dt",), (19_753,), (day,), DEFAULT) == "dt=2024-01-31"
    assert (
        partition_path(("dt", "region", "n"), (19_753, "eu/west", 3), (day, STRING, INT), DEFAULT)
        == "dt=2024-01-31/region=eu%2Fwest/n=3"
    )


def test_null_and_empty_map_to_the_default_name() -> None:
    keys, types = ("a", "b"), (STRING, INT)
    assert partition_path(keys, (None, None), types, DEFAULT) == f"a={DEFAULT}/b={DEFAULT}"
    assert partition_path(keys, ("", 0), types, DEFAULT) == f"a={DEFAULT}/b=0"
    assert partition_path(keys, ("", None), types, "NULL") == "a=NULL/b=NULL"
    # The default name itself is used verbatim (it is the table's choice, not a value).
    assert partition_path(("a",), (None,), (STRING,), "__HIVE_DEFAULT__") == "a=__HIVE_DEFAULT__"


def test_keys_and_values_are_escaped() -> None:
    assert partition_path(("k=1",), ("a=b",), (STRING,), DEFAULT) == "k%3D1=a%3Db"
    ts = TypeSpec(kind="timestamp", unit="s", tz="UTC")
    assert (
        partition_path(("t",), (1_706_696_430,), (ts,), DEFAULT)
        == "t=2024-01-31T10%3A20%3A30+00%3A00"
    )
    assert partition_path(("b",), (True,), (TypeSpec(kind="bool"),), DEFAULT) == "b=true"


def test_key_value_count_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError):
        partition_path(("a", "b"), ("x",), (STRING, STRING), DEFAULT)


#: NUL is refused in names and values (tests/security/test_containment.py), never escaped.
partition_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00")
    | st.sampled_from(SPECIAL + CONTROL),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(partition_text.filter(bool), st.none() | partition_text), min_size=1, max_size=4
    )
)
def test_partition_path_parses_back(pairs: list[tuple[str, str | None]]) -> None:
    keys = tuple(k for k, _ in pairs)
    values = tuple(v for _, v in pairs)
    path = partition_path(keys, values, (STRING,) * len(keys), DEFAULT)
    parts = path.split("/")
    assert len(parts) == len(keys)
    for part, key, value in zip(parts, keys, values, strict=True):
        raw_key, raw_value = part.split("=")
        assert unescape(raw_key) == key
        if value is None or value == "":
            assert raw_value == DEFAULT
        else:
            assert unescape(raw_value) == value
