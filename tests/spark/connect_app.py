"""A foreachBatch pipeline under Spark Connect (run by test_connect.py as a script)."""

from __future__ import annotations

import json
import sys
import tempfile

from pyspark.sql import SparkSession

import appendtable_spark


def run(spark: SparkSession, source: str, sink: object) -> str:
    query = (
        spark.readStream.format("appendtable")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", "1")
        .load(source)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", tempfile.mkdtemp())
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    except Exception as exc:
        return str(exc)
    return "ok"


def main() -> None:
    source, sink_without, sink_with = sys.argv[1:4]
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    appendtable_spark.register(spark)
    without = run(spark, source, appendtable_spark.foreach_batch_sink(sink_without))
    with_user = run(
        spark, source, appendtable_spark.foreach_batch_sink(sink_with, commit_user="job-7")
    )
    print(json.dumps({"without": without, "with": with_user}))
    spark.stop()


if __name__ == "__main__":
    main()
