"""A SparkSession of its own with a Hive metastore (Spark's embedded Derby), run as a separate
process by tests/spark/test_sql_tables.py: each run is a new session on the same metastore.

    python -m tests.spark.sql_app METASTORE_DIR WAREHOUSE_DIR STATEMENTS_JSON

Runs each SQL statement in order and prints one JSON line per statement: its rows (as lists of
strings) or its error's text.
"""

from __future__ import annotations

import json
import os
import sys

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import appendtable_spark


def main(metastore: str, warehouse: str, statements: list[str]) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("appendtable-sql-tables")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", warehouse)
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={metastore};create=true",
        )
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .enableHiveSupport()
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    appendtable_spark.register(spark)
    for statement in statements:
        try:
            rows = [[str(v) for v in row] for row in spark.sql(statement).collect()]
            print(json.dumps({"rows": rows}), flush=True)
        except (PySparkException, Py4JJavaError) as exc:
            print(json.dumps({"error": str(exc)[:20000]}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
