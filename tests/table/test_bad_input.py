"""Bad input gets a specific error naming the culprit, and nothing becomes visible."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.data import EVENTS, events

STRICT = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("small", pa.int16()),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)


def _good(rows: int = 3) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "small": pa.array([1] * rows, pa.int16()),
            "name": ["x"] * rows,
            "ts": pa.array([0] * rows, pa.timestamp("us", tz="UTC")),
        },
        schema=STRICT,
    )


def _data_files(table: at.Table) -> list[str]:
    root = table.uri
    if "://" in root:
        return []
    found = []
    for directory, _dirs, names in os.walk(root):
        found.extend(os.path.join(directory, n) for n in names if n.endswith(".parquet"))
    return found


@pytest.mark.parametrize(
    ("change", "column", "message"),
    [
        (lambda t: t.drop_columns(["name"]), "name", "missing column 'name'"),
        (lambda t: t.append_column("extra", pa.array([1, 2, 3])), "extra", "'extra' is not in"),
        (
            lambda t: t.set_column(0, "id", pa.array(["1", "2", "3"])),
            "id",
            "cannot be safely cast",
        ),
        (
            lambda t: t.set_column(1, "small", pa.array([1, 2, 70000], pa.int64())),
            "small",
            "do not fit",
        ),
        (
            lambda t: t.set_column(0, "id", pa.array([1, None, 3], pa.int64())),
            "id",
            "not nullable",
        ),
        (
            lambda t: t.set_column(3, "ts", pa.array([0, 1, 2], pa.timestamp("us"))),
            "ts",
            "cannot be safely cast",
        ),
        (
            lambda t: t.set_column(1, "small", pa.array([1.5, 2.0, 3.0])),
            "small",
            "cannot be safely cast",
        ),
    ],
)
def test_bad_batches_are_rejected_and_nothing_lands(
    uri: str, change: object, column: str, message: str
) -> None:
    table = at.create_table(uri, STRICT)
    table.append(_good())
    files_before = _data_files(table)
    bad = change(_good())  # type: ignore[operator]
    with pytest.raises(at.SchemaMismatchError, match=message) as caught:
        table.append(bad)
    assert caught.value.column == column
    assert column in str(caught.value)
    assert table.latest_snapshot().id == 1  # type: ignore[union-attr]
    assert table.scan().count() == 3
    assert _data_files(table) == files_before


def test_safe_casts_are_accepted(uri: str) -> None:
    table = at.create_table(uri, STRICT)
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),  # widening
            "small": pa.array([3, 4], pa.int8()),
            "name": pa.array(["a", "b"], pa.large_string()),
            "ts": pa.array([1, 2], pa.timestamp("ms", tz="Europe/Paris")),  # same instants
        }
    )
    table.append(data.select(["ts", "name", "small", "id"]))  # any column order
    result = table.scan().to_arrow()
    assert result.schema == STRICT
    assert (
        result.column("ts").to_pylist()
        == pa.array([1000, 2000], pa.timestamp("us", tz="UTC")).to_pylist()
    )


def test_failure_in_the_middle_of_a_multi_batch_write_lands_nothing(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    good = events(0, 100).to_batches()[0]
    bad = pa.RecordBatch.from_pydict({"oops": [1]})
    with pytest.raises(at.SchemaMismatchError):
        table.append([good, bad])
    assert table.latest_snapshot() is None


def test_writer_abort_deletes_its_files(tmp_path: object) -> None:
    table = at.create_table(str(tmp_path) + "/t", EVENTS)
    with table.writer() as writer:
        writer.write(events(0, 100))
        messages = writer.prepare_commit()
    assert len(_data_files(table)) == 1
    table.committer("job").abort(messages)
    assert _data_files(table) == []
    with pytest.raises(ValueError, match="boom"), table.writer() as writer:
        writer.write(events(0, 100))
        raise ValueError("boom")
    assert _data_files(table) == []
    assert table.latest_snapshot() is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bucket": 4}, "needs 'bucket-key'"),
        ({"bucket-key": "key"}, "needs a fixed number of buckets"),
        ({"bucket": 0, "bucket-key": "key"}, "must be -1"),
        ({"bucket": 2, "bucket-key": "nope"}, "column 'nope'"),
        ({"bucket": 2, "bucket-key": "day"}, "is a partition column"),
        ({"buckets": 2}, "did you mean 'bucket'"),
        ({"target-file-size": "lots"}, "target-file-size"),
        ({"snapshot.time-retained": "5 fortnights"}, "snapshot.time-retained"),
        ({"full-compaction.delta-commits": 3}, "bucketed tables only"),
    ],
)
def test_bad_options_at_create(uri: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(at.InvalidOptionError, match=message):
        at.create_table(uri, EVENTS, partition_by=["day"], options=options)
    with pytest.raises(at.TableNotFoundError):
        at.open_table(uri)


def test_bad_table_definitions(uri: str) -> None:
    with pytest.raises(at.InvalidSchemaError, match="partition column 'nope'"):
        at.create_table(uri, EVENTS, partition_by=["nope"])
    with pytest.raises(at.InvalidSchemaError, match="floating-point"):
        at.create_table(uri, EVENTS, partition_by=["value"])
    nested = pa.schema([("k", pa.list_(pa.int64())), ("v", pa.int64())])
    with pytest.raises(at.InvalidSchemaError, match="bucket key column 'k'"):
        at.create_table(uri, nested, options={"bucket": 2, "bucket-key": "k"})
    with pytest.raises(at.InvalidSchemaError, match="duplicate column"):
        at.create_table(uri, pa.schema([("a", pa.int64()), ("a", pa.int32())]))
    with pytest.raises(at.InvalidSchemaError, match="watermark column"):
        at.create_table(uri, EVENTS, options={"watermark.column": "name"})


def test_sizes_and_durations_parse(uri: str) -> None:
    table = at.create_table(
        uri,
        EVENTS,
        options={"target-file-size": "128 MB", "snapshot.time-retained": "10 s", "bucket": -1},
    )
    assert table.options["target-file-size"] == "128 MB"


BAD_DECIMALS = [pa.decimal128(2, 3), pa.decimal128(5, -2), pa.decimal256(40, 2)]


@pytest.mark.parametrize("dtype", BAD_DECIMALS, ids=str)
def test_decimals_parquet_cannot_store_are_refused_at_definition(
    uri: str, dtype: pa.DataType
) -> None:
    """``decimal(2, 3)`` (scale above precision) and negative scales could be created, but no
    row could ever be written (StorageError from the Parquet writer). Refused when defined,
    at the top level or nested, naming the column; in a schema change as SchemaChangeError."""
    for schema, column in (
        (pa.schema([("d", dtype)]), "d"),
        (pa.schema([("id", pa.int64()), ("s", pa.struct([("x", pa.list_(dtype))]))]), "s"),
    ):
        with pytest.raises(at.InvalidSchemaError, match=r"column '[sd][.x]*") as caught:
            at.create_table(uri, schema)
        assert caught.value.column == column
    table = at.create_table(uri, pa.schema([("id", pa.int64())]))
    with pytest.raises(at.SchemaChangeError, match="column 'd'") as change:
        table.update_schema().add_column("d", dtype).commit()
    assert change.value.column == "d"
    values = pa.array([None], dtype)
    with pytest.raises(at.SchemaChangeError, match="column 'd'") as merge:
        table.append(pa.table({"id": [1], "d": values}), schema_mode="merge")
    assert merge.value.column == "d"
    assert table.latest_snapshot() is None  # nothing landed
    assert table.scan().count() == 0


@pytest.mark.parametrize(
    ("column", "mirror"),
    [
        (pa.nulls(1), False),
        (pa.array([1], pa.uint64()), True),
        (pa.array([1], pa.duration("s")), True),
        (pa.array([1.0], pa.float16()), True),
        (pa.array([{"u": 1}], pa.struct([("u", pa.uint64())])), True),
    ],
    ids=["null", "uint64-mirrored", "duration-mirrored", "float16-mirrored", "nested-mirrored"],
)
def test_merge_mode_names_the_column_it_cannot_add(
    uri: str, column: pa.Array, mirror: bool
) -> None:
    """A merge-mode append of a column the table cannot hold raised InvalidSchemaError with
    ``.column`` None; docs/errors.md promises SchemaChangeError naming the column."""
    options = {"metadata.iceberg.storage": "table-location"} if mirror else {}
    table = at.create_table(uri, pa.schema([("id", pa.int64())]), options=options)
    with pytest.raises(at.SchemaChangeError, match="column 'c'") as caught:
        table.append(pa.table({"id": [1], "c": column}), schema_mode="merge")
    assert caught.value.column == "c"
    assert table.scan().count() == 0
    assert table.schema.names == ["id"]
