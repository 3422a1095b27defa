"""``--filter`` on struct fields: ``payload.x = 3`` (a bare dotted name that is a top-level
column stays that column), parts quoted with backticks or double quotes (``payload.`x.y```),
in ``scan`` and ``tail``; errors name the field and the struct."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at

from .conftest import Result

Cli = Callable[..., Result]

PAYLOAD = pa.struct(
    [("x", pa.int32()), ("x.y", pa.string()), ("in", pa.struct([("d", pa.date32())]))]
)
SCHEMA = pa.schema([("k", pa.int64()), ("payload", PAYLOAD), ("a.b", pa.int32())])


@pytest.fixture
def uri(tmp_path: Path) -> str:
    location = str(tmp_path / "t")
    table = at.create_table(location, SCHEMA)
    table.append(
        pa.Table.from_pylist(
            [
                {
                    "k": 1,
                    "payload": {"x": 1, "x.y": "p", "in": {"d": dt.date(2024, 5, 1)}},
                    "a.b": 7,
                },
                {"k": 2, "payload": None, "a.b": 8},
                {"k": 3, "payload": {"x": 3, "x.y": "q", "in": None}, "a.b": 9},
            ],
            schema=SCHEMA,
        )
    )
    return location


def _keys(cli: Cli, uri: str, *filters: str) -> list[int]:
    args = [item for text in filters for item in ("--filter", text)]
    result = cli("scan", uri, "--format", "jsonl", *args)
    assert result.code == 0, result.err
    return sorted(json.loads(line)["k"] for line in result.out.splitlines())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("payload.x = 3", [3]),
        ("payload.x is null", [2]),
        ("payload.x in (1, 3)", [1, 3]),
        ("payload.x != 1", [3]),
        ("`payload`.`x` >= 1", [1, 3]),
        ('"payload".x < 3', [1]),
        ("payload.`x.y` = q", [3]),
        ("payload.in.d = 2024-05-01", [1]),
        ("payload.in.d is null", [2, 3]),
        ("a.b = 8", [2]),  # the top-level column named a.b
        ("`a.b` >= 8", [2, 3]),
        ("payload.x > 1 or a.b = 7", [1, 3]),
    ],
)
def test_scan_filters_on_struct_fields(cli: Cli, uri: str, text: str, expected: list[int]) -> None:
    assert _keys(cli, uri, text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("payload.z = 1", "unknown field 'z' of struct 'payload' (its fields: x, x.y, in)"),
        ("k.z = 1", "'k' is not a struct (type int64)"),
        ("nope.z = 1", "unknown column 'nope'"),
        ("payload.x = abc", "payload.x"),
        ("payload.`x = 1", "unterminated quoted column name"),
    ],
)
def test_bad_struct_field_filters_name_the_field(
    cli: Cli, uri: str, text: str, message: str
) -> None:
    result = cli("scan", uri, "--filter", text)
    assert result.code == 2, (result.out, result.err)
    assert message in result.err


def test_tail_filters_on_struct_fields(cli: Cli, uri: str) -> None:
    result = cli(
        "tail",
        uri,
        "--from",
        "earliest",
        "--idle-exit",
        "0",
        "--format",
        "jsonl",
        "--filter",
        "payload.x >= 2",
    )
    assert result.code == 0, result.err
    assert [json.loads(line)["k"] for line in result.out.splitlines()] == [3]
