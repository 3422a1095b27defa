"""The Spark adapter against a real local Spark session (marker ``spark``)."""

from __future__ import annotations

import collections
import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.table import StaticTable

import appendtable as at
from appendtable.planning.bucket import bucket_ids
from tests.helpers.clock import past_every_file_ms
from tests.helpers.data import sorted_rows

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


EVENTS = pa.schema(
    [
        ("day", pa.date32()),
        ("key", pa.int64()),
        ("seq", pa.int64()),
        ("name", pa.string()),
    ]
)


def _events(start: int, rows: int, days: int = 2) -> pa.Table:
    return pa.table(
        {
            "day": pa.array(
                [dt.date(2024, 1, 1) + dt.timedelta(days=i % days) for i in range(rows)],
                pa.date32(),
            ),
            "key": pa.array([(start + i) * 7 % 11 for i in range(rows)], pa.int64()),
            "seq": pa.array(range(start, start + rows), pa.int64()),
            "name": [f"n{i}" for i in range(start, start + rows)],
        },
        schema=EVENTS,
    )


def test_batch_read_of_every_type(spark_at: Any, tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("i8", pa.int8()),
            ("u32", pa.uint32()),
            ("u64", pa.uint64()),
            ("f", pa.float32()),
            ("s", pa.large_string()),
            ("b", pa.binary()),
            ("d", pa.date32()),
            ("ts_utc", pa.timestamp("us", tz="UTC")),
            ("ts_ny", pa.timestamp("ms", tz="America/New_York")),
            ("ts_ntz", pa.timestamp("ns")),
            ("dec", pa.decimal128(20, 4)),
            ("tags", pa.list_(pa.string())),
            ("point", pa.struct([("x", pa.int32()), ("y", pa.float64())])),
            ("attrs", pa.map_(pa.string(), pa.int64())),
        ]
    )
    row = {
        "i8": -3,
        "u32": 4_000_000_000,
        "u64": 2**63 + 5,
        "f": 1.5,
        "s": "ünïcode",
        "b": b"\x00\x01",
        "d": dt.date(2024, 2, 29),
        "ts_utc": dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC),
        "ts_ny": dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC),
        "ts_ntz": dt.datetime(2024, 1, 1, 8, 30),
        "dec": decimal.Decimal("12345.6789"),
        "tags": ["a", "b"],
        "point": {"x": 1, "y": 2.5},
        "attrs": [("k", 1)],
    }
    uri = str(tmp_path / "types")
    table = at.create_table(uri, schema)
    table.append(pa.Table.from_pylist([row], schema=schema))
    df = spark_at.read.format("appendtable").load(uri)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["u32"] == "bigint" and types["u64"] == "decimal(20,0)"
    assert types["ts_utc"] == "timestamp" and types["ts_ntz"] == "timestamp_ntz"
    assert types["attrs"] == "map<string,bigint>"
    got = df.collect()[0].asDict(recursive=True)
    assert got["u64"] == decimal.Decimal(2**63 + 5)
    assert got["s"] == "ünïcode" and got["dec"] == decimal.Decimal("12345.6789")
    assert got["ts_ntz"] == dt.datetime(2024, 1, 1, 8, 30)
    assert got["tags"] == ["a", "b"] and got["point"] == {"x": 1, "y": 2.5}
    assert got["attrs"] == {"k": 1}


def test_batch_round_trip_pinning_time_travel_and_pruning(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 4, "bucket-key": "key"}
    )
    table.append(_events(0, 500))
    df = spark_at.read.format("appendtable").load(uri)  # pins snapshot 1
    table.append(_events(500, 500))
    assert df.count() == 500
    assert df.filter("key >= 0").count() == 500  # re-planned scans stay on the pinned snapshot
    assert spark_at.read.format("appendtable").load(uri).count() == 1000
    old = spark_at.read.format("appendtable").option("scan.snapshot-id", "1").load(uri)
    assert old.count() == 500
    point = spark_at.read.format("appendtable").load(uri).filter("key = 3 AND day = '2024-01-02'")
    rows = sorted(r.seq for r in point.collect())
    expected = sorted(
        r["seq"]
        for r in table.scan().to_arrow().to_pylist()
        if r["key"] == 3 and r["day"] == dt.date(2024, 1, 2)
    )
    assert rows == expected


