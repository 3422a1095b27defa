"""A driver application for the standalone-cluster tests (run by test_cluster.py as a script):

    python cluster_app.py MASTER MODE TABLE MARKERS [SOURCE CHECKPOINT]

MODE: ``format`` (df.write.format("appendtable")), ``native`` (write_table), ``foreach`` (a
stream of SOURCE's Parquet files into foreach_batch_sink, one file per micro-batch). The rows
are Spark's ordinary NOT NULL columns (``id``, ``repeat('x', 5)``). Each task touches a file
in MARKERS when it starts and then works slowly, so the test can kill executors mid-write.
Exits 0 when the write (or stream) finished, 3 when Spark reported it failed.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

import appendtable_spark

ROWS = 120_000


def slowly(markers: str) -> object:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        Path(markers, uuid.uuid4().hex).touch()
        for batch in batches:
            yield batch
            time.sleep(0.4)

    return run


def main() -> int:
    master, mode, table, markers = sys.argv[1:5]
    builder = SparkSession.builder
    hidden = os.environ.get("APPENDTABLE_TEST_EXECUTOR_PYTHONPATH")
    if hidden:  # executors whose Python cannot import the package (test_cluster.py)
        builder = builder.config("spark.executorEnv.PYTHONPATH", hidden)
    spark = (
        builder.master(master)
        .appName(f"appendtable-cluster-{mode}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "1g")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "5000")
        .config("spark.task.maxFailures", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    appendtable_spark.register(spark)
    schema = "id BIGINT NOT NULL, s STRING NOT NULL"
    try:
        if mode == "foreach":
            source, checkpoint = sys.argv[5:7]
            stream = (
                spark.readStream.schema("id BIGINT, s STRING")
                .option("maxFilesPerTrigger", 1)
                .parquet(source)
                .selectExpr("coalesce(id, -1) AS id", "repeat('x', 5) AS s")  # NOT NULL
                .mapInArrow(slowly(markers), schema)
            )
            query = (
                stream.writeStream.foreachBatch(appendtable_spark.foreach_batch_sink(table))
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
        else:
            df = (
                spark.range(0, ROWS, numPartitions=6)
                .selectExpr("id", "repeat('x', 5) AS s")  # both NOT NULL, as Spark marks them
                .mapInArrow(slowly(markers), schema)
            )
            if mode == "native":
                appendtable_spark.write_table(df, table)
            else:
                df.write.format("appendtable").mode("append").save(table)
    except Exception as exc:  # report, as a test's driver would see it
        print(f"FAILED: {type(exc).__name__}: {str(exc)[:2000]}", file=sys.stderr)
        return 3
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
