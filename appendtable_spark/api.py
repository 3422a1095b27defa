"""The adapter's helpers: registration, bucket-aware writes, foreachBatch, compaction."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark.errors import PySparkAttributeError, PySparkNotImplementedError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import appendtable as at
from appendtable_spark import identity, write_schema
from appendtable_spark import options as registry
from appendtable_spark.options import SparkOption, Use
from appendtable_spark.settings import Settings, check_append
from appendtable_spark.source import FORMAT, AppendTableDataSource, open_or_create
from appendtable_spark.staged import (
    bucket_partitioning,
    staged_write_unsupported,
    write_staged,
)
from appendtable_spark.types import spark_arrow_schema
from appendtable_spark.write_mode import (
    MODE_OPTIONS,
    SPARK_MODES,
    OverwriteDynamic,
    OverwriteTable,
    SparkMode,
    WriteMode,
    format_write,
)

__all__ = [
    "bucket_column",
    "compact",
    "create_temp_view",
    "foreach_batch_sink",
    "register",
    "write_table",
]


log = logging.getLogger("appendtable_spark")

#: Spark's session setting for what an overwrite of a partitioned table replaces.
SESSION_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"


def _session_dynamic(spark: SparkSession) -> bool:
    """The session's ``spark.sql.sources.partitionOverwriteMode`` is ``dynamic``."""
    return str(spark.conf.get(SESSION_OVERWRITE_MODE, "static")).strip().lower() == "dynamic"


def register(spark: SparkSession) -> None:
    """Register the ``appendtable`` format (and its SQL tables: ``CREATE TABLE ... USING
    appendtable``). Spark's session configuration is left as it is. Spark hands a Python data
    source only a write's own options, never the session's configuration: if the session's
    ``spark.sql.sources.partitionOverwriteMode`` is ``dynamic``, a WARNING says that the
    format's overwrites do not see it (``write_table`` does)."""
    spark.dataSource.register(AppendTableDataSource)
    if _session_dynamic(spark):
        log.warning(
            "this session sets %s=dynamic, which df.write.format('appendtable') cannot see "
            "(Spark passes a Python data source only the write's options): "
            "mode('overwrite') there replaces the whole table. Give "
            ".option('%s', 'dynamic') to replace only the partitions written, or use "
            "appendtable_spark.write_table(df, uri, mode='overwrite'), which honours the "
            "session setting",
            SESSION_OVERWRITE_MODE,
            registry.PARTITION_OVERWRITE_MODE.name,
        )


def _storage(options: Mapping[str, object] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (options or {}).items()}


