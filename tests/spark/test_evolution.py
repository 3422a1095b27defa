"""The Spark adapter across schema changes (marker ``spark``).

* ``mergeSchema`` on every write path (``write_table`` through Spark's Parquet writer and
  through the Python writer, the format writer, ``foreach_batch_sink``, the streaming sink):
  new columns and struct fields are added, missing ones written as nulls, and the table holds
  exactly the rows of a model; without it a differing DataFrame changes nothing.
* Time travel (``scan.snapshot-id``, ``scan.timestamp-millis``, ``scan.tag-name``) returns
  the snapshot's schema through the format and through ``read_table``'s native path, across
  renames, drops, re-adds under an old name and widenings.
* A Structured Streaming query keeps its start schema across changes, and a restart with the
  same checkpoint sees the new columns, with nothing lost or repeated.

DataFrames come from ``spark.range`` and friends, whose columns Spark marks NOT NULL.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

appendtable_spark = pytest.importorskip("appendtable_spark")
F = pytest.importorskip("pyspark.sql.functions")


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


Row = dict[str, Any]


def _by_id(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: row["id"])


def _spark_rows(df: Any) -> list[Row]:
    return _by_id([row.asDict(recursive=True) for row in df.collect()])


def _table_rows(table: at.Table, **scan: Any) -> list[Row]:
    return _by_id(table.scan(**scan).to_arrow().to_pylist())


def _data_files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*.parquet")
        if "_staging" not in p.relative_to(root).parts
    }


def _referenced(table: at.Table) -> set[str]:
    return {p for s in table.snapshots() for p in table.files(s.id).column("path").to_pylist()}


def _assert_files_hold_their_schema(table: at.Table, root: Path) -> None:
    """Every live file holds exactly the columns (and struct fields) of the schema version it
    is recorded with: files are read by that version's names."""
    schemas = table.schemas()
    for split in table.scan().plan():
        for file in split.files:
            recorded = schemas[file.schema_id]
            found = pq.read_schema(root / file.path)
            assert found.names == recorded.names, file.path
            for field in recorded:
                if pa.types.is_struct(field.type):
                    inner = found.field(field.name).type
                    assert [f.name for f in inner] == [f.name for f in field.type], file.path


# ---- mergeSchema on every write path -------------------------------------------------------

BASE = pa.schema(
    [
        ("part", pa.string()),
        ("id", pa.int64()),
        ("s", pa.struct([("x", pa.int64())])),
        ("keep", pa.string()),
        ("events", pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]))),
    ]
)
PATHS = ["native", "python", "format", "sink"]


def _writer(how: str, uri: str) -> Callable[..., None]:
    """One write of ``df`` on path ``how``; ``merge`` given as the keyword where there is one
    (``write_table`` native, ``foreach_batch_sink``) and as the option elsewhere."""

    def write(df: Any, *, merge: bool, identifier: int) -> None:
        if how == "native":
            appendtable_spark.write_table(df, uri, native=True, merge_schema=merge)
        elif how == "python":
            options = {"mergeSchema": "true"} if merge else {}
            appendtable_spark.write_table(df, uri, native=False, options=options)
        elif how == "format":
            writer = df.write.format("appendtable").mode("append")
            if merge:
                writer = writer.option("mergeSchema", "true")
            writer.save(uri)
        else:
            sink = appendtable_spark.foreach_batch_sink(
                uri, commit_user="evolution", merge_schema=merge
            )
            sink(df, identifier)
            sink(df, identifier)  # a replayed micro-batch: skipped

    return write


def _part(spark_id: Any) -> Any:
    return F.when(spark_id % 2 == 0, F.lit("a")).otherwise(F.lit("b"))


