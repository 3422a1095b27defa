"""Split a batch of rows into (partition, bucket) groups with Arrow compute and numpy.

Guarantee: within each group, rows keep their input order (the sort is stable), which is what
makes a bucket a strictly ordered queue. No Python code runs per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.stats import scalar_to_stat
from appendtable.metadata.models import PartitionValues
from appendtable.planning.bucket import bucket_ids

__all__ = ["GroupKey", "RoutingSpec", "partitions_of", "route"]


@dataclass(frozen=True, slots=True)
class GroupKey:
    partition: PartitionValues
    bucket: int


@dataclass(frozen=True)
class RoutingSpec:
    """Column positions and kinds needed to route rows."""

    partition_indices: tuple[int, ...]
    partition_kinds: tuple[str, ...]
    bucket_indices: tuple[int, ...]
    num_buckets: int  # -1 for the scalable (unaware-bucket) mode


def route(table: pa.Table, spec: RoutingSpec) -> list[tuple[GroupKey, pa.Table]]:
    """The (partition, bucket) groups of ``table``, each with its rows in input order."""
    rows = table.num_rows
    if rows == 0:
        return []
    if not spec.partition_indices and spec.num_buckets <= 0:
        return [(GroupKey((), 0), table)]

    codes = np.zeros(rows, dtype=np.int64)
    distinct = 1  # an upper bound of the number of distinct codes so far
    for index in spec.partition_indices:
        encoded = pc.dictionary_encode(table.column(index).combine_chunks())
        radix = len(encoded.dictionary) + 1  # the extra code stands for null
        indices = encoded.indices.fill_null(radix - 1).to_numpy(zero_copy_only=False)
        codes, distinct = _combine(codes, distinct, indices, radix)
    if spec.num_buckets > 0:
        buckets = bucket_ids([table.column(i) for i in spec.bucket_indices], spec.num_buckets)
        codes, distinct = _combine(codes, distinct, buckets, spec.num_buckets)

    if distinct == 1 or np.all(codes == codes[0]):
        return [(_key(table, 0, spec, codes), table)]
    order = np.argsort(_narrow(codes, distinct), kind="stable")
    starts = np.concatenate(([0], np.flatnonzero(np.diff(codes[order])) + 1))
    ends = np.concatenate((starts[1:], [rows]))
    taken = table.take(pa.array(order))
    groups = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        part = taken.slice(start, end - start)
        groups.append((_key(part, 0, spec, codes[order[start : start + 1]]), part))
    return groups


def partitions_of(table: pa.Table, spec: RoutingSpec) -> list[PartitionValues]:
    """The distinct partitions of ``table``'s rows (stored values), one Python step per
    partition, none per row."""
    if not spec.partition_indices or table.num_rows == 0:
        return [()] if table.num_rows else []
    names = [table.column_names[i] for i in spec.partition_indices]
    distinct = table.select(names).group_by(names, use_threads=False).aggregate([])
    return [
        tuple(
            scalar_to_stat(distinct.column(name)[row], kind)
            for name, kind in zip(names, spec.partition_kinds, strict=True)
        )
        for row in range(distinct.num_rows)
    ]


def _narrow(codes: np.ndarray, distinct: int) -> np.ndarray:
    """The codes in the smallest unsigned type that holds them: a stable sort (radix sort
    for small integer types) is several times faster on narrow keys."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if distinct <= np.iinfo(dtype).max + 1:
            return codes.astype(dtype)
    return codes


def _combine(
    codes: np.ndarray, distinct: int, values: np.ndarray, radix: int
) -> tuple[np.ndarray, int]:
    """Fold one more key column into the group codes, renumbering when they could overflow."""
    if distinct * radix >= 2**62:
        _, codes = np.unique(codes, return_inverse=True)
        codes = codes.astype(np.int64, copy=False)
        distinct = int(codes.max()) + 1
    return codes * radix + values.astype(np.int64, copy=False), distinct * radix


def _key(part: pa.Table, row: int, spec: RoutingSpec, codes: np.ndarray) -> GroupKey:
    """The key of the group whose first row is ``part[row]``."""
    bucket = int(codes[row]) % spec.num_buckets if spec.num_buckets > 0 else 0
    values = tuple(
        scalar_to_stat(part.column(index)[row], kind)
        for index, kind in zip(spec.partition_indices, spec.partition_kinds, strict=True)
    )
    return GroupKey(values, bucket)
