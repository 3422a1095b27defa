"""The ``appendtable`` Spark format (PySpark's Python Data Source API)."""

from __future__ import annotations

import uuid

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

import appendtable as at
from appendtable_spark.evolution import check_write, merge_schema
from appendtable_spark.pinning import pin
from appendtable_spark.reader import BatchReader
from appendtable_spark.settings import Settings
from appendtable_spark.streaming import StreamSource
from appendtable_spark.types import spark_arrow_schema, spark_schema
from appendtable_spark.writer import BatchWriter, StreamWriter

__all__ = ["FORMAT", "AppendTableDataSource", "open_or_create"]

FORMAT = "appendtable"


class AppendTableDataSource(DataSource):  # type: ignore[misc]
    """``spark.read/readStream/write/writeStream.format("appendtable")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        """The schema of the snapshot read (the latest, or the one named by ``scan.snapshot-id``,
        ``scan.timestamp-millis`` or ``scan.tag-name``: time travel returns the columns of its
        time), or the ``columns`` option's projection of it. With ``scan.mode`` (a stream's
        start), the current schema. Also pins the snapshot, so every scan of this DataFrame
        reads the same one, in this schema."""
        settings = Settings.parse(self.options)
        table = settings.open()
        self._pinned, arrow = pin(table, settings)
        columns = settings.columns()
        if columns is not None:
            missing = [c for c in columns if c not in arrow.names]
            if missing:
                raise at.InvalidFilterError(
                    f"option 'columns': unknown column '{missing[0]}' (columns: "
                    f"{', '.join(arrow.names)})"
                )
            arrow = pa.schema([arrow.field(c) for c in columns])
        return spark_schema(arrow)

    def reader(self, schema: StructType) -> DataSourceReader:
        settings = Settings.parse(self.options)
        pinned = getattr(self, "_pinned", None)
        if pinned is None:  # a user-specified schema skips schema()
            pinned, _ = pin(settings.open(), settings)
        return BatchReader(settings, schema, pinned)

    def _write_table(self, schema: StructType) -> tuple[Settings, at.Table]:
        """The table to write (created if missing), merged with ``schema`` under
        ``mergeSchema``, and checked against it."""
        settings = Settings.parse(self.options)
        table = open_or_create(settings, schema)
        data = spark_arrow_schema(schema)
        merge = settings.merge_schema()
        if merge:
            merge_schema(table, data)
        check_write(table, data, merge=merge)
        return settings, table

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        settings, table = self._write_table(schema)
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
        pinned = getattr(self, "_pinned", None)
        return StreamSource(
            Settings.parse(self.options), schema, pinned.schema_id if pinned else None
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        settings, _ = self._write_table(schema)
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
