"""Batch and streaming writes: executors write data files, the driver commits one snapshot.

* ``write`` (executors) streams Spark's Arrow batches through the table's writer into the
  write's staging area (``_staging/<id>``, one per write, made on the driver): columns are
  matched by name and checked (types were already checked on the driver), rows routed to
  (partition, bucket) files. A failing task deletes its own files.
* ``commit`` (driver) moves every task's files from the staging area into the table's layout
  and commits them as one snapshot, idempotently on (commit user, identifier) when an
  identifier is known (streaming: the batch id). If the commit definitely failed, the moved
  files are discarded; the staging area is removed either way.
* ``abort`` (driver; Spark calls it when a task or ``commit`` failed) removes the staging area
  whole, with whatever tasks wrote into it, including tasks Spark no longer reports. It never
  touches files ``commit`` moved into the table: those are either referenced by a snapshot,
  of unknown outcome, or were already discarded by ``commit``. A zombie task still writing
  after the removal leaves an orphan in ``_staging``, which ``remove_orphan_files`` reclaims.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

import appendtable as at
from appendtable_spark import options as registry
from appendtable_spark.identity import Skip, checkpoint_query_id, decide
from appendtable_spark.settings import Settings
from appendtable_spark.tables import cached_table
from appendtable_spark.write_mode import WriteMode, commit_files
from appendtable_spark.write_schema import pad_batch

__all__ = ["BatchWriter", "FilesMessage", "StreamWriter"]


@dataclass
class FilesMessage(WriterCommitMessage):
    """What one task wrote: serialized commit messages (and, when streaming, the query id)."""

    messages: list[bytes] = field(default_factory=list)
    query_id: str | None = None
    #: The staging area the task wrote into (streaming writes).
    staging_id: str | None = None


def write_task(settings: Settings, area_id: str, batches: Iterator[pa.RecordBatch]) -> list[bytes]:
    """Write one task's rows into the write's staging area, in the table's current schema (a
    worker's cached table is refreshed first: the driver may just have changed it); the
    serialized commit messages of its files. Under ``mergeSchema`` the nullable columns and
    struct fields the rows lack are written as nulls."""
    table = cached_table(settings)
    _ = table.schema_id  # refreshes the cached table's schema, which the re-opened area takes
    area = table.staging_area(area_id)
    schema = area.view.arrow_schema if settings.merge_schema() else None
    with area.writer() as writer:
        for batch in batches:
            writer.write(batch if schema is None else pad_batch(batch, schema))
        return [message.to_bytes() for message in writer.prepare_commit()]


def _ours(messages: list[WriterCommitMessage | None]) -> list[FilesMessage | None]:
    """The tasks' messages as Spark hands them to ``commit`` / ``abort`` (None for a task that
    sent none), typed as the ones ``write`` returns."""
    return [message if isinstance(message, FilesMessage) else None for message in messages]


def _decode(messages: list[FilesMessage | None]) -> list[at.CommitMessage]:
    return [
        at.CommitMessage.from_bytes(payload)
        for message in messages
        if message is not None
        for payload in message.messages
    ]


def commit_staged(
    table: at.Table,
    area: at.StagingArea,
    messages: list[at.CommitMessage],
    *,
    commit_user: str,
    identifier: int | None,
    mode: WriteMode,
    base_snapshot_id: int | None,
    owner: str = "",
) -> at.Snapshot | None:
    """Move the files of ``messages`` out of ``area`` and commit them as one snapshot, as
    ``mode`` says (see ``appendtable_spark.write_mode``); the area is removed afterwards, and
    the post-commit maintenance is waited for. Files of a commit that definitely failed, or of
    a replay whose identifier had landed, are discarded. ``owner`` is recorded with the
    identifier (see ``appendtable_spark.identity``)."""
    committer = table.committer(commit_user)
    try:
        moved = area.adopt_written(messages)
        since = area.since_snapshot_id
        with committer.discarding(moved, since_snapshot_id=since):
            landed = commit_files(
                committer,
                moved,
                mode,
                base_snapshot_id=base_snapshot_id,
                identifier=identifier,
                owner=owner,
            )
        if landed is None and moved:
            committer.abort(moved, since_snapshot_id=since)  # this identifier had landed
        return landed
    finally:
        area.remove()
        # The driver's handle is per write: finish its compaction before the next batch, so
        # batches do not pile up compactions that race each other.
        table.close()


class BatchWriter(DataSourceArrowWriter):
    """A write of one DataFrame as one snapshot, as ``mode`` says."""

    def __init__(
        self,
        settings: Settings,
        *,
        commit_user: str,
        identifier: int | None,
        base_snapshot_id: int | None,
        mode: WriteMode,
        skip: bool,
        owner: str = "",
    ) -> None:
        self._settings = settings
        self._commit_user = commit_user
        self._identifier = identifier
        self._owner = owner
        self._base = base_snapshot_id
        self._mode = mode
        self._skip = skip  # this (commit user, identifier) already landed: write nothing
        # Spark pickles this writer once, for the tasks and for the driver's commit or abort,
        # which therefore agree on the write's staging area
        self._area = uuid.uuid4().hex

    def _staging(self, table: at.Table) -> at.StagingArea:
        # the tasks wrote after the base snapshot was read on the driver
        return table.staging_area(self._area, since_snapshot_id=self._base)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        if self._skip:
            return FilesMessage()
        return FilesMessage(write_task(self._settings, self._area, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self._skip:
            return
        table = self._settings.open()
        commit_staged(
            table,
            self._staging(table),
            _decode(_ours(messages)),
            commit_user=self._commit_user,
            identifier=self._identifier,
            mode=self._mode,
            base_snapshot_id=self._base,
            owner=self._owner,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if not self._skip:
            self._staging(self._settings.open()).remove()


def stream_staging_id(key: str, batch_id: int | str) -> str:
    """The staging area of one micro-batch of one streaming write (``key``: what identifies
    the write across restarts), the same wherever it is computed."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return f"stream-{digest}-{batch_id}"


