"""Tags: named snapshots that survive expiration, stored in the table directory.

``tag/tag-<name>`` holds a copy of the tagged snapshot (so the tag stays readable after the
snapshot itself leaves the log), written with put-if-absent: two racing ``create`` calls of one
name never both succeed. Tag files are immutable and CRC-checked like every metadata file.

Expiration keeps every data and manifest file a tag references. Deleting a tag writes a
*release* record (``tag/released-<name>-<uuid>``, the same content) before removing the tag
file; the next expiration frees the files only that tag kept, then removes the record. A crash
between the two steps leaves the tag in place (the delete can simply be repeated).
"""

from __future__ import annotations

import time
import uuid

from appendtable.commit.validation import check_snapshot
from appendtable.errors import ObjectNotFoundError, TagExistsError, TagNotFoundError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import Snapshot, Tag
from appendtable.storage import Storage

__all__ = ["TagStore"]


def _decode_tag(data: bytes, uri: str) -> Tag:
    tag = codec.decode(data, Tag, codec.Kind.TAG, uri)
    check_snapshot(tag.snapshot, uri)
    return tag


class TagStore:
    """Reads, creates and deletes the tags of one table."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def get(self, name: str) -> Tag:
        """Tag ``name``; TagNotFoundError if there is none."""
        path = layout.tag_path(name)
        try:
            data = self._storage.read(path)
        except ObjectNotFoundError:
            known = ", ".join(sorted(self.all())) or "none"
            raise TagNotFoundError(f"no tag named '{name}' (tags: {known})") from None
        return _decode_tag(data, self._storage.uri(path))

    def create(self, name: str, snapshot: Snapshot) -> Tag:
        """Tag ``snapshot`` as ``name``, atomically; TagExistsError if the name is taken."""
        tag = Tag(snapshot=snapshot, time_ms=int(time.time() * 1000))
        if not self._storage.put_if_absent(
            layout.tag_path(name), codec.encode(tag, codec.Kind.TAG)
        ):
            existing = self.get(name)
            raise TagExistsError(
                f"tag '{name}' already exists (on snapshot {existing.snapshot.id}); delete it "
                "first to move it"
            )
        return tag

    def delete(self, name: str) -> Tag:
        """Delete tag ``name``: its files are released at the next expiration."""
        tag = self.get(name)
        self._storage.write(
            layout.released_tag_path(name, uuid.uuid4().hex), codec.encode(tag, codec.Kind.TAG)
        )
        self._storage.delete(layout.tag_path(name))
        return tag

    def all(self) -> dict[str, Tag]:
        """Every tag by name."""
        found: dict[str, Tag] = {}
        for name in self._storage.listnames(layout.TAG_DIR):
            tag_name = layout.tag_name_of(name)
            if tag_name is None:
                continue
            path = layout.tag_path(tag_name)
            try:
                data = self._storage.read(path)
            except ObjectNotFoundError:
                continue  # deleted while we listed
            found[tag_name] = _decode_tag(data, self._storage.uri(path))
        return found

    def released(self) -> dict[str, Tag]:
        """Release records of deleted tags not yet processed by an expiration, by path."""
        found: dict[str, Tag] = {}
        for name in self._storage.listnames(layout.TAG_DIR):
            base = name.rsplit("/", 1)[-1]
            if not base.startswith(layout.RELEASED_TAG_PREFIX):
                continue
            path = f"{layout.TAG_DIR}/{base}"
            try:
                data = self._storage.read(path)
            except ObjectNotFoundError:
                continue
            found[path] = _decode_tag(data, self._storage.uri(path))
        return found

    def forget_release(self, path: str) -> None:
        """Remove a processed release record."""
        try:
            self._storage.delete(path)
        except ObjectNotFoundError:
            pass
