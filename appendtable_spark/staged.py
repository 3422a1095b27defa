"""Spark's own Parquet writer carrying a table write (the native write path of ``write_table``).

1. The driver shapes the DataFrame like the table's files: the table's columns in its order,
   cast to its types (already checked to cast safely), plus, for a partitioned table, a hidden
   column (a hash of the partition values) that gives every partition its own directory. A
   bucketed table is repartitioned into N tasks so that task b holds exactly the rows of
   bucket b: the shuffle key is, per row, an integer chosen on the driver so that Spark's hash
   partitioning (``pmod(hash(x), N)``, the function Spark's own bucketing uses) sends it to
   partition b, where b is the row's bucket computed with Spark's native
   ``pmod(hash(key...), N)`` (bit-for-bit the table's bucket function). Each task is then one
   bucket and needs no sort (Spark sorts a task only by the hidden partition column, and only
   for partitioned tables); a file's bucket is the task number in its name (``part-<b>-``).
2. Spark's Parquet writer writes into a staging area inside the table (partitioned by the
   hidden column, which it leaves out of the files), with the table's codec and microsecond
   timestamps.
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

import functools
import re

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

import appendtable as at
from appendtable_spark.locations import spark_location
from appendtable_spark.types import spark_arrow_schema, spark_type
from appendtable_spark.write_mode import WriteMode, commit_files
from appendtable_spark.write_schema import check_write, shaped_columns

__all__ = ["bucket_partitioning", "staged_write_unsupported", "write_staged"]

#: The hidden directory column (a name Spark and the staging area do not treat as a hidden
#: file: no leading ``_`` or ``.``).
PARTITION_COLUMN = "appendtable-partition"
#: The task number in the name of a file Spark's writer wrote (``part-00003-<uuid>...``).
_TASK_FILE = re.compile(r"(?:^|/)part-(\d+)-[^/]*$")
#: Table codecs and the name Spark's Parquet writer knows them by (brotli needs a codec
#: library Spark does not ship).
_SPARK_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4_raw"}


def staged_write_unsupported(table: at.Table) -> str | None:
    """Why Spark's Parquet writer cannot write this table's files, or None if it can: every
    column type must come back from a Spark-written file exactly as the table declares it
    (not so for large strings, nanosecond or non-UTC timestamps, unsigned integers, ...), and
    no column may have a name another column held before (``Table.reused_names``)."""
    codec = str(table.option("file.compression"))
    if codec not in _SPARK_CODECS and codec != "none":
        return f"Spark's Parquet writer has no '{codec}' codec"
    reused = table.reused_names()
    if reused:
        return (
            f"column '{reused[0]}' has a name another column of the table held before, and "
            "Spark's Parquet writer writes no field ids"
        )
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


@functools.cache
def _partition_keys(buckets: int) -> tuple[int, ...]:
    """For each bucket b of ``buckets``, an int32 that Spark's hash partitioning into
    ``buckets`` partitions (``pmod(hash(x), N)``, seed 42) sends to partition b: the smallest
    non-negative one (found among consecutive candidates, hashed with the table's own Spark
    hash)."""
    keys = np.full(buckets, -1, dtype=np.int64)
    start, step = 0, max(4096, 8 * buckets)
    while (keys < 0).any():
        candidates = np.arange(start, start + step, dtype=np.int32)
        partitions = at.bucket_ids([pa.array(candidates)], buckets)
        targets, first = np.unique(partitions, return_index=True)
        new = keys[targets] < 0
        keys[targets[new]] = start + first[new]
        start += step
    return tuple(int(key) for key in keys)


def bucket_partitioning(table: at.Table) -> Column:
    """The column to ``repartition(table.bucket, ...)`` a DataFrame by so that partition
    (task) b holds exactly the rows of bucket b: per row, the key of ``_partition_keys`` for
    the row's bucket (``pmod(hash(key...), N)``, computed by Spark)."""
    bucket = F.pmod(F.hash(*[_quoted(name) for name in table.bucket_key]), F.lit(table.bucket))
    # one SQL literal (one call into the JVM however many buckets there are)
    keys = F.expr(f"array({', '.join(map(str, _partition_keys(table.bucket)))})")
    return F.element_at(keys, bucket + F.lit(1))