@pytest.mark.parametrize("how", PATHS)
def test_merge_schema_on_every_write_path(spark_at: Any, tmp_path: Path, how: str) -> None:
    root = tmp_path / "t"
    uri = str(root)
    table = at.create_table(
        uri, BASE, partition_by=["part"], options={"bucket": 2, "bucket-key": "id"}
    )
    table.append(
        pa.table(
            {
                "part": ["a", "b", "a"],
                "id": [0, 1, 2],
                "s": [{"x": 0}, {"x": 1}, None],
                "keep": ["k0", "k1", None],
                "events": [[{"a": 0, "b": "b0"}], None, []],
            },
            schema=BASE,
        )
    )
    model: list[Row] = [
        {"part": "a", "id": 0, "s": {"x": 0}, "keep": "k0", "events": [{"a": 0, "b": "b0"}]},
        {"part": "b", "id": 1, "s": {"x": 1}, "keep": "k1", "events": None},
        {"part": "a", "id": 2, "s": None, "keep": None, "events": []},
    ]
    write = _writer(how, uri)
    ids = F.col("id")
    # a new column, a new struct field (given before the old one), and "keep" missing
    wider = spark_at.range(100, 110).select(
        _part(ids).alias("part"),
        "id",
        F.struct((ids * 10).alias("y"), ids.alias("x")).alias("s"),
        F.concat(F.lit("e"), ids.cast("string")).alias("extra"),
    )
    assert not wider.schema["id"].nullable and not wider.schema["s"].nullable

    # without mergeSchema: refused, naming the column, and nothing changes
    before = (len(table.snapshots()), table.schema_id, _data_files(root))
    with pytest.raises(Exception, match="'extra'"):
        write(wider, merge=False, identifier=1)
    assert (len(table.snapshots()), table.schema_id, _data_files(root)) == before
    assert _table_rows(table) == model

    write(wider, merge=True, identifier=2)
    assert table.schema.names == ["part", "id", "s", "keep", "events", "extra"]
    assert table.schema.field("s").type == pa.struct([("x", pa.int64()), ("y", pa.int64())])
    assert all(table.schema.field(n).nullable for n in ("extra", "s"))
    for row in model:
        row["extra"] = None  # added after "events" (the table's last column)
        if row["s"] is not None:
            row["s"]["y"] = None
    model += [
        {
            "part": "a" if i % 2 == 0 else "b",
            "id": i,
            "s": {"x": i, "y": i * 10},
            "keep": None,
            "events": None,
            "extra": f"e{i}",
        }
        for i in range(100, 110)
    ]
    assert _table_rows(table) == _by_id(model)

    # merging what the table already has adds nothing; missing columns and fields are nulls
    narrower = spark_at.range(200, 204).select(
        "id",
        _part(ids).alias("part"),
        F.when(ids % 2 == 0, F.struct(ids.alias("x"))).alias("s"),  # a nullable struct
        F.lit("kept").alias("keep"),
    )
    write(narrower, merge=True, identifier=3)
    model += [
        {
            "part": "a" if i % 2 == 0 else "b",
            "id": i,
            "s": {"x": i, "y": None} if i % 2 == 0 else None,
            "keep": "kept",
            "events": None,
            "extra": None,
        }
        for i in range(200, 204)
    ]
    # the table's columns exactly, struct fields in another order (in lists too): matched by
    # name, never by position
    exact = spark_at.range(300, 303).select(
        F.struct((ids + 1).alias("y"), ids.alias("x")).alias("s"),
        F.lit("x").alias("extra"),
        "id",
        F.array(F.struct(F.lit("b").alias("b"), (ids * 2).alias("a"))).alias("events"),
        F.lit("k").alias("keep"),
        _part(ids).alias("part"),
    )
    write(exact, merge=False, identifier=4)
    model += [
        {
            "part": "a" if i % 2 == 0 else "b",
            "id": i,
            "s": {"x": i, "y": i + 1},
            "keep": "k",
            "events": [{"a": i * 2, "b": "b"}],
            "extra": "x",
        }
        for i in range(300, 303)
    ]
    table = at.open_table(uri)
    assert _table_rows(table) == _by_id(model)
    kinds = [s.kind for s in table.snapshots() if s.kind != at.CommitKind.COMPACT]
    assert kinds == [at.CommitKind.APPEND, at.CommitKind.ALTER] + [at.CommitKind.APPEND] * 3
    assert len(table.schemas()) == 2  # one ALTER: merges of nothing add no version
    _assert_files_hold_their_schema(table, root)
    assert _data_files(root) == _referenced(table)
    assert not list(root.glob("_staging/**/*.parquet"))
    # both Spark read paths agree with the model (old files read by field id)
    assert _spark_rows(spark_at.read.format("appendtable").load(uri)) == _by_id(model)
    assert _spark_rows(appendtable_spark.read_table(spark_at, uri)) == _by_id(model)


