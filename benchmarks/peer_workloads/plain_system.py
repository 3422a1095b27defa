"""Plain pyarrow Parquet: one zstd file per write, no table (the baseline column)."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.peer_workloads import Unsupported

__all__ = ["ADAPTER"]


class Plain:
    name = "plain"
    version = pa.__version__
    transactional = False

    def create(self, path: str, schema: pa.Schema, bucketed: bool) -> str:
        if bucketed:
            raise Unsupported("plain Parquet files have no buckets")
        os.makedirs(path)
        return path

    def open(self, path: str) -> str:
        return path

    def append(self, handle: str, data: pa.Table) -> object:
        pq.write_table(data, os.path.join(handle, "data.parquet"), compression="zstd")
        return None

    def read(self, handle: str, key: int | None = None) -> pa.Table:
        filters = None if key is None else [("key", "=", key)]
        return pq.read_table(os.path.join(handle, "data.parquet"), filters=filters)

    def plan(self, handle: Any) -> int:
        raise Unsupported("plain Parquet files have no commits")

    def incremental(self, handle: Any, first: object, commits: int) -> int:
        raise Unsupported("plain Parquet files have no commits")

    def compact(self, handle: Any) -> int:
        raise Unsupported("plain Parquet files have no commits")


ADAPTER = Plain()
