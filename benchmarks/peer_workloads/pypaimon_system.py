"""pypaimon (Apache Paimon's Python client): append tables in a filesystem catalog."""

from __future__ import annotations

import os
from importlib.metadata import version as package_version
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema

from benchmarks.peer_workloads import Unsupported

__all__ = ["ADAPTER"]

DATABASE = "bench"
BUCKETED = {"bucket": "8", "bucket-key": "key"}


def _catalog(path: str) -> tuple[Any, str]:
    """The filesystem catalog holding ``path`` (its parent is the warehouse) and the table's
    identifier."""
    warehouse, name = os.path.split(path.rstrip("/"))
    catalog = CatalogFactory.create({"warehouse": warehouse})
    return catalog, f"{DATABASE}.{name.replace('-', '_')}"


class Paimon:
    name = "pypaimon"
    version = package_version("pypaimon")
    transactional = True

    def create(self, path: str, schema: pa.Schema, bucketed: bool) -> Any:
        catalog, identifier = _catalog(path)
        catalog.create_database(DATABASE, True)
        options = BUCKETED if bucketed else {}
        catalog.create_table(identifier, Schema.from_pyarrow_schema(schema, options=options), True)
        return catalog.get_table(identifier)

    def open(self, path: str) -> Any:
        catalog, identifier = _catalog(path)
        return catalog.get_table(identifier)

    def append(self, handle: Any, data: pa.Table) -> object:
        builder = handle.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        try:
            write.write_arrow(data)
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
        return None  # snapshots are consecutive: incremental() counts back from the latest

    def read(self, handle: Any, key: int | None = None) -> pa.Table:
        builder = handle.new_read_builder()
        if key is not None:
            builder = builder.with_filter(builder.new_predicate_builder().equal("key", key))
        splits = builder.new_scan().plan().splits()
        return builder.new_read().to_arrow(splits)

    def plan(self, handle: Any) -> int:
        splits = handle.new_read_builder().new_scan().plan().splits()
        return sum(len(split.files) for split in splits)

    def incremental(self, handle: Any, first: object, commits: int) -> int:
        """The streaming scan, started ``commits`` snapshots before the latest (pypaimon has no
        start-snapshot option for it: its position is set directly), read plan by plan until
        it has passed the latest snapshot (a plan covers one snapshot, or a diff of many)."""
        latest = handle.snapshot_manager().get_latest_snapshot().id
        builder = handle.new_stream_read_builder()
        scan = builder.new_streaming_scan()
        scan.next_snapshot_id = latest - commits + 1
        read = builder.new_read()
        rows = 0
        plans = scan.stream_sync()
        try:
            while scan.next_snapshot_id <= latest:
                rows += read.to_arrow(next(plans).splits()).num_rows
        finally:
            plans.close()
        return rows

    def compact(self, handle: Any) -> int:
        raise Unsupported("pypaimon has no compaction API for append tables")


ADAPTER = Paimon()
