"""System tables in Spark: a table's metadata (``snapshots``, ``files``, ``partitions``, ...)
as a DataFrame, through the format's option ``systemTable``.

The metadata is read on the driver when the read is planned and travels to one task as an
Arrow IPC stream (metadata is small: 10,000 snapshots are a few MB). ``files``, ``manifests``,
``partitions`` and ``buckets`` time-travel with ``scan.snapshot-id``, ``scan.tag-name`` or
``scan.timestamp-millis``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

import appendtable as at
from appendtable_spark.settings import Settings
from appendtable_spark.types import cast_batch, spark_arrow_schema, spark_schema

__all__ = ["SystemTableReader", "system_schema", "system_table"]


def system_schema(name: str, columns: list[str] | None) -> StructType:
    """The Spark schema of system table ``name`` (or of its ``columns``)."""
    schema = at.system_table_schema(name)
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise at.InvalidOptionError(
                f"option 'columns': system table {name} has no column '{missing[0]}' "
                f"(columns: {', '.join(schema.names)})"
            )
        schema = pa.schema([schema.field(c) for c in columns])
    return spark_schema(schema)


@dataclass
class ArrowPartition(InputPartition):
    """Rows computed on the driver, as an Arrow IPC stream."""

    payload: bytes


class SystemTableReader(DataSourceReader):
    """A read of one system table, planned whole (no query's filters shape it)."""

    def __init__(self, settings: Settings, schema: StructType, name: str) -> None:
        self._settings = settings
        self._schema = schema
        self._name = name

    def partitions(self) -> list[ArrowPartition]:
        snapshot_id, timestamp, tag = self._settings.read_target()
        rows = self._settings.open().system_table(
            self._name, snapshot_id=snapshot_id, tag=tag, timestamp_ms=timestamp
        )
        rows = rows.select(self._schema.names)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows)
        return [ArrowPartition(sink.getvalue().to_pybytes())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ArrowPartition):
            return  # not one of ours (partitions() always returns one): nothing to read
        target = spark_arrow_schema(self._schema)
        for batch in pa.ipc.open_stream(partition.payload):
            yield cast_batch(batch, target)


def system_table(
    spark: SparkSession,
    uri: str,
    name: str,
    *,
    snapshot_id: int | None = None,
    tag: str | None = None,
    timestamp_ms: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """System table ``name`` of the table at ``uri`` as a DataFrame (see
    ``appendtable.Table.system_table``; the same columns, in Spark's types), read when its
    first query runs."""
    at.system_table_info(name)  # an unknown name fails here, naming the known ones
    reader = spark.read.format("appendtable").option("systemTable", name)
    for key, value in {
        "scan.snapshot-id": snapshot_id,
        "scan.tag-name": tag,
        "scan.timestamp-millis": timestamp_ms,
    }.items():
        if value is not None:
            reader = reader.option(key, str(value))
    for key, value in (storage_options or {}).items():
        text = value if isinstance(value, str) else json.dumps(value)
        reader = reader.option(f"storage.{key}", text)
    return reader.load(uri)
