"""Per-file bloom filters: built as a data file is written, probed when a scan is planned.

A bloom filter answers "may this file hold a row whose column equals x?" without opening the
file: never a false "no", and a false "yes" with about the configured probability
(``file-index.bloom-filter.fpp``). Scans use them for ``=`` and ``in`` predicates on the
indexed columns, after partition, bucket and statistics pruning.

Hashing: each value gets a 32-bit Murmur3 hash ``h1`` (Spark's hash, ``planning.bucket``, with
a seed of its own, so filters do not correlate with bucket assignment) and ``h2``, a remix of
``h1``; probe ``i < num_hashes`` sets bit ``(h1 + i * h2 mod 2**32) * num_bits >> 32``.
Values are hashed as a canonical type (``hash_type``): every integer type as a 64-bit
integer and float32 as float64 (so widening a column keeps its filters valid), ``-0.0`` like
``0.0``, strings and binaries by their bytes, timestamps by their instant in microseconds;
nulls and NaN are left out. A filter is probed only with values of the type it was built with;
otherwise the file is kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from appendtable.errors import InvalidOptionError
from appendtable.metadata.models import BloomFilter, FileIndex
from appendtable.planning.bucket import spark_hash, unsupported_bucket_key_reason

__all__ = [
    "BloomBuilder",
    "IndexProbe",
    "ProbeValues",
    "bloom_may_contain",
    "check_index_columns",
    "hash_type_of",
    "value_hashes",
]

_SEED = 0x3C074A61
_REMIX = 0x2F0B3A5D
_MAX_HASHES = 16
_MIN_BITS = 64
_MAX_BITS = 1 << 32
_EXACT_DISTINCT = 1 << 16
_MAX_COUNTING_BITS = 1 << 26  # linear counting's bitmap (64 MB of booleans at most)
_U32 = npt.NDArray[np.uint32]
_U64 = npt.NDArray[np.uint64]
_NO_HASHES: _U32 = np.empty(0, dtype=np.uint32)


def hash_type_of(data_type: pa.DataType) -> str | None:
    """The canonical type a column's values are hashed as; None if it cannot be indexed."""
    if pa.types.is_dictionary(data_type):
        return hash_type_of(data_type.value_type)
    if unsupported_bucket_key_reason(data_type) is not None:
        return None
    if pa.types.is_integer(data_type):
        return "int64"
    if pa.types.is_floating(data_type):
        return "float64"
    if pa.types.is_date(data_type):
        return "date"
    if pa.types.is_timestamp(data_type):
        return "timestamp"
    if pa.types.is_boolean(data_type):
        return "bool"
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return "string"
    if pa.types.is_string_view(data_type):
        return "string"
    if pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return "binary"
    if pa.types.is_binary_view(data_type):
        return "binary"
    return str(data_type)  # decimals and fixed-size binaries: hashed by exact type


def check_index_columns(columns: Sequence[str], types: Mapping[str, pa.DataType]) -> None:
    """Raise InvalidOptionError naming a ``file-index.bloom-filter.columns`` column that is not
    a top-level column or whose type cannot be indexed."""
    for column in columns:
        if column not in types:
            raise InvalidOptionError(
                f"option 'file-index.bloom-filter.columns' names column '{column}', which is not "
                f"a top-level column (columns: {', '.join(types)})"
            )
        if hash_type_of(types[column]) is None:
            reason = unsupported_bucket_key_reason(types[column]) or "unsupported type"
            raise InvalidOptionError(
                f"option 'file-index.bloom-filter.columns': column '{column}' cannot be indexed: "
                f"{reason}"
            )


