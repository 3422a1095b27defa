"""Adopted files and field ids: a file joins the table as is only if every reader reads the
same column from it. Iceberg readers of the mirror match a file's columns by its Parquet field
ids, or, for a file without them, by name through the mirror's name mapping (where a name two
columns have held stands for the first). Found by a docs-only hunt: a file written by pyiceberg
(whose ids were not the table's) was adopted, and the mirror read ``b`` where the table read
``c``; a file without ids adopted after ``x`` was dropped and added again read as null.

Such files are refused (SchemaMismatchError naming the column, nothing moved); files whose ids
are the table's, or that have none and no reused name, are adopted, and pyiceberg reads the same
rows as the table. Spark's native write (no field ids) falls back to the Python writer for a
table with a reused name (tests/spark/test_staged_writes.py covers the paths)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

import appendtable as at

MIRROR = {"metadata.iceberg.storage": "table-location", "write-only": True}
FIELD_ID = b"PARQUET:field_id"


def _with_ids(schema: pa.Schema, ids: dict[str, int]) -> pa.Schema:
    return pa.schema(
        [field.with_metadata({FIELD_ID: str(ids[field.name]).encode()}) for field in schema]
    )


def _stage(area: at.StagingArea, rows: pa.Table, name: str = "part-0.parquet") -> str:
    pq.write_table(rows, f"{area.uri}/{name}")
    return name


def _mirror_rows(table: at.Table) -> list[dict[str, object]]:
    location = table.iceberg_metadata_location()
    assert location is not None
    return sorted(StaticTable.from_metadata(location).scan().to_arrow().to_pylist(), key=repr)


def _table_rows(table: at.Table) -> list[dict[str, object]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=repr)


def _alter(table: at.Table, change: str, *arguments: object) -> None:
    with table.update_schema() as update:
        getattr(update, change)(*arguments)


def _files_in(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*.parquet"))


SCHEMA = pa.schema([("id", pa.int64()), ("b", pa.int64()), ("c", pa.int64())])


def test_a_file_whose_field_ids_are_not_the_tables_is_refused_before_anything_moves(
    tmp_path: Path,
) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=MIRROR)
    rows = pa.table({"id": [1], "b": [20], "c": [30]})
    foreign = rows.cast(_with_ids(SCHEMA, {"id": 1, "b": 3, "c": 4}))  # as pyiceberg wrote it
    with table.staging_area() as area:
        name = _stage(area, foreign)
        before = _files_in(tmp_path / "t")
        with pytest.raises(at.SchemaMismatchError, match="field id 3") as raised:
            area.adopt([name])
        assert raised.value.column == "b"
        assert _files_in(tmp_path / "t") == before
    assert table.latest_snapshot() is None


def test_files_with_the_tables_field_ids_or_none_are_adopted_and_read_alike(
    tmp_path: Path,
) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=MIRROR)
    with table.staging_area() as area:
        own_ids = pa.table({"id": [1], "b": [20], "c": [30]}).cast(
            _with_ids(SCHEMA, {"id": 1, "b": 2, "c": 3})
        )
        plain = pa.table({"id": [2], "b": [21], "c": [31]})
        names = [_stage(area, own_ids, "a.parquet"), _stage(area, plain, "b.parquet")]
        table.committer().commit(area.adopt(names))
    expected = [{"id": 1, "b": 20, "c": 30}, {"id": 2, "b": 21, "c": 31}]
    assert _table_rows(table) == expected
    assert _mirror_rows(table) == expected


@pytest.mark.parametrize("change", ["drop_and_add", "rename_onto_dropped"])
def test_a_file_without_field_ids_is_refused_where_a_name_changed_owner(
    tmp_path: Path, change: str
) -> None:
    table = at.create_table(
        str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("x", pa.string())]), options=MIRROR
    )
    table.append(pa.table({"id": [1], "x": ["old"]}))
    if change == "drop_and_add":
        _alter(table, "drop_column", "x")
        _alter(table, "add_column", "x", pa.string())
    else:
        _alter(table, "add_column", "y", pa.string())
        _alter(table, "drop_column", "x")
        _alter(table, "rename_column", "y", "x")
    assert table.reused_names() == ["x"]
    with table.staging_area() as area:
        name = _stage(area, pa.table({"id": [2], "x": ["new"]}))
        with pytest.raises(at.SchemaMismatchError, match="held the name 'x' before") as raised:
            area.adopt([name])
        assert raised.value.column == "x"
    table.append(pa.table({"id": [2], "x": ["new"]}))  # the way the message names
    expected = [{"id": 1, "x": None}, {"id": 2, "x": "new"}]
    assert _table_rows(table) == expected
    assert _mirror_rows(table) == expected


def test_a_reused_name_inside_a_struct_is_named_with_its_path(tmp_path: Path) -> None:
    point = pa.struct([("x", pa.int64()), ("y", pa.int64())])
    table = at.create_table(
        str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("p", point)]), options=MIRROR
    )
    assert table.reused_names() == []
    _alter(table, "drop_column", "p.y")
    _alter(table, "add_column", "p.y", pa.int64())
    assert table.reused_names() == ["p.y"]
    rows = pa.table({"id": [1], "p": pa.array([{"x": 1, "y": 2}], point)})
    with table.staging_area() as area:
        name = _stage(area, rows)
        with pytest.raises(at.SchemaMismatchError, match=r"'p\.y'") as raised:
            area.adopt([name])
        assert raised.value.column == "p"


def test_a_new_name_is_not_reused(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=MIRROR)
    _alter(table, "drop_column", "c")
    _alter(table, "add_column", "d", pa.int64())
    _alter(table, "rename_column", "b", "e")
    assert table.reused_names() == []
    with table.staging_area() as area:
        name = _stage(area, pa.table({"id": [1], "e": [2], "d": [3]}))
        table.committer().commit(area.adopt([name]))
    assert _mirror_rows(table) == _table_rows(table) == [{"id": 1, "e": 2, "d": 3}]