def test_merge_schema_refuses_what_it_cannot_fill(spark_at: Any, tmp_path: Path) -> None:
    """A required column the DataFrame lacks, or a type that does not cast: refused before
    anything is written, on every path, with mergeSchema too."""
    uri = str(tmp_path / "r")
    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int32()), ("v", pa.string())])
    table = at.create_table(uri, schema)
    table.append(pa.table({"id": [1], "n": pa.array([1], pa.int32()), "v": ["one"]}, schema))
    no_id = spark_at.range(3).select(F.col("id").cast("int").alias("n"))
    text_n = spark_at.range(3).select("id", F.lit("seven").alias("n"))
    for how in PATHS:
        write = _writer(how, uri)
        with pytest.raises(Exception, match="missing column 'id'"):
            write(no_id, merge=True, identifier=1)
        with pytest.raises(Exception, match="'n' has type string"):
            write(text_n, merge=True, identifier=1)
    assert len(table.snapshots()) == 1 and table.schema_id == 0
    assert _table_rows(table) == [{"id": 1, "n": 1, "v": "one"}]


def test_python_writer_tasks_see_a_schema_change_made_elsewhere(
    spark_at: Any, tmp_path: Path
) -> None:
    """Spark reuses Python workers, which cache open tables: a task must write the schema of
    now, not the one its worker saw in an earlier write."""
    uri = str(tmp_path / "w")
    at.create_table(uri, pa.schema([("id", pa.int64())]))
    for start in range(3):  # every worker caches the table at schema 0
        spark_at.range(start * 10, start * 10 + 10, numPartitions=2).write.format(
            "appendtable"
        ).mode("append").save(uri)
    with at.open_table(uri).update_schema() as update:
        update.rename_column("id", "key")
        update.add_column("v", pa.string())
    later = spark_at.range(30, 40, numPartitions=2).select(
        F.col("id").alias("key"), F.lit("v").alias("v")
    )
    later.write.format("appendtable").mode("append").save(uri)
    appendtable_spark.write_table(later.withColumn("key", F.col("key") + 10), uri, native=False)
    rows = _spark_rows(spark_at.read.format("appendtable").load(uri).withColumnRenamed("key", "id"))
    assert rows == [{"id": i, "v": None if i < 30 else "v"} for i in range(50)]


def test_stream_sink_merges_the_schema(spark_at: Any, tmp_path: Path) -> None:
    source_uri, sink_uri = str(tmp_path / "src"), str(tmp_path / "sink")
    source = at.create_table(
        source_uri,
        pa.schema([("id", pa.int64()), ("a", pa.string()), ("s", pa.struct([("x", pa.int32())]))]),
    )
    source.append(pa.table({"id": [1, 2], "a": ["a1", "a2"], "s": [{"x": 1}, None]}, source.schema))
    sink = at.create_table(sink_uri, pa.schema([("id", pa.int64()), ("old", pa.string())]))
    sink.append(pa.table({"id": [0], "old": ["o"]}, sink.schema))

    def run(checkpoint: str, **options: str) -> Any:
        writer = spark_at.readStream.format("appendtable").load(source_uri).writeStream
        for key, value in options.items():
            writer = writer.option(key, value)
        query = (
            writer.format("appendtable")
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start(sink_uri)
        )
        query.awaitTermination(120)
        return query

    with pytest.raises(Exception, match="'a' is not in the table schema"):
        run("c1").processAllAvailable()
    assert len(sink.snapshots()) == 1 and sink.schema_id == 0
    assert run("c2", mergeSchema="true").exception() is None
    assert sink.schema.names == ["id", "old", "a", "s"]
    assert _table_rows(sink) == [
        {"id": 0, "old": "o", "a": None, "s": None},
        {"id": 1, "old": None, "a": "a1", "s": {"x": 1}},
        {"id": 2, "old": None, "a": "a2", "s": None},
    ]


