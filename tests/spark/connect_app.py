"""A foreachBatch pipeline under Spark Connect (run by test_connect.py as a script)."""

from __future__ import annotations

import json
import sys
import tempfile

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

import appendtable_spark


def run(spark: SparkSession, source: str, sink: object, checkpoint: str | None = None) -> str:
    query = (
        spark.readStream.format("appendtable")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", "1")
        .load(source)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint or tempfile.mkdtemp())
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    except StreamingQueryException as exc:
        return str(exc)
    return "ok"


def main() -> None:
    source, sink_without, sink_with, sink_rotated = sys.argv[1:5]
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    appendtable_spark.register(spark)
    without = run(spark, source, appendtable_spark.foreach_batch_sink(sink_without))
    with_user = run(
        spark, source, appendtable_spark.foreach_batch_sink(sink_with, commit_user="job-7")
    )
    # the sink reads the query id from the checkpoint: a new checkpoint is told apart
    rotated = []
    for _ in range(2):
        checkpoint = tempfile.mkdtemp()
        sink = appendtable_spark.foreach_batch_sink(
            sink_rotated, commit_user="job-8", checkpoint_location=checkpoint
        )
        rotated.append(run(spark, source, sink, checkpoint))
    print(json.dumps({"without": without, "with": with_user, "rotated": rotated}))
    spark.stop()


if __name__ == "__main__":
    main()
