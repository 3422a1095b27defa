"""Spill files: buffered rows parked on local disk under memory pressure.

One spill event writes the buffers of many (partition, bucket) groups, one after the other, into
a single Arrow IPC file as a few large, uncompressed record batches; each group remembers the
row range that is its own. Reading back memory-maps the file, so a group's rows are zero-copy
slices: flushing a spilled group never needs its whole data in memory, and thousands of small
groups do not pay a per-batch decoding cost each.
"""

from __future__ import annotations

import bisect
import os
import tempfile
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

__all__ = ["SpillArea", "SpilledPart"]

_BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class SpilledPart:
    """Rows ``start .. start + count - 1`` of spill file ``path`` (counted across batches)."""

    path: str
    start: int
    count: int


class SpillArea:
    """A private local directory for one writer's spill files. Reads are thread-safe."""

    def __init__(self, parent: str | None, schema: pa.Schema) -> None:
        self._parent = parent or None
        self._schema = schema
        self._directory: str | None = None
        self._files: dict[str, _SpillFile] = {}
        self._lock = threading.Lock()

    def spill(self, groups: Sequence[Sequence[pa.Table]]) -> list[SpilledPart]:
        """Write the tables of each group into one new spill file; one part per group."""
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="appendtable-spill-", dir=self._parent)
        path = os.path.join(self._directory, f"spill-{uuid.uuid4().hex}.arrow")
        parts = []
        start = 0
        for tables in groups:
            count = sum(t.num_rows for t in tables)
            parts.append(SpilledPart(path, start, count))
            start += count
        everything = pa.concat_tables([t for tables in groups for t in tables]).combine_chunks()
        with (
            pa.OSFile(path, "wb") as sink,
            pa.ipc.new_file(sink, self._schema) as out,
        ):
            for batch in everything.to_batches(max_chunksize=_BATCH_ROWS):
                out.write_batch(batch)
        return parts

    def read(self, part: SpilledPart) -> Iterator[pa.Table]:
        """The rows of one spilled part, in order, as zero-copy slices of the mapped file."""
        spill = self._open(part.path)
        position, end = part.start, part.start + part.count
        while position < end:
            index = bisect.bisect_right(spill.offsets, position) - 1
            batch = spill.batches[index]
            offset = position - spill.offsets[index]
            length = min(batch.num_rows - offset, end - position)
            yield pa.Table.from_batches([batch.slice(offset, length)])
            position += length

    def _open(self, path: str) -> _SpillFile:
        with self._lock:
            found = self._files.get(path)
            if found is None:
                found = _SpillFile(path)
                self._files[path] = found
            return found

    def clear(self) -> None:
        """Delete every spill file (after the groups that used them were written or aborted)."""
        with self._lock:
            for spill in self._files.values():
                spill.close()
            self._files = {}
        if self._directory is None:
            return
        for name in os.listdir(self._directory):
            try:
                os.unlink(os.path.join(self._directory, name))
            except FileNotFoundError:
                pass
        os.rmdir(self._directory)
        self._directory = None


class _SpillFile:
    """A memory-mapped spill file with its batches and their first row numbers."""

    def __init__(self, path: str) -> None:
        self._source = pa.memory_map(path, "r")
        reader = pa.ipc.open_file(self._source)
        self.batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        self.offsets: list[int] = []
        total = 0
        for batch in self.batches:
            self.offsets.append(total)
            total += batch.num_rows

    def close(self) -> None:
        self.batches = []
        self._source.close()
