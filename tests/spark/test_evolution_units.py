"""Pure parts of the adapter's schema handling (no session): what ``mergeSchema`` adds, racing
merges, padding Arrow batches, options."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import appendtable as at
from appendtable_spark.options import Use
from appendtable_spark.settings import Settings
from appendtable_spark.write_schema import Addition, additions, merge_schema, pad_batch

TABLE = pa.schema([("id", pa.int64()), ("s", pa.struct([("x", pa.int64())])), ("v", pa.string())])


def test_additions_follow_the_data_order_at_every_struct_depth() -> None:
    inner = pa.struct([("q", pa.int8()), ("p", pa.int8())])
    data = pa.schema(
        [
            ("new", pa.string(), False),
            ("s", pa.struct([("y", pa.int32()), ("x", pa.int64()), ("deep", inner)])),
            ("id", pa.int64()),
            ("last", pa.bool_()),
        ]
    )
    assert additions(TABLE, data) == [
        Addition(("new",), pa.string(), "v"),
        Addition(("s", "y"), pa.int32(), "x"),
        Addition(("s", "deep"), inner, "y"),
        Addition(("last",), pa.bool_(), "new"),
    ]
    assert additions(TABLE, TABLE) == []
    assert additions(TABLE, pa.schema([("id", pa.int64())])) == []  # missing: not dropped


def test_racing_merges_of_the_same_columns_all_succeed(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), TABLE)
    data = pa.schema([*TABLE, ("extra", pa.string())]).set(
        1, pa.field("s", pa.struct([("x", pa.int64()), ("y", pa.string())]))
    )
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def merge() -> None:
        handle = at.open_table(table.uri)
        barrier.wait()
        try:
            merge_schema(handle, data)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=merge) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert table.schema.names == ["id", "s", "v", "extra"]
    assert table.schema.field("s").type == pa.struct([("x", pa.int64()), ("y", pa.string())])
    # one ALTER: the others found nothing left to add (their losing schema files land nowhere)
    assert [s.kind for s in table.snapshots()] == [at.CommitKind.ALTER]


def test_merge_adds_nullable_fields_and_keeps_types(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), TABLE)
    table.append(pa.table({"id": [1], "s": [{"x": 1}], "v": ["a"]}, TABLE))
    data = pa.schema(
        [
            ("id", pa.int32(), False),  # narrower: the table keeps int64
            ("s", pa.struct([pa.field("y", pa.int64(), False)]), False),
            pa.field("n", pa.int64(), False),
        ]
    )
    snapshot = merge_schema(table, data)
    assert snapshot is not None and snapshot.kind == at.CommitKind.ALTER
    assert table.schema == pa.schema(
        [
            ("id", pa.int64()),
            ("s", pa.struct([("x", pa.int64()), ("y", pa.int64())])),
            ("v", pa.string()),
            ("n", pa.int64()),
        ]
    )
    assert merge_schema(table, data) is None


def test_pad_batch_fills_missing_columns_and_struct_fields() -> None:
    deep = pa.struct([("a", pa.int8()), ("b", pa.string())])
    schema = pa.schema(
        [
            ("id", pa.int64(), False),
            ("s", pa.struct([("x", pa.int64()), ("t", deep)])),
            ("v", pa.string()),
        ]
    )
    given = pa.array(
        [{"t": {"a": 1}}, None, {"t": None}],
        pa.struct([("t", pa.struct([("a", pa.int8())]))]),
    )
    batch = pa.record_batch({"s": given, "id": pa.array([1, 2, 3])})
    padded = pad_batch(batch, schema)
    assert padded.schema.names == ["id", "s", "v"]
    assert padded.to_pylist() == [
        {"id": 1, "s": {"t": {"a": 1, "b": None}, "x": None}, "v": None},
        {"id": 2, "s": None, "v": None},
        {"id": 3, "s": {"t": None, "x": None}, "v": None},
    ]
    # the core's writer takes it as the table's schema (fields matched by name)
    assert pa.Table.from_batches([padded]).cast(schema).to_pylist()[0]["s"] == {
        "x": None,
        "t": {"a": 1, "b": None},
    }
    untouched = pa.record_batch({"id": [1], "s": [{"x": 1, "t": {"a": 1, "b": "b"}}], "v": ["v"]})
    assert pad_batch(untouched, schema).equals(untouched)
    extra = pa.record_batch({"id": [1], "other": [1]})
    assert pad_batch(extra, schema).schema.names == ["id", "s", "v", "other"]  # left to refuse


def test_merge_schema_option() -> None:
    write = Use.WRITE
    assert Settings.parse({"path": "/t", "mergeSchema": "true"}, write).merge_schema()
    assert not Settings.parse({"path": "/t"}, write).merge_schema()
    merged = Settings.parse({"path": "/t", "mergeSchema": "true"}, write)
    assert "mergeschema" not in merged.format_options
    with pytest.raises(at.InvalidOptionError, match="mergeSchema"):
        Settings.parse({"path": "/t", "mergeSchema": "yes"}, write)
    with pytest.raises(at.InvalidOptionError, match="not both"):
        Settings.parse({"path": "/t", "scan.tag-name": "a", "scan.timestamp-millis": "1"}, Use.READ)
