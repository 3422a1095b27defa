"""appendtable with default options (fsync on, automatic compaction after commits)."""

from __future__ import annotations

import pyarrow as pa

import appendtable as at

__all__ = ["ADAPTER"]

BUCKETED = {"bucket": 8, "bucket-key": "key"}


class AppendTable:
    name = "appendtable"
    version = at.__version__
    transactional = True

    def create(self, path: str, schema: pa.Schema, bucketed: bool) -> at.Table:
        return at.create_table(path, schema, options=BUCKETED if bucketed else {})

    def open(self, path: str) -> at.Table:
        return at.open_table(path)

    def append(self, handle: at.Table, data: pa.Table) -> object:
        snapshot = handle.append(data)
        assert snapshot is not None
        return snapshot.id

    def finish(self, handle: at.Table) -> None:
        """Wait for the compaction the commits started in the background."""
        handle.close()

    def read(self, handle: at.Table, key: int | None = None) -> pa.Table:
        return handle.scan(filter=None if key is None else [("key", "=", key)]).to_arrow()

    def plan(self, handle: at.Table) -> int:
        return sum(len(split.files) for split in handle.scan().plan())

    def incremental(self, handle: at.Table, first: object, commits: int) -> int:
        """Catch up from ``first`` to what is committed now (``batches(timeout=0)``)."""
        assert isinstance(first, int)
        with handle.stream(mode="from-snapshot", snapshot_id=first) as reader:
            return sum(batch.num_rows for batch in reader.batches(timeout=0))

    def compact(self, handle: at.Table) -> int:
        handle.compact(full=True)
        return len(handle.files())


ADAPTER = AppendTable()