def _canonical(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    data_type = values.type
    if pa.types.is_dictionary(data_type):
        values = pc.cast(values, data_type.value_type)
        data_type = values.type
    if pa.types.is_integer(data_type) and not pa.types.is_int64(data_type):
        return pc.cast(values, pa.int64())
    if pa.types.is_float16(data_type) or pa.types.is_float32(data_type):
        return pc.cast(values, pa.float64())
    return values


def _fmix32(h: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Murmur3's 32-bit finaliser: a bijection that spreads every input bit."""
    h = h ^ (h >> np.uint32(16))
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def value_hashes(values: pa.Array | pa.ChunkedArray) -> _U32:
    """The hash ``h1`` of each non-null, non-NaN value: Spark's Murmur3 hash with this module's
    seed. The second hash of a value is derived from it (:func:`_second_hash`)."""
    values = _canonical(values)
    if values.null_count:
        values = pc.drop_null(values)
    if pa.types.is_floating(values.type):
        values = pc.filter(values, pc.invert(pc.is_nan(values)))
    if len(values) == 0:
        return np.empty(0, dtype=np.uint32)
    hashes: _U32 = spark_hash([values], seed=_SEED).view(np.uint32)
    return hashes


def _second_hash(h1: _U32) -> _U32:
    """``h2``: Murmur3's 32-bit finaliser of ``h1 ^ _REMIX`` (a bijection that spreads every
    bit), made odd so that the probes of a value differ."""
    h = h1 ^ np.uint32(_REMIX)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    h |= np.uint32(1)
    return h


def _dimensions(items: int, fpp: float) -> tuple[int, int]:
    """(num_bits, num_hashes) of a filter for ``items`` distinct values at false-positive
    probability ``fpp``: the textbook optimum, bits rounded up to whole 64-bit words."""
    items = max(1, items)
    bits = math.ceil(-items * math.log(fpp) / (math.log(2) ** 2))
    bits = min(_MAX_BITS, max(_MIN_BITS, -(-bits // 64) * 64))
    hashes = max(1, min(_MAX_HASHES, round(bits / items * math.log(2))))
    return bits, hashes


def _probes(h1: _U32, num_bits: int, num_hashes: int) -> Iterator[_U64]:
    """The bit positions of probe ``i`` of every value, for ``i < num_hashes``:
    ``g_i = h1 + i * h2 (mod 2**32)`` mapped onto ``[0, num_bits)`` by multiply-shift
    (``g_i * num_bits >> 32``), which needs no division."""
    h2 = _second_hash(h1)
    g = h1.copy()
    scale, shift = np.uint64(num_bits), np.uint64(32)
    for _ in range(num_hashes):
        positions: _U64 = (g.astype(np.uint64) * scale) >> shift
        yield positions
        g += h2  # wraps modulo 2**32


def _set_bits(bits: npt.NDArray[np.bool_], h1: _U32, num_hashes: int) -> None:
    for positions in _probes(h1, len(bits), num_hashes):
        bits[positions] = True


def _distinct(h1: _U32) -> tuple[_U32, int]:
    """(hashes to set, number of distinct values). Up to ``_EXACT_DISTINCT`` hashes they are
    deduplicated exactly (a sort); beyond, all are kept (setting a bit twice is harmless) and
    the count is estimated by linear counting on a bitmap at least twice their number (within
    a few percent; sorting a million hashes would cost a third of writing the file)."""
    if len(h1) <= _EXACT_DISTINCT:
        ordered = np.sort(h1)
        keep = np.empty(len(ordered), dtype=np.bool_)
        keep[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
        unique = ordered[keep]
        return unique, len(unique)
    size = min(_MAX_COUNTING_BITS, 1 << (2 * len(h1) - 1).bit_length())
    seen = np.zeros(size, dtype=np.bool_)
    seen[h1 & np.uint32(size - 1)] = True
    empty = size - int(np.count_nonzero(seen))
    estimate = len(h1) if empty == 0 else round(-size * math.log(empty / size))
    return h1, min(len(h1), max(1, estimate))


class BloomBuilder:
    """Collects the values of one column of one data file and builds its filter.

    With ``items`` > 0 the filter has a fixed size (for that many distinct values) and bits are
    set as rows arrive (memory: the filter). Otherwise it is sized for the file's own distinct
    values when the file is finished (memory: 4 bytes per non-null value until then).
    """

    def __init__(self, field_id: int, hash_type: str, fpp: float, items: int) -> None:
        self.field_id = field_id
        self.hash_type = hash_type
        self._fpp = fpp
        self._pending: list[_U32] = []
        self._bits: npt.NDArray[np.bool_] | None = None
        self._num_hashes = 0
        if items > 0:
            num_bits, self._num_hashes = _dimensions(items, fpp)
            self._bits = np.zeros(num_bits, dtype=np.bool_)

    def update(self, values: pa.Array | pa.ChunkedArray) -> None:
        hashes = value_hashes(values)
        if self._bits is not None:
            _set_bits(self._bits, hashes, self._num_hashes)
            return
        self._pending.append(hashes)

    def result(self) -> BloomFilter:
        bits = self._bits
        num_hashes = self._num_hashes
        if bits is None:
            hashes = np.concatenate(self._pending) if self._pending else _NO_HASHES
            hashes, count = _distinct(hashes)
            num_bits, num_hashes = _dimensions(count, self._fpp)
            bits = np.zeros(num_bits, dtype=np.bool_)
            _set_bits(bits, hashes, num_hashes)
        packed = np.packbits(bits, bitorder="little").tobytes()
        return BloomFilter(
            field_id=self.field_id,
            hash_type=self.hash_type,
            num_hashes=num_hashes,
            num_bits=len(bits),
            bits=packed,
        )


def bloom_may_contain(bloom: BloomFilter, bits: bytes, hashes: _U32) -> bool:
    """True if any of the values with these hashes may be in the filter (``bits``: the
    filter's bits, from the manifest or the sidecar)."""
    if len(hashes) == 0:
        return False
    if len(bits) * 8 < bloom.num_bits:
        return True  # damaged or missing bits: keep the file
    table = np.frombuffer(bits, dtype=np.uint8)
    present = np.ones(len(hashes), dtype=np.bool_)
    for positions in _probes(hashes, bloom.num_bits, bloom.num_hashes):
        present &= ((table[positions >> np.uint64(3)] >> (positions & np.uint64(7))) & 1) == 1
    return bool(present.any())


@dataclass(frozen=True)
class ProbeValues:
    """The literals of one ``=`` / ``in`` predicate on an indexed column, hashed."""

    field_id: int
    hash_type: str
    hashes: _U32


@dataclass(frozen=True)
class IndexProbe:
    """What a filter in disjunctive normal form asks of bloom filters.

    ``clauses`` holds, per clause of the filter, its predicates that a filter can answer; a
    clause without any always may match, and so does the whole filter then."""

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

    @property
    def field_ids(self) -> frozenset[int]:
        return frozenset(v.field_id for clause in self.clauses for v in clause)

    def concerns(self, index: FileIndex | None) -> bool:
        """True if ``index`` has a filter this probe can use."""
        if index is None:
            return False
        wanted = self.field_ids
        return any(bloom.field_id in wanted for bloom in index.blooms)

    def may_match(self, index: FileIndex) -> bool:
        """False only if the filters of ``index`` (with their bits) prove no row matches."""
        by_field = {bloom.field_id: bloom for bloom in index.blooms}
        for clause in self.clauses:
            for values in clause:
                bloom = by_field.get(values.field_id)
                if bloom is None or bloom.hash_type != values.hash_type:
                    continue
                if not bloom_may_contain(bloom, bloom.bits, values.hashes):
                    break  # this clause cannot match
            else:
                return True
        return False
