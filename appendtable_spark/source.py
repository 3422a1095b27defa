"""The ``appendtable`` Spark format (PySpark's Python Data Source API)."""

from __future__ import annotations

import uuid

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

import appendtable as at
from appendtable_spark.reader import BatchReader
from appendtable_spark.settings import Settings
from appendtable_spark.streaming import StreamSource
from appendtable_spark.types import spark_arrow_schema, spark_schema
from appendtable_spark.writer import BatchWriter, StreamWriter

__all__ = ["FORMAT", "AppendTableDataSource", "open_or_create"]

FORMAT = "appendtable"


def _pin(table: at.Table, settings: Settings) -> int | None:
    """The snapshot a batch read uses: ``scan.snapshot-id``, ``scan.timestamp-millis`` or the
    latest at the time the DataFrame is defined."""
    snapshot_id = settings.format_options.get("scan.snapshot-id")
    timestamp = settings.format_options.get("scan.timestamp-millis")
    if snapshot_id:
        return table.snapshot(int(snapshot_id)).id
    if timestamp:
        return table.scan(timestamp_ms=int(timestamp)).snapshot.id  # type: ignore[union-attr]
    latest = table.latest_snapshot()
    return latest.id if latest is not None else None


class AppendTableDataSource(DataSource):  # type: ignore[misc]
    """``spark.read/readStream/write/writeStream.format("appendtable")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        """The table's schema (or the ``columns`` option's projection). Also pins the
        snapshot, so every scan of this DataFrame reads the same one."""
        settings = Settings.parse(self.options)
        table = settings.open()
        self._pinned = _pin(table, settings)
        columns = settings.columns()
        arrow = (
            table.schema if columns is None else pa.schema([table.schema.field(c) for c in columns])
        )
        return spark_schema(arrow)

    def reader(self, schema: StructType) -> DataSourceReader:
        settings = Settings.parse(self.options)
        pinned = getattr(self, "_pinned", None)
        if pinned is None:  # a user-specified schema skips schema()
            pinned = _pin(settings.open(), settings)
        return BatchReader(settings, schema, pinned)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        settings = Settings.parse(self.options)
        table = open_or_create(settings, schema)
        table.check_write_schema(spark_arrow_schema(schema))
        user, identifier = settings.commit_identity()
        latest = table.latest_snapshot()
        return BatchWriter(
            settings,
            commit_user=user or f"spark-write-{uuid.uuid4().hex}",
            identifier=identifier,
            base_snapshot_id=latest.id if latest is not None else None,
            overwrite=overwrite,
            skip=user is not None
            and identifier is not None
            and table.has_committed(user, identifier),
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamSource(Settings.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        settings = Settings.parse(self.options)
        table = open_or_create(settings, schema)
        table.check_write_schema(spark_arrow_schema(schema))
        return StreamWriter(
            settings,
            commit_user=settings.adapter.get("commituser"),
            overwrite=overwrite,
        )


def open_or_create(settings: Settings, schema: StructType) -> at.Table:
    """The table at the settings' location, created from ``schema`` (with the settings' table
    options and partition columns) if there is none yet."""
    try:
        return settings.open()
    except at.TableNotFoundError:
        pass
    try:
        return at.create_table(
            settings.uri,
            spark_arrow_schema(schema),
            partition_by=settings.partition_by(),
            options=settings.format_options,
            storage_options=settings.storage_options,
        )
    except at.TableExistsError:  # created concurrently
        return settings.open()
