"""Text tables, CSV, JSON lines and progress lines."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json

import pyarrow as pa

from appendtable.cli.output import Progress, TextTable, cell_text, progress_bar, write_rows

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(6, 2))])
ROWS = pa.table(
    {
        "id": [1, 200, None],
        "name": ["a", "x" * 60, "line\nbreak"],
        "amount": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("-3.00")]),
    },
    schema=SCHEMA,
)


def test_text_table_aligns_truncates_and_counts() -> None:
    out = io.StringIO()
    assert write_rows("table", out, SCHEMA, ROWS.to_batches()) == 3
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["id", "name", "amount"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    widths = [len(part) for part in lines[1].split("  ")]
    assert widths == [4, 40, 6]  # "null" is the widest id; names cut at 40
    assert lines[2].startswith("   1  a ")  # numbers right-aligned
    assert lines[2].endswith("  1.50")
    assert "x" * 39 + "…" in lines[3]
    assert "line\\nbreak" in lines[4]  # one row stays one line
    assert lines[-1] == "(3 rows)"


def test_text_table_measures_the_first_rows_then_streams() -> None:
    out = io.StringIO()
    table = TextTable(out, SCHEMA)
    table.write(pa.table({"id": [1], "name": ["a"], "amount": [None]}, schema=SCHEMA))
    assert out.getvalue() == ""  # still measuring
    table.close()
    assert out.getvalue().splitlines()[-1] == "(1 row)"


def test_csv_and_jsonl() -> None:
    out = io.StringIO()
    write_rows("csv", out, SCHEMA, [ROWS])
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows[0] == ["id", "name", "amount"]
    assert rows[1] == ["1", "a", "1.50"]
    assert rows[3] == ["", "line\nbreak", "-3.00"]  # nulls empty, new lines quoted
    out = io.StringIO()
    write_rows("jsonl", out, SCHEMA, [ROWS], limit=2)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [
        {"id": 1, "name": "a", "amount": "1.50"},
        {"id": 200, "name": "x" * 60, "amount": None},
    ]


def test_cells() -> None:
    utc = dt.UTC
    assert cell_text(dt.datetime(2024, 5, 1, 10, tzinfo=utc)) == "2024-05-01 10:00:00Z"
    assert cell_text(dt.datetime(2024, 5, 1, 10, 0, 0, 123000)) == "2024-05-01 10:00:00.123"
    assert cell_text(dt.datetime(2024, 5, 1, 10, 0, 0, 5)) == "2024-05-01 10:00:00.000005"
    assert cell_text(dt.date(2024, 5, 1)) == "2024-05-01"
    assert cell_text(b"\x00\xff") == "0x00ff"
    assert cell_text(True) == "true"
    assert cell_text(0.1) == "0.1"
    assert cell_text([1, None]) == "[1, null]"
    assert cell_text({"a": dt.date(2024, 1, 2)}) == '{"a": "2024-01-02"}'
    assert cell_text([("k", 1)]) == '[["k", 1]]'  # map entries
    assert cell_text(None) == "null"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_redraws_one_line() -> None:
    out = _Terminal()
    progress = Progress(out, interval=0)
    progress.update("a long first text")
    progress.update("short")
    progress.done("finished")
    text = out.getvalue()
    assert text.startswith("\ra long first text\rshort            \rfinished\n")


def test_progress_elsewhere_prints_only_final_lines_and_quiet_prints_nothing() -> None:
    out = io.StringIO()
    progress = Progress(out, interval=0)
    progress.update("drawing")
    progress.done("file 1 done")
    assert out.getvalue() == "file 1 done\n"
    quiet = _Terminal()
    silent = Progress(quiet, enabled=False)
    silent.update("x")
    silent.done("y")
    assert quiet.getvalue() == ""


def test_progress_bar() -> None:
    assert progress_bar(0.5, width=10) == "[#####-----]  50%"
    assert progress_bar(2.0, width=4) == "[####] 100%"
