"""The second phase of a two-phase write: committing messages from any number of writers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from appendtable._state import TableState
from appendtable.commit.changes import CommitRequest, OverwriteScope
from appendtable.commit.committer import Committer
from appendtable.errors import InvalidFilterError, StorageError
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitKind, CommitMessage, Snapshot
from appendtable.planning.filters import to_stored

__all__ = ["TableCommit"]


class TableCommit:
    """Commits writers' messages as one snapshot per call, as ``commit_user``.

    Idempotence: give each commit an ``identifier`` that increases per commit user (for example
    a Spark batch id); a commit whose identifier this user already committed (or passed) does
    nothing and returns None, also after the snapshot that recorded it has expired.
    """

    def __init__(self, state: TableState, commit_user: str) -> None:
        if not commit_user:
            raise ValueError("commit_user must be a non-empty string")
        self._state = state
        self.commit_user = commit_user

    def _committer(self) -> Committer:
        state = self._state
        return Committer(
            state.storage,
            state.snapshots,
            state.manifests,
            state.options,
            schema_id=state.schema.id,
            partition_keys=state.schema.partition_keys,
        )

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
        return self._committer().commit(
            CommitRequest(
                kind=CommitKind.APPEND,
                commit_user=self.commit_user,
                messages=tuple(listed),
                identifier=identifier,
                watermark=self._watermark(listed, watermark),
                properties=dict(properties or {}),
            )
        )

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
        scope = OverwriteScope(
            tuple(self._stored_partition(p) for p in partitions) if partitions else None
        )
        return self._committer().commit(
            CommitRequest(
                kind=CommitKind.OVERWRITE,
                commit_user=self.commit_user,
                messages=tuple(listed),
                identifier=identifier,
                watermark=self._watermark(listed, watermark),
                overwrite=scope,
                base_snapshot_id=base_snapshot_id,
                properties=dict(properties or {}),
            )
        )

    def _stored_partition(self, spec: Mapping[str, object]) -> Mapping[str, object]:
        types = self._state.column_types
        keys = set(self._state.schema.partition_keys)
        for key in spec:
            if key not in keys:
                raise InvalidFilterError(
                    f"overwrite partition spec names '{key}', which is not a partition column "
                    f"(partition keys: {', '.join(sorted(keys)) or 'none'})"
                )
        return {
            key: None if value is None else to_stored(value, types[key], key)
            for key, value in spec.items()
        }

    def abort(self, messages: Iterable[CommitMessage]) -> None:
        """Delete the data files of messages that will not be committed. Only call this when
        the commit definitely did not land (never after CommitStateUnknownError)."""
        for message in messages:
            for file in (*message.new_files, *message.compact_after):
                try:
                    self._state.storage.delete(file.path)
                except StorageError:
                    pass  # orphan-file removal reclaims it
