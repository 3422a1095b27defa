"""Batch and streaming writes: executors write data files, the driver commits one snapshot.

* ``write`` (executors) streams Spark's Arrow batches through the table's writer: columns are
  matched by name and checked (types were already checked on the driver), rows routed to
  (partition, bucket) files. A failing task deletes its own files.
* ``commit`` (driver) commits every task's files as one snapshot, idempotently on
  (commit user, identifier) when an identifier is known (streaming: the batch id).
* ``abort`` (driver; Spark calls it also when ``commit`` raised, possibly *after* the snapshot
  landed) deletes the files only if the write did not land.
"""

from __future__ import annotations

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
from appendtable_spark.settings import Settings
from appendtable_spark.tables import cached_table

__all__ = ["BatchWriter", "FilesMessage", "StreamWriter"]


@dataclass
class FilesMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task wrote: serialized commit messages (and, when streaming, the query id)."""

    messages: list[bytes] = field(default_factory=list)
    query_id: str | None = None


def write_task(settings: Settings, batches: Iterator[pa.RecordBatch]) -> list[bytes]:
    """Write one task's rows; the serialized commit messages of its files."""
    table = cached_table(settings)
    with table.writer() as writer:
        for batch in batches:
            writer.write(batch)
        return [message.to_bytes() for message in writer.prepare_commit()]


def _decode(messages: list[FilesMessage | None]) -> list[at.CommitMessage]:
    return [
        at.CommitMessage.from_bytes(payload)
        for message in messages
        if message is not None
        for payload in message.messages
    ]


def _delete_files(table: at.Table, messages: list[at.CommitMessage]) -> None:
    table.committer("spark-cleanup").abort(messages)


class BatchWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """A write of one DataFrame as one snapshot (OVERWRITE when ``overwrite``)."""

    def __init__(
        self,
        settings: Settings,
        *,
        commit_user: str,
        identifier: int | None,
        base_snapshot_id: int | None,
        overwrite: bool,
        skip: bool,
    ) -> None:
        self._settings = settings
        self._commit_user = commit_user
        self._identifier = identifier
        self._base = base_snapshot_id
        self._overwrite = overwrite
        self._skip = skip  # this (commit user, identifier) already landed: write nothing

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        if self._skip:
            return FilesMessage()
        return FilesMessage(write_task(self._settings, iterator))

    def commit(self, messages: list[FilesMessage | None]) -> None:
        if self._skip:
            return
        table = self._settings.open()
        decoded = _decode(messages)
        committer = table.committer(self._commit_user)
        if self._overwrite:
            landed = committer.overwrite(
                decoded, base_snapshot_id=self._base, identifier=self._identifier
            )
        else:
            landed = committer.commit(decoded, identifier=self._identifier)
        if landed is None and decoded and self._identifier is not None:
            _delete_files(table, decoded)  # a replay of a write that had already landed

    def abort(self, messages: list[FilesMessage | None]) -> None:
        if self._skip:
            return
        table = self._settings.open()
        if table.has_committed(self._commit_user, self._identifier, since_snapshot_id=self._base):
            return  # commit() raised after the snapshot landed: the files are in use
        _delete_files(table, _decode(messages))


class StreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """A streaming sink: one snapshot per micro-batch, idempotent on (commit user, batch id).

    The commit user is the ``commitUser`` option, or else derived from the query id, which is
    stable per checkpoint: a micro-batch replayed after a crash is recognised and skipped."""

    def __init__(self, settings: Settings, *, commit_user: str | None, overwrite: bool) -> None:
        self._settings = settings
        self._commit_user = commit_user
        self._overwrite = overwrite

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        context = TaskContext.get()
        query_id = context.getLocalProperty("sql.streaming.queryId") if context else None
        return FilesMessage(write_task(self._settings, iterator), query_id)

    def _user(self, messages: list[FilesMessage | None]) -> str | None:
        if self._commit_user:
            return self._commit_user
        ids = {m.query_id for m in messages if m is not None and m.query_id}
        return f"spark-query-{ids.pop()}" if ids else None

    def commit(self, messages: list[FilesMessage | None], batchId: int) -> None:
        decoded = _decode(messages)
        user = self._user(messages)
        if user is None:
            if decoded:
                raise at.InvalidOptionError(
                    "cannot tell which streaming query wrote this batch: set option "
                    "'commitUser' to a name that is stable for this checkpoint"
                )
            return
        table = self._settings.open()
        committer = table.committer(user)
        if self._overwrite:
            landed = committer.overwrite(decoded, identifier=batchId)
        else:
            landed = committer.commit(decoded, identifier=batchId)
        if landed is None and decoded:
            _delete_files(table, decoded)  # a replay of a batch that had already landed

    def abort(self, messages: list[FilesMessage | None], batchId: int) -> None:
        user = self._user(messages)
        table = self._settings.open()
        if user is not None and table.has_committed(user, batchId):
            return
        _delete_files(table, _decode(messages))
