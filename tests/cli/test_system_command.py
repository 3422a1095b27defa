"""``appendtable system``: every system table printed as a table, CSV or JSON lines, with time
travel, and the command line's errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

import appendtable as at
from tests.system.model import Model


@pytest.fixture
def evolved(tmp_path: Path) -> Model:
    model = Model.create(str(tmp_path / "t"))
    model.append([("mon", 3), ("a/b:c", 2)], watermark=1_700_000_000_000)
    model.tag("v1")
    model.append([("tue", 4), (None, 1)])
    model.register("billing", 2, full=False)
    model.add_column("extra")
    model.compact()
    return model


def test_the_list_of_system_tables(cli: Any, evolved: Model) -> None:
    result = cli("system", evolved.table.uri, "--format", "csv")
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert [r["name"] for r in rows] == list(at.SYSTEM_TABLE_NAMES)
    travels = {r["name"] for r in rows if r["time_travel"] == "true"}
    assert travels == {"files", "manifests", "partitions", "buckets"}


@pytest.mark.parametrize("name", at.SYSTEM_TABLE_NAMES)
def test_every_system_table_prints_what_python_returns(cli: Any, evolved: Model, name: str) -> None:
    expected = evolved.table.system_table(name)
    result = cli("system", evolved.table.uri, name, "--format", "jsonl")
    assert result.code == 0, result.err
    printed = [json.loads(line) for line in result.out.splitlines()]
    assert len(printed) == expected.num_rows > 0
    assert [list(row) for row in printed] == [expected.column_names] * expected.num_rows
    key = expected.column_names[0]
    assert [row[key] for row in printed] == expected[key].to_pylist()
    for row, want in zip(printed, expected.to_pylist(), strict=True):
        for column, value in want.items():
            if isinstance(value, int) and not isinstance(value, bool):
                assert row[column] == value, (column, row)
    text = cli("system", evolved.table.uri, name)
    assert text.code == 0 and text.out.splitlines()[0].split() == expected.column_names
    assert text.out.rstrip().endswith(
        f"({expected.num_rows:,} row{'' if expected.num_rows == 1 else 's'})"
    )


def test_time_travel_and_limit(cli: Any, evolved: Model) -> None:
    uri = evolved.table.uri
    for args in (["--snapshot", "1"], ["--tag", "v1"]):
        result = cli("system", uri, "partitions", *args, "--format", "csv")
        assert result.code == 0, result.err
        rows = {
            r["partition"]: int(r["record_count"]) for r in csv.DictReader(io.StringIO(result.out))
        }
        assert rows == {"day=a%2Fb%3Ac": 2, "day=mon": 3}
    limited = cli("system", uri, "snapshots", "--limit", "2", "--format", "csv")
    assert len(list(csv.DictReader(io.StringIO(limited.out)))) == 2


def test_errors(cli: Any, evolved: Model) -> None:
    uri = evolved.table.uri
    wrong = cli("system", uri, "snapshot")
    assert wrong.code == 2 and "did you mean 'snapshots'" in wrong.err
    assert "files, manifests, partitions, buckets" in wrong.err
    travel = cli("system", uri, "tags", "--snapshot", "1")
    assert travel.code == 2 and "--snapshot and --tag apply to files" in travel.err
    assert cli("system", uri, "--tag", "v1").code == 2
    assert cli("system", uri, "files", "--limit", "-1").code == 2
    both = cli("system", uri, "files", "--snapshot", "1", "--tag", "v1")
    assert both.code == 2
    expired = cli("system", uri, "files", "--snapshot", "99")
    assert expired.code == 1 and expired.err.startswith("error: no such snapshot: 99")
    missing = cli("system", uri, "files", "--tag", "nope")
    assert missing.code == 1 and "no tag named 'nope'" in missing.err
