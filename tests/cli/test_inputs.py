"""CSV and JSON-lines input: errors name the column and the line; --schema-from infers the
same types from both formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import appendtable as at


@pytest.fixture
def table(cli: Any, tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    assert cli("create", uri, "--schema", "id int64, day date32, amount float64").code == 0
    return uri


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "bad.csv",
            "amount,id,day\n1.5,1,2024-01-01\n2.5,2,2024-01-02\nabc,3,2024-01-03\n",
            "column 'amount', line 4:",
        ),
        (
            "bad_date.csv",
            "id,day,amount\n1,2024-01-01,1\n2,2024-02-30,2\n",
            "column 'day', line 3:",
        ),
        (
            "bad.jsonl",
            '{"id": 1, "day": "2024-01-01", "amount": 1}\n'
            '{"id": 2, "day": "2024-13-01", "amount": 2}\n',
            "column 'day', line 2:",
        ),
        (
            "mixed.jsonl",
            '{"id": 1, "day": "2024-01-01", "amount": 1}\n'
            '{"id": 2, "day": "2024-01-02", "amount": 2}\n'
            '{"id": "three", "day": "2024-01-03", "amount": 3}\n',
            "column 'id', line 3:",
        ),
    ],
)
def test_input_errors_name_the_column_and_the_line(
    cli: Any, tmp_path: Path, table: str, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    result = cli("append", table, str(path))
    assert result.code != 0
    assert message in result.err and name in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1
    assert at.open_table(table).latest_snapshot() is None  # nothing committed


def test_schema_from_infers_dates_and_timestamps_alike_for_csv_and_json(
    cli: Any, tmp_path: Path
) -> None:
    (tmp_path / "s.csv").write_text("id,day,at,name\n1,2024-01-01,2024-01-01 10:00:00,x\n")
    (tmp_path / "s.jsonl").write_text(
        '{"id": 1, "day": "2024-01-01", "at": "2024-01-01 10:00:00", "name": "x"}\n'
    )
    schemas = []
    for name in ("s.csv", "s.jsonl"):
        uri = str(tmp_path / f"t-{name}")
        assert cli("create", uri, "--schema-from", str(tmp_path / name)).code == 0
        schemas.append(at.open_table(uri).schema)
    assert schemas[0] == schemas[1]
    assert str(schemas[1].field("day").type) == "date32[day]"
    assert str(schemas[1].field("at").type) == "timestamp[s]"
