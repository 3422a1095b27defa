"""Shared fixtures: storage URIs for every backend, and one session-scoped local Spark."""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole test run (start-up costs about 5 s)."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    warehouse = tempfile.mkdtemp(prefix="appendtable-spark-warehouse-")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("appendtable-tests")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(params=["local", "memory"])
def uri(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A fresh table location on local disk and on fsspec's memory:// file system."""
    if request.param == "local":
        yield str(tmp_path / "table")
        return
    path = f"memory://appendtable-tests/{uuid.uuid4().hex}"
    yield path
    fs = fsspec.filesystem("memory")
    if fs.exists(path):
        fs.rm(path, recursive=True)
