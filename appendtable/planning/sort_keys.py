"""Row orders for sort compaction: lexicographic, z-order and Hilbert (vectorised).

For the space-filling curves each column is first mapped to its dense rank (nulls last), scaled
to ``bits`` bits, so columns of any type and range weigh equally. Z-order interleaves the bits of
the coordinates; the Hilbert order uses Skilling's transform ("Programming the Hilbert curve",
2004), which keeps neighbouring keys closer together than z-order does. Both cluster rows so
that files hold narrow ranges of *every* sorted column, which sharpens min/max pruning.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import assert_never

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "SortStrategy",
    "hilbert_index",
    "hilbert_keys",
    "sort_indices",
    "zorder_index",
    "zorder_keys",
]

_U64 = np.uint64


def _coordinates(
    table: pa.Table, columns: Sequence[str], bits: int
) -> list[npt.NDArray[np.uint64]]:
    coordinates = []
    top = (1 << bits) - 1
    for name in columns:
        ranks = pc.rank(table.column(name), sort_keys="ascending", tiebreaker="dense")
        values = ranks.to_numpy(zero_copy_only=False).astype(np.uint64) - _U64(1)
        highest = int(values.max()) if len(values) else 0
        if highest > 0:
            values = (values * _U64(top)) // _U64(highest)
        coordinates.append(values)
    return coordinates


def _bits_per_dimension(dimensions: int) -> int:
    return max(1, min(21, 63 // dimensions))


def zorder_keys(table: pa.Table, columns: Sequence[str]) -> npt.NDArray[np.uint64]:
    bits = _bits_per_dimension(len(columns))
    return zorder_index(_coordinates(table, columns, bits), bits)


def hilbert_keys(table: pa.Table, columns: Sequence[str]) -> npt.NDArray[np.uint64]:
    bits = _bits_per_dimension(len(columns))
    return hilbert_index(_coordinates(table, columns, bits), bits)


def zorder_index(
    coordinates: Sequence[npt.NDArray[np.uint64]], bits: int
) -> npt.NDArray[np.uint64]:
    """Morton codes: bit ``b`` of dimension ``d`` goes to position ``b * dims + (dims - 1 - d)``."""
    dims = len(coordinates)
    keys = np.zeros(len(coordinates[0]), dtype=np.uint64)
    for bit in range(bits):
        for index, values in enumerate(coordinates):
            position = _U64(bit * dims + (dims - 1 - index))
            keys |= ((values >> _U64(bit)) & _U64(1)) << position
    return keys


def hilbert_index(
    coordinates: Sequence[npt.NDArray[np.uint64]], bits: int
) -> npt.NDArray[np.uint64]:
    """Hilbert indices via Skilling's axes-to-transpose transform, then bit interleaving."""
    dims = len(coordinates)
    x = [values.copy() for values in coordinates]
    top = _U64(1 << (bits - 1))
    q = top
    while q > _U64(1):  # undo excess work
        p = q - _U64(1)
        for i in range(dims):
            high = (x[i] & q) != 0
            x[0] = np.where(high, x[0] ^ p, x[0])
            swap = np.where(high, _U64(0), (x[0] ^ x[i]) & p)
            x[0] ^= swap
            x[i] ^= swap
        q >>= _U64(1)
    for i in range(1, dims):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = top
    while q > _U64(1):
        t = np.where((x[dims - 1] & q) != 0, t ^ (q - _U64(1)), t)
        q >>= _U64(1)
    for i in range(dims):
        x[i] ^= t
    keys = np.zeros(len(x[0]), dtype=np.uint64)
    for bit in range(bits - 1, -1, -1):
        for i in range(dims):
            keys = (keys << _U64(1)) | ((x[i] >> _U64(bit)) & _U64(1))
    return keys


class SortStrategy(enum.StrEnum):
    """The row orders of sort compaction."""

    ORDER = "order"  #: lexicographic
    ZORDER = "zorder"
    HILBERT = "hilbert"


def sort_indices(table: pa.Table, columns: Sequence[str], strategy: SortStrategy) -> pa.Array:
    """Row indices that put ``table`` in the order of ``strategy`` over ``columns`` (over one
    column every order is the lexicographic one)."""
    if len(columns) == 1:
        strategy = SortStrategy.ORDER
    match strategy:
        case SortStrategy.ORDER:
            sort_keys = [(name, "ascending", "at_end") for name in columns]
            return pc.sort_indices(table, sort_keys=sort_keys)
        case SortStrategy.ZORDER:
            keys = zorder_keys(table, columns)
        case SortStrategy.HILBERT:
            keys = hilbert_keys(table, columns)
        case _:
            assert_never(strategy)
    return pa.array(np.argsort(keys, kind="stable"))
