"""The second phase of a two-phase write: committing messages from any number of writers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from appendtable._state import TableState
from appendtable.commit.changes import CommitRequest
from appendtable.commit.committer import Committer
from appendtable.errors import CommitConflictError, StorageError
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitKind, CommitMessage, Snapshot

__all__ = ["AfterCommit", "BeforeCommit", "TableCommit"]

#: Runs after every successful commit (compaction, expiration).
AfterCommit = Callable[[Snapshot, Sequence[CommitMessage]], None]
#: Rewrites a commit's messages before it is published (pre-commit compaction).
BeforeCommit = Callable[[list[CommitMessage]], list[CommitMessage]]


class TableCommit:
    """Commits writers' messages as one snapshot per call, as ``commit_user``.

    Idempotence: give each commit an ``identifier`` that increases per commit user (for example
    a Spark batch id); a commit whose identifier this user already committed (or passed) does
    nothing and returns None, also after the snapshot that recorded it has expired.
    """

    def __init__(
        self,
        state: TableState,
        commit_user: str,
        *,
        after_commit: AfterCommit | None = None,
        before_commit: BeforeCommit | None = None,
    ) -> None:
        if not commit_user:
            raise ValueError("commit_user must be a non-empty string")
        self._state = state
        self.commit_user = commit_user
        self._after_commit = after_commit
        self._before_commit = before_commit

    def _committer(self) -> Committer:
        return self._state.committer()

    def _watermark(self, messages: Sequence[CommitMessage], explicit: int | None) -> int | None:
        if explicit is not None:
            return explicit
        event_times = [m.max_event_time_ms for m in messages if m.max_event_time_ms is not None]
        if not event_times:
            return None
        return max(event_times) - self._state.options.get(opt.WATERMARK_DELAY)

    def commit(
        self,
        messages: Iterable[CommitMessage],
        *,
        identifier: int | None = None,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Snapshot | None:
        """Append the files of ``messages`` atomically. Returns the new snapshot, or None if
        there was nothing to commit or this identifier already landed. The watermark (epoch ms)
        defaults to the messages' max event time minus ``watermark.delay`` when the table
        declares ``watermark.column``; a snapshot's watermark never decreases."""
        listed = list(messages)
        request = CommitRequest(
            kind=CommitKind.APPEND,
            commit_user=self.commit_user,
            messages=tuple(listed),
            identifier=identifier,
            watermark=self._watermark(listed, watermark),
            properties=dict(properties or {}),
        )
        return self._run(request)

    def _run(self, request: CommitRequest) -> Snapshot | None:
        """Commit, with the table's pre-commit merging and post-commit maintenance."""
        committer = self._committer()
        merged: list[CommitMessage] = []
        if self._before_commit is not None and request.messages:
            if committer.already_landed(request):
                return None
            merged = self._before_commit(list(request.messages))
            request = replace(request, messages=tuple(merged))
        try:
            snapshot = committer.commit(request)
        except CommitConflictError:
            if merged:
                self.abort(merged)  # the merged files are ours; the caller's were deleted
            raise
        if snapshot is not None and self._after_commit is not None:
            self._after_commit(snapshot, request.messages)
        return snapshot

    def overwrite(
        self,
        messages: Iterable[CommitMessage],
        *,
        partitions: Sequence[Mapping[str, object]] | None = None,
        base_snapshot_id: int | None = None,
        identifier: int | None = None,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Snapshot | None:
        """Replace the table's rows (or those of the given static ``partitions``) with the files
        of ``messages``, atomically. ``base_snapshot_id`` is the snapshot the overwrite was
        planned against (default: the latest when this is called): if files were appended to
        the overwritten partitions after it, CommitConflictError is raised instead of silently
        dropping them."""
        listed = list(messages)
        return self._run(
            CommitRequest(
                kind=CommitKind.OVERWRITE,
                commit_user=self.commit_user,
                messages=tuple(listed),
                identifier=identifier,
                watermark=self._watermark(listed, watermark),
                overwrite=self._state.partition_scope(partitions),
                base_snapshot_id=base_snapshot_id,
                properties=dict(properties or {}),
            )
        )

    def abort(self, messages: Iterable[CommitMessage]) -> None:
        """Delete the data files of messages that will not be committed. Only call this when
        the commit definitely did not land (never after CommitStateUnknownError)."""
        for message in messages:
            for file in (*message.new_files, *message.compact_after):
                try:
                    self._state.storage.delete(file.path)
                except StorageError:
                    pass  # orphan-file removal reclaims it
