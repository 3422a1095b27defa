"""Spill files: buffered rows parked on local disk under memory pressure.

One spill event writes the buffers of many (partition, bucket) groups into a single Arrow IPC
file (lz4-compressed); each group remembers which record batches of which file are its own, in
order. Reading back is memory-mapped and batch by batch, so flushing a spilled group never needs
its whole data in memory.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

__all__ = ["SpillArea", "SpilledPart"]


@dataclass(frozen=True)
class SpilledPart:
    """Batches ``first .. first + count - 1`` of spill file ``path``."""

    path: str
    first: int
    count: int
    nbytes: int


class SpillArea:
    """A private local directory for one writer's spill files."""

    def __init__(self, parent: str | None, schema: pa.Schema) -> None:
        self._parent = parent or None
        self._schema = schema
        self._directory: str | None = None

    def spill(self, groups: Sequence[Sequence[pa.Table]]) -> list[SpilledPart]:
        """Write the tables of each group into one new spill file; one part per group."""
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="appendtable-spill-", dir=self._parent)
        path = os.path.join(self._directory, f"spill-{uuid.uuid4().hex}.arrow")
        options = pa.ipc.IpcWriteOptions(compression="lz4")
        parts = []
        index = 0
        with (
            pa.OSFile(path, "wb") as sink,
            pa.ipc.new_file(sink, self._schema, options=options) as out,
        ):
            for tables in groups:
                first = index
                nbytes = 0
                for table in tables:
                    for batch in table.to_batches():
                        out.write_batch(batch)
                        index += 1
                    nbytes += table.nbytes
                parts.append(SpilledPart(path, first, index - first, nbytes))
        return parts

    def read(self, part: SpilledPart) -> Iterator[pa.Table]:
        """The batches of one spilled part, in order, memory-mapped."""
        with pa.memory_map(part.path, "r") as source:
            reader = pa.ipc.open_file(source)
            for offset in range(part.count):
                yield pa.Table.from_batches([reader.get_batch(part.first + offset)])

    def clear(self) -> None:
        """Delete every spill file (after the groups that used them were written or aborted)."""
        if self._directory is None:
            return
        for name in os.listdir(self._directory):
            try:
                os.unlink(os.path.join(self._directory, name))
            except FileNotFoundError:
                pass
        os.rmdir(self._directory)
        self._directory = None
