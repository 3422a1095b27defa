"""The ``appendtable`` Spark format (PySpark's Python Data Source API).

What Spark reuses, and why the adapter is safe with it: Spark creates one ``DataSource`` per
relation (a DataFrame returned by ``load()``, a temporary view, one table reference of a SQL
statement) and reuses it, pickled, for every query of that relation; PySpark 4.x also keeps the
first planned read of a relation (its partitions and read function) and hands it to later
queries of the same relation, and even to other scans of it in the same query. So nothing a
query passes (filters, a limit) may shape what the reader plans. The reader plans the
relation's snapshot whole (every split, no filter); Spark applies every filter of every query
itself. The only state a ``DataSource`` keeps is set once, when the relation is defined: the
snapshot it reads (``schema()``). Readers and writers hold only what ``Settings`` derived from
the options of their own call.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

import appendtable as at
from appendtable_spark import options as registry
from appendtable_spark.catalog import (
    CatalogEntry,
    adapter_options,
    catalog_entry,
    check_columns,
    with_entry,
)
from appendtable_spark.ddl import parse_columns
from appendtable_spark.options import Use
from appendtable_spark.pinning import ReadPin, pin
from appendtable_spark.reader import BatchReader
from appendtable_spark.settings import Settings, check_append
from appendtable_spark.stream_source import RefusedStream, StreamSource, check_start
from appendtable_spark.system import SystemTableReader, system_schema
from appendtable_spark.types import spark_arrow_schema, spark_schema
from appendtable_spark.write_schema import check_write, merge_schema
from appendtable_spark.writer import BatchWriter, StreamWriter

__all__ = ["FORMAT", "AppendTableDataSource", "check_user_schema", "open_or_create"]

FORMAT = "appendtable"


_INSERT_SELECT_HINT = (
    ". For INSERT INTO <table> SELECT ...: Spark passes a Python data source's writer neither "
    "the table's location nor its options, only its columns' metadata, and that only where it "
    "renames or casts a column: a query whose columns already have the table's names and "
    "types (SELECT * FROM a relation of the same schema) reaches the writer without it. Name "
    "the columns differently (INSERT INTO t SELECT a AS c1, b AS c2 FROM s: Spark maps them "
    "by position), insert into a temporary view of the table "
    "(appendtable_spark.create_temp_view), or use appendtable_spark.write_table(df, uri). "
    "Nothing was written"
)


def _settings(options: Mapping[str, str], use: Use, schema: StructType) -> Settings:
    """The checked options of one call: a catalog table's (its schema carries its location
    and creation options, the statement's own ``WITH`` options override them) or a path's."""
    entry = catalog_entry(schema)
    if entry is not None:
        return Settings.parse(adapter_options(entry, options, use), use, location=entry.location)
    if not any(str(key).lower() == "path" for key in options):
        raise at.InvalidOptionError(
            "no table location: give it with .load(uri) / .save(uri) or .option('path', uri). "
            "For a SQL table: Spark does not tell a Python data source where a table defined "
            "with a column list (or by CREATE TABLE ... AS SELECT) is; define it with "
            "CREATE TABLE <name> USING appendtable LOCATION '<uri>' (for a new table with "
            "TBLPROPERTIES ('schema' = '<columns>', 'partitionBy' = '<columns>', ...))"
            + (_INSERT_SELECT_HINT if Use.WRITE in use else "")
        )
    return Settings.parse(options, use)


class AppendTableDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("appendtable")``, and catalog tables
    (``CREATE TABLE t USING appendtable LOCATION '<uri>'``)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        """The schema of the snapshot read (the latest, or the one named by ``scan.snapshot-id``,
        ``scan.timestamp-millis`` or ``scan.tag-name``: time travel returns the columns of its
        time), or the ``columns`` option's projection of it. With ``scan.mode`` (a stream's
        start), the current schema. Also pins the snapshot, once, when the relation is
        defined: every query of this DataFrame reads that snapshot, in this schema. At
        ``CREATE TABLE``, the catalog table's schema (see :mod:`appendtable_spark.catalog`)."""
        if "provider" in {str(k).lower() for k in self.options}:
            return create_catalog_table(self.options)
        settings = Settings.parse(self.options, Use.READ | Use.STREAM)
        if settings.given(registry.SYSTEM_TABLE):
            return system_schema(settings.get(registry.SYSTEM_TABLE), settings.columns())
        table = settings.open()
        if settings.format_options.get("scan.mode"):  # a stream's start: checked when defined
            check_start(table, settings.format_options)
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
        settings = _settings(self.options, Use.READ, schema)
        entry = catalog_entry(schema)
        if settings.given(registry.SYSTEM_TABLE):
            name = settings.get(registry.SYSTEM_TABLE)
            if entry is not None:
                check_columns(
                    schema, system_schema(name, None), uri=settings.uri, what=f"system table {name}"
                )
            return SystemTableReader(settings, schema, name)
        pinned: ReadPin | None = getattr(self, "_pinned", None) if entry is None else None
        if pinned is None:  # a catalog table, or a user-specified schema: schema() not called
            table = settings.open()
            pinned, arrow = pin(table, settings)
            travels = settings.read_target() != (None, None, None)
            what = f"snapshot {pinned.snapshot_id}" if travels else "the current schema"
            if entry is not None:
                if travels:  # a catalog entry out of date: redefining it is the way out
                    check_columns(
                        schema,
                        spark_schema(table.schema),
                        uri=settings.uri,
                        what="the current schema",
                    )
                check_columns(
                    schema,
                    spark_schema(arrow),
                    uri=settings.uri,
                    what=what,
                    travel_to=pinned.snapshot_id if travels else None,
                )
            else:
                check_user_schema(schema, spark_schema(arrow), uri=settings.uri, what=what)
        return BatchReader(settings, schema, pinned)

    def _write_table(self, schema: StructType, use: Use) -> tuple[Settings, at.Table]:
        """The table to write (created if missing), merged with ``schema`` under
        ``mergeSchema``, and checked against it."""
        settings = _settings(self.options, use, schema)
        table = open_or_create(settings, schema)
        if catalog_entry(schema) is not None:
            check_columns(
                schema, spark_schema(table.schema), uri=settings.uri, what="the current schema"
            )
        data = spark_arrow_schema(schema)
        merge = settings.merge_schema()
        if merge:
            merge_schema(table, data)
        check_write(table, data, merge=merge)
        return settings, table

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        if not overwrite:  # the write's own options (not those stored with a catalog table)
            check_append(self.options)
        settings, table = self._write_table(schema, Use.WRITE)
        user, identifier = settings.commit_identity()
        latest = table.latest_snapshot()
        return BatchWriter(
            settings,
            commit_user=user or f"spark-write-{uuid.uuid4().hex}",
            identifier=identifier,
            base_snapshot_id=latest.id if latest is not None else None,
            mode=settings.write_mode(overwrite),
            skip=user is not None
            and identifier is not None
            and table.has_committed(user, identifier),
            owner=settings.commit_owner(),
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        pinned = getattr(self, "_pinned", None)
        try:
            settings = _settings(self.options, Use.STREAM, schema)
        except at.AppendTableError as refused:  # (raised here, PySpark would hide it)
            return RefusedStream(refused)
        return StreamSource(settings, schema, pinned.schema_id if pinned else None)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        settings, _ = self._write_table(schema, Use.SINK)
        return StreamWriter(
            settings,
            commit_user=settings.get(registry.COMMIT_USER) or None,
            mode=settings.write_mode(overwrite),
            reuse=settings.get(registry.COMMIT_USER_REUSE),
        )


def check_user_schema(given: StructType, table: StructType, *, uri: str, what: str) -> None:
    """A schema given with ``spark.read.schema(...)`` must name columns of the table (``what``:
    the schema version read), each once, in the table's case and with the table's type; a
    subset in any order is fine (columns are read by name). A read never casts: Spark would
    cast silently (a double into FLOAT overflows to inf, strings would be parsed as numbers)
    or fail at query time, so anything else is refused here, naming the column."""
    fields = {f.name: f for f in table.fields}
    lowered = {name.lower(): name for name in fields}
    seen: set[str] = set()
    for field in given.fields:
        if field.name.lower() in seen:
            raise at.SchemaMismatchError(
                f"the schema given with .schema(...) names column '{field.name}' twice"
            )
        seen.add(field.name.lower())
        column = fields.get(field.name)
        if column is None:
            near = lowered.get(field.name.lower())
            hint = f" (did you mean '{near}'? names match in the table's case)" if near else ""
            raise at.SchemaMismatchError(
                f"the schema given with .schema(...) names column '{field.name}', which "
                f"{what} of the table at {uri} does not have{hint}; its columns: "
                f"{', '.join(fields)}"
            )
        want, have = field.dataType.simpleString(), column.dataType.simpleString()
        if want != have:
            raise at.SchemaMismatchError(
                f"the schema given with .schema(...) declares column '{field.name}' as {want}, "
                f"but it is {have} in {what} of the table at {uri}: a read does not cast "
                f"(give {have}, and cast in Spark)"
            )
        if column.nullable and not field.nullable:
            raise at.SchemaMismatchError(
                f"the schema given with .schema(...) declares column '{field.name}' NOT NULL, "
                f"but it may hold nulls in {what} of the table at {uri}"
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


def create_catalog_table(options: Mapping[str, str]) -> StructType:
    """``CREATE TABLE name USING appendtable LOCATION '<uri>' [TBLPROPERTIES (...)]``: the
    schema the catalog stores. An existing table is registered as it is (table options given
    must agree with it); a new one is created from the ``schema`` property (Spark SQL column
    definitions), ``partitionBy`` and the table options."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    if not (lowered.get("location") or lowered.get("path")):
        raise at.InvalidOptionError(
            "CREATE TABLE ... USING appendtable needs LOCATION '<uri>': the table's data "
            "lives there, not in Spark's warehouse"
        )
    settings = Settings.parse(options, Use.CREATE)
    if settings.given(registry.SYSTEM_TABLE):
        settings.open()  # the table must exist
        name = settings.get(registry.SYSTEM_TABLE)
        entry = CatalogEntry(settings.uri, {registry.SYSTEM_TABLE.name: name})
        return with_entry(system_schema(name, None), entry)
    columns = settings.get(registry.SCHEMA)
    try:
        table = settings.open()
    except at.TableNotFoundError:
        if not columns:
            raise at.TableNotFoundError(
                f"no appendtable table at {settings.uri}: to create one, give its columns "
                "as TBLPROPERTIES ('schema' = 'day DATE, id BIGINT, ...') (Spark does not "
                "pass a column list to Python data sources), with 'partitionBy' and table "
                "options such as 'bucket' beside it"
            ) from None
        table = open_or_create(settings, parse_columns(columns))
    else:
        _check_existing(table, settings, columns)
    stored = {
        option.name: settings.adapter[option.name]
        for option in (registry.PARTITION_OVERWRITE_MODE,)
        if settings.given(option)
    }
    return with_entry(spark_schema(table.schema), CatalogEntry(settings.uri, stored))


def _check_existing(table: at.Table, settings: Settings, columns: str) -> None:
    """Options of ``CREATE TABLE`` naming an existing table must describe it as it is."""
    if columns:
        declared = spark_schema(spark_arrow_schema(parse_columns(columns)))
        check_columns(declared, spark_schema(table.schema), uri=settings.uri, what="the table")
    partition_by = settings.partition_by()
    if partition_by and list(partition_by) != list(table.partition_by):
        raise at.InvalidOptionError(
            f"the table at {settings.uri} is partitioned by "
            f"({', '.join(table.partition_by)}), not ({', '.join(partition_by)})"
        )
    stored = table.options
    for key, value in settings.format_options.items():
        if "".join(stored.get(key, "").split()).lower() != "".join(value.split()).lower():
            raise at.InvalidOptionError(
                f"the table at {settings.uri} has option {key} = {stored.get(key)!r}, not "
                f"{value!r}: CREATE TABLE registers an existing table as it is (change options "
                "with Table.set_options)"
            )
