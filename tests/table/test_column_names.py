"""Column names are unique ignoring case, at every level: Spark SQL, DuckDB and most engines
resolve names case-insensitively and cannot tell ``id`` from ``ID``. Creating, merging, adding
and renaming refuse a second name that differs only by case, naming both."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at

SCHEMA = pa.schema([("id", pa.int64()), ("point", pa.struct([("x", pa.int32())]))])


def _table(tmp_path: Path) -> at.Table:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"id": [1], "point": [{"x": 1}]}, schema=SCHEMA))
    return table


@pytest.mark.parametrize(
    ("schema", "names", "column"),
    [
        (pa.schema([("id", pa.int64()), ("ID", pa.string())]), ("id", "ID"), "ID"),
        (
            pa.schema([("Straße", pa.int64()), ("STRASSE", pa.int64())]),
            ("Straße", "STRASSE"),
            "STRASSE",
        ),
        (
            pa.schema([("p", pa.struct([("x", pa.int32()), ("X", pa.int32())]))]),
            ("p.x", "p.X"),
            "p",
        ),
        (
            pa.schema([("l", pa.list_(pa.struct([("a", pa.int32()), ("A", pa.int32())])))]),
            ("l.item.a", "l.item.A"),
            "l",
        ),
        (pa.schema([("a", pa.int64()), ("a", pa.int32())]), ("duplicate column name(s): a",), "a"),
    ],
)
def test_create_refuses_names_that_differ_only_by_case(
    tmp_path: Path, schema: pa.Schema, names: tuple[str, ...], column: str
) -> None:
    """``column`` (errors.md: it names the top-level column at fault) is the later name."""
    with pytest.raises(at.InvalidSchemaError) as caught:
        at.create_table(str(tmp_path / "t"), schema)
    for name in names:
        assert name in str(caught.value)
    assert caught.value.column == column
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_merge_mode_refuses_a_column_that_differs_only_by_case(tmp_path: Path) -> None:
    """Merge mode added ``ID`` beside ``id``."""
    table = _table(tmp_path)
    for data, error, names, column in (
        (pa.table({"id": [2], "ID": [3]}), at.InvalidSchemaError, ("'id'", "'ID'"), "ID"),
        (pa.table({"ID": [2]}), at.SchemaChangeError, ("'id'", "'ID'"), "ID"),
        (
            pa.table({"id": [2], "point": [{"x": 1, "X": 2}]}),
            at.InvalidSchemaError,
            ("'point.x'", "'point.X'"),
            "point",  # the input's own twins: its top-level column
        ),
        (
            pa.table({"id": [2], "point": [{"X": 2}]}),
            at.SchemaChangeError,
            ("'point.x'", "'point.X'"),
            "point.X",  # a change: the path of the field it would add
        ),
    ):
        with pytest.raises(error) as caught:
            table.append(data, schema_mode="merge")
        assert caught.value.column == column, caught.value  # (the input's own: was None)
        message = str(caught.value)
        for name in names:
            assert name in message, (name, message)
        assert "case" in message
    assert table.schema == SCHEMA
    assert table.scan().count() == 1
    # a genuinely new column still merges
    table.append(pa.table({"id": [2], "idx": [5]}), schema_mode="merge")
    assert table.schema.names == ["id", "point", "idx"]


def test_add_and_rename_refuse_names_that_differ_only_by_case(tmp_path: Path) -> None:
    table = _table(tmp_path)
    with pytest.raises(at.SchemaChangeError, match=r"'ID'.*'id'|'id'.*'ID'") as caught:
        table.update_schema().add_column("ID", pa.string()).commit()
    assert caught.value.column == "ID"
    with pytest.raises(at.SchemaChangeError, match=r"'point\.X'.*'point\.x'"):
        table.update_schema().add_column("point.X", pa.int32()).commit()
    table.update_schema().add_column("name", pa.string()).commit()
    with pytest.raises(at.SchemaChangeError, match=r"'Id'.*'id'"):
        table.update_schema().rename_column("name", "Id").commit()
    # a column may change the case of its own name
    table.update_schema().rename_column("id", "ID").commit()
    assert table.schema.names == ["ID", "point", "name"]
    assert table.scan().to_arrow().column("ID").to_pylist() == [1]


def test_strict_mode_names_the_column_of_the_other_case(tmp_path: Path) -> None:
    table = _table(tmp_path)
    with pytest.raises(at.SchemaMismatchError, match=r"'ID'.*'id'") as caught:
        table.append(pa.table({"ID": [2], "point": [{"x": 1}]}))
    assert caught.value.column == "ID"
