"""File indexes: which bloom filters a scan can ask, and what they answer.

A data file of a table with ``file-index.bloom-filter.columns`` carries Parquet's own
split-block bloom filters for those columns, one per row group (see ``parquet_bloom``), and its
manifest entry describes them (:class:`~appendtable.metadata.models.FileIndex`). A scan whose
filter pins an indexed column with ``=`` or ``in`` in every clause hashes its literals once
(:class:`ProbeValues`) and skips a file when, in some column of every clause, no row group's
filter may hold any literal. A filter is only probed with values of the Arrow type its file was
written with (a widened column's older files are kept); a column whose filters do not cover
every row group of a file is not used for that file. Never a false "no": a file is skipped
only when no row in it can match.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from appendtable.errors import InvalidOptionError
from appendtable.metadata.models import BloomFilter, FileIndex
from appendtable.planning.parquet_bloom import (
    BLOCK_BYTES,
    block_has,
    block_index,
    plain_encodings,
    sbbf_may_contain,
    unsupported_bloom_reason,
    xxh64,
)

__all__ = ["BlockReader", "IndexProbe", "ProbeValues", "check_index_columns", "probe_values"]


def check_index_columns(columns: Sequence[str], types: Mapping[str, pa.DataType]) -> None:
    """Raise InvalidOptionError naming a ``file-index.bloom-filter.columns`` column that is not
    a top-level column or whose type cannot have a bloom filter."""
    for column in columns:
        if column not in types:
            raise InvalidOptionError(
                f"option 'file-index.bloom-filter.columns' names column '{column}', which is not "
                f"a top-level column (columns: {', '.join(types)})"
            )
        reason = unsupported_bloom_reason(types[column])
        if reason is not None:
            raise InvalidOptionError(
                f"option 'file-index.bloom-filter.columns': column '{column}' cannot be indexed: "
                f"{reason}"
            )


@dataclass(frozen=True)
class ProbeValues:
    """The literals of one ``=`` / ``in`` predicate on a column, hashed as the column's current
    Arrow type (``value_type``, as ``str(type)``)."""

    field_id: int
    value_type: str
    hashes: tuple[int, ...]


def probe_values(
    field_id: int, values: Iterable[object], data_type: pa.DataType
) -> ProbeValues | None:
    """The hashes of ``values`` (Python values or Arrow scalars of the column) for probing;
    None when some value cannot be probed for (NaN, an unsupported type)."""
    if unsupported_bloom_reason(data_type) is not None:
        return None
    hashes: list[int] = []
    for value in values:
        encodings = plain_encodings(value, data_type)
        if encodings is None:
            return None
        hashes.extend(xxh64(encoded) for encoded in encodings)
    return ProbeValues(field_id=field_id, value_type=str(data_type), hashes=tuple(hashes))


@dataclass(frozen=True)
class IndexProbe:
    """What a filter in disjunctive normal form asks of bloom filters.

    ``clauses`` holds, per clause of the filter, its predicates that a filter can answer."""

    clauses: tuple[tuple[ProbeValues, ...], ...]

    @staticmethod
    def of(clauses: Iterable[Iterable[ProbeValues | None]]) -> IndexProbe | None:
        """A probe from per-clause values (None: a predicate no filter can answer); None when
        some clause has nothing to probe (no file could ever be skipped)."""
        kept = []
        for clause in clauses:
            values = tuple(v for v in clause if v is not None)
            if not values:
                return None
            kept.append(values)
        return IndexProbe(tuple(kept)) if kept else None

    @functools.cached_property
    def field_ids(self) -> frozenset[int]:
        """The fields some predicate probes (asked once per planned file: computed once)."""
        return frozenset(v.field_id for clause in self.clauses for v in clause)

    def concerns(self, index: FileIndex | None) -> bool:
        """True if ``index`` has a filter this probe can use."""
        if index is None:
            return False
        wanted = self.field_ids
        return any(bloom.field_id in wanted for bloom in index.blooms)

    def may_match(self, index: FileIndex, read_block: BlockReader | None = None) -> bool:
        """False only if the filters of ``index`` prove no row matches. Bitsets not kept in
        the manifest are probed block by block through ``read_block`` (without it, such a
        filter answers "maybe"). Raises what ``read_block`` raises."""
        by_field: dict[int, list[BloomFilter]] = {}
        for bloom in index.blooms:
            by_field.setdefault(bloom.field_id, []).append(bloom)
        for clause in self.clauses:
            for values in clause:
                blooms = by_field.get(values.field_id, [])
                if len(blooms) != index.row_groups or any(
                    bloom.value_type != values.value_type for bloom in blooms
                ):
                    continue  # not every row group covered, or written as another type
                if not any(_bloom_may_contain(b, values.hashes, read_block) for b in blooms):
                    break  # this clause cannot match
            else:
                return True
        return False


#: Reads block ``i`` (32 bytes) of a filter whose bitset is not kept in the manifest.
BlockReader = Callable[[BloomFilter, int], bytes]


def _bloom_may_contain(
    bloom: BloomFilter, hashes: Sequence[int], read_block: BlockReader | None
) -> bool:
    if bloom.bits or bloom.num_bytes == 0:
        return sbbf_may_contain(bloom.bits, list(hashes))
    if read_block is None or bloom.num_bytes % BLOCK_BYTES:
        return True
    for h in hashes:
        block = read_block(bloom, block_index(h, bloom.num_bytes))
        if len(block) != BLOCK_BYTES or block_has(block, h):
            return True
    return False
