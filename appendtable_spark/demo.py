"""The Spark demo behind ``make demo-spark``: a streaming pipeline between two tables.

A producer appends click events to a bucketed source table from plain Python while a Spark
Structured Streaming query tails it (``readStream.format("appendtable")``), keeps the purchases
and writes them, exactly once, to a sink table (``writeStream.format("appendtable")``). It prints
what each micro-batch did and how long a row took from its commit to the sink.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

import appendtable as at
import appendtable_spark

SCHEMA = pa.schema(
    [
        ("user_id", pa.int64()),
        ("event_time", pa.timestamp("ms", tz="UTC")),
        ("action", pa.string()),
        ("amount", pa.float64()),
    ]
)


def _batch(rng: np.random.Generator, rows: int) -> pa.Table:
    now = int(time.time() * 1000)
    return pa.table(
        {
            "user_id": pa.array(rng.integers(0, 1000, rows)),
            "event_time": pa.array(np.full(rows, now), pa.timestamp("ms", tz="UTC")),
            "action": pa.array(rng.choice(["view", "click", "buy"], rows)),
            "amount": pa.array(np.round(rng.exponential(30.0, rows), 2)),
        },
        schema=SCHEMA,
    )


def _count(uri: str) -> int:
    try:
        return at.open_table(uri).scan().count()
    except at.TableNotFoundError:
        return 0


def run(workdir: str) -> None:
    source_uri, sink_uri = f"{workdir}/clicks", f"{workdir}/purchases"
    source = at.create_table(
        source_uri,
        SCHEMA,
        options={"bucket": 4, "bucket-key": "user_id", "watermark.column": "event_time"},
    )
    print(f"source table {source_uri} (4 ordered buckets on user_id)")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("appendtable-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    appendtable_spark.register(spark)
    print(f"Spark {spark.version} started; appendtable format registered")

    purchases = (
        spark.readStream.format("appendtable")
        .option("consumer-id", "demo-purchases")
        .load(source_uri)
        .where("action = 'buy'")
    )
    query = (
        purchases.writeStream.format("appendtable")
        .option("checkpointLocation", f"{workdir}/checkpoint")
        .trigger(processingTime="1 second")
        .start(sink_uri)
    )
    while query.lastProgress is None:  # the first (empty) trigger: the query is live
        time.sleep(0.2)
    rng = np.random.default_rng(7)
    latencies = []
    for _ in range(5):
        snapshot = source.append(_batch(rng, 20_000))
        assert snapshot is not None
        committed_at = time.time()
        expected = source.scan(filter=[("action", "=", "buy")]).count()
        while _count(sink_uri) < expected and time.time() - committed_at < 120:
            time.sleep(0.05)
        latencies.append(time.time() - committed_at)
        print(
            f"producer: snapshot {snapshot.id} ({snapshot.total_record_count:,} events); "
            f"its purchases visible in the sink after {latencies[-1]:.2f} s"
        )
    query.processAllAvailable()  # let the running micro-batch finish before stopping
    query.stop()
    sink = at.open_table(sink_uri)
    appends = [s for s in sink.snapshots() if s.kind == at.CommitKind.APPEND]
    print(
        f"sink {sink_uri}: {sink.scan().count():,} purchases (expected {expected:,}) in "
        f"{len(appends)} appends by {appends[-1].commit_user} (one per micro-batch, idempotent "
        "on the query id and batch id)"
    )
    print(f"commit-to-visible latency: median {sorted(latencies)[2]:.2f} s (1 s trigger)")
    print(f"consumer progress on the source: {source.consumers()}")
    spark.stop()
    if sink.scan().count() != expected:
        raise SystemExit("the sink does not hold exactly the purchases")
    print(f"\ndone at {dt.datetime.now(dt.UTC):%H:%M:%S} UTC")


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="appendtable-spark-demo-")
    try:
        run(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
