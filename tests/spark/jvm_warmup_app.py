"""The workload a test run's JVM class-data archive is dumped from (tests/helpers/jvm_archive.py):
a short run of what the Spark tests do, so that the classes they load are in the archive. Run as a
script:

    python jvm_warmup_app.py <empty directory> <archive path>

The driver JVM (only it: not spark-submit's launcher JVM) is started with
``-XX:ArchiveClassesAtExit``, and the script returns once that JVM has exited, so once the
archive is written whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa

import appendtable as at
import appendtable_spark
from tests.spark.driver_session import driver_session

SCHEMA = pa.schema([("key", pa.int64()), ("seq", pa.int64()), ("name", pa.string())])


def _rows(start: int, count: int) -> pa.Table:
    seqs = list(range(start, start + count))
    return pa.table(
        {"key": [s % 5 for s in seqs], "seq": seqs, "name": [f"n{s}" for s in seqs]},
        schema=SCHEMA,
    )


def main(root: Path, archive: str) -> None:
    spark = driver_session(
        **{
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive}",
            "spark.sql.python.filterPushdown.enabled": "true",
        }
    )
    appendtable_spark.register(spark)
    source = str(root / "source")
    table = at.create_table(source, SCHEMA, options={"bucket": 2, "bucket-key": "key"})
    for start in (0, 100):
        table.append(_rows(start, 50))
    df = spark.read.format("appendtable").load(source)
    df.filter("key > 1 AND name != 'x'").toArrow()
    df.groupBy("key").count().orderBy("key").collect()
    spark.createDataFrame(_rows(200, 20).to_pylist(), schema=df.schema).write.format(
        "appendtable"
    ).mode("append").save(str(root / "format"))
    appendtable_spark.write_table(df, str(root / "native"))
    appendtable_spark.write_table(df, str(root / "python"), native=False)
    stream = spark.readStream.format("appendtable").load(source)
    for kind in ("format", "foreach"):
        writer = stream.writeStream.option("checkpointLocation", str(root / f"checkpoint-{kind}"))
        writer = writer.trigger(availableNow=True)
        if kind == "format":
            query = writer.format("appendtable").start(str(root / "stream-format"))
        else:
            sink = appendtable_spark.foreach_batch_sink(str(root / "stream-foreach"))
            query = writer.foreachBatch(sink).start()
        query.awaitTermination()
    df.createOrReplaceTempView("source")
    spark.sql("SELECT key, max(seq) FROM source GROUP BY key").collect()
    jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
    spark.stop()
    jvm.stdin.close()  # the gateway JVM exits when its stdin closes, writing the archive
    jvm.wait(timeout=300)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
