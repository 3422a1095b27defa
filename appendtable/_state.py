"""What every facade object of one open table shares (internal)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from appendtable.commit.changes import PartitionScope
from appendtable.commit.committer import Committer
from appendtable.commit.discard import DiscardResult, discard_files, discard_tree
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.datafiles.arrow_schema import arrow_schema
from appendtable.errors import InvalidFilterError
from appendtable.metadata import options as opt
from appendtable.metadata.models import PartitionValues, TableSchema
from appendtable.metadata.types import TypeSpec
from appendtable.planning.filters import to_stored
from appendtable.planning.partitions import partition_path
from appendtable.storage import Storage

__all__ = ["TableState"]


@dataclass
class TableState:
    storage: Storage
    schema: TableSchema
    options: opt.Options = field(init=False)
    arrow_schema: pa.Schema = field(init=False)
    snapshots: SnapshotStore = field(init=False)
    manifests: ManifestStore = field(init=False)

    def __post_init__(self) -> None:
        self.options = opt.Options(self.schema.options)
        self.arrow_schema = arrow_schema(self.schema.fields)
        self.snapshots = SnapshotStore(self.storage)
        self.manifests = ManifestStore(
            self.storage, target_size=self.options.get(opt.MANIFEST_TARGET_SIZE)
        )

    @property
    def column_types(self) -> dict[str, TypeSpec]:
        return {f.name: f.type for f in self.schema.fields}

    @property
    def partition_types(self) -> tuple[TypeSpec, ...]:
        types = self.column_types
        return tuple(types[key] for key in self.schema.partition_keys)

    def committer(self) -> Committer:
        """A committer of this table (without the facade's pre- and post-commit hooks)."""
        return Committer(
            self.storage,
            self.snapshots,
            self.manifests,
            self.options,
            schema_id=self.schema.id,
            partition_keys=self.schema.partition_keys,
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
