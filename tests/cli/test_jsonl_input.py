"""JSON-lines and CSV input of the CLI over the domain of the types they carry: map columns in
both JSON forms (the CLI's own ``[[key, value]], ...`` output and JSON objects), zoned
timestamps needing an offset as in CSV, and error lines that are lines of the file (a quoted
CSV field may span several)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

import appendtable as at
from tests.helpers import strategies

#: Map types a user loads from JSON, with the DDL that declares them.
MAP_TYPES = {
    "map<string, int64>": pa.map_(pa.string(), pa.int64()),
    "map<int64, string>": pa.map_(pa.int64(), pa.string()),
    "map<int32, float64>": pa.map_(pa.int32(), pa.float64()),
    "map<string, decimal(38, 10)>": pa.map_(pa.string(), pa.decimal128(38, 10)),
    "map<string, timestamp[us, UTC]>": pa.map_(pa.string(), pa.timestamp("us", "UTC")),
    "map<string, date32>": pa.map_(pa.string(), pa.date32()),
    "map<string, list<int64>>": pa.map_(pa.string(), pa.list_(pa.int64())),
    "map<string, struct<a int64, b string>>": pa.map_(
        pa.string(), pa.struct([("a", pa.int64()), ("b", pa.string())])
    ),
    "map<string, map<int64, bool>>": pa.map_(pa.string(), pa.map_(pa.int64(), pa.bool_())),
}


def _json_value(value: Any) -> Any:
    """A Python value as JSON carries it (the json module is the oracle): decimals as exact
    strings, instants in ISO 8601 with their offset, dates in ISO 8601, maps as pairs."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def _finite(value: Any) -> bool:
    """JSON has no NaN or infinities."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


def _map_in_json(pairs: list[tuple[Any, Any]] | None, as_object: bool) -> Any:
    """A map as a JSON object (keys as text) or as the CLI's ``[key, value]`` pairs."""
    if pairs is None:
        return None
    if as_object:
        return {str(k): _json_value(v) for k, v in pairs}
    return [[_json_value(k), _json_value(v)] for k, v in pairs]


def _rows(dtype: pa.DataType) -> st.SearchStrategy[list[tuple[Any, str]]]:
    """Rows of (map value, form): a map, null, or no key at all; either JSON form."""
    value = strategies.values(dtype, python=True).filter(_finite)
    form = st.sampled_from(["object", "pairs", "null", "absent"])
    return st.lists(st.tuples(value, form), min_size=1, max_size=12)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.sampled_from(sorted(MAP_TYPES)).flatmap(lambda d: st.tuples(st.just(d), _rows(MAP_TYPES[d])))
)
def test_map_columns_read_from_both_json_forms(cli: Any, case: tuple[str, list[Any]]) -> None:
    """A table with a map column refused every JSON-lines file, even one without the column
    ('JSON conversion to map<string, int64> is not supported'); the CLI's own output form
    (pairs) and JSON objects are both read, exactly as the json module writes the values."""
    ddl, rows = case
    dtype = MAP_TYPES[ddl]
    lines = []
    want = []
    for index, (pairs, form) in enumerate(rows):
        record: dict[str, Any] = {"id": index}
        if form in ("object", "pairs"):
            record["m"] = _map_in_json(pairs, form == "object")
            want.append(pairs)
        elif form == "null":
            record["m"] = None
            want.append(None)
        else:
            want.append(None)
        lines.append(json.dumps(record, ensure_ascii=False))
    with tempfile.TemporaryDirectory() as root:
        uri = f"{root}/t"
        assert cli("create", uri, "--schema", f"id int64, m {ddl}").code == 0
        path = Path(root) / "in.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        result = cli("append", uri, str(path), "--quiet")
        assert result.code == 0, result.err
        got = at.open_table(uri).scan().to_arrow().sort_by("id").column("m")
        assert got.to_pylist() == pa.array(want, dtype).to_pylist()


def test_a_json_file_without_the_map_column_is_read(cli: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    assert cli("create", uri, "--schema", "id int64, m map<string, int64>").code == 0
    (tmp_path / "a.jsonl").write_text('{"id": 1}\n\n{"id": 2, "m": null}\n')
    assert cli("append", uri, str(tmp_path / "a.jsonl")).code == 0, cli
    rows = at.open_table(uri).scan().to_arrow().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "m": None}, {"id": 2, "m": None}]


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("5", "a map is"),
        ('[["k"]]', "a map is"),
        ('[["k", 1, 2]]', "a map is"),
        ('{"k": "x"}', "changed from number to string"),
        ("[[null, 1]]", "is not a valid"),
        ('[["k", 99999999999999999999]]', "99999999999999999999"),
    ],
)
def test_a_bad_map_names_the_column_and_the_line(
    cli: Any, tmp_path: Path, value: str, detail: str
) -> None:
    uri = str(tmp_path / "t")
    assert cli("create", uri, "--schema", "id int64, m map<string, int64>").code == 0
    path = tmp_path / "bad.jsonl"
    path.write_text(f'{{"id": 1, "m": {{"a": 1}}}}\n{{"id": 2}}\n{{"id": 3, "m": {value}}}\n')
    result = cli("append", uri, str(path))
    assert result.code != 0
    assert "column 'm', line 3:" in result.err and detail in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1
    assert at.open_table(uri).latest_snapshot() is None


