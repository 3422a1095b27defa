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

from appendtable.errors import CommitConflictError, CorruptMetadataError, ObjectNotFoundError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import ConsumerState, WatermarkMember
from appendtable.storage import Storage

__all__ = ["ConsumerStore", "WatermarkGroupStore"]


#: Saves of one position tried before giving up when its file keeps changing under it.
_SAVE_ATTEMPTS = 8


class ConsumerStore:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        #: The version of each consumer's file this store wrote last (unknown: read first).
        self._versions: dict[str, str] = {}

    def get(self, consumer_id: str) -> ConsumerState | None:
        path = layout.consumer_path(consumer_id)
        try:
            data = self._storage.read(path)
        except ObjectNotFoundError:
            return None
        return codec.decode(data, ConsumerState, codec.Kind.CONSUMER, self._storage.uri(path))

    def put(self, consumer_id: str, state: ConsumerState) -> None:
        """Save ``state`` as the consumer's progress, replacing whatever the file holds; but
        each request is conditional on the version read (or written) just before it, so an
        earlier save delivered late never overwrites this one. The version this store wrote
        last is reused: one request per save, unless the file changed meanwhile (another
        reader with the same id, ``delete_consumer``, expiration, a late save)."""
        path = layout.consumer_path(consumer_id)
        data = codec.encode(state, codec.Kind.CONSUMER)
        for _attempt in range(_SAVE_ATTEMPTS):
            # (forgotten first: after a failure the file's version is unknown)
            version = self._versions.pop(consumer_id, None) or self._storage.version(path)
            written = self._storage.replace_if_unchanged(path, data, version)
            if written is not None:
                self._versions[consumer_id] = written
                return
        raise CommitConflictError(
            f"consumer {consumer_id!r}: its progress file {self._storage.uri(path)} changed "
            f"under each of {_SAVE_ATTEMPTS} saves (is another reader using the same id?)"
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