# ---- time travel -------------------------------------------------------------------------------


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _stream_rows(spark: Any, uri: str, checkpoint: Path, options: dict[str, object]) -> list[Row]:
    """The rows an ``availableNow`` streaming query with ``options`` delivers."""
    seen: list[Row] = []
    reader = spark.readStream.format("appendtable")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    query = (
        reader.load(uri)
        .writeStream.foreachBatch(
            lambda batch, _: seen.extend(row.asDict(recursive=True) for row in batch.collect())
        )
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return _by_id(seen)


def test_time_travel_has_the_snapshot_schema_on_both_read_paths(
    spark_at: Any, tmp_path: Path
) -> None:
    root = tmp_path / "tt"
    uri = str(root)
    schema = pa.schema(
        [("id", pa.int64()), ("a", pa.int32()), ("b", pa.string()), ("c", pa.string())]
    )
    table = at.create_table(uri, schema, options={"bucket": 2, "bucket-key": "id"})
    ids = F.col("id")
    table.append(
        pa.table(
            {"id": [0, 1], "a": pa.array([0, 1], pa.int32()), "b": ["b0", "b1"], "c": ["c0", "c1"]},
            schema,
        )
    )
    spark_rows = spark_at.range(2, 4).select(
        "id",
        ids.cast("int").alias("a"),
        F.concat(F.lit("b"), ids.cast("string")).alias("b"),
        F.concat(F.lit("c"), ids.cast("string")).alias("c"),
    )
    appendtable_spark.write_table(spark_rows, uri, native=True)  # Spark's own Parquet files
    all_schema_0 = table.latest_snapshot().id  # type: ignore[union-attr]
    with table.update_schema() as update:
        update.rename_column("b", "bee")
    spark_at.range(4, 6).select(
        "id",
        ids.cast("int").alias("a"),
        F.concat(F.lit("b"), ids.cast("string")).alias("bee"),
        F.concat(F.lit("c"), ids.cast("string")).alias("c"),
    ).write.format("appendtable").mode("append").save(uri)
    renamed = table.latest_snapshot().id  # type: ignore[union-attr]
    with table.update_schema() as update:
        update.drop_column("c")
    with table.update_schema() as update:
        update.add_column("c", pa.string())  # the old name, a new column
    appendtable_spark.write_table(
        spark_at.range(6, 8).select(
            "id",
            ids.cast("int").alias("a"),
            F.lit("b").alias("bee"),
            F.lit("new-c").alias("c"),
        ),
        uri,
    )
    readded = table.latest_snapshot().id  # type: ignore[union-attr]
    # streams from a snapshot: with scan.mode in the current schema, without it in the schema
    # of the snapshot the options name (like a batch time travel); later rows mapped onto it
    as_now = _stream_rows(
        spark_at, uri, tmp_path / "c1", {"scan.mode": "from-snapshot", "scan.snapshot-id": renamed}
    )
    assert as_now == [
        {"id": i, "a": i, "bee": f"b{i}" if i < 6 else "b", "c": None if i < 6 else "new-c"}
        for i in range(4, 8)
    ]
    as_then = _stream_rows(spark_at, uri, tmp_path / "c2", {"scan.snapshot-id": renamed})
    assert as_then == [
        {"id": i, "a": i, "bee": f"b{i}" if i < 6 else "b", "c": f"c{i}" if i < 6 else None}
        for i in range(4, 8)
    ]
    with table.update_schema() as update:
        update.update_column("a", type=pa.int64())
    appendtable_spark.write_table(
        spark_at.range(8, 9).select(
            "id", F.lit(2**40).alias("a"), F.lit("b").alias("bee"), F.lit("c").alias("c")
        ),
        uri,
    )
    widened = table.latest_snapshot().id  # type: ignore[union-attr]

    def format_read(**options: object) -> Any:
        reader = spark_at.read.format("appendtable")
        for key, value in options.items():
            reader = reader.option(key, str(value))
        return reader.load(uri)

    for snapshot in table.snapshots():
        expected = _table_rows(table, snapshot_id=snapshot.id)  # the core reads by field id
        names = table.scan(snapshot_id=snapshot.id).output_schema.names
        for df in (
            format_read(**{"scan.snapshot-id": snapshot.id}),
            appendtable_spark.read_table(spark_at, uri, snapshot_id=snapshot.id),
        ):
            assert df.columns == names, snapshot.id
            assert _spark_rows(df) == expected, snapshot.id
    # what each version looks like
    old = _spark_rows(format_read(**{"scan.snapshot-id": all_schema_0}))
    assert [r["b"] for r in old] == ["b0", "b1", "b2", "b3"]
    at_rename = _spark_rows(format_read(**{"scan.snapshot-id": renamed}))
    assert [r["bee"] for r in at_rename] == [f"b{i}" for i in range(6)]  # values kept
    at_readd = _spark_rows(appendtable_spark.read_table(spark_at, uri, snapshot_id=readded))
    assert [r["c"] for r in at_readd] == [None] * 6 + ["new-c"] * 2  # not the dropped values
    latest = format_read()
    assert latest.schema["a"].dataType.simpleString() == "bigint"
    assert [r["a"] for r in _spark_rows(latest)] == [*range(8), 2**40]
    old_int = format_read(**{"scan.snapshot-id": renamed})
    assert old_int.schema["a"].dataType.simpleString() == "int"
    assert _spark_rows(format_read(**{"scan.snapshot-id": widened})) == _table_rows(table)
    # by time: the newest snapshot at or before it, in its schema
    at_time = table.snapshot(renamed).time_ms
    expected_names = table.scan(timestamp_ms=at_time).output_schema.names
    by_time = format_read(**{"scan.timestamp-millis": at_time})
    assert by_time.columns == expected_names
    assert _spark_rows(by_time) == _table_rows(table, timestamp_ms=at_time)
    # filters and projections name the snapshot's columns
    assert _spark_rows(
        format_read(**{"scan.snapshot-id": renamed}).where("bee = 'b3'").select("id")
    ) == [{"id": 3}]
    assert _spark_rows(
        format_read(**{"scan.snapshot-id": all_schema_0, "columns": "id,b"}).where("id = 1")
    ) == [{"id": 1, "b": "b1"}]
    with pytest.raises(Exception, match="unknown column 'b'"):
        format_read(columns="id,b")
    # stream options (scan.mode) give the current schema, the snapshot's rows mapped onto it
    as_now = format_read(**{"scan.mode": "from-snapshot", "scan.snapshot-id": all_schema_0})
    assert as_now.columns == table.schema.names
    assert _spark_rows(as_now) == [{"id": i, "a": i, "bee": f"b{i}", "c": None} for i in range(4)]
    # the native path reads Spark's Parquet directly only where every file has the
    # snapshot's schema version; otherwise the Python source maps the files by field id
    assert "FileScan parquet" in _plan(appendtable_spark.read_table(spark_at, uri, snapshot_id=1))
    mixed = _plan(appendtable_spark.read_table(spark_at, uri, snapshot_id=readded))
    assert "FileScan parquet" not in mixed and "(Python)" in mixed
    table.compact(full=True)  # every file rewritten in the current schema version
    compacted = appendtable_spark.read_table(spark_at, uri)
    assert "FileScan parquet" in _plan(compacted)
    assert _spark_rows(compacted) == _table_rows(table)


def test_tag_reads_keep_the_tagged_schema_after_expiration(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "tags")
    table = at.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.string())]))
    table.append(pa.table({"id": [0, 1], "v": ["v0", "v1"]}, table.schema))
    tagged = table.create_tag("release-1")
    with table.update_schema() as update:
        update.rename_column("v", "w")
        update.add_column("z", pa.int64())
    for start in (2, 4):
        appendtable_spark.write_table(
            spark_at.range(start, start + 2).select(
                "id", F.lit("w").alias("w"), F.col("id").alias("z")
            ),
            uri,
        )
    # a stream starting at the tag (while its snapshot is in the log)
    streamed = _stream_rows(
        spark_at,
        uri,
        tmp_path / "c",
        {"scan.tag-name": "release-1", "scan.mode": "from-snapshot-full"},
    )
    assert streamed == [
        {"id": i, "w": f"v{i}" if i < 2 else "w", "z": None if i < 2 else i} for i in range(6)
    ]
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=int(time.time() * 1000) + 1)
    with pytest.raises(at.SnapshotExpiredError):
        table.snapshot(tagged.id)  # only the tag keeps it readable
    expected = [{"id": 0, "v": "v0"}, {"id": 1, "v": "v1"}]
    via_format = spark_at.read.format("appendtable").option("scan.tag-name", "release-1").load(uri)
    assert via_format.columns == ["id", "v"]
    assert _spark_rows(via_format) == expected
    assert _spark_rows(via_format.where("v = 'v1'")) == expected[1:]
    native = appendtable_spark.read_table(spark_at, uri, tag="release-1")
    assert native.columns == ["id", "v"] and _spark_rows(native) == expected
    latest = spark_at.read.format("appendtable").load(uri)
    assert latest.columns == ["id", "w", "z"] and latest.count() == 6
    with pytest.raises(Exception, match="not both"):
        spark_at.read.format("appendtable").option("scan.tag-name", "release-1").option(
            "scan.snapshot-id", "1"
        ).load(uri)
    with pytest.raises(Exception, match="release-2"):
        spark_at.read.format("appendtable").option("scan.tag-name", "release-2").load(uri)
    # a DataFrame defined on a tag that then moves to another snapshot refuses to plan again
    table.delete_tag("release-1")
    table.create_tag("release-1")
    with pytest.raises(Exception, match="load it again"):
        via_format.where("id > 0").collect()


