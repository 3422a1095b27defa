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
from appendtable.metadata.models import PartitionValues, StatValue
from appendtable.metadata.types import INTEGER_KINDS
from appendtable.planning.bucket import bucket_ids

__all__ = ["GroupKey", "Routed", "RoutingSpec", "partitions_of", "route"]


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


@dataclass(frozen=True)
class Routed:
    """Rows grouped by (partition, bucket): group ``keys[i]`` is ``table.slice(starts[i],
    lengths[i])``, its rows in input order. Ranges rather than slices: a writer buffering
    thousands of groups keeps a few integers per group, not a table object (about 2 KB each)."""

    table: pa.Table
    keys: list[GroupKey]
    starts: list[int]
    lengths: list[int]


def route(table: pa.Table, spec: RoutingSpec) -> Routed:
    """The (partition, bucket) groups of ``table``, each with its rows in input order."""
    rows = table.num_rows
    if rows == 0:
        return Routed(table, [], [], [])
    if not spec.partition_indices and spec.num_buckets <= 0:
        return Routed(table, [GroupKey((), 0)], [0], [rows])

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
        return Routed(
            table, _keys(table, np.zeros(1, dtype=np.int64), codes[:1], spec), [0], [rows]
        )
    order = np.argsort(_narrow(codes, distinct), kind="stable")
    starts = np.concatenate(([0], np.flatnonzero(np.diff(codes[order])) + 1))
    lengths = np.diff(np.concatenate((starts, [rows])))
    firsts = order[starts]  # the input row of each group's first row
    keys = _keys(table, firsts, codes[firsts], spec)
    return Routed(table.take(pa.array(order)), keys, starts.tolist(), lengths.tolist())


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


def _keys(
    table: pa.Table, rows: np.ndarray, codes: np.ndarray, spec: RoutingSpec
) -> list[GroupKey]:
    """The keys of the groups whose first rows are ``table[rows]`` (their codes ``codes``):
    one gather per partition column, one Python step per group."""
    if spec.num_buckets > 0:
        buckets = (codes % spec.num_buckets).tolist()
    else:
        buckets = [0] * len(rows)
    indices = pa.array(rows)
    columns = [
        _stored_values(table.column(index).take(indices), kind)
        for index, kind in zip(spec.partition_indices, spec.partition_kinds, strict=True)
    ]
    partitions = list(zip(*columns, strict=True)) if columns else [()] * len(buckets)
    return [
        GroupKey(tuple(values), bucket) for values, bucket in zip(partitions, buckets, strict=True)
    ]


#: Kinds whose stored partition value is the Arrow value itself (``as_py``).
_PLAIN_KINDS = INTEGER_KINDS | {
    "bool",
    "float32",
    "float64",
    "string",
    "large_string",
    "binary",
    "large_binary",
}
#: Kinds stored as the integer behind the value (in the column's unit).
_INTEGER_BACKED = {"date32": pa.int32(), "time32": pa.int32()} | dict.fromkeys(
    ("timestamp", "time64", "duration"), pa.int64()
)


def _stored_values(values: pa.ChunkedArray, kind: str) -> list[StatValue]:
    """``scalar_to_stat`` of each value: in one conversion for the plain kinds, value by value
    (one step per group, not per row) for the others."""
    if kind in _PLAIN_KINDS:
        return values.to_pylist()  # type: ignore[no-any-return]
    if kind in _INTEGER_BACKED:
        return values.cast(_INTEGER_BACKED[kind]).to_pylist()  # type: ignore[no-any-return]
    return [scalar_to_stat(value, kind) for value in values]