def _shaped(df: DataFrame, table: at.Table, schema: pa.Schema) -> tuple[DataFrame, str | None]:
    """The rows as the table's files hold them (``schema``: the table's columns, struct fields
    matched by name, missing nullable ones as nulls), plus the hidden directory column of a
    partitioned table (its name, or None); a bucketed table's rows one bucket per task, task b
    holding bucket b."""
    frame = df.select(*shaped_columns(df.schema, schema))
    hidden = None
    if table.partition_by:
        hidden = _unused(PARTITION_COLUMN, schema)
        frame = frame.withColumn(
            hidden, F.xxhash64(*[_quoted(name) for name in table.partition_by])
        )
    if table.bucket > 0:
        frame = frame.repartition(table.bucket, bucket_partitioning(table))
    return frame, hidden


def _spark_write(frame: DataFrame, hidden: str | None, table: at.Table, location: str) -> None:
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
    for key, value in _bloom_filter_options(table).items():
        writer = writer.option(key, value)
    if hidden is not None:
        writer = writer.partitionBy(hidden)
    writer.parquet(location)


def _bloom_filter_options(table: at.Table) -> dict[str, str]:
    """Parquet writer options that give Spark's files the bloom filters of the table's
    ``file-index.bloom-filter.columns`` (adopting a file describes them; without them its
    lookups are not skipped until compaction rewrites it): sized for ``.items`` distinct
    values when set, else adaptively, at most for a million."""
    columns = table.option("file-index.bloom-filter.columns")
    if not isinstance(columns, tuple | list) or not columns:
        return {}
    items = table.option("file-index.bloom-filter.items")
    ndv = str(items) if isinstance(items, int) and items > 0 else "1000000"
    options = (
        {}
        if isinstance(items, int) and items > 0
        else {"parquet.bloom.filter.adaptive.enabled": "true"}
    )
    for column in columns:
        options[f"parquet.bloom.filter.enabled#{column}"] = "true"
        options[f"parquet.bloom.filter.expected.ndv#{column}"] = ndv
        options[f"parquet.bloom.filter.fpp#{column}"] = str(
            table.option("file-index.bloom-filter.fpp")
        )
    return options


def _buckets(
    files: list[str], hidden: str | None, table: at.Table
) -> tuple[list[str], list[int] | None]:
    """The staged files to adopt and, for a bucketed table, each one's bucket (the number of
    the task that wrote it). Spark may write one row-less file outside the partition
    directories for an empty DataFrame: it is left out. Raises InvalidOptionError for a file
    whose bucket cannot be told."""
    if hidden is not None:
        files = [name for name in files if name.startswith(f"{hidden}=")]
    if table.bucket <= 0:
        return files, None
    buckets = []
    for name in files:
        match = _TASK_FILE.search(name)
        bucket = int(match.group(1)) if match is not None else -1
        if not 0 <= bucket < table.bucket:
            raise at.InvalidOptionError(
                f"Spark wrote {name!r}, whose bucket (the task number in its name) is not one "
                f"of the table's {table.bucket}: nothing was committed"
            )
        buckets.append(bucket)
    return files, buckets


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
    mode: WriteMode,
    commit_user: str,
    identifier: int | None,
    merge: bool = False,
    owner: str = "",
) -> at.Snapshot | None:
    """Write ``df`` with Spark's Parquet writer and commit it as one snapshot, as ``mode`` says
    (see ``appendtable_spark.write_mode``). Returns the snapshot, or None when nothing was
    committed (no rows, or this identifier had already landed). ``merge``: the nullable
    columns and struct fields ``df`` lacks are written as nulls (the table was already merged
    with its schema). The files are written in the schema the staging area pins, which ``df``
    is checked against, and recorded with it. ``owner`` is recorded with the identifier."""
    with _checked_area(table, df, merge) as area:
        frame, hidden = _shaped(df, table, area.view.arrow_schema)
        base = area.since_snapshot_id  # the latest snapshot before anything was written
        _spark_write(frame, hidden, table, spark_location(table, area.path))
        files, buckets = _buckets(area.files(), hidden, table)
        messages = area.adopt(files, buckets=buckets)
        committer = table.committer(commit_user)
        with committer.discarding(messages, since_snapshot_id=base):
            landed = commit_files(
                committer,
                messages,
                mode,
                base_snapshot_id=base,
                identifier=identifier,
                owner=owner,
            )
        if landed is None and messages:
            committer.abort(messages, since_snapshot_id=base)  # this identifier had landed
    return landed