# ---- Structured Streaming across schema changes ----------------------------------------------


def test_stream_keeps_its_start_schema_and_a_restart_sees_new_columns(
    spark_at: Any, tmp_path: Path
) -> None:
    uri, sink_uri = str(tmp_path / "src"), str(tmp_path / "sink")
    checkpoint = str(tmp_path / "checkpoint")
    schema = pa.schema(
        [("id", pa.int64()), ("n", pa.int32()), ("name", pa.string()), ("gone", pa.string())]
    )
    table = at.create_table(uri, schema, options={"bucket": 2, "bucket-key": "id"})

    def rows(start: int, count: int, **columns: Callable[[int], object]) -> pa.Table:
        ids = range(start, start + count)
        data: dict[str, Any] = {"id": pa.array(ids, pa.int64())}
        data.update({name: [make(i) for i in ids] for name, make in columns.items()})
        return pa.table(data)

    table.append(
        rows(0, 10, n=lambda i: i, name=lambda i: f"n{i}", gone=lambda i: f"g{i}").cast(schema)
    )
    runs: list[list[Row]] = []
    sink = appendtable_spark.foreach_batch_sink(sink_uri, merge_schema=True)

    def handle(batch: Any, batch_id: int) -> None:
        runs[-1].extend(row.asDict() for row in batch.collect())
        sink(batch, batch_id)

    def start(*, available_now: bool = False) -> Any:
        runs.append([])
        writer = (
            spark_at.readStream.format("appendtable")
            .load(uri)
            .writeStream.foreachBatch(handle)
            .option("checkpointLocation", checkpoint)
        )
        if available_now:
            query = writer.trigger(availableNow=True).start()
            query.awaitTermination(120)
            assert query.exception() is None
            return query
        return writer.trigger(processingTime="100 milliseconds").start()

    # 1. a running query crosses a rename, a drop and an add: rows keep the start schema
    query = start()
    query.processAllAvailable()
    with table.update_schema() as update:
        update.rename_column("name", "title")
        update.drop_column("gone")
        update.add_column("extra", pa.string())
    table.append(rows(10, 10, n=lambda i: i, title=lambda i: f"t{i}", extra=lambda i: f"x{i}"))
    ids = F.col("id")
    appendtable_spark.write_table(
        spark_at.range(20, 30).select(
            "id",
            ids.cast("int").alias("n"),
            F.concat(F.lit("t"), ids.cast("string")).alias("title"),
            F.concat(F.lit("x"), ids.cast("string")).alias("extra"),
        ),
        uri,
    )
    query.processAllAvailable()
    query.stop()
    assert _by_id(runs[0]) == [
        {
            "id": i,
            "n": i,
            "name": f"n{i}" if i < 10 else f"t{i}",  # renamed: under its start name
            "gone": f"g{i}" if i < 10 else None,  # dropped: null in later files
        }  # added: absent
        for i in range(30)
    ]

    # 2. restarted with the same checkpoint: the new schema, only the new rows
    table.append(rows(30, 5, n=lambda i: i, title=lambda i: f"t{i}", extra=lambda i: f"x{i}"))
    start(available_now=True)
    assert _by_id(runs[1]) == [
        {"id": i, "n": i, "title": f"t{i}", "extra": f"x{i}"} for i in range(30, 35)
    ]

    # 3. a widened column: a value the start type cannot hold fails the running query (no
    # row is delivered in the wrong type); the restart reads it in the new type
    query = start()
    query.processAllAvailable()
    with table.update_schema() as update:
        update.update_column("n", type=pa.int64())
    with at.open_table(sink_uri).update_schema() as update:
        update.update_column("n", type=pa.int64())
    table.append(rows(35, 2, n=lambda i: 2**40 + i, title=lambda i: f"t{i}", extra=str))
    with pytest.raises(Exception):  # noqa: B017 (Spark wraps the reader's error)
        query.processAllAvailable()
    query.stop()
    assert runs[2] == []
    start(available_now=True)
    assert _by_id(runs[3]) == [
        {"id": i, "n": 2**40 + i, "title": f"t{i}", "extra": str(i)} for i in (35, 36)
    ]

    # every row exactly once across the restarts, in the source and in the merged sink
    delivered = sorted(row["id"] for run in runs for row in run)
    assert delivered == list(range(37))
    sink_table = at.open_table(sink_uri)
    assert sink_table.schema.names == ["id", "n", "name", "gone", "title", "extra"]
    assert sorted(sink_table.scan().to_arrow().column("id").to_pylist()) == list(range(37))
    assert [r["name"] for r in _table_rows(sink_table)] == [
        f"n{i}" if i < 10 else f"t{i}" if i < 30 else None for i in range(37)
    ]