def test_batch_write_append_overwrite_and_create(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "w")
    source = spark_at.createDataFrame(_events(0, 300).to_pandas())
    appendtable_spark.write_table(
        source,
        uri,
        options={"bucket": 3, "bucket-key": "key"},
        partition_by=["day"],
    )
    table = at.open_table(uri)
    assert table.partition_by == ["day"] and table.bucket == 3
    snapshots = table.snapshots()
    assert len(snapshots) == 1 and snapshots[0].kind == at.CommitKind.APPEND  # one snapshot
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(300))
    # the Spark-side bucketing equals the core's: each file holds rows of its own bucket only
    for split in table.scan().plan():
        keys = pa.concat_tables([pa.Table.from_batches([b]) for b in table.read(split)])
        assert set(bucket_ids([keys.column("key")], 3).tolist()) == {split.bucket}
    spark_at.createDataFrame(_events(1000, 10).to_pandas()).write.format("appendtable").mode(
        "overwrite"
    ).save(uri)
    assert sorted(at.open_table(uri).scan().to_arrow().column("seq").to_pylist()) == list(
        range(1000, 1010)
    )
    assert at.open_table(uri).latest_snapshot().kind == at.CommitKind.OVERWRITE  # type: ignore[union-attr]


def test_batch_write_rejects_mismatched_schemas_before_writing(
    spark_at: Any, tmp_path: Path
) -> None:
    uri = str(tmp_path / "strict")
    at.create_table(uri, EVENTS)
    wrong = spark_at.createDataFrame(
        [("2024-01-01", "7", 1, "x")], "day string, key string, seq long, name string"
    )
    with pytest.raises(Exception, match="cannot be safely cast"):
        wrong.write.format("appendtable").mode("append").save(uri)
    extra = spark_at.createDataFrame(_events(0, 2).to_pandas()).withColumnRenamed("name", "nom")
    with pytest.raises(Exception, match="'nom' is not in the table schema"):
        extra.write.format("appendtable").mode("append").save(uri)
    assert at.open_table(uri).latest_snapshot() is None
    assert not list((tmp_path / "strict").glob("**/*.parquet"))


def test_failed_task_leaves_no_visible_rows_and_no_files(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "fail")
    at.create_table(uri, pa.schema([("id", pa.int64(), False), ("v", pa.int64())]))
    ok = spark_at.range(0, 10).selectExpr("id", "id AS v")
    ok.write.format("appendtable").mode("append").save(uri)
    nulls = spark_at.range(0, 1000, numPartitions=4).selectExpr(
        "CASE WHEN id = 900 THEN NULL ELSE id END AS id", "id AS v"
    )
    with pytest.raises(Exception, match="not nullable"):
        nulls.write.format("appendtable").mode("append").save(uri)
    table = at.open_table(uri)
    assert table.scan().count() == 10
    root = tmp_path / "fail"
    referenced = {Path(p).name for p in table.files().column("path").to_pylist()}
    outside = {p.name for p in root.glob("**/*.parquet") if "_staging" not in p.parts}
    assert outside == referenced  # tasks wrote only into the write's staging area
    # the failed write removed its area; a task Spark is still killing may write into it
    # afterwards, and nowhere else: orphan removal reclaims such stragglers
    stragglers = {str(p.relative_to(root)) for p in root.glob("_staging/**/*.parquet")}
    removed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert stragglers <= set(removed.files)
    assert table.scan().count() == 10


