"""The local Spark session of the tests' driver scripts (restart_app.py, jvm_warmup_app.py):
each is a driver process of its own, configured the same way."""

from __future__ import annotations

from pyspark.sql import SparkSession


def driver_session(**extra: str) -> SparkSession:
    """A ``local[2]`` session bound to 127.0.0.1, in UTC, without UI, plus ``extra`` settings."""
    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    for key, value in extra.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