def test_a_stream_started_without_a_mode_keeps_its_snapshots_schema_until_restarted_with_one(
    spark_at: Any, tmp_path: Path
) -> None:
    """``scan.snapshot-id`` alone reads like time travel: that snapshot's schema, at every
    restart too (the options are read again); a restart with ``scan.mode`` added continues
    from the checkpoint in the current schema. Every row once, in the right column."""
    uri, checkpoint = str(tmp_path / "t"), str(tmp_path / "checkpoint")
    table = at.create_table(uri, pa.schema([("id", pa.int64()), ("s", pa.string())]))
    table.append(pa.table({"id": [0, 1], "s": ["s0", "s1"]}))
    runs: list[tuple[list[str], list[Row]]] = []

    def run(**options: str) -> None:
        query = (
            spark_at.readStream.format("appendtable")
            .options(**{"scan.snapshot-id": "1", **options})
            .load(uri)
            .writeStream.foreachBatch(
                lambda df, _id: runs.append((df.columns, [r.asDict() for r in df.collect()]))
            )
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    with table.update_schema() as update:
        update.rename_column("s", "s2")
        update.add_column("c", pa.string())
    table.append(pa.table({"id": [2], "s2": ["s2"], "c": ["c2"]}))
    run()  # the same options: still snapshot 1's schema, the new row mapped onto it
    table.append(pa.table({"id": [3], "s2": ["s3"], "c": ["c3"]}))
    run(**{"scan.mode": "from-snapshot"})
    assert runs == [
        (["id", "s"], [{"id": 0, "s": "s0"}, {"id": 1, "s": "s1"}]),
        (["id", "s"], [{"id": 2, "s": "s2"}]),
        (["id", "s2", "c"], [{"id": 3, "s2": "s3", "c": "c3"}]),
    ]
