"""Projection of record batches of one schema version onto another by field id, including
nested types and sliced input (a later batch of a file shares its buffers)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.datafiles.arrow_schema import field_specs
from appendtable.datafiles.projection import Projection
from appendtable.metadata.models import TableSchema
from appendtable.planning.schema_changes import (
    AddColumn,
    DropColumn,
    RenameColumn,
    UpdateColumn,
    apply_changes,
    with_field_ids,
)

ITEM = pa.struct([("a", pa.int32()), ("b", pa.string())])
SOURCE = pa.schema(
    [
        ("id", pa.int32()),
        ("items", pa.list_(ITEM)),
        ("attrs", pa.map_(pa.string(), pa.int32())),
        ("s", pa.struct([("p", pa.int16()), ("q", pa.string())])),
        ("gone", pa.string()),
        ("fixed", pa.list_(pa.int16(), 2)),
        ("big", pa.large_list(pa.int8())),
    ]
)


def _schema() -> TableSchema:
    return with_field_ids(
        TableSchema(id=0, fields=field_specs(SOURCE), partition_keys=(), options={}, time_ms=0)
    )


def _target(base: TableSchema) -> TableSchema:
    added = field_specs(pa.schema([("c", pa.float64())]))[0]
    return apply_changes(
        base,
        [
            RenameColumn(path=("id",), new_name="key"),
            UpdateColumn(path=("key",), type=field_specs(pa.schema([("k", pa.int64())]))[0].type),
            AddColumn(parent=("items", "element"), field=added),
            RenameColumn(path=("items", "element", "a"), new_name="alpha"),
            DropColumn(path=("items", "element", "b")),
            UpdateColumn(
                path=("attrs", "value"), type=field_specs(pa.schema([("v", pa.int64())]))[0].type
            ),
            RenameColumn(path=("s", "q"), new_name="quality"),
            DropColumn(path=("gone",)),
            AddColumn(parent=(), field=field_specs(pa.schema([("new", pa.string())]))[0]),
            UpdateColumn(
                path=("fixed", "element"),
                type=field_specs(pa.schema([("v", pa.int64())]))[0].type,
            ),
            UpdateColumn(
                path=("big", "element"), type=field_specs(pa.schema([("v", pa.int32())]))[0].type
            ),
        ],
        new_id=1,
        first_free_field_id=100,
        time_ms=0,
    ).schema


def _expected(row: dict[str, Any]) -> dict[str, Any]:
    items = row["items"]
    s = row["s"]
    return {
        "key": row["id"],
        "items": None
        if items is None
        else [None if i is None else {"alpha": i["a"], "c": None} for i in items],
        "attrs": row["attrs"],
        "s": None if s is None else {"p": s["p"], "quality": s["q"]},
        "new": None,
        "fixed": row["fixed"],
        "big": row["big"],
    }


rows = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.none() | st.integers(-(2**31), 2**31 - 1),
            "items": st.none()
            | st.lists(
                st.none()
                | st.fixed_dictionaries(
                    {"a": st.none() | st.integers(-100, 100), "b": st.none() | st.text(max_size=3)}
                ),
                max_size=3,
            ),
            "attrs": st.none()
            | st.lists(st.tuples(st.text(max_size=2), st.none() | st.integers(-5, 5)), max_size=2),
            "s": st.none()
            | st.fixed_dictionaries(
                {"p": st.none() | st.integers(-5, 5), "q": st.none() | st.text(max_size=2)}
            ),
            "gone": st.none() | st.text(max_size=2),
            "fixed": st.none() | st.lists(st.none() | st.integers(-9, 9), min_size=2, max_size=2),
            "big": st.none() | st.lists(st.none() | st.integers(-9, 9), max_size=3),
        }
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(data=rows, bounds=st.tuples(st.integers(0, 12), st.integers(0, 12)))
def test_converting_sliced_nested_batches_matches_the_model(
    data: list[dict[str, Any]], bounds: tuple[int, int]
) -> None:
    base = _schema()
    target = _target(base)
    projection = Projection(target, {0: base, 1: target}.__getitem__)
    layout = projection.layout(0)
    assert not layout.native
    batch = pa.RecordBatch.from_pylist(data, schema=SOURCE)
    start = min(bounds[0], len(data))
    length = max(0, min(bounds[1], len(data) - start))
    sliced = batch.slice(start, length)
    columns = projection.arrow_schema.names
    read = sliced.select(projection.file_columns(layout, columns))
    converted = projection.convert(read, layout, columns)
    assert converted.schema == projection.arrow_schema
    got = converted.to_pylist()
    assert got == [_expected(r) for r in data[start : start + length]]
