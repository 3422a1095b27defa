"""A live ``foreach_batch_sink`` pipeline over Spark's ``rate`` source with NOT NULL columns
(the reported failure: after three micro-batches the query died and the table was unreadable),
into a table of nullable columns with automatic compaction and expiration on, while a reader
tails the table. Every row must arrive exactly once, in the table and at the reader.

``APPENDTABLE_LIVE_SECONDS`` sets how long the query runs (default 20 s; run it for minutes by
hand)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at

pytestmark = [pytest.mark.spark, pytest.mark.slow]

appendtable_spark = pytest.importorskip("appendtable_spark")

SECONDS = float(os.environ.get("APPENDTABLE_LIVE_SECONDS", "20"))


def test_rate_rows_with_not_null_columns_arrive_exactly_once(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "live")
    table = at.create_table(
        uri,
        pa.schema([("id", pa.int64()), ("s", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))]),
        options={"compaction.min.file-num": 3, "snapshot.num-retained.max": 20},
    )
    seen: list[int] = []
    stop = threading.Event()

    def tail() -> None:
        reader = table.stream(mode="latest-full", consumer_id="tail", poll_interval=0.05)
        while not stop.is_set():
            for batch in reader.batches(timeout=0.5):
                seen.extend(batch.column("id").to_pylist())
            reader.commit()
        for batch in reader.batches(timeout=1):
            seen.extend(batch.column("id").to_pylist())

    reader = threading.Thread(target=tail)
    reader.start()
    rate = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 2000)
        .load()
        .selectExpr("value AS id", "repeat('x', 5) AS s", "timestamp AS ts")  # NOT NULL columns
    )
    query = (
        rate.writeStream.foreachBatch(appendtable_spark.foreach_batch_sink(uri))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.5)
        batches = query.lastProgress["batchId"] if query.lastProgress else 0
    finally:
        query.stop()
        stop.set()
        reader.join(timeout=60)
    assert batches >= 5  # the query ran many micro-batches, not three
    final = at.open_table(uri)
    ids = final.scan().to_arrow().column("id").to_pylist()
    assert ids, "nothing was written"
    assert sorted(ids) == list(range(len(ids)))  # every row of the committed batches, once
    assert sorted(seen) == sorted(ids)  # the tailing reader got each row exactly once
    assert len(final.files()) < batches  # automatic compaction ran on Spark's files
