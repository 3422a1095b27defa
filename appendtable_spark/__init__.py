"""Spark adapter for appendtable: the ``appendtable`` format for batch and Structured Streaming,
an exactly-once ``foreachBatch`` sink, and distributed compaction.

    import appendtable_spark
    appendtable_spark.register(spark)
    df = spark.read.format("appendtable").load(uri)
    appendtable_spark.write_table(df, uri)     # Spark's Parquet writer; the driver commits
    appendtable_spark.delete(spark, uri, "user_id = 42")   # one atomic DELETE snapshot
    query = stream.writeStream.foreachBatch(appendtable_spark.foreach_batch_sink(uri)).start()
"""

from appendtable_spark.api import (
    bucket_column,
    compact,
    create_temp_view,
    foreach_batch_sink,
    register,
    write_table,
)
from appendtable_spark.deletes import delete
from appendtable_spark.native import read_table
from appendtable_spark.source import AppendTableDataSource
from appendtable_spark.system import system_table

__all__ = [
    "AppendTableDataSource",
    "bucket_column",
    "compact",
    "create_temp_view",
    "delete",
    "foreach_batch_sink",
    "read_table",
    "register",
    "system_table",
    "write_table",
]
