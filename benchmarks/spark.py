"""Spark benchmarks, all in one local[2] session: batch reads through the format and
through ``read_table`` against ``spark.read.parquet``, batch writes against ``df.write.parquet``,
the format's reads and writes against the measured floor of the Python Data Source API (a
pyarrow-only data source, ``benchmarks.spark_floor``), and the end-to-end
latency of a streaming query from one table to another.

Skipped, with the reason in the report, when PySpark or Java is missing."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

import appendtable as at
from benchmarks.data import SCHEMA, make_table
from benchmarks.harness import Case, Result, Timing, measure, sync_then
from benchmarks.rows import count_row, skipped_row, speed_row
from benchmarks.workspace import Workspace, remove, write_plain

__all__ = ["bench_spark"]

GROUP = "spark"
#: The target: the format within 10 % of the floor.
FLOOR_RATIO = 0.9
TRIGGER = "500 milliseconds"
STREAM_ROWS = 100  # rows per streamed append
STREAM_TIMEOUT_S = 60.0


def _missing() -> str | None:
    """Why Spark cannot run here, or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"pyspark is not installed ({exc}); install the `spark` extra"
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (
        java_home and os.path.exists(os.path.join(java_home, "bin", "java"))
    ):
        return "no Java runtime (`java` not on PATH and no JAVA_HOME); Spark needs Java 17+"
    return None


@contextmanager
def _session(ws: Workspace) -> Iterator[Any]:
    """The session lent by the caller (``ws.servers.spark``, left running), or one local[2]
    session, stopped on exit; the format and the floor registered in it."""
    import appendtable_spark
    from benchmarks.spark_floor import FloorDataSource

    lent = ws.servers.spark
    spark = lent if lent is not None else _local_session(ws)
    appendtable_spark.register(spark)
    spark.dataSource.register(FloorDataSource)
    try:
        yield spark
    finally:
        if lent is None:
            spark.stop()


