"""A dataset scan of several data files that leaves out their deleted rows.

The scanner decodes the files on Arrow's threads, as a scan without deletes does, and yields
their batches in order (file by file, each file's batches in row order), so a batch's row
positions in its file follow from the rows of that file seen before it. The rows a file's keep
mask marks deleted are filtered out of each batch as it comes (Arrow releases the GIL: the
scanner decodes on meanwhile; filtering on a pool of threads measured no faster). Measured on
2 cores (10 M rows in 80 files, 1 % deleted): 1.26-1.37x the scan without deletes, where
reading the files one by one on threads took 1.37-1.45x; the filtering itself costs about
0.11 s of CPU, against 0.4 s for the whole scan without deletes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = ["RowCountMismatch", "scan_kept"]


class RowCountMismatch(Exception):
    """A file gave other than the rows its keep mask covers (the caller names the damage)."""

    def __init__(self, path: str, read: int, written: int) -> None:
        super().__init__(f"{read} rows read, {written} written")
        self.path = path
        self.read = read
        self.written = written


def scan_kept(
    dataset: ds.Dataset,
    columns: Sequence[str] | None,
    keep: Mapping[str, npt.NDArray[np.bool_] | None],
    rows: Mapping[str, int],
    schema: pa.Schema,
) -> pa.Table:
    """The rows of ``dataset``'s files in order, projected to ``columns``, without those
    ``keep`` (by fragment path: a mask over the file's rows, None for a file without deletes)
    marks deleted. ``rows``: each file's row count as written; a file that gives other than
    that raises RowCountMismatch (after the whole scan), as no mask would then fit it.
    ``schema``: the result's schema."""
    seen = dict.fromkeys(rows, 0)
    batches: list[pa.RecordBatch] = []
    scanner = dataset.scanner(columns=list(columns) if columns is not None else None)
    for tagged in scanner.scan_batches():
        path = tagged.fragment.path
        batch = tagged.record_batch
        first = seen[path]
        seen[path] = first + batch.num_rows
        mask = keep[path]
        if mask is not None and seen[path] <= len(mask):  # too many rows: raised below
            kept = mask[first : first + batch.num_rows]
            batch = batch if kept.all() else batch.filter(pa.array(kept))
        batches.append(batch)
    for path, written in rows.items():
        if seen[path] != written:
            raise RowCountMismatch(path, seen[path], written)
    return pa.Table.from_batches(batches, schema=schema)