class StreamWriter(DataSourceStreamArrowWriter):
    """A streaming sink: one snapshot per micro-batch, exactly once per query.

    The commit user is the ``commitUser`` option, or else derived from the query id, which is
    stable per checkpoint. Each batch commits as (commit user, identifier) and records the
    query as the identifier's owner (``appendtable_spark.identity``): a micro-batch replayed
    after a crash is recognised and skipped, and a new query (a new checkpoint) reusing the
    commit user is refused at its first batch, before anything is committed, or with
    ``commitUserReuse`` = ``continue`` numbered after the old query's batches.

    Each micro-batch has its own staging area, named from the batch id and the query's key
    (the ``checkpointLocation`` option, else the query id, which is stable per checkpoint,
    with the ``commitUser``), so that the driver's commit and abort, which Spark runs from a
    data source instance of their own, find it: with the checkpoint in the options even when
    every task failed, else from the tasks' messages. Two queries (two checkpoints) never
    share an area, even when they share a commit user."""

    def __init__(
        self,
        settings: Settings,
        *,
        commit_user: str | None,
        mode: WriteMode,
        reuse: str = "fail",
    ) -> None:
        self._settings = settings
        self._commit_user = commit_user
        self._mode = mode
        self._reuse = reuse
        self._checkpoint = settings.get(registry.CHECKPOINT_LOCATION) or None

    def _area_key(self, query_id: str | None) -> str | None:
        """What names this query's staging areas (None: not known here)."""
        if self._checkpoint is not None:
            return self._checkpoint
        if query_id:
            return f"{self._commit_user or ''}-query-{query_id}"
        return None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        context = TaskContext.get()
        query_id = context.getLocalProperty("sql.streaming.queryId") if context else None
        batch = context.getLocalProperty("streaming.sql.batchId") if context else None
        key = self._area_key(query_id) or f"{self._commit_user or ''}-unknown"
        area = stream_staging_id(key, batch if batch is not None else "unknown")
        return FilesMessage(write_task(self._settings, area, iterator), query_id, area)

    def _query(self, messages: list[FilesMessage | None]) -> str | None:
        """The query id the tasks saw (else the checkpoint's, if the options name it)."""
        ids = {m.query_id for m in messages if m is not None and m.query_id}
        if len(ids) == 1:
            return ids.pop()
        if not ids and self._checkpoint is not None:
            return checkpoint_query_id(self._checkpoint, self._settings.storage_options)
        return None

    def _areas(
        self, table: at.Table, messages: list[FilesMessage | None], batch_id: int
    ) -> list[at.StagingArea]:
        """This batch's staging areas (one, unless the tasks disagreed). Their files can only
        be named by this batch's commit, which comes after the latest snapshot of now: their
        removal checks the snapshots from there on."""
        names = {m.staging_id for m in messages if m is not None and m.staging_id}
        key = self._area_key(self._query(messages))
        if key is not None:
            names.add(stream_staging_id(key, batch_id))
        latest = table.latest_snapshot()
        since = latest.id if latest is not None else None
        return [table.staging_area(name, since_snapshot_id=since) for name in sorted(names)]

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        ours = _ours(messages)
        table = self._settings.open()
        areas = self._areas(table, ours, batchId)
        try:
            self._commit(table, areas, ours, batchId)
        finally:
            for area in areas:
                area.remove()

    def _commit(
        self,
        table: at.Table,
        areas: list[at.StagingArea],
        messages: list[FilesMessage | None],
        batch_id: int,
    ) -> None:
        decoded = _decode(messages)
        written = {m.staging_id for m in messages if m is not None and m.messages}
        query = self._query(messages)
        user = self._commit_user or (f"spark-query-{query}" if query else None)
        if user is None or len(written) > 1:
            if decoded:
                raise at.InvalidOptionError(
                    "cannot tell which streaming query wrote this batch: set option "
                    "'commitUser' to a name that is stable for this checkpoint"
                )
            return
        decision = decide(
            user=user,
            batch=batch_id,
            query=query,
            record=table.last_commit(user),
            reuse=self._reuse,
            option="option 'commitUserReuse'",
        )
        area = next((a for a in areas if a.id in written), areas[0]) if areas else None
        if isinstance(decision, Skip) or area is None:
            return  # a replay of a batch that landed (its files go with the area)
        commit_staged(
            table,
            area,
            decoded,
            commit_user=user,
            identifier=decision.identifier,
            mode=self._mode,
            base_snapshot_id=None,
            owner=decision.owner.text(),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        for area in self._areas(self._settings.open(), _ours(messages), batchId):
            area.remove()