def _local_session(ws: Workspace) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("appendtable-bench")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", ws.fresh_path("spark-warehouse"))
        .config("spark.local.dir", ws.fresh_path("spark-local"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _full_aggregate(df: Any) -> tuple[int, int, float, int]:
    """An aggregate touching every column, so every value is read."""
    from pyspark.sql import functions as F

    row = df.agg(
        F.count(F.lit(1)), F.sum("key"), F.sum("value"), F.sum(F.length("text"))
    ).collect()[0]
    return int(row[0]), int(row[1]), float(row[2]), int(row[3])


@dataclass(frozen=True)
class _Fixture:
    df: Any  # the cached DataFrame that is written
    table_uri: str  # the same rows written by the format (one file per task)
    plain_dir: str  # the same rows written by df.write.parquet
    rows: int


def _fixture(ws: Workspace, spark: Any) -> _Fixture:
    """The rows as two zstd Parquet files (written by pyarrow, read back and cached by Spark:
    no Python worker involved) and as a table written by the format from that DataFrame."""
    data = make_table(ws.config.spark_rows, seed=5)
    source = ws.fresh_path("spark-source")
    os.makedirs(source)
    half = -(-data.num_rows // 2)
    for index, offset in enumerate(range(0, data.num_rows, half)):
        write_plain(data.slice(offset, half), os.path.join(source, f"part-{index}.parquet"))
    df = spark.read.parquet(source).cache()
    rows = df.count()
    table_uri, plain_dir = ws.fresh_path("spark-table"), ws.fresh_path("spark-plain")
    df.write.format("appendtable").mode("append").save(table_uri)
    df.write.parquet(plain_dir, compression="zstd")
    return _Fixture(df, table_uri, plain_dir, rows)


def _read_rows(ws: Workspace, spark: Any, fixture: _Fixture) -> list[Result]:
    import appendtable_spark
    from benchmarks.spark_floor import FLOOR_FORMAT

    answers: dict[str, tuple[int, int, float, int]] = {}
    # the table's own data files, read by the floor as plain Parquet
    table_files = at.open_table(fixture.table_uri).files().column("path").to_pylist()
    files = [os.path.join(fixture.table_uri, path) for path in table_files]

    def check(name: str, returned: object) -> None:
        assert isinstance(returned, tuple) and returned[0] == fixture.rows, (name, returned)
        answers[name] = returned

    timings = measure(
        [
            Case(
                "format",
                run=lambda _: _full_aggregate(
                    spark.read.format("appendtable").load(fixture.table_uri)
                ),
            ),
            Case(
                "native",
                run=lambda _: _full_aggregate(
                    appendtable_spark.read_table(spark, fixture.table_uri)
                ),
            ),
            Case(
                "floor",
                run=lambda _: _full_aggregate(
                    spark.read.format(FLOOR_FORMAT).option("files", json.dumps(files)).load()
                ),
            ),
            Case("plain", run=lambda _: _full_aggregate(spark.read.parquet(fixture.plain_dir))),
        ],
        reps=ws.config.spark_reps,
        warmup=ws.warmup(1),
        check=check,
    )
    exact = {name: (a[0], a[1], a[3]) for name, a in answers.items()}
    assert len(set(exact.values())) == 1, f"the reads disagree: {answers}"
    details = {"rows": fixture.rows, "table_files": len(files)}
    what = f"{fixture.rows / 1e6:g} M rows, aggregate over every column"
    return [
        speed_row(
            GROUP,
            f"Spark read through the format, {what}, vs spark.read.parquet",
            timings["format"],
            timings["plain"],
            unit="s",
            target_ratio=0.9,
            target_label="Spark Parquet",
            details=details,
        ),
        speed_row(
            GROUP,
            f"Spark read through the format, {what}, vs the floor (pyarrow-only Python data "
            "source reading the same files)",
            timings["format"],
            timings["floor"],
            unit="s",
            target_ratio=FLOOR_RATIO,
            target_label="floor",
            details=details,
        ),
        speed_row(
            GROUP,
            f"Spark read, the floor (pyarrow-only Python data source), {what}, "
            "vs spark.read.parquet",
            timings["floor"],
            timings["plain"],
            unit="s",
            target_ratio=None,
            details=details,
        ),
        speed_row(
            GROUP,
            f"Spark read_table (native Parquet path), {what}, vs spark.read.parquet",
            timings["native"],
            timings["plain"],
            unit="s",
            target_ratio=0.9,
            target_label="Spark Parquet",
            details=details,
        ),
    ]


def _write_case(name: str, ws: Workspace, write: Callable[[str], object]) -> Case:
    return Case(
        name,
        run=write,
        setup=sync_then(lambda: ws.fresh_path(f"spark-write-{name}")),
        teardown=remove,
    )


def _plain_write(df: Any, path: str) -> None:
    """Spark's Parquet writer with the codec and level of a table's defaults (zstd level 1;
    Spark's own default level is 3, which costs more CPU and so would flatter the table)."""
    df.write.option("parquet.compression.codec.zstd.level", "1").parquet(path, compression="zstd")


def _write_rows(ws: Workspace, fixture: _Fixture) -> list[Result]:
    import appendtable_spark
    from benchmarks.spark_floor import FLOOR_FORMAT

    df = fixture.df
    bucketed = {"bucket": 8, "bucket-key": "key"}
    timings = measure(
        [
            _write_case(
                "format", ws, lambda uri: df.write.format("appendtable").mode("append").save(uri)
            ),
            _write_case("write_table", ws, lambda uri: appendtable_spark.write_table(df, uri)),
            _write_case(
                "write_table-bucketed",
                ws,
                lambda uri: appendtable_spark.write_table(df, uri, options=bucketed),
            ),
            _write_case(
                "write_table-bucketed-python",
                ws,
                lambda uri: appendtable_spark.write_table(df, uri, options=bucketed, native=False),
            ),
            _write_case(
                "floor", ws, lambda path: df.write.format(FLOOR_FORMAT).mode("append").save(path)
            ),
            _write_case("plain", ws, lambda path: _plain_write(df, path)),
            _write_case(
                "plain-repartitioned", ws, lambda path: _plain_write(df.repartition(8, "key"), path)
            ),
        ],
        reps=ws.config.spark_reps,
        warmup=ws.warmup(1),
    )
    what = f"{fixture.rows / 1e6:g} M rows (cached DataFrame)"
    return [
        speed_row(
            GROUP,
            f"Spark write through the format, {what}, vs df.write.parquet (zstd)",
            timings["format"],
            timings["plain"],
            unit="s",
            target_ratio=0.8,
            target_label="Spark Parquet",
            details={"rows": fixture.rows},
        ),
        speed_row(
            GROUP,
            f"Spark write through the format, {what}, vs the floor (pyarrow-only Python data "
            "source, one file per task)",
            timings["format"],
            timings["floor"],
            unit="s",
            target_ratio=FLOOR_RATIO,
            target_label="floor",
            details={"rows": fixture.rows},
        ),
        speed_row(
            GROUP,
            f"Spark write, the floor (pyarrow-only Python data source), {what}, "
            "vs df.write.parquet (zstd)",
            timings["floor"],
            timings["plain"],
            unit="s",
            target_ratio=None,
            details={"rows": fixture.rows},
        ),
        speed_row(
            GROUP,
            f"Spark write_table (native: Spark's Parquet writer, adapter commits), {what}, "
            "vs df.write.parquet (zstd)",
            timings["write_table"],
            timings["plain"],
            unit="s",
            target_ratio=0.8,
            target_label="Spark Parquet",
            details={"rows": fixture.rows},
        ),
        speed_row(
            GROUP,
            f"Spark write_table native, bucket=8 + key, {what}, "
            "vs df.repartition(8, key).write.parquet",
            timings["write_table-bucketed"],
            timings["plain-repartitioned"],
            unit="s",
            target_ratio=0.9,
            target_label="Spark Parquet",
            details={"rows": fixture.rows, "options": bucketed},
        ),
        speed_row(
            GROUP,
            f"Spark write_table Python writer (native=False), bucket=8 + key, {what}, "
            "vs df.repartition(8, key).write.parquet",
            timings["write_table-bucketed-python"],
            timings["plain-repartitioned"],
            unit="s",
            target_ratio=None,
            details={"rows": fixture.rows, "options": bucketed},
        ),
    ]


def _wait_rows(uri: str, rows: int) -> None:
    """Block until the table at ``uri`` holds ``rows`` rows (polling every 2 ms)."""
    deadline = time.monotonic() + STREAM_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            snapshot = at.open_table(uri).latest_snapshot()
        except at.TableNotFoundError:
            snapshot = None
        if snapshot is not None and snapshot.total_record_count >= rows:
            return
        time.sleep(0.002)
    raise TimeoutError(f"the sink did not reach {rows} rows in {STREAM_TIMEOUT_S:g} s")


def _stream_latency(ws: Workspace, spark: Any) -> list[Result]:
    """Seconds from ``source.append()`` returning to the rows being visible in the sink."""
    source = at.create_table(ws.fresh_path("stream-source"), SCHEMA)
    source.append(make_table(STREAM_ROWS, seed=0))
    sink = ws.fresh_path("stream-sink")
    query = (
        spark.readStream.format("appendtable")
        .load(source.uri)
        .writeStream.format("appendtable")
        .option("checkpointLocation", tempfile.mkdtemp(dir=ws.root))
        .trigger(processingTime=TRIGGER)
        .start(sink)
    )
    rng = np.random.default_rng(13)
    latencies = []
    try:
        _wait_rows(sink, STREAM_ROWS)  # the first micro-batch (query start-up) is not timed
        for index in range(1, ws.config.stream_appends + 1):
            time.sleep(float(rng.uniform(0.0, 0.5)))  # a random phase against the trigger
            source.append(make_table(STREAM_ROWS, seed=index))
            appended = time.perf_counter()
            _wait_rows(sink, STREAM_ROWS * (index + 1))
            latencies.append(time.perf_counter() - appended)
        query.processAllAvailable()  # stop between micro-batches, not inside one
    finally:
        query.stop()
    timing = Timing(tuple(latencies))
    return [
        count_row(
            GROUP,
            f"streaming end-to-end latency, appendtable → Spark (trigger {TRIGGER}) → "
            f"appendtable, median of {len(latencies)} appends",
            timing.median * 1000,
            "ms",
            details={
                "latency_ms": timing.summary(1000),
                "p90_ms": timing.percentile(90) * 1000,
                "mean_ms": statistics.fmean(latencies) * 1000,
                "rows_per_append": STREAM_ROWS,
            },
        )
    ]


def bench_spark(ws: Workspace) -> list[Result]:
    reason = _missing()
    if reason is not None:
        return [skipped_row(GROUP, reason)]
    started = time.perf_counter()
    with _session(ws) as spark:
        session_seconds = time.perf_counter() - started
        fixture = _fixture(ws, spark)
        rows = _read_rows(ws, spark, fixture)
        rows += _write_rows(ws, fixture)
        rows += _stream_latency(ws, spark)
    rows[0].details["session_start_seconds"] = session_seconds
    return rows
