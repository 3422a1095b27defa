"""The second phase of a two-phase write: committing messages from any number of writers.

Guarantees of ``TableCommit``:

* A commit that landed is reported as landed. Once the snapshot is published, nothing raises
  out of ``commit``/``overwrite``: post-commit maintenance (compaction, expiration) runs under
  ``appendtable.after_commit.guard.run_maintenance``, which logs a failure with the snapshot
  id and leaves the work for the next commit or a maintenance job.
* ``abort`` deletes files only through the discard gate (``appendtable.commit.discard``), so
  it never deletes a file a snapshot references, even when called after a commit that landed;
  after ``CommitStateUnknownError`` it deletes nothing at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

from appendtable import argument_checks
from appendtable._state import TableState
from appendtable.after_commit.guard import run_maintenance
from appendtable.commit.changes import CommitRequest, PartitionScope
from appendtable.commit.committer import Committer
from appendtable.commit.discard import DiscardResult
from appendtable.errors import CommitStateUnknownError, InvalidArgumentError
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitKind, CommitMessage, Snapshot

__all__ = ["AfterCommit", "BeforeCommit", "TableCommit"]

log = logging.getLogger("appendtable")

#: Runs after every successful commit (compaction, expiration). Whatever it raises is logged,
#: never raised to the committer's caller.
AfterCommit = Callable[[Snapshot, Sequence[CommitMessage]], None]
#: Rewrites a commit's messages before it is published (pre-commit compaction); files it
#: replaces or creates were written after snapshot ``since`` was the latest.
BeforeCommit = Callable[[list[CommitMessage], "int | None"], list[CommitMessage]]


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
            raise InvalidArgumentError("commit_user must be a non-empty string")
        self._state = state
        self.commit_user = commit_user
        self._after_commit = after_commit
        self._before_commit = before_commit
        self._outcome_unknown = False

    def _committer(self) -> Committer:
        return self._state.committer()

    def _watermark(self, messages: Sequence[CommitMessage], explicit: object) -> int | None:
        if explicit is not None:
            return argument_checks.epoch_ms(explicit, "watermark")
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
        owner: str = "",
    ) -> Snapshot | None:
        """Append the files of ``messages`` atomically. Returns the new snapshot, or None if
        there was nothing to commit or this identifier already landed. The watermark (epoch ms)
        defaults to the messages' max event time minus ``watermark.delay`` when the table
        declares ``watermark.column``; a snapshot's watermark never decreases. ``owner`` is
        recorded with the identifier (see ``Table.last_commit``)."""
        listed = list(messages)
        request = CommitRequest(
            kind=CommitKind.APPEND,
            commit_user=self.commit_user,
            messages=tuple(listed),
            identifier=identifier,
            watermark=self._watermark(listed, watermark),
            properties=dict(properties or {}),
            owner=owner,
        )
        return self._run(request)

    def _run(self, request: CommitRequest) -> Snapshot | None:
        """Commit, with the table's pre-commit merging and post-commit maintenance."""
        committer = self._committer()
        merged: list[CommitMessage] = []
        since: int | None = None
        if self._before_commit is not None and request.messages:
            # The merge replaces the caller's files, which only a snapshot after ``since`` can
            # reference, unless they are a retry of a commit whose outcome was unknown (then
            # every retained snapshot is checked). The newest id this process saw serves: an
            # older one only widens the check, and asking storage costs two or three requests.
            snapshots = self._state.snapshots
            if not self._outcome_unknown:
                since = snapshots.latest_seen() or snapshots.latest_id()
            if committer.already_landed(request):
                return None
            merged = self._before_commit(list(request.messages), since)
            request = replace(request, messages=tuple(merged))
        try:
            snapshot = committer.commit(request)
        except CommitStateUnknownError:
            self._outcome_unknown = True
            raise
        except BaseException:
            if merged:  # the merged files are ours (the caller's were replaced by them)
                self._state.discard(_paths(merged), since_snapshot_id=since)
            raise
        if snapshot is None:
            if merged:  # nothing landed (the identifier had landed meanwhile)
                self._state.discard(_paths(merged), since_snapshot_id=since)
            return None
        if self._after_commit is not None:
            self._maintain(snapshot, request.messages)
        return snapshot

    def _maintain(self, snapshot: Snapshot, messages: Sequence[CommitMessage]) -> None:
        assert self._after_commit is not None
        after_commit = self._after_commit
        run_maintenance(lambda: after_commit(snapshot, messages), snapshot)

    def overwrite(
        self,
        messages: Iterable[CommitMessage],
        *,
        partitions: Sequence[Mapping[str, object]] | None = None,
        dynamic: bool = False,
        base_snapshot_id: int | None = None,
        identifier: int | None = None,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
        owner: str = "",
    ) -> Snapshot | None:
        """Replace the table's rows (or those of the given static ``partitions``, or with
        ``dynamic`` those of the partitions ``messages`` write rows into: none when they hold
        no rows) with the files of ``messages``, atomically. ``base_snapshot_id`` is the
        snapshot the overwrite was planned against (default: the latest when this is called):
        if files were appended to the overwritten partitions after it, CommitConflictError is
        raised instead of silently dropping them."""
        partitions = argument_checks.overwrite_specs(partitions)
        listed = list(messages)
        state = self._state
        if dynamic and partitions:
            raise InvalidArgumentError("give partitions= or dynamic=True, not both")
        scope = (
            _written_partitions(listed, state.schema.partition_keys)
            if dynamic
            else state.partition_scope(partitions)
        )
        if partitions:  # files only of the given partitions (named in the table's terms)
            described = state.describe_specs(partitions)
            for message in listed:
                if message.new_files:
                    scope.require(
                        message.partition,
                        state.schema.partition_keys,
                        named=state.partition_name(message.partition),
                        scope_named=described,
                    )
        return self._run(
            CommitRequest(
                kind=CommitKind.OVERWRITE,
                commit_user=self.commit_user,
                messages=tuple(listed),
                identifier=identifier,
                watermark=self._watermark(listed, watermark),
                overwrite=scope,
                base_snapshot_id=base_snapshot_id,
                properties=dict(properties or {}),
                owner=owner,
            )
        )

    @contextmanager
    def discarding(
        self, messages: Sequence[CommitMessage], *, since_snapshot_id: int | None = None
    ) -> Iterator[None]:
        """Around committing ``messages``: if the block raises, ``abort`` them (which keeps
        them when the outcome is unknown or a snapshot references them) and re-raise."""
        try:
            yield
        except CommitStateUnknownError:
            self._outcome_unknown = True  # the files may be referenced: keep them
            raise
        except BaseException:
            self.abort(messages, since_snapshot_id=since_snapshot_id)
            raise

    def abort(
        self, messages: Iterable[CommitMessage], *, since_snapshot_id: int | None = None
    ) -> DiscardResult:
        """Delete the data files of messages given up on, through the discard gate: files a
        snapshot references (the commit landed after all) are kept, and so is everything
        after this committer saw ``CommitStateUnknownError``. ``since_snapshot_id``: the
        latest snapshot when the files were written, if known (a cheaper check)."""
        paths = _paths(messages)
        if self._outcome_unknown:
            log.warning(
                "keeping %d data file(s): a commit of this committer has an unknown outcome",
                len(paths),
            )
            return DiscardResult(left=tuple(paths))
        return self._state.discard(paths, since_snapshot_id=since_snapshot_id)


def _written_partitions(messages: Sequence[CommitMessage], keys: Sequence[str]) -> PartitionScope:
    """The partitions ``messages`` write rows into, as an overwrite's scope."""
    written = {message.partition for message in messages if message.new_files}
    return PartitionScope(tuple(dict(zip(keys, values, strict=True)) for values in written))


def _paths(messages: Iterable[CommitMessage]) -> list[str]:
    return [f.path for m in messages for f in (*m.new_files, *m.compact_after)]