@pytest.mark.parametrize(
    ("ddl", "line"),
    [
        ("ts timestamp[us, UTC]", '"ts": "{}"'),
        ("ts timestamp[ms, Europe/Paris]", '"ts": "{}"'),
        ("ts struct<t timestamp[us, UTC]>", '"ts": {{"t": "{}"}}'),
    ],
)
def test_a_zoned_timestamp_needs_an_offset_in_json_as_in_csv(
    cli: Any, tmp_path: Path, ddl: str, line: str
) -> None:
    """JSON lines took '2024-05-01T10:00:00' into a UTC column (as UTC) where CSV refuses it
    as documented: both refuse it, naming the column and the line."""
    uri = str(tmp_path / "t")
    assert cli("create", uri, "--schema", f"id int64, {ddl}").code == 0
    good = ["2024-05-01T10:00:00Z", "2024-05-01T10:00:00+02:00", "2024-05-01 10:00:00.123-07:30"]
    path = tmp_path / "ok.jsonl"
    path.write_text("".join(f'{{"id": {i}, {line.format(text)}}}\n' for i, text in enumerate(good)))
    assert cli("append", uri, str(path)).code == 0
    got = at.open_table(uri).scan().to_arrow().sort_by("id").column("ts").to_pylist()
    instants = [v if isinstance(v, dt.datetime) else v["t"] for v in got]
    assert instants == [dt.datetime.fromisoformat(text) for text in good]
    for text in ("2024-05-01T10:00:00", "2024-05-01"):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(f'{{"id": 5, {line.format(good[0])}}}\n{{"id": 6, {line.format(text)}}}\n')
        result = cli("append", uri, str(bad))
        assert result.code != 0
        assert "column 'ts" in result.err and "line 2:" in result.err, result.err
        assert "offset" in result.err, result.err
    if "struct" not in ddl:  # CSV says the same
        (tmp_path / "bad.csv").write_text(f"id,ts\n5,{good[0]}\n6,2024-05-01T10:00:00\n")
        result = cli("append", uri, str(tmp_path / "bad.csv"))
        assert result.code != 0 and "column 'ts', line 3:" in result.err, result.err
    assert at.open_table(uri).scan().count() == len(good)


@pytest.mark.parametrize(
    ("text", "column", "bad"),
    [
        ('id,s,f\n1,"multi\nline\nvalue",1\n2,b,1\n3,c,x\n', "f", "x"),
        ('id,s,f\n1,a,1\n2,"b\r\nc",x\n', "f", "x"),
        ('id,s,f\n1,"a\n\n\nb",1\n2,"c\nd",1\n3,e,1.5e\n', "f", "1.5e"),
        ('id,s,f\r\n1,"x\r\ny",1\r\n2,z,?\r\n', "f", "?"),
        ('id,s,f\n1,"""q""\n",1\n2,"",bad\n', "f", "bad"),
        ("id,s,f\n\n1,a,1\n\n2,b,zz\n", "f", "zz"),
        ('id,s,f\n1,"a\nb",1\n2,"c\nd",qq\n', "f", "qq"),
        ('id,s,g\n1,"a\nb",1\n2,"c\nd\ne",1e300\n', "g", "1e300"),
        ('id,s,g\n1,"a\nb",1\n2,c,abc\n', "g", "abc"),
    ],
)
def test_csv_errors_name_the_line_of_the_file(
    cli: Any, tmp_path: Path, text: str, column: str, bad: str
) -> None:
    """The line named counted records, not lines, when a quoted field spans lines (and
    empty lines, which are no records)."""
    uri = str(tmp_path / "t")
    schema = "id int64, s string, f float64, g float32"
    assert cli("create", uri, "--schema", schema).code == 0
    path = tmp_path / "e.csv"
    path.write_bytes(text.encode())
    result = cli("append", uri, str(path))
    assert result.code != 0
    line = text[: text.rindex(bad)].count("\n") + 1  # the line the bad value is on
    assert f"column '{column}', line {line}:" in result.err, result.err
    assert at.open_table(uri).latest_snapshot() is None