def bucket_column(uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Column:
    """``pmod(hash(key...), N)``: the bucket of each row, as Spark computes it natively (it is
    bit-for-bit the table's own bucket function)."""
    table = at.open_table(uri, storage_options=storage_options)
    if table.bucket <= 0:
        raise at.InvalidOptionError(f"{uri} is not a bucketed table (bucket = {table.bucket})")
    return F.pmod(F.hash(*[F.col(c) for c in table.bucket_key]), F.lit(table.bucket))


def _clustered(df: DataFrame, uri: str, storage_options: Mapping[str, Any] | None) -> DataFrame:
    """Each bucket in exactly one task, task b holding bucket b (so one writer per bucket per
    commit, in order, and the buckets spread evenly over the tasks)."""
    try:
        table = at.open_table(uri, storage_options=storage_options)
    except at.TableNotFoundError:
        return df
    if table.bucket <= 0:
        return df
    return df.repartition(table.bucket, bucket_partitioning(table))


def write_table(
    df: DataFrame,
    uri: str,
    *,
    mode: SparkMode = "append",
    options: Mapping[str, object] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    partition_by: list[str] | str | None = None,
    native: bool | None = None,
    partitions: list[dict[str, object]] | None = None,
    merge_schema: bool = False,
) -> None:
    """Write ``df`` as one snapshot (``mode="overwrite"``: an OVERWRITE of the whole table, or
    with ``partitions=[{"day": date(2024, 5, 1)}]`` of those static partitions only: a row of
    any other partition fails the write with SchemaMismatchError naming it, and nothing lands;
    with option ``partitionOverwriteMode`` = ``dynamic`` of the partitions ``df`` has rows in).
    When the write names neither, the session's ``spark.sql.sources.partitionOverwriteMode``
    decides, as for Spark's own tables: ``dynamic`` overwrites a partitioned table
    dynamically. Partition-overwrite options with ``mode="append"`` are refused.
    A table that does not exist is created from ``df``'s schema with ``options``.

    ``native`` picks the data path. Spark's own Parquet writer (True) writes the files into a
    staging area inside the table, and the driver checks their footers, moves them into the
    table's layout and commits them (see ``appendtable_spark.staged``). The format's Python
    writer (False) streams Arrow batches through the table's writer on the executors. By
    default (None) the native path is taken whenever Spark can write the table's types
    exactly. Either way the columns are checked against the table before anything is written
    (SchemaMismatchError), bucketed tables are repartitioned with Spark's native
    ``pmod(hash(key), N)`` so each bucket has one writer, and options ``commitUser`` +
    ``commitIdentifier`` make the write idempotent.

    ``merge_schema`` (or option ``mergeSchema``): columns and struct fields only ``df`` has are
    first added to the table as nullable fields (one ALTER snapshot), and the table's nullable
    columns and struct fields ``df`` lacks are written as nulls. Types are never changed.
    Without it, a DataFrame whose columns differ from the table's fails with
    SchemaMismatchError naming the column, and nothing is written."""
    if mode not in SPARK_MODES:
        raise at.InvalidArgumentError(
            f"mode must be {' or '.join(repr(m) for m in SPARK_MODES)}, not {mode!r}"
        )
    overwrite = mode == "overwrite"
    if partitions is not None and not overwrite:
        raise at.InvalidArgumentError(
            "partitions= names what an overwrite replaces: mode='overwrite'"
        )
    if partitions is not None and len(partitions) == 0:
        raise at.InvalidArgumentError(
            "partitions: an empty list names no partition to replace; pass None (the default) "
            "to replace every row"
        )
    if partitions is not None and any(len(spec) == 0 for spec in partitions):
        raise at.InvalidArgumentError(
            "partitions: an empty spec {} names no partition column (it would replace every "
            "row); pass None (the default) to replace every row"
        )
    given = {str(k): _text(v) for k, v in (options or {}).items()}
    for key, value in (storage_options or {}).items():
        given[f"storage.{key}"] = value if isinstance(value, str) else _json(value)
    keywords = {
        option: value
        for option, value in (
            (registry.PARTITION_BY, partition_by),
            (registry.OVERWRITE_PARTITIONS, partitions),
            (registry.MERGE_SCHEMA, merge_schema or None),
        )
        if value is not None and value != []
    }
    settings = Settings.parse({**given, "path": uri}, Use.WRITE, keywords=keywords)
    if not overwrite:
        check_append(given)
    merge = settings.merge_schema()
    table = open_or_create(settings, df.schema)
    write_mode = settings.write_mode(overwrite)
    if (
        isinstance(write_mode, OverwriteTable)
        and table.partition_by
        and not settings.given(registry.OVERWRITE_PARTITIONS)
        and not settings.given(registry.PARTITION_OVERWRITE_MODE)
        and _session_dynamic(df.sparkSession)
    ):
        write_mode = OverwriteDynamic()
    data = spark_arrow_schema(df.schema)
    if merge:
        write_schema.merge_schema(table, data)
    write_schema.check_write(table, data, merge=merge)
    unsupported = staged_write_unsupported(table) or write_schema.unchecked_cast(
        df.schema, table.schema
    )
    if native and unsupported:
        raise at.InvalidOptionError(f"no native write path for {uri}: {unsupported}")
    if native is False or unsupported:
        spark_mode, format_options = _format_options(given, settings, keywords, write_mode)
        writer = _clustered(df, uri, storage_options).write.format(FORMAT).mode(spark_mode)
        for key, value in format_options.items():
            writer = writer.option(key, value)
        writer.save(uri)
        return
    user, identifier = settings.commit_identity()
    if user is not None and identifier is not None and table.has_committed(user, identifier):
        return  # this write already landed
    with table:  # the write returns once the compaction after it is done too
        write_staged(
            df,
            table,
            mode=write_mode,
            commit_user=user or f"spark-write-{uuid.uuid4().hex}",
            identifier=identifier,
            merge=merge,
            owner=settings.commit_owner(),
        )


def _json(value: object) -> str:
    return json.dumps(value)


def _text(value: object) -> str:
    """An option value as Spark would pass it (``True`` -> ``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _format_options(
    given: Mapping[str, str],
    settings: Settings,
    keywords: Iterable[SparkOption[Any]],
    mode: WriteMode,
) -> tuple[SparkMode, dict[str, str]]:
    """How ``write_table`` hands the write to the format: Spark's mode, and the options given
    (but those saying which rows an overwrite replaces: the mode's options say that, the
    session's setting included) with the keywords' settings as option texts."""
    spark_mode, mode_options = format_write(mode)
    options = {
        key: value
        for key, value in given.items()
        if registry.lookup(key.lower()) not in MODE_OPTIONS
    }
    for option in keywords:
        if option is registry.PARTITION_BY:
            options[option.name] = ",".join(settings.partition_by())
        elif option is registry.MERGE_SCHEMA:
            options[option.name] = _text(settings.merge_schema())
    return spark_mode, {**options, **mode_options}


def foreach_batch_sink(
    uri: str,
    *,
    commit_user: str | None = None,
    options: Mapping[str, object] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    merge_schema: bool = False,
    commit_user_reuse: str | None = None,
    checkpoint_location: str | None = None,
) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function that appends each micro-batch exactly once (with
    ``merge_schema`` or option ``mergeSchema``, as ``write_table(..., merge_schema=True)``).

    Each batch commits idempotently as (commit user, identifier), recording the streaming
    query it belongs to (see ``appendtable_spark.identity``): a batch replayed after a crash
    (even one between the table commit and Spark's checkpoint commit) is skipped, and a new
    query (a new checkpoint) reusing ``commit_user`` is refused at its first batch, before
    anything is written, unless ``commit_user_reuse="continue"`` lets it take the commit user
    over. The commit user is ``commit_user``, or else derived from the query id, which is
    stable per checkpoint.

    Under Spark Connect, ``foreachBatch`` cannot see the query id: give ``commit_user``, and
    ``checkpoint_location`` (the query's ``checkpointLocation``; the id is read from it) so a
    new query reusing the commit user is always told apart from a replay. ``options`` are
    checked now, as ``write_table`` would check them."""
    if not isinstance(merge_schema, bool):
        raise at.InvalidArgumentError(
            f"foreach_batch_sink(merge_schema=...) is True or False, not {merge_schema!r}"
        )
    given = {str(k): _text(v) for k, v in (options or {}).items()}
    reuse = _sink_setting(given, registry.COMMIT_USER_REUSE, commit_user_reuse)
    option_user = _sink_setting(given, registry.COMMIT_USER, commit_user)
    for key in given:
        option = registry.lookup(key.lower())
        if option in (registry.COMMIT_IDENTIFIER, registry.COMMIT_OWNER):
            raise at.InvalidOptionError(
                f"foreach_batch_sink numbers its commits itself: drop option '{key}'"
            )
    Settings.parse({**given, "path": uri}, Use.WRITE)
    user_name = str(option_user) if option_user else None
    reuse_mode = str(reuse)
    storage = dict(storage_options or {})

    def sink(batch: DataFrame, batch_id: int) -> None:
        query = _query_id(batch, checkpoint_location, storage)
        user = user_name or _query_user(query)
        try:
            record = at.open_table(uri, storage_options=storage).last_commit(user)
        except at.TableNotFoundError:
            record = None
        decision = identity.decide(
            user=user,
            batch=batch_id,
            query=query,
            record=record,
            reuse=reuse_mode,
            option="foreach_batch_sink(commit_user_reuse=...)",
        )
        if isinstance(decision, identity.Skip):
            return  # a replay of a batch that landed: write nothing
        table_options = {
            **given,
            registry.COMMIT_USER.name: user,
            registry.COMMIT_IDENTIFIER.name: decision.identifier,
            registry.COMMIT_OWNER.name: decision.owner.text(),
        }
        write_table(
            batch,
            uri,
            options=table_options,
            storage_options=storage_options,
            merge_schema=merge_schema,
        )

    return sink


def _sink_setting(given: dict[str, str], option: SparkOption[Any], keyword: object) -> object:
    """A setting of ``foreach_batch_sink`` given as a keyword or as an option (taken out of
    ``given``, which goes on to ``write_table``), checked; its default if neither."""
    keys = [key for key in given if key.lower() in option.keys]
    if keys and keyword is not None:
        raise at.InvalidArgumentError(f"give {option.keyword}= or option '{option.name}', not both")
    text = given.pop(keys[0]) if keys else None
    for key in keys[1:]:
        if given.pop(key) != text:
            raise at.InvalidOptionError(f"option '{option.name}' given twice, differently")
    if keyword is not None:
        text = str(keyword)
    return option.default if text is None else option.value(text)


def _query_id(
    batch: DataFrame, checkpoint_location: str | None, storage: Mapping[str, Any]
) -> str | None:
    """The streaming query of a ``foreachBatch`` call: the session's local property (classic
    Spark), else the checkpoint's metadata, else unknown (Spark Connect)."""
    try:
        query = batch.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
    except (PySparkAttributeError, PySparkNotImplementedError):  # Spark Connect
        query = None
    if query:
        return str(query)
    if checkpoint_location is not None:
        return identity.checkpoint_query_id(checkpoint_location, storage)
    return None


def _query_user(query: str | None) -> str:
    if query is None:
        raise at.InvalidArgumentError(
            "foreach_batch_sink needs commit_user= when it cannot see the streaming query id "
            "(under Spark Connect, or outside foreachBatch): without a stable commit user a "
            "replayed batch could be written twice"
        )
    return f"spark-query-{query}"


def create_temp_view(
    spark: SparkSession, name: str, uri: str, *, options: Mapping[str, object] | None = None
) -> None:
    """``CREATE OR REPLACE TEMPORARY VIEW name USING appendtable``: SQL over the table as of
    now. A temp view reads the snapshot that was latest when it was created (re-create it
    to see newer data); a catalog table (``CREATE TABLE name USING appendtable LOCATION
    '<uri>'``) reads the latest snapshot at each statement. ``options`` are read options,
    checked like the format's."""
    given = {str(k): _text(v) for k, v in (options or {}).items()}
    Settings.parse({**given, "path": uri}, Use.READ)
    clauses = ", ".join(f"{_identifier(k)} {_string(v)}" for k, v in {"path": uri, **given}.items())
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW {_identifier(name)} USING {FORMAT} OPTIONS ({clauses})"
    )


def _identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


#: How many times ``compact`` plans and runs its Spark job when its commit keeps conflicting.
COMPACT_ATTEMPTS = 3


def compact(
    spark: SparkSession,
    uri: str,
    *,
    full: bool = False,
    partitions: list[dict[str, object]] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> at.Snapshot | None:
    """Compaction with the coordinator on the driver and the rewrites on executors: plan,
    run every task in Spark (writing into one staging area), move the outputs into the table
    and commit one COMPACT snapshot. On a conflict with a concurrent change (another writer's
    compaction, delete or overwrite of the planned files) nothing is applied, the outputs are
    discarded, and it plans again from the new snapshot: CommitConflictError after
    ``COMPACT_ATTEMPTS`` plans that all conflicted. A failed Spark job leaves nothing behind
    but the staging area, which is removed."""
    settings = Settings(uri, dict(storage_options or {}))
    table = settings.open()
    compactor = table.compactor(f"spark-compaction-{spark.sparkContext.applicationId}")
    attempt = 1
    while True:
        try:
            return _compact_once(spark, settings, table, compactor, full, partitions)
        except at.CommitConflictError:
            if attempt >= COMPACT_ATTEMPTS:
                raise
            attempt += 1


def _compact_once(
    spark: SparkSession,
    settings: Settings,
    table: at.Table,
    compactor: at.Compactor,
    full: bool,
    partitions: list[dict[str, object]] | None,
) -> at.Snapshot | None:
    """One plan, one Spark job and one commit of ``compact``."""
    plan = compactor.plan(full=full, partitions=partitions)
    if not plan.tasks:
        return None
    payloads = [task.to_bytes() for task in plan.tasks]
    with table.staging_area(since_snapshot_id=plan.snapshot_id) as area:
        area_id = area.id

        def run(task: bytes) -> bytes:
            worker = settings.open()
            message = worker.compactor().run_task(
                at.CompactionTask.from_bytes(task), staging=worker.staging_area(area_id)
            )
            return message.to_bytes()

        rdd = spark.sparkContext.parallelize(payloads, numSlices=len(payloads))
        written = [at.CommitMessage.from_bytes(p) for p in rdd.map(run).collect()]
        messages = area.adopt_written(written)
        try:
            return compactor.commit(messages)
        except at.CommitConflictError:
            compactor.abort(messages, since_snapshot_id=plan.snapshot_id)
            raise
