"""The schema versions of a table: ``schema/schema-<id>`` files.

A schema file is immutable once written, and written only with put-if-absent, so two racing
schema changes never both write the same id. Which schema is *current* is decided by the
snapshot log, not by the files: the current schema is the one the latest snapshot names (schema
0 before the first snapshot). A schema file that no snapshot names (a change that lost its
race, or crashed before committing) is ignored, and its id and field ids are not reused.

Schemas are returned with their field ids (implicit ids for format version 1 schemas, see
``planning.schema_changes``) and cached by id.
"""

from __future__ import annotations

import threading

from appendtable.errors import ObjectNotFoundError, TableNotFoundError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import Snapshot, TableSchema
from appendtable.planning.schema_changes import with_field_ids
from appendtable.storage import Storage

__all__ = ["SchemaStore"]


class SchemaStore:
    """Reads and publishes the schema versions of one table. Thread-safe."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._cache: dict[int, TableSchema] = {}
        self._lock = threading.Lock()

    def get(self, schema_id: int) -> TableSchema:
        """Schema ``schema_id``, with field ids. ObjectNotFoundError if it does not exist."""
        cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        path = layout.schema_path(schema_id)
        schema = with_field_ids(
            codec.decode(
                self._storage.read(path), TableSchema, codec.Kind.SCHEMA, self._storage.uri(path)
            )
        )
        with self._lock:
            self._cache[schema_id] = schema
        return schema

    def remember(self, schema: TableSchema) -> TableSchema:
        """Cache a schema this process wrote (returned with its field ids)."""
        schema = with_field_ids(schema)
        with self._lock:
            self._cache[schema.id] = schema
        return schema

    def current(self, snapshot: Snapshot | None) -> TableSchema:
        """The schema of ``snapshot`` (the latest, for the current schema); schema 0 when the
        table has no snapshot yet."""
        return self.get(snapshot.schema_id if snapshot is not None else 0)

    def list_ids(self) -> list[int]:
        """Every schema id written, ascending (named by a snapshot or not)."""
        ids = [
            layout.id_from_name(name, layout.SCHEMA_PREFIX)
            for name in self._storage.listnames(layout.SCHEMA_DIR)
        ]
        found = sorted(i for i in ids if i is not None)
        if not found:
            raise TableNotFoundError(f"no table at {self._storage.root} (no schema files)")
        return found

    def next_ids(self) -> tuple[int, int]:
        """(the next free schema id, the first field id no schema ever used)."""
        ids = self.list_ids()
        highest = 0
        for schema_id in ids:
            try:
                highest = max(highest, self.get(schema_id).highest_field_id)
            except ObjectNotFoundError:
                continue
        return ids[-1] + 1, highest + 1

    def publish(self, schema: TableSchema) -> bool:
        """Write a new schema version; False if its id is taken (a concurrent change won)."""
        created = self._storage.put_if_absent(
            layout.schema_path(schema.id), codec.encode(schema, codec.Kind.SCHEMA)
        )
        if created:
            self.remember(schema)
        return created
