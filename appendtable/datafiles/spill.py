"""Spill files: buffered rows parked on local disk under memory pressure.

One spill event writes the buffers of many (partition, bucket) groups, one group after the
other, into a single Arrow IPC file; each group's rows are a run of record batches of their own
(combined into pieces of at most ``piece_rows`` rows, so thousands of small groups do not become
tens of thousands of tiny batches, and no more than one piece is ever copied at a time). A group
remembers its run. Reading back reads just that run with positional reads into ordinary memory,
released once the group's file is written (a memory map would keep every page read resident in
the process until the whole spill file is closed).

Spill files have no name: they are anonymous temporary files (unlinked at creation), so they
vanish when closed or when the process dies, even by SIGKILL; nothing is ever left to clean up.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO

import pyarrow as pa

__all__ = ["SpillArea", "SpilledPart"]


@dataclass(frozen=True)
class SpilledPart:
    """Record batches ``first .. first + batches - 1`` of spill file ``file`` (``rows`` rows)."""

    file: int
    first: int
    batches: int
    rows: int


class SpillArea:
    """One writer's spill files, in ``parent`` (a local directory; None: the system's temporary
    directory). Reads are thread-safe."""

    def __init__(self, parent: str | None, schema: pa.Schema) -> None:
        self._parent = parent or None
        self._schema = schema
        self._files: list[_SpillFile] = []
        #: Spill files written and rows written to them, over the area's life.
        self.files_written = 0
        self.rows_written = 0

    def spill(self, groups: Iterable[Sequence[pa.Table]], piece_rows: int) -> list[SpilledPart]:
        """Write the tables of each group into one new spill file; one part per group, in
        order. Copies at most ``piece_rows`` rows at a time."""
        handle = tempfile.TemporaryFile(prefix="appendtable-spill-", dir=self._parent)  # noqa: SIM115 - closed by clear()
        spill = _SpillFile(handle)
        self._files.append(spill)
        number = len(self._files) - 1
        parts = []
        batches = 0
        self.files_written += 1
        with pa.ipc.new_file(pa.PythonFile(spill.handle, mode="w"), self._schema) as out:
            for tables in groups:
                rows = pa.concat_tables(tables)  # zero-copy: the tables' chunks side by side
                first = batches
                for offset in range(0, rows.num_rows, piece_rows):
                    piece = rows.slice(offset, piece_rows).combine_chunks()
                    for batch in piece.to_batches():
                        out.write_batch(batch)
                        batches += 1
                parts.append(SpilledPart(number, first, batches - first, rows.num_rows))
                self.rows_written += rows.num_rows
        spill.finish()
        return parts

    def read(self, part: SpilledPart) -> Iterator[pa.Table]:
        """The rows of one spilled part, in order, a record batch at a time."""
        spill = self._files[part.file]
        for index in range(part.first, part.first + part.batches):
            yield pa.Table.from_batches([spill.batch(index)])

    def clear(self) -> None:
        """Close (and so delete) every spill file, after the groups that used them were
        written or aborted."""
        for spill in self._files:
            spill.close()
        self._files = []


class _SpillFile:
    """An anonymous spill file: written once, then read a batch at a time."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self._reader: pa.ipc.RecordBatchFileReader | None = None
        self._lock = threading.Lock()

    def finish(self) -> None:
        """Open the written file for reading (its footer read once)."""
        self.handle.flush()
        self._reader = pa.ipc.open_file(pa.PythonFile(self.handle, mode="r"))

    def batch(self, index: int) -> pa.RecordBatch:
        assert self._reader is not None
        with self._lock:  # one positional read and decode at a time per file
            return self._reader.get_batch(index)

    def close(self) -> None:
        with self._lock:
            self._reader = None
            self.handle.close()
