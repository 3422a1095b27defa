"""The streaming source's read limits and option checks in a real Spark session: every
micro-batch is bounded, a full start included, and bad options fail when the stream is
defined (``load()``), naming the option, before any micro-batch."""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from tests.spark.restart_model import SourceModel, check_delivery
from tests.spark.restart_runs import sink_rows

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")
from pyspark.errors import AnalysisException, StreamingQueryException  # noqa: E402

_SEQ = pa.schema([("seq", pa.int64())])


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


def _collect(
    spark: Any,
    uri: str,
    checkpoint: Path,
    options: dict[str, str],
    trigger: dict[str, bool] | None = None,
) -> list[list[int]]:
    """The seqs of each micro-batch of a run that ends by itself (default: AvailableNow)."""
    batches: dict[int, list[int]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [row.seq for row in batch.collect()]

    query = (
        spark.readStream.format("appendtable")
        .options(**options)
        .load(uri)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**(trigger or {"availableNow": True}))
        .start()
    )
    assert query.awaitTermination(300)
    return [batches[b] for b in sorted(batches)]


def test_read_limits_bound_every_micro_batch_of_a_full_start(spark_at: Any, tmp_path: Path) -> None:
    # the reported case: a latest-full start, whose one snapshot has many files per split
    model = SourceModel(str(tmp_path / "s"), buckets=2)
    rng = random.Random(3)
    for _ in range(8):
        model.append(rng, rng.randint(3, 9))
    file_of = {
        seq: (snapshot, bucket)
        for snapshot, seqs in model.added.items()
        for seq, bucket in zip(seqs, model.bucket_of(seqs), strict=True)
    }
    files = len(set(file_of.values()))
    by_files = _collect(spark_at, model.uri, tmp_path / "c1", {"maxFilesPerTrigger": "1"})
    assert [len({file_of[s] for s in batch}) for batch in by_files if batch] == [1] * files
    check_delivery(model, [s for batch in by_files for s in batch], sorted(file_of))
    by_rows = _collect(spark_at, model.uri, tmp_path / "c2", {"maxRowsPerTrigger": "10"})
    for batch in by_rows:
        assert len(batch) <= 10 or len({file_of[s] for s in batch}) == 1, batch
    assert len(by_rows) >= sum(len(seqs) for seqs in model.added.values()) // 10
    check_delivery(model, [s for batch in by_rows for s in batch], sorted(file_of))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxFilesPerTrigger": "0"}, "maxFilesPerTrigger.*0 is not a positive"),
        ({"maxFilesPerTrigger": "-1"}, "maxFilesPerTrigger.*-1 is not a positive"),
        ({"maxRowsPerTrigger": "abc"}, "maxRowsPerTrigger.*'abc' is not an integer"),
        ({"maxRowsPerTrigger": "1.5"}, "maxRowsPerTrigger.*'1.5' is not an integer"),
        ({"maxFilesPerTrigger": "1", "maxRowsPerTrigger": "5"}, "not both"),
        ({"maxFilePerTrigger": "1"}, "did you mean 'maxFilesPerTrigger'"),
        ({"scan.mode": "from-snapshot"}, "needs option 'scan.snapshot-id'"),
        ({"scan.mode": "from-timestamp"}, "needs option 'scan.timestamp-millis'"),
        ({"scan.mode": "earliest"}, "scan.mode"),
        (
            {"scan.mode": "from-snapshot", "scan.snapshot-id": "99"},
            "'scan.snapshot-id' is 99, but the table's latest snapshot is 8",
        ),
        ({"scan.mode": "from-snapshot", "scan.snapshot-id": "0"}, "scan.snapshot-id.*start at 1"),
        ({"scan.snapshot-id": "-1"}, "scan.snapshot-id.*start at 1"),
        (
            {"scan.mode": "latest", "scan.snapshot-id": "1"},
            "'scan.snapshot-id' is not used by scan.mode 'latest'",
        ),
        (
            {"scan.mode": "latest-full", "scan.file-creation-time-millis": "1"},
            "'scan.file-creation-time-millis' is not used by scan.mode 'latest-full'",
        ),
        ({"consumer-id": ""}, "consumer-id.*not a consumer id"),
        ({"consumer-id": "../x"}, "consumer-id.*not a consumer id"),
    ],
)
def test_stream_options_are_checked_when_the_stream_is_defined(
    spark_at: Any, tmp_path: Path, options: dict[str, str], message: str
) -> None:
    uri = str(tmp_path / "t")
    model = SourceModel(uri, buckets=2)
    rng = random.Random(1)
    for _ in range(8):
        model.append(rng, 3)
    with pytest.raises(AnalysisException, match=message):
        spark_at.readStream.format("appendtable").options(**options).load(uri)


def test_a_stream_may_start_at_the_next_snapshot(spark_at: Any, tmp_path: Path) -> None:
    model = SourceModel(str(tmp_path / "t"), buckets=2)
    rng = random.Random(2)
    model.append(rng, 5)
    options = {"scan.mode": "from-snapshot", "scan.snapshot-id": "2"}
    assert _collect(spark_at, model.uri, tmp_path / "c", options) in ([], [[]])
    model.append(rng, 5)
    rows = [s for batch in _collect(spark_at, model.uri, tmp_path / "c", options) for s in batch]
    check_delivery(model, rows, list(range(5, 10)))


