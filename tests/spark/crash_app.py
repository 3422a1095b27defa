"""A streaming job that is killed (SIGKILL, the whole driver) right after a table commit and
before Spark records the micro-batch in its checkpoint. Run as a script by test_crash.py:

    python crash_app.py SOURCE SINK CHECKPOINT {sink|foreach} KILL_AFTER_BATCH(-1: never)
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from pyspark.sql import SparkSession

import appendtable_spark
from appendtable_spark.source import AppendTableDataSource
from appendtable_spark.writer import StreamWriter

KILL_AFTER = int(sys.argv[5])


def _die() -> None:
    """SIGKILL the whole driver: every process of this app's session (JVM and Python workers,
    which run in process groups of their own), this one last."""
    session = os.getsid(0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.getsid(int(entry)) == session:
                os.kill(int(entry), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


class KillingStreamWriter(StreamWriter):
    def commit(self, messages: Any, batchId: int) -> None:
        super().commit(messages, batchId)
        if batchId == KILL_AFTER:
            _die()


class KillingSource(AppendTableDataSource):
    @classmethod
    def name(cls) -> str:
        return "appendtable_killing"

    def streamWriter(self, schema: Any, overwrite: bool) -> StreamWriter:
        writer = super().streamWriter(schema, overwrite)
        killing = KillingStreamWriter.__new__(KillingStreamWriter)
        killing.__dict__.update(writer.__dict__)
        return killing


def main() -> None:
    source, sink, checkpoint, mode = sys.argv[1:5]
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    appendtable_spark.register(spark)
    spark.dataSource.register(KillingSource)
    stream = (
        spark.readStream.format("appendtable")
        .option("scan.mode", "from-snapshot")
        .option("scan.snapshot-id", "1")
        .option("maxFilesPerTrigger", "1")
        .load(source)
    )
    if mode == "sink":
        query = (
            stream.writeStream.format("appendtable_killing")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start(sink)
        )
    else:
        write = appendtable_spark.foreach_batch_sink(sink)

        def killing(batch: Any, batch_id: int) -> None:
            write(batch, batch_id)
            if batch_id == KILL_AFTER:
                _die()

        query = (
            stream.writeStream.foreachBatch(killing)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
