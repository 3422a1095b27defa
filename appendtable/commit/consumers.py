"""Named stream consumers and watermark-alignment groups, stored in the table directory.

A consumer file records where a named reader resumes; writing it is atomic (local: temp file
and rename; object stores: a single PUT), so a reader killed at any point leaves either its old
or its new progress. Expiration never removes a snapshot a live consumer still needs.

A consumer file is replaced only if it still holds the version its writer saw
(``Storage.replace_if_unchanged``): on object stores the condition travels with the request, so
a save that failed (its client gave up) and that the network delivers after a later save of the
same reader is refused by the store, instead of moving the position back.
"""

from __future__ import annotations

import time

from appendtable.commit.snapshots import SnapshotStore
from appendtable.errors import CommitConflictError, CorruptMetadataError, ObjectNotFoundError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import ConsumerState, WatermarkMember
from appendtable.storage import Storage

__all__ = ["ConsumerStore", "WatermarkGroupStore"]


#: Saves of one position tried before giving up when its file keeps changing under it.
_SAVE_ATTEMPTS = 8


class ConsumerStore:
    """The consumers' progress records. One store serves one reader (or a listing): it
    remembers the version of each record it resumed from or saved last, so that a save finds
    out whether anyone else changed the record since."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        #: The version of each consumer's record this store read or wrote last (None: known
        #: absent); a consumer missing here is unknown.
        self._versions: dict[str, str | None] = {}

    def get(self, consumer_id: str) -> ConsumerState | None:
        path = layout.consumer_path(consumer_id)
        try:
            data = self._storage.read(path)
        except ObjectNotFoundError:
            return None
        return codec.decode(data, ConsumerState, codec.Kind.CONSUMER, self._storage.uri(path))

    def resume(self, consumer_id: str) -> ConsumerState | None:
        """``get``, remembering the record's version: a reader resumes from it, and its saves
        then replace this record only (see ``put``)."""
        version = self._storage.version(layout.consumer_path(consumer_id))
        state = self.get(consumer_id) if version is not None else None
        self._versions[consumer_id] = version if state is not None else None
        return state

    def put(self, consumer_id: str, state: ConsumerState, *, reset: bool = False) -> None:
        """Save ``state`` as the consumer's progress. Each request is conditional on the
        version this store resumed from or saved last, so an earlier save of this reader
        delivered late never overwrites this one (one request per save). When the record
        changed since (a save of this reader that failed and still landed; a record removed
        by ``delete_consumer`` or ``consumer.expiration-time``: the running reader registers
        its consumer again), it is replaced anyway, unless that would lose or repeat rows: a
        record ahead of ``state`` (another reader with the same id), or removed while the
        snapshot ``state`` needs expired, raises CommitConflictError and nothing is saved. So
        a consumer never moves back and is never brought back at an expired position.
        ``reset``: replace whatever the record holds (``consumer.ignore-progress``)."""
        path = layout.consumer_path(consumer_id)
        data = codec.encode(state, codec.Kind.CONSUMER)
        known = consumer_id in self._versions and not reset
        version = self._versions.get(consumer_id)
        for _attempt in range(_SAVE_ATTEMPTS):
            if not known:
                version = self._storage.version(path)
            written = self._storage.replace_if_unchanged(path, data, version)
            if written is not None:
                self._versions[consumer_id] = written
                return
            if not reset:
                self._check_not_superseded(consumer_id, state, had_record=version is not None)
            known = False  # (kept on failures: a save that failed may still land)
        raise CommitConflictError(
            f"consumer {consumer_id!r}: its progress file {self._storage.uri(path)} changed "
            f"under each of {_SAVE_ATTEMPTS} saves (is another reader using the same id?)"
        )

    def _check_not_superseded(
        self, consumer_id: str, state: ConsumerState, *, had_record: bool
    ) -> None:
        """After a refused save: raise if the record moved ahead of ``state``, or was removed
        while the snapshot ``state`` needs expired."""
        stored = self.get(consumer_id)
        if stored is None and had_record:
            earliest = SnapshotStore(self._storage).earliest_id()
            if earliest is not None and state.next_snapshot < earliest:
                raise CommitConflictError(
                    f"consumer {consumer_id!r} was removed since this reader resumed or last "
                    "saved (delete_consumer, or idle longer than 'consumer.expiration-time'), "
                    f"and the snapshot its position needs ({state.next_snapshot}) has expired "
                    f"since (earliest retained: {earliest}): its progress is not saved, and a "
                    "reader created again with the id starts from its start mode"
                )
        if stored is not None and stored.next_snapshot > state.next_snapshot:
            raise CommitConflictError(
                f"consumer {consumer_id!r}: another reader with the same id saved a later "
                f"position (next snapshot {stored.next_snapshot}) since this reader resumed "
                f"or last saved; its own (next snapshot {state.next_snapshot}) is not saved, "
                "so the consumer does not move back (a consumer id is for one reader at a "
                "time)"
            )

    def delete(self, consumer_id: str) -> None:
        self._storage.delete(layout.consumer_path(consumer_id))

    def all(self) -> dict[str, ConsumerState]:
        """Every consumer; damaged files are reported, not skipped (they fence expiration)."""
        found: dict[str, ConsumerState] = {}
        for info in self._storage.listdir(layout.CONSUMER_DIR):
            name = info.path.rsplit("/", 1)[-1]
            if not name.startswith(layout.CONSUMER_PREFIX):
                continue
            consumer_id = name[len(layout.CONSUMER_PREFIX) :]
            state = self.get(consumer_id)
            if state is not None:
                found[consumer_id] = state
        return found

    def expire(self, older_than_ms: int, *, dry_run: bool = False) -> list[str]:
        """Delete consumers that have not recorded progress since ``older_than_ms``."""
        expired = [
            consumer_id
            for consumer_id, state in self.all().items()
            if state.time_ms < older_than_ms
        ]
        if not dry_run:
            for consumer_id in expired:
                self.delete(consumer_id)
        return sorted(expired)


class WatermarkGroupStore:
    """The members of one watermark-alignment group and the watermarks they reached."""

    def __init__(self, storage: Storage, group: str) -> None:
        self._storage = storage
        self._group = layout.validate_consumer_id(group)

    def publish(self, member: str, watermark: int | None) -> None:
        state = WatermarkMember(watermark=watermark, time_ms=int(time.time() * 1000))
        self._storage.write(
            layout.watermark_group_path(self._group, member),
            codec.encode(state, codec.Kind.WATERMARK_GROUP),
        )

    def leave(self, member: str) -> None:
        self._storage.delete(layout.watermark_group_path(self._group, member))

    def members(self) -> dict[str, WatermarkMember]:
        found: dict[str, WatermarkMember] = {}
        directory = f"{layout.WATERMARK_DIR}/{self._group}"
        for info in self._storage.listdir(directory):
            member = info.path.rsplit("/", 1)[-1]
            try:
                data = self._storage.read(info.path)
            except ObjectNotFoundError:
                continue  # left the group while we listed
            try:
                found[member] = codec.decode(
                    data, WatermarkMember, codec.Kind.WATERMARK_GROUP, self._storage.uri(info.path)
                )
            except CorruptMetadataError:
                continue  # a member rewriting its file on a store without atomic replace
        return found
