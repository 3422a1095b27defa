"""The ``schemas`` system table's (and ``schema_history()``'s) ``columns`` text names every
column and field exactly: it was ``name type`` with names as they are, so a column named
``a, b`` read as two columns, and nested fields lost their nullability. It is now the DDL that
``at.format_schema`` writes and the command line reads back, each doc as a JSON string."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa

import appendtable as at
from appendtable.cli.ddl import parse_schema
from tests.system.model import read_system

AWKWARD = pa.schema(
    [
        pa.field("day", pa.date32(), nullable=False),
        pa.field("a, b", pa.int64()),
        pa.field("not", pa.string()),
        pa.field("with space", pa.float64(), nullable=False),
        pa.field('tick`and"quote', pa.string()),
        pa.field(
            "payload",
            pa.struct(
                [
                    pa.field("x, y", pa.int32(), nullable=False),
                    pa.field("inner", pa.struct([pa.field("deep name", pa.bool_())])),
                ]
            ),
        ),
        pa.field("tags", pa.list_(pa.field("item", pa.string(), nullable=False))),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    ]
)


def test_the_columns_text_reads_back_as_the_schema(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), AWKWARD, partition_by=["day"])
    (row,) = read_system(table, "schemas").to_pylist()
    assert parse_schema(row["columns"]) == table.schema  # every name, type and nullability
    assert row["columns"] == at.format_schema(table.schema)
    assert "`a, b` int64" in row["columns"] and "`x, y`: int32 not null" not in row["columns"]
    assert "`x, y` int32 not null" in row["columns"]
    assert table.schema_history()["columns"].to_pylist() == [row["columns"]]


def test_docs_follow_their_column_as_json_strings(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), AWKWARD, partition_by=["day"])
    doc = 'what it is, "quoted", and (parenthesised)'
    table.update_schema().update_column("a, b", doc=doc).commit()
    text = table.schema_history()["columns"].to_pylist()[-1]
    found = re.search(r"`a, b` int64 \(doc: (\".*?(?<!\\)\")\)", text)
    assert found is not None, text
    assert json.loads(found.group(1)) == doc
    without_docs = text.replace(f" (doc: {json.dumps(doc)})", "")
    assert parse_schema(without_docs) == table.schema