def test_stream_read_keeps_bucket_order_and_respects_limits(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "s")
    table = at.create_table(
        uri, EVENTS, options={"bucket": 2, "bucket-key": "key", "write-only": True}
    )
    for i in range(6):
        table.append(_events(i * 50, 50))
    table.compact(full=True)  # a COMPACT snapshot in the middle must not re-emit rows
    table.append(_events(300, 50))
    seen: list[tuple[int, int, int]] = []

    def collect(batch: Any, batch_id: int) -> None:
        seen.extend((batch_id, r.key, r.seq) for r in batch.collect())

    query = (
        spark_at.readStream.format("appendtable")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", "1")
        .option("consumer-id", "spark-reader")
        .option("maxFilesPerTrigger", "3")
        .load(uri)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert sorted(s for _, _, s in seen) == list(range(350))  # nothing twice, nothing lost
    assert len({b for b, _, _ in seen}) >= 3  # admission control split it into micro-batches
    by_bucket: dict[int, list[int]] = {}
    keys = pa.array([k for _, k, _ in seen], pa.int64())
    for (_, _, seq), bucket in zip(seen, bucket_ids([keys], 2).tolist(), strict=True):
        by_bucket.setdefault(bucket, []).append(seq)
    for seqs in by_bucket.values():
        assert seqs == sorted(seqs)  # per-bucket write order within and across micro-batches
    # a second run resumes from the checkpoint: only new rows
    table.append(_events(350, 20))
    seen.clear()
    query = (
        spark_at.readStream.format("appendtable")
        .option("consumer-id", "spark-reader")
        .load(uri)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert sorted(s for _, _, s in seen) == list(range(350, 370))
    assert "spark-reader" in at.open_table(uri).consumers()


def test_stream_sink_and_foreach_batch_are_idempotent(spark_at: Any, tmp_path: Path) -> None:
    source_uri, sink_uri, fb_uri = (str(tmp_path / n) for n in ("src", "sink", "fb"))
    source = at.create_table(source_uri, EVENTS, options={"write-only": True})
    for i in range(3):
        source.append(_events(i * 10, 10))
    stream = (
        spark_at.readStream.format("appendtable")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", "1")
    )
    sink = (
        stream.load(source_uri)
        .writeStream.format("appendtable")
        .option("checkpointLocation", str(tmp_path / "c1"))
        .trigger(availableNow=True)
        .start(sink_uri)
    )
    sink.awaitTermination(120)
    fb = (
        stream.load(source_uri)
        .writeStream.foreachBatch(appendtable_spark.foreach_batch_sink(fb_uri))
        .option("checkpointLocation", str(tmp_path / "c2"))
        .trigger(availableNow=True)
        .start()
    )
    fb.awaitTermination(120)
    for uri in (sink_uri, fb_uri):
        table = at.open_table(uri)
        assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(30))
        users = {s.commit_user for s in table.snapshots()}
        assert len(users) == 1 and next(iter(users)).startswith("spark-query-")
    # outside foreachBatch (no query id) and without commit_user it refuses to guess
    with pytest.raises(at.InvalidArgumentError, match="commit_user"):
        appendtable_spark.foreach_batch_sink(fb_uri)(
            spark_at.createDataFrame(_events(0, 1).to_pandas()), 9
        )
    # batch 0 again, outside the query: the sink cannot tell a replay from another query's
    # first batch, so it refuses and writes nothing
    table = at.open_table(fb_uri)
    user = table.latest_snapshot().commit_user  # type: ignore[union-attr]
    replay = spark_at.createDataFrame(_events(0, 10).to_pandas())
    with pytest.raises(at.CommitUserReusedError, match="checkpoint_location"):
        appendtable_spark.foreach_batch_sink(fb_uri, commit_user=user)(replay, 0)
    assert at.open_table(fb_uri).scan().count() == 30
    # told the query's checkpoint, it knows the query: replaying its batch 0 is a no-op
    knowing = appendtable_spark.foreach_batch_sink(
        fb_uri, commit_user=user, checkpoint_location=str(tmp_path / "c2")
    )
    knowing(replay, 0)
    assert at.open_table(fb_uri).scan().count() == 30


def test_temp_view_and_distributed_compaction(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "v")
    table = at.create_table(uri, EVENTS, partition_by=["day"], options={"write-only": True})
    for i in range(6):
        table.append(_events(i * 20, 20))
    appendtable_spark.create_temp_view(spark_at, "events_view", uri)
    total = spark_at.sql("SELECT count(*) AS n, max(seq) AS m FROM events_view").collect()[0]
    assert (total.n, total.m) == (120, 119)
    spark_at.sql("INSERT INTO events_view SELECT day, key, seq + 1000, name FROM events_view")
    assert at.open_table(uri).scan().count() == 240
    snapshot = appendtable_spark.compact(spark_at, uri)
    assert snapshot is not None and snapshot.kind == at.CommitKind.COMPACT
    assert at.open_table(uri).files().num_rows == 2
    seqs = sorted(at.open_table(uri).scan().to_arrow().column("seq").to_pylist())
    assert seqs == list(range(120)) + list(range(1000, 1120))


def test_distributed_compaction_plans_again_after_a_conflict(
    spark_at: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent change to the planned files (here another writer's compaction, as a
    table's own background maintenance after a delete does) makes ``compact`` plan again,
    up to ``COMPACT_ATTEMPTS`` times; nothing is lost or doubled."""
    uri = str(tmp_path / "c")
    table = at.create_table(uri, EVENTS, partition_by=["day"], options={"write-only": True})
    rival = at.open_table(uri)
    commit = at.Compactor.commit
    attempts: list[int] = []

    rivalling = False  # (the rival's own compaction commits through the same method)

    def rival_first(self: at.Compactor, messages: Any) -> Any:
        nonlocal rivalling
        if rivalling:
            return commit(self, messages)
        attempts.append(len(attempts) + 1)
        if len(attempts) < appendtable_spark.api.COMPACT_ATTEMPTS:  # the rival gets there first
            rivalling = True
            rival.append(_events(10_000 + len(attempts) * 100, 20))
            rival.compact(full=True)
            rival.append(_events(20_000 + len(attempts) * 100, 20))
            rivalling = False
        return commit(self, messages)

    monkeypatch.setattr(at.Compactor, "commit", rival_first)
    for i in range(6):
        table.append(_events(i * 20, 20))
    snapshot = appendtable_spark.compact(spark_at, uri, full=True)
    assert snapshot is not None and snapshot.kind == at.CommitKind.COMPACT
    assert attempts == [1, 2, 3]
    seqs = sorted(at.open_table(uri).scan().to_arrow().column("seq").to_pylist())
    expected = list(range(120)) + [
        base + n for k in (1, 2) for base in (10_000 + k * 100, 20_000 + k * 100) for n in range(20)
    ]
    assert seqs == sorted(expected)
    # every plan conflicting (a rival deletes a row of the planned files each time):
    # CommitConflictError after COMPACT_ATTEMPTS plans, the compaction applied nowhere
    attempts.clear()

    def rival_deletes(self: at.Compactor, messages: Any) -> Any:
        attempts.append(len(attempts) + 1)
        rival.delete([("seq", "=", len(attempts))])
        return commit(self, messages)

    monkeypatch.setattr(at.Compactor, "commit", rival_deletes)
    table.append(_events(40_000, 20))
    before = at.open_table(uri).snapshots()[-1].id
    with pytest.raises(at.CommitConflictError):
        appendtable_spark.compact(spark_at, uri, full=True)
    assert attempts == [1, 2, 3]
    after = at.open_table(uri)
    assert [s.kind for s in after.snapshots() if s.id > before] == [at.CommitKind.DELETE] * 3
    assert sorted(after.scan().to_arrow().column("seq").to_pylist()) == sorted(
        [q for q in expected if q not in (1, 2, 3)] + list(range(40_000, 40_020))
    )


def test_stream_write_sets_watermarks_for_bounded_reads(spark_at: Any, tmp_path: Path) -> None:
    schema = pa.schema([("event_time", pa.timestamp("us", tz="UTC")), ("seq", pa.int64())])
    source_uri, sink_uri = str(tmp_path / "ws"), str(tmp_path / "wt")
    source = at.create_table(source_uri, schema, options={"write-only": True})
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    for minute in range(4):  # one snapshot per minute of event time
        times = [base + dt.timedelta(minutes=minute, seconds=s) for s in range(10)]
        source.append(
            pa.table(
                {"event_time": times, "seq": range(minute * 10, minute * 10 + 10)}, schema=schema
            )
        )
    at.create_table(
        sink_uri,
        schema,
        options={"watermark.column": "event_time", "watermark.delay": "30 s", "write-only": True},
    )
    query = (
        spark_at.readStream.format("appendtable")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", "1")
        .option("maxFilesPerTrigger", "1")
        .load(source_uri)
        .writeStream.format("appendtable")
        .option("checkpointLocation", str(tmp_path / "wc"))
        .trigger(availableNow=True)
        .start(sink_uri)
    )
    query.awaitTermination(120)
    sink = at.open_table(sink_uri)
    marks = [s.watermark for s in sink.snapshots()]
    start_ms = int(base.timestamp() * 1000)
    assert marks == [start_ms + m * 60_000 + 9_000 - 30_000 for m in range(4)]  # max - delay
    bound = start_ms + 60_000  # ends before the snapshot whose watermark passes minute 1
    reader = sink.stream(mode="from-snapshot", snapshot_id=1, bounded_watermark=bound)
    rows = [r["seq"] for batch in reader for r in batch.to_pylist()]
    assert sorted(rows) == list(range(20)) and reader.finished


def test_native_read_path_matches_the_format(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "n")
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 2, "bucket-key": "key"}
    )
    table.append(_events(0, 200))
    table.append(_events(200, 200))
    via_format = spark_at.read.format("appendtable").load(uri)
    native = appendtable_spark.read_table(spark_at, uri)
    assert native.schema == via_format.schema
    assert sorted(r.seq for r in native.collect()) == sorted(r.seq for r in via_format.collect())
    flt = [("key", "in", [1, 2]), ("seq", ">=", 100)]
    picked = appendtable_spark.read_table(spark_at, uri, columns=["seq"], filter=flt)
    expected = sorted(r["seq"] for r in table.scan(filter=flt).to_arrow().to_pylist())
    assert sorted(r.seq for r in picked.collect()) == expected and picked.columns == ["seq"]
    old = appendtable_spark.read_table(spark_at, uri, snapshot_id=1)
    assert old.count() == 200
    nanos = pa.schema([("ts", pa.timestamp("ns")), ("v", pa.int64())])
    ns_uri = str(tmp_path / "ns")
    at.create_table(ns_uri, nanos).append(
        pa.table({"ts": pa.array([1, 2], pa.timestamp("ns")), "v": [1, 2]})
    )
    assert appendtable_spark.read_table(spark_at, ns_uri).count() == 2  # Python-source fallback


def _rows(table: at.Table) -> list[tuple[Any, ...]]:
    data = table.scan().to_arrow()
    return sorted(tuple(row.values()) for row in data.to_pylist())


def test_native_write_path_equals_the_format_writer(spark_at: Any, tmp_path: Path) -> None:
    """Spark's own Parquet writer carries the data; the table gets the same rows, types,
    layout and statistics as through the format's Python writer."""
    df = spark_at.sql(
        """SELECT date_add(DATE'2024-01-01', CAST(id % 3 AS INT)) AS day, id % 11 AS key,
                  id AS seq, concat('n', id) AS name, CAST(id % 100 AS TINYINT) AS tiny,
                  CAST(id / 7 AS DECIMAL(12, 3)) AS amount, CAST(id AS DECIMAL(30, 2)) AS big,
                  timestamp_seconds(id) AS ts, CAST(timestamp_seconds(id) AS TIMESTAMP_NTZ) AS ntz,
                  CAST(id AS FLOAT) AS f, id % 2 = 0 AS flag, CAST(id AS STRING) AS s,
                  CAST(concat('b', id) AS BINARY) AS bin, array(id, id + 1) AS arr,
                  map('k', id) AS m, named_struct('x', id, 'y', concat('y', id)) AS st,
                  IF(id % 5 = 0, NULL, id) AS maybe
           FROM range(0, 600)"""
    )
    native_uri, python_uri = str(tmp_path / "native"), str(tmp_path / "python")
    options = {"bucket": 3, "bucket-key": "key"}
    appendtable_spark.write_table(df, native_uri, options=options, partition_by=["day"])
    appendtable_spark.write_table(
        df, python_uri, options=options, partition_by=["day"], native=False
    )
    native, python = at.open_table(native_uri), at.open_table(python_uri)
    assert native.schema == python.schema
    assert _rows(native) == _rows(python) and len(_rows(native)) == 600
    (snapshot,) = native.snapshots()
    assert snapshot.kind == at.CommitKind.APPEND and snapshot.total_record_count == 600

    # one file per (partition, bucket), in the table's layout, holding only its bucket's rows
    def groups(table: at.Table) -> list[tuple[str, int]]:
        files = table.files()
        return sorted(zip(files["partition"].to_pylist(), files["bucket"].to_pylist(), strict=True))

    assert groups(native) == groups(python)
    for split in native.scan().plan():
        rows = pa.Table.from_batches(list(native.read(split)))
        assert set(bucket_ids([rows.column("key")], 3).tolist()) == {split.bucket}
        for file in split.files:
            assert file.path.startswith("day=") and f"/bucket-{split.bucket}/data-" in file.path
    # statistics came from the footers: the same pruning as the Python writer's files
    for flt in ([("seq", ">=", 590)], [("key", "=", 4)], [("name", "=", "n7")]):
        assert len(native.scan(filter=flt).plan()) == len(python.scan(filter=flt).plan())
        assert sorted(native.scan(filter=flt).to_arrow().column("seq").to_pylist()) == sorted(
            python.scan(filter=flt).to_arrow().column("seq").to_pylist()
        )
    assert not [p for p in (tmp_path / "native").rglob("*") if p.is_file() and "_staging" in str(p)]
    # streaming readers see each bucket in file order, the files in sequence order
    reader = native.stream(mode="from-snapshot", snapshot_id=1)
    streamed = 0
    while (unit := reader.poll()) is not None:
        streamed += sum(batch.num_rows for batch in reader.read(unit))
    assert streamed == 600


@pytest.mark.parametrize("adaptive", [False, True], ids=["aqe-off", "aqe-on"])
def test_bucketed_writes_put_every_row_in_its_bucket_one_task_per_bucket(
    spark_at: Any, tmp_path: Path, adaptive: bool
) -> None:
    """Both write paths of a bucketed table, unpartitioned and partitioned, with bucket counts
    that are and are not powers of two and keys of several types: no row is lost or
    duplicated, every file holds only its bucket's rows, and each bucket is written by exactly
    one task (task b for bucket b), so a write adds one file per (partition, bucket)."""
    spark_at.conf.set("spark.sql.adaptive.enabled", str(adaptive).lower())
    try:
        df = spark_at.sql(
            """SELECT id AS seq, id * 7919 % 1000 AS key, concat('k', id % 97) AS name,
                      date_add(DATE'2024-01-01', CAST(id % 2 AS INT)) AS day
               FROM range(0, 3000, 1, 5)"""
        )
        cases = [
            (8, "key", None, True),
            (13, "key", None, True),
            (5, "name", ["day"], True),
            (3, "key,name", None, False),
            (8, "key", None, False),
        ]
        for index, (buckets, key, partition_by, native) in enumerate(cases):
            table = at.create_table(
                str(tmp_path / f"b{index}"),
                pa.schema(
                    [
                        ("seq", pa.int64()),
                        ("key", pa.int64()),
                        ("name", pa.string()),
                        ("day", pa.date32()),
                    ]
                ),
                partition_by=partition_by,
                options={"bucket": buckets, "bucket-key": key},
            )
            # the partitioning itself: partition (task) b holds exactly bucket b
            spread = df.repartition(buckets, appendtable_spark.staged.bucket_partitioning(table))
            tasks = spread.select(
                pyspark.sql.functions.spark_partition_id().alias("task"),
                appendtable_spark.bucket_column(table.uri).alias("bucket"),
            ).distinct()
            assert all(row.task == row.bucket for row in tasks.collect()), (buckets, key)
            for _ in range(2):
                appendtable_spark.write_table(df, table.uri, native=native)
            table = at.open_table(table.uri)
            seqs = table.scan().to_arrow().column("seq").to_pylist()
            assert sorted(seqs) == sorted(list(range(3000)) * 2), (buckets, key, native)
            keys = table.bucket_key
            for split in table.scan().plan():
                rows = pa.Table.from_batches(list(table.read(split)))
                got = set(bucket_ids([rows.column(c) for c in keys], buckets).tolist())
                assert got == {split.bucket}, (buckets, key, native, split.bucket)
            # one file per (partition, bucket) per write (fewer where compaction merged them)
            files = table.files()
            groups = zip(files["partition"].to_pylist(), files["bucket"].to_pylist(), strict=True)
            assert max(collections.Counter(groups).values()) <= 2, (buckets, key, native)
    finally:
        spark_at.conf.set("spark.sql.adaptive.enabled", "false")


def test_native_write_modes_idempotence_and_fallback(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "m")
    source = spark_at.createDataFrame(_events(0, 100).to_pandas())
    ids = {"commitUser": "job-1", "commitIdentifier": 7}
    appendtable_spark.write_table(source, uri, options=ids, partition_by=["day"], native=True)
    appendtable_spark.write_table(source, uri, options=ids, native=True)  # a replay: no-op
    table = at.open_table(uri)
    assert table.scan().count() == 100 and len(table.snapshots()) == 1
    later = spark_at.createDataFrame(_events(100, 50).to_pandas())
    appendtable_spark.write_table(later, uri, options={**ids, "commitIdentifier": 8})
    replaced = spark_at.createDataFrame(_events(500, 5).to_pandas())
    appendtable_spark.write_table(replaced, uri, mode="overwrite")
    table = at.open_table(uri)
    assert [s.kind for s in table.snapshots()][-1] == at.CommitKind.OVERWRITE
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(500, 505))
    appendtable_spark.write_table(replaced.limit(0), uri)  # nothing to commit
    assert len(at.open_table(uri).snapshots()) == 3
    with pytest.raises(at.InvalidArgumentError, match="mode"):
        appendtable_spark.write_table(replaced, uri, mode="ignore")
    # a type Spark cannot write exactly: the Python writer takes over, or native=True refuses
    wide_uri = str(tmp_path / "wide")
    at.create_table(wide_uri, pa.schema([("s", pa.large_string()), ("v", pa.int64())]))
    rows = spark_at.createDataFrame([("a", 1), ("b", 2)], "s string, v long")
    with pytest.raises(at.InvalidOptionError, match=r"'s'.*large_string"):
        appendtable_spark.write_table(rows, wide_uri, native=True)
    appendtable_spark.write_table(rows, wide_uri)
    assert at.open_table(wide_uri).scan().count() == 2


def test_a_reused_column_name_takes_the_python_writer_and_the_mirror_reads_it(
    spark_at: Any, tmp_path: Path
) -> None:
    """Spark's Parquet writer writes no field ids, and a file without them is read by name in
    the Iceberg mirror, where a name two columns have held stands for the first: after ``x``
    is dropped and added again, writes take the Python writer (or native=True refuses)."""
    uri = str(tmp_path / "reused")
    schema = pa.schema([("id", pa.int64()), ("x", pa.string())])
    table = at.create_table(uri, schema, options={"metadata.iceberg.storage": "table-location"})
    table.append(pa.table({"id": [1], "x": ["old"]}))
    with table.update_schema() as update:
        update.drop_column("x")
    with table.update_schema() as update:
        update.add_column("x", pa.string())
    rows = spark_at.createDataFrame([(2, "new")], "id long, x string")
    with pytest.raises(at.InvalidOptionError, match="'x' has a name another column"):
        appendtable_spark.write_table(rows, uri, native=True)
    appendtable_spark.write_table(rows, uri)
    location = at.open_table(uri).iceberg_metadata_location()
    assert location is not None
    mirrored = StaticTable.from_metadata(location).scan().to_arrow().sort_by("id").to_pylist()
    assert mirrored == [{"id": 1, "x": None}, {"id": 2, "x": "new"}]


def test_native_write_checks_before_and_after_spark_writes(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "checked")
    schema = pa.schema([("id", pa.int64(), False), ("v", pa.int64())])
    at.create_table(uri, schema).append(pa.table({"id": [1], "v": [1]}, schema=schema))
    wrong = spark_at.createDataFrame([("7", 1)], "id string, v long")
    with pytest.raises(at.SchemaMismatchError, match="'id'"):
        appendtable_spark.write_table(wrong, uri, native=True)
    nulls = spark_at.range(0, 1000, numPartitions=4).selectExpr(
        "CASE WHEN id = 900 THEN NULL ELSE id END AS id", "id AS v"
    )
    with pytest.raises(at.SchemaMismatchError, match="'id' is not nullable") as info:
        appendtable_spark.write_table(nulls, uri, native=True)
    assert info.value.column == "id"
    table = at.open_table(uri)
    assert table.scan().count() == 1 and len(table.snapshots()) == 1
    on_disk = {p.name for p in (tmp_path / "checked").rglob("*.parquet")}
    assert on_disk == {Path(p).name for p in table.files().column("path").to_pylist()}


def test_native_write_sets_the_watermark(spark_at: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "wm")
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    at.create_table(uri, schema, options={"watermark.column": "ts", "watermark.delay": "1 min"})
    df = spark_at.sql("SELECT timestamp_seconds(id * 60) AS ts, id AS v FROM range(0, 10)")
    appendtable_spark.write_table(df, uri, native=True)
    snapshot = at.open_table(uri).latest_snapshot()
    assert snapshot is not None and snapshot.watermark == 9 * 60_000 - 60_000


def test_native_write_deletes_its_files_only_when_the_commit_did_not_land(
    spark_at: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, root = str(tmp_path / "c"), tmp_path / "c"
    table = at.create_table(uri, EVENTS)
    table.append(_events(0, 10))
    df = spark_at.createDataFrame(_events(100, 50).to_pandas())
    commit = at.TableCommit.commit

    def on_disk() -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}

    def referenced() -> set[str]:
        return set(at.open_table(uri).files().column("path").to_pylist())

    def failing(error: at.CommitError) -> Any:
        def fail(self: at.TableCommit, *args: Any, **kwargs: Any) -> None:
            raise error

        return fail

    # definitely not applied: the adopted files are deleted, the staging area removed
    monkeypatch.setattr(at.TableCommit, "commit", failing(at.CommitConflictError("injected")))
    with pytest.raises(at.CommitConflictError, match="injected"):
        appendtable_spark.write_table(df, uri, native=True)
    assert on_disk() == referenced() and at.open_table(uri).scan().count() == 10
    # outcome unknown: the files may be referenced, so they stay
    monkeypatch.setattr(at.TableCommit, "commit", failing(at.CommitStateUnknownError("injected")))
    with pytest.raises(at.CommitStateUnknownError):
        appendtable_spark.write_table(df, uri, native=True)
    kept = on_disk() - referenced()
    assert kept and all(path.startswith("bucket-0/data-") for path in kept)
    # a replay that slipped past the pre-check (the same identifier landed meanwhile) deletes
    # its own files and adds no rows
    monkeypatch.setattr(at.TableCommit, "commit", commit)
    ids = {"commitUser": "job", "commitIdentifier": 3}
    appendtable_spark.write_table(df, uri, options=ids, native=True)
    monkeypatch.setattr(at.Table, "has_committed", lambda self, *a, **k: False)
    appendtable_spark.write_table(df, uri, options=ids, native=True)
    assert at.open_table(uri).scan().count() == 60
    assert on_disk() == referenced() | kept


@pytest.mark.parametrize("native", [True, False], ids=["native", "python-writer"])
def test_overwrite_of_given_partitions_refuses_rows_of_other_partitions(
    spark_at: Any, tmp_path: Path, native: bool
) -> None:
    uri = str(tmp_path / f"p-{native}")
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    table.append(_events(0, 10))  # days 2024-01-01 and 2024-01-02
    day1, day2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    before = sorted_rows(table.scan().to_arrow())
    rows = _events(100, 4)
    wrong = spark_at.createDataFrame(rows.filter(pc.equal(rows["day"], day2)).to_pandas())
    with pytest.raises(Exception, match="partition day=2024-01-02 are outside"):
        appendtable_spark.write_table(
            wrong, uri, mode="overwrite", partitions=[{"day": day1}], native=native
        )
    assert sorted_rows(at.open_table(uri).scan().to_arrow()) == before
    right = _events(200, 6).filter(pc.equal(_events(200, 6)["day"], day1))
    appendtable_spark.write_table(
        spark_at.createDataFrame(right.to_pandas()),
        uri,
        mode="overwrite",
        partitions=[{"day": day1}],
        native=native,
    )
    after = at.open_table(uri).scan().to_arrow()
    kept = [r for r in before if r["day"] == day2]
    assert sorted_rows(after) == sorted(kept + right.to_pylist(), key=lambda r: r["seq"])


@pytest.mark.parametrize("native", [True, False], ids=["native", "python-writer"])
def test_a_table_a_spark_write_creates_keeps_not_null_until_relaxed(
    spark_at: Any, tmp_path: Path, native: bool
) -> None:
    """docs/spark.md (Table creation): the created table takes the DataFrame's NOT NULL flags;
    a table created first (Python API, or SQL with a 'schema' property) is nullable, and
    ``update_column(nullable=True)`` relaxes one."""
    uri = str(tmp_path / "created")
    appendtable_spark.write_table(spark_at.range(3), uri, native=native)  # id: NOT NULL
    assert at.open_table(uri).schema.field("id").nullable is False
    nulls = spark_at.createDataFrame([(None,)], "id BIGINT")
    with pytest.raises(Exception, match=r"(?i)null"):
        nulls.write.format("appendtable").mode("append").save(uri)
    assert at.open_table(uri).scan().count() == 3
    with at.open_table(uri).update_schema() as update:
        update.update_column("id", nullable=True)
    nulls.write.format("appendtable").mode("append").save(uri)
    assert sorted(at.open_table(uri).scan().to_arrow()["id"].to_pylist(), key=str) == [
        0,
        1,
        2,
        None,
    ]
    first = str(tmp_path / "first")
    at.create_table(first, pa.schema([("id", pa.int64())]))
    spark_at.range(2).write.format("appendtable").mode("append").save(first)
    nulls.write.format("appendtable").mode("append").save(first)
    assert at.open_table(first).schema.field("id").nullable is True
    assert at.open_table(first).scan().count() == 3
    sql_uri = str(tmp_path / "sql")
    spark_at.sql(
        f"CREATE TABLE created_nullable USING appendtable LOCATION '{sql_uri}' "
        "TBLPROPERTIES ('schema' = 'id BIGINT')"
    )
    spark_at.range(2).write.format("appendtable").mode("append").save(sql_uri)
    spark_at.sql("INSERT INTO created_nullable VALUES (NULL)")
    assert at.open_table(sql_uri).scan().count() == 3
