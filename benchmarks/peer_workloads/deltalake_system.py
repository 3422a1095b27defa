"""delta-rs (``deltalake``): no buckets; change data feed on, for incremental reads."""

from __future__ import annotations

import deltalake
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.peer_workloads import Unsupported

__all__ = ["ADAPTER"]


class Delta:
    name = "deltalake"
    version = deltalake.__version__
    transactional = True

    def create(self, path: str, schema: pa.Schema, bucketed: bool) -> DeltaTable:
        if bucketed:
            raise Unsupported("Delta Lake has no buckets (no hash-clustered append layout)")
        return DeltaTable.create(
            path, schema=schema, configuration={"delta.enableChangeDataFeed": "true"}
        )

    def open(self, path: str) -> DeltaTable:
        return DeltaTable(path)

    def append(self, handle: DeltaTable, data: pa.Table) -> object:
        write_deltalake(handle, data, mode="append")
        return handle.version()

    def read(self, handle: DeltaTable, key: int | None = None) -> pa.Table:
        filters = None if key is None else [("key", "=", key)]
        return handle.to_pyarrow_table(filters=filters)

    def plan(self, handle: DeltaTable) -> int:
        return len(handle.file_uris())

    def incremental(self, handle: DeltaTable, first: object, commits: int) -> int:
        assert isinstance(first, int)
        reader = handle.load_cdf(starting_version=first, ending_version=first + commits - 1)
        return sum(batch.num_rows for batch in reader)

    def compact(self, handle: DeltaTable) -> int:
        handle.optimize.compact()
        return len(DeltaTable(handle.table_uri).file_uris())


ADAPTER = Delta()
