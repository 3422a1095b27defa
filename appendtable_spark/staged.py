"""Spark's own Parquet writer carrying a table write (the native write path of ``write_table``).

1. The driver shapes the DataFrame like the table's files: the table's columns in its order,
   cast to its types (already checked to cast safely), plus hidden columns that give every
   (partition, bucket) its own directory: the bucket, computed with Spark's native
   ``pmod(hash(key...), N)`` (bit-for-bit the table's bucket function), and a hash of the
   partition values. A bucketed table is repartitioned by bucket so each bucket has one
   writer per commit.
2. Spark's Parquet writer writes into a staging area inside the table, partitioned by the
   hidden columns (which it leaves out of the files), with the table's codec and
   microsecond timestamps.
3. The core adopts the files: it checks each footer against the table (columns, order, types,
   no nulls in non-nullable columns, one partition per file), moves the files into the table's
   layout and takes their statistics from the footers.
4. The driver commits one snapshot, idempotently on (commit user, identifier) when one is given.

Nothing is visible before step 4. A failed Spark job or a failed check removes the staging
area; files adopted but not committed are discarded through the core's gate, which keeps
them when the commit's outcome is unknown or a snapshot references them. A driver that dies
midway leaves only unreferenced files, which ``remove_orphan_files`` reclaims.
"""

from __future__ import annotations

import re

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

import appendtable as at
from appendtable_spark.evolution import check_write, shaped_columns
from appendtable_spark.locations import spark_location
from appendtable_spark.types import spark_arrow_schema, spark_type

__all__ = ["staged_write_unsupported", "write_staged"]

#: The hidden directory columns (names Spark and the staging area do not treat as hidden
#: files: no leading ``_`` or ``.``).
BUCKET_COLUMN = "appendtable-bucket"
PARTITION_COLUMN = "appendtable-partition"
#: Table codecs and the name Spark's Parquet writer knows them by (brotli needs a codec
#: library Spark does not ship).
_SPARK_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4_raw"}


def staged_write_unsupported(table: at.Table) -> str | None:
    """Why Spark's Parquet writer cannot write this table's files, or None if it can: every
    column type must come back from a Spark-written file exactly as the table declares it
    (not so for large strings, nanosecond or non-UTC timestamps, unsigned integers, ...)."""
    codec = str(table.option("file.compression"))
    if codec not in _SPARK_CODECS and codec != "none":
        return f"Spark's Parquet writer has no '{codec}' codec"
    for field in table.schema:
        try:
            written = spark_arrow_schema(
                StructType([StructField(field.name, spark_type(field.type, field.name))])
            ).field(0)
        except (at.InvalidSchemaError, TypeError, ValueError):
            return f"column '{field.name}' ({field.type}) has no Spark Parquet equivalent"
        if written.type != field.type:
            return (
                f"Spark writes column '{field.name}' as {written.type}, the table declares "
                f"{field.type}"
            )
    return None


def _quoted(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _unused(name: str, schema: pa.Schema) -> str:
    while name in schema.names:
        name += "-"
    return name


def _shaped(df: DataFrame, table: at.Table, schema: pa.Schema) -> tuple[DataFrame, list[str]]:
    """The rows as the table's files hold them (``schema``: the table's columns, struct fields
    matched by name, missing nullable ones as nulls), plus the hidden directory columns
    (bucket first)."""
    frame = df.select(*shaped_columns(df.schema, schema))
    hidden = []
    if table.bucket > 0:
        keys = [_quoted(name) for name in table.bucket_key]
        bucket = _unused(BUCKET_COLUMN, schema)
        frame = frame.withColumn(bucket, F.pmod(F.hash(*keys), F.lit(table.bucket)))
        hidden.append(bucket)
    if table.partition_by:
        partition = _unused(PARTITION_COLUMN, schema)
        frame = frame.withColumn(
            partition, F.xxhash64(*[_quoted(name) for name in table.partition_by])
        )
        hidden.append(partition)
    if table.bucket > 0:  # one task per bucket: one writer per (partition, bucket)
        frame = frame.repartition(table.bucket, *[_quoted(c) for c in hidden])
    return frame, hidden


def _spark_write(frame: DataFrame, hidden: list[str], table: at.Table, location: str) -> None:
    codec = str(table.option("file.compression"))
    writer = (
        frame.write.mode("append")  # into the (new, empty) staging area
        .option("compression", _SPARK_CODECS.get(codec, "none"))
        # Spark writes INT96 timestamps by default, which read back as nanoseconds
        .option("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    )
    if codec == "zstd":
        writer = writer.option(
            "parquet.compression.codec.zstd.level", str(table.option("file.compression.zstd-level"))
        )
    if hidden:
        writer = writer.partitionBy(*hidden)
    writer.parquet(location)


def _buckets(
    files: list[str], hidden: list[str], table: at.Table
) -> tuple[list[str], list[int] | None]:
    """The staged files to adopt and each one's bucket (from its hidden directory). Spark may
    write one row-less file outside the directories for an empty DataFrame: it is left out."""
    if table.bucket <= 0:
        return files, None
    directory = re.compile(rf"^{re.escape(hidden[0])}=(\d+)/")
    named = [(name, directory.search(name)) for name in files]
    kept = [(name, int(match.group(1))) for name, match in named if match is not None]
    return [name for name, _ in kept], [bucket for _, bucket in kept]


#: Staging areas made before giving up when the schema keeps changing under the check.
_ATTEMPTS = 20


def _checked_area(table: at.Table, df: DataFrame, merge: bool) -> at.StagingArea:
    """A new staging area whose schema (the current one when it is made: its files are
    checked against and recorded with it) ``df`` was checked against."""
    data = spark_arrow_schema(df.schema)
    for _ in range(_ATTEMPTS):
        schema_id = table.schema_id
        check_write(table, data, merge=merge)
        area = table.staging_area()
        if area.view.schema.id == schema_id:
            return area
        area.remove()  # the schema changed meanwhile: check again
    raise at.SchemaChangeError(
        f"the schema of {table.uri} kept changing while a write was checked: retry later"
    )


def write_staged(
    df: DataFrame,
    table: at.Table,
    *,
    overwrite: bool,
    commit_user: str,
    identifier: int | None,
    partitions: list[dict[str, object]] | None = None,
    merge: bool = False,
) -> at.Snapshot | None:
    """Write ``df`` with Spark's Parquet writer and commit it as one snapshot (an OVERWRITE of
    the whole table with ``overwrite``, or of the static ``partitions``). Returns the snapshot,
    or None when nothing was committed (no rows, or this identifier had already landed).
    ``merge``: the nullable columns and struct fields ``df`` lacks are written as nulls (the
    table was already merged with its schema). The files are written in the schema the
    staging area pins, which ``df`` is checked against, and recorded with it."""
    with _checked_area(table, df, merge) as area:
        frame, hidden = _shaped(df, table, area.view.arrow_schema)
        base = area.since_snapshot_id  # the latest snapshot before anything was written
        _spark_write(frame, hidden, table, spark_location(table.uri, area.path))
        files, buckets = _buckets(area.files(), hidden, table)
        messages = area.adopt(files, buckets=buckets)
        committer = table.committer(commit_user)
        with committer.discarding(messages, since_snapshot_id=base):
            if overwrite:
                landed = committer.overwrite(
                    messages, partitions=partitions, base_snapshot_id=base, identifier=identifier
                )
            else:
                landed = committer.commit(messages, identifier=identifier)
        if landed is None and messages:
            committer.abort(messages, since_snapshot_id=base)  # this identifier had landed
    return landed