def test_sink_options_are_checked_before_anything_is_written(spark_at: Any, tmp_path: Path) -> None:
    # Spark calls a Python sink first when it writes micro-batch 0, not at start()
    model = SourceModel(str(tmp_path / "s"), buckets=2)
    model.append(random.Random(4), 5)
    sink = str(tmp_path / "sink")
    query = (
        spark_at.readStream.format("appendtable")
        .load(model.uri)
        .writeStream.format("appendtable")
        .option("comitUser", "job")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start(sink)
    )
    with pytest.raises(StreamingQueryException, match="did you mean 'commitUser'"):
        query.awaitTermination(300)
    with pytest.raises(at.TableNotFoundError):
        at.open_table(sink)


@pytest.mark.parametrize(
    ("option", "value"), [("splitTargetBytes", "100"), ("systemTable", "snapshots")]
)
def test_batch_only_options_fail_a_stream_naming_them(
    spark_at: Any, tmp_path: Path, option: str, value: str
) -> None:
    # Spark asks for the stream reader at start(); the refusal comes at its first call, before
    # any micro-batch (an error raised while the reader is made, PySpark's worker would hide)
    model = SourceModel(str(tmp_path / "s"), buckets=2)
    model.append(random.Random(5), 5)
    seen: list[int] = []
    query = (
        spark_at.readStream.format("appendtable")
        .option(option, value)
        .load(model.uri)
        .writeStream.foreachBatch(lambda batch, batch_id: seen.append(batch_id))
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException, match=f"InvalidOptionError.*{option}"):
        query.awaitTermination(300)
    assert seen == []


def _to_sink(spark: Any, source: str, sink: str, checkpoint: Path, options: dict[str, str]) -> Any:
    return (
        spark.readStream.format("appendtable")
        .option("maxFilesPerTrigger", "1")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", "1")
        .load(source)
        .writeStream.format("appendtable")
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(sink)
    )


def test_a_checkpoint_taking_a_commit_user_over_in_the_same_session(
    spark_at: Any, tmp_path: Path
) -> None:
    # in one session (Python workers reused between queries): a second query taking the
    # commit user over, then the first query restarted (refused, twice), with the format sink
    model = SourceModel(str(tmp_path / "s"), buckets=2)
    rng = random.Random(6)
    for _ in range(3):
        model.append(rng, 10)
    sink = str(tmp_path / "sink")
    first = _to_sink(spark_at, model.uri, sink, tmp_path / "a", {"commitUser": "u"})
    first.awaitTermination(300)
    assert first.exception() is None
    check_delivery(model, sink_rows(sink), list(range(30)))
    for _ in range(2):
        model.append(rng, 10)
    taking_over = {"commitUser": "u", "commitUserReuse": "continue"}
    second = _to_sink(spark_at, model.uri, sink, tmp_path / "b", taking_over)
    second.awaitTermination(300)
    assert second.exception() is None
    # the second query started at snapshot 1 too: the sink holds the first 30 rows twice
    rows = sink_rows(sink)
    assert sorted(rows) == sorted([*range(30), *range(50)])
    for attempt in range(2):
        again = _to_sink(spark_at, model.uri, sink, tmp_path / "a", {"commitUser": "u"})
        with pytest.raises(StreamingQueryException, match="CommitUserReusedError"):
            again.awaitTermination(300)
        assert sorted(sink_rows(sink)) == sorted(rows), attempt


def test_trigger_once_takes_everything_available_whatever_the_limit(
    spark_at: Any, tmp_path: Path
) -> None:
    """As docs/spark.md says (found by a docs-only hunt, which read "bounds every
    micro-batch"): Spark asks every source for all it has under ``Trigger.Once``."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, _SEQ, options={"bucket": 2, "bucket-key": "seq"})
    for start in range(0, 50, 10):
        table.append(pa.table({"seq": pa.array(range(start, start + 10), pa.int64())}))
    options = {"maxFilesPerTrigger": "1"}
    batches = _collect(spark_at, uri, tmp_path / "ckpt", options, trigger={"once": True})
    assert [sorted(batch) for batch in batches] == [list(range(50))]


def _extend_seqs(seqs: list[int], batch: Any, _batch_id: int) -> None:
    seqs.extend(row.seq for row in batch.collect())


def test_a_bounded_watermark_ends_an_available_now_query_and_idles_a_timed_one(
    spark_at: Any, tmp_path: Path
) -> None:
    """docs/spark.md: an ``availableNow`` query stops by itself at the bound; a
    ``processingTime`` query delivers the same rows and stays active (Spark lets no source
    end it)."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("seq", pa.int64()), ("ts", pa.int64())])
    table = at.create_table(uri, schema, options={"watermark.column": "ts"})
    for minute in range(4):  # snapshot watermarks 0, 60_000, 120_000, 180_000
        table.append(pa.table({"seq": [2 * minute, 2 * minute + 1], "ts": [minute * 60_000] * 2}))
    for name, trigger in (
        ("available-now", {"availableNow": True}),
        ("timed", {"processingTime": "100 milliseconds"}),
    ):
        seqs: list[int] = []
        query = (
            spark_at.readStream.format("appendtable")
            .option("scan.mode", "from-snapshot")
            .option("scan.snapshot-id", "1")
            .option("scan.bounded.watermark", "60000")
            .load(uri)
            .writeStream.foreachBatch(functools.partial(_extend_seqs, seqs))
            .option("checkpointLocation", str(tmp_path / f"ckpt-{name}"))
            .trigger(**trigger)
            .start()
        )
        try:
            if name == "available-now":
                assert query.awaitTermination(300)
            else:
                query.processAllAvailable()
                assert query.isActive
        finally:
            query.stop()
        assert sorted(seqs) == [0, 1, 2, 3], name  # snapshots 1 and 2
