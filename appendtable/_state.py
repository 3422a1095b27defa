"""What every facade object of one open table shares (internal)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from appendtable.commit.changes import PartitionScope
from appendtable.commit.committer import Committer
from appendtable.commit.discard import DiscardResult, discard_files, discard_tree
from appendtable.commit.iceberg_mirror import IcebergMirror
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.schemas import SchemaStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.commit.turns import CommitTurns
from appendtable.datafiles.arrow_schema import arrow_schema
from appendtable.datafiles.projection import Projection
from appendtable.errors import InvalidFilterError
from appendtable.metadata import options as opt
from appendtable.metadata.models import PartitionValues, Snapshot, TableSchema
from appendtable.metadata.types import TypeSpec
from appendtable.planning.filters import to_stored
from appendtable.planning.partitions import partition_path
from appendtable.storage import Storage

__all__ = ["SchemaView", "TableState"]


@dataclass(frozen=True)
class SchemaView:
    """One schema version of a table, with what is derived from it."""

    schema: TableSchema
    options: opt.Options
    arrow_schema: pa.Schema

    @staticmethod
    def of(schema: TableSchema) -> SchemaView:
        return SchemaView(schema, opt.Options(schema.options), arrow_schema(schema.fields))

    @property
    def column_types(self) -> dict[str, TypeSpec]:
        return {f.name: f.type for f in self.schema.fields}

    @property
    def partition_types(self) -> tuple[TypeSpec, ...]:
        types = self.column_types
        return tuple(types[key] for key in self.schema.partition_keys)


class TableState:
    """The storage, stores and current schema of one open table, shared by its facade
    objects. The current schema follows the snapshot log: ``refresh`` adopts the schema of
    the latest snapshot (each view is immutable, and replaced whole)."""

    def __init__(
        self, storage: Storage, schema: TableSchema, *, turns: CommitTurns | None = None
    ) -> None:
        self.storage = storage
        #: Taken by each commit attempt: shared with the handle's maintenance worker's state.
        self.turns = turns if turns is not None else CommitTurns()
        self.schemas = SchemaStore(storage)
        self.view = SchemaView.of(self.schemas.remember(schema))
        self.snapshots = SnapshotStore(storage)
        self.manifests = ManifestStore(
            storage, target_size=self.options.get(opt.MANIFEST_TARGET_SIZE)
        )
        self._views: dict[int, SchemaView] = {self.view.schema.id: self.view}
        self._projections: dict[int, Projection] = {}
        self._mirror: IcebergMirror | None = None

    @property
    def schema(self) -> TableSchema:
        return self.view.schema

    @property
    def options(self) -> opt.Options:
        return self.view.options

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.view.arrow_schema

    @property
    def column_types(self) -> dict[str, TypeSpec]:
        return self.view.column_types

    @property
    def partition_types(self) -> tuple[TypeSpec, ...]:
        return self.view.partition_types

    @property
    def mirror(self) -> IcebergMirror:
        """The table's Iceberg mirror writer (whether or not the option is on)."""
        if self._mirror is None:
            self._mirror = IcebergMirror(self.storage, self.snapshots, self.manifests, self.schemas)
        return self._mirror

    def publish_mirror(self, *, rebuild: bool = False) -> str | None:
        """Bring the Iceberg mirror up to date (see ``commit.iceberg_mirror``); its location."""
        return self.mirror.publish(self.options.get(opt.ICEBERG_MAX_SNAPSHOTS), rebuild=rebuild)

    def publish_and_prune_mirror(self) -> list[str]:
        """With the Iceberg mirror on as of the latest snapshot (read now: another handle may
        have turned it on or off), publish it, then delete its older versions and the files
        only they use (``IcebergMirror.prune``); what it deleted."""
        self.refresh()
        if not self.mirrors_iceberg:
            return []
        self.publish_mirror()
        return self.mirror.prune(self.options.get(opt.ICEBERG_MAX_SNAPSHOTS))

    @property
    def mirrors_iceberg(self) -> bool:
        """Whether ``metadata.iceberg.storage`` is on (as of the current schema)."""
        return self.options.get(opt.ICEBERG_STORAGE) != "disabled"

    def view_of(self, schema_id: int) -> SchemaView:
        """Schema version ``schema_id`` (cached: schema files never change)."""
        view = self._views.get(schema_id)
        if view is None:
            view = SchemaView.of(self.schemas.get(schema_id))
            self._views[schema_id] = view
        return view

    def view_at(self, snapshot: Snapshot | None) -> SchemaView:
        """The schema a snapshot has (schema 0 without one)."""
        return self.view_of(snapshot.schema_id if snapshot is not None else 0)

    def refresh(self, latest: Snapshot | None = None) -> SchemaView:
        """Adopt the schema of the latest snapshot (``latest``, when the caller just read it)
        as the current one, and return it."""
        if latest is None:
            latest = self.snapshots.latest()
        if latest is not None and latest.schema_id != self.view.schema.id:
            self.view = self.view_of(latest.schema_id)
        return self.view

    def projection(self, view: SchemaView | None = None) -> Projection:
        """How files of any schema version read as ``view`` (default: the current schema);
        one per schema version, so its layouts are computed once."""
        schema = (view or self.view).schema
        found = self._projections.get(schema.id)
        if found is None:
            found = self._projections[schema.id] = Projection(schema, self.schemas.get)
        return found

    def committer(self) -> Committer:
        """A committer of this table (without the facade's pre- and post-commit hooks)."""
        return Committer(
            self.storage,
            self.snapshots,
            self.manifests,
            self.schemas,
            self.options,
            partition_keys=self.schema.partition_keys,
            turns=self.turns,
        )

    def discard(
        self, paths: Iterable[str], *, since_snapshot_id: int | None = None
    ) -> DiscardResult:
        """Delete data files of a write given up on, unless a snapshot references them (the
        one gate for such deletes: ``appendtable.commit.discard``)."""
        return discard_files(
            self.storage, self.snapshots, self.manifests, paths, since_snapshot_id=since_snapshot_id
        )

    def discard_directory(
        self, directory: str, *, since_snapshot_id: int | None = None
    ) -> DiscardResult:
        """``discard`` for everything below ``directory`` (a staging area)."""
        return discard_tree(
            self.storage,
            self.snapshots,
            self.manifests,
            directory,
            since_snapshot_id=since_snapshot_id,
        )

    def partition_name(self, partition: PartitionValues) -> str:
        """A partition as its directory names it (``day=2024-01-02``)."""
        return partition_path(
            self.schema.partition_keys,
            partition,
            self.partition_types,
            self.options.get(opt.PARTITION_DEFAULT_NAME),
        )

    @staticmethod
    def describe_specs(specs: Sequence[Mapping[str, object]]) -> str:
        """Static partition specs as the user wrote them (``day=2024-01-02; day=...``)."""
        return "; ".join(", ".join(f"{k}={v}" for k, v in spec.items()) for spec in specs)

    def partition_scope(self, specs: Sequence[Mapping[str, object]] | None) -> PartitionScope:
        """Static partition specs (user values, e.g. dates) as a scope over stored values."""
        if not specs:
            return PartitionScope(None)
        types = self.column_types
        keys = set(self.schema.partition_keys)
        stored = []
        for spec in specs:
            for key in spec:
                if key not in keys:
                    raise InvalidFilterError(
                        f"partition spec names '{key}', which is not a partition column "
                        f"(partition keys: {', '.join(sorted(keys)) or 'none'})"
                    )
            stored.append(
                {k: None if v is None else to_stored(v, types[k], k) for k, v in spec.items()}
            )
        return PartitionScope(tuple(stored))
