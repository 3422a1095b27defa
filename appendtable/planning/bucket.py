"""Vectorised bucket assignment, bit-for-bit equal to Spark SQL's ``pmod(hash(k1, k2, ...), N)``.

Guarantee
---------
For every supported Arrow type, :func:`spark_hash` returns exactly the int32 that Spark SQL's
``hash(k1, k2, ...)`` (the ``Murmur3Hash`` expression, seed 42) returns for the same values, and
:func:`bucket_ids` returns exactly ``pmod(hash(k1, k2, ...), N)``. This was checked against
Spark 4.3 (golden values in ``tests/unit/test_bucket_hash.py``, randomised row-for-row comparison
in ``tests/spark/test_bucket_hash_spark.py``).

Algorithm
---------
Murmur3 x86 32-bit as in Spark's ``Murmur3_x86_32``. The key columns are chained left to right:
the running hash starts at the seed and each column's value is hashed with the running hash as
its seed. A null value leaves the running hash unchanged (so an all-null key hashes to 42).
``pmod(h, N) = ((h % N) + N) % N``, always in ``[0, N)``.

Encoding per type (the Spark type each Arrow type corresponds to in brackets):

* ``bool`` [boolean]: ``hashInt(1 if true else 0)``.
* ``int8``, ``int16``, ``int32`` [tinyint, smallint, int]: ``hashInt(value)`` (sign-extended).
* ``uint8``, ``uint16`` [smallint, int]: ``hashInt(value)``.
* ``uint32`` [bigint]: ``hashLong(value)`` -- an unsigned 32-bit value only fits Spark's bigint.
* ``int64`` [bigint]: ``hashLong(value)``.
* ``float32`` [float]: ``hashInt(floatToIntBits(v))``, with -0.0 hashed as 0.0 and every NaN
  as the canonical NaN ``0x7fc00000``.
* ``float64`` [double]: ``hashLong(doubleToLongBits(v))``, with -0.0 hashed as 0.0 and every
  NaN as the canonical NaN ``0x7ff8000000000000``.
* ``string``, ``large_string``, ``string_view`` [string, UTF8_BINARY collation] and ``binary``,
  ``large_binary``, ``binary_view``, ``fixed_size_binary`` [binary]: ``hashUnsafeBytes`` of the
  raw (UTF-8) bytes: every complete 4-byte little-endian word is mixed in, then *each* of the
  up to three trailing bytes is mixed in on its own as a sign-extended byte (this differs from
  the reference Murmur3 tail handling), and the finalisation uses the byte length.
* ``date32`` [date]: ``hashInt(days since epoch)``; ``date64`` is converted to days by floor
  division of its milliseconds by 86 400 000.
* ``timestamp[s|ms|us|ns]`` with or without time zone [timestamp, timestamp_ntz]:
  ``hashLong(microseconds since epoch)`` of the stored value; seconds and milliseconds are
  multiplied up, nanoseconds floor-divided by 1000 (as pyspark does when it hands Arrow data to
  Spark); seconds beyond Spark's range (about +-292 000 years) wrap around instead of failing.
  The time zone does not matter: Arrow stores UTC instants for zoned timestamps and wall-clock
  values for naive ones, exactly the longs Spark keeps for timestamp and timestamp_ntz.
* ``decimal32``, ``decimal64``, ``decimal128`` and ``decimal256`` with precision <= 38
  [decimal(p, s)]: if the *type's* precision is <= 18, ``hashLong(unscaled value)``; otherwise
  ``hashUnsafeBytes`` of the minimal big-endian two's-complement encoding of the unscaled value
  (what Java's ``BigInteger.toByteArray`` returns, 1 to 16 bytes).
* ``dictionary<values=T>``: decoded first, then hashed as ``T`` (Spark sees the decoded values).

Rejected (``ValueError`` from the hash functions, a reason from
:func:`unsupported_bucket_key_reason`): ``null``, ``uint64``, ``float16``, ``decimal256`` with
precision > 38, time, duration and interval types, and nested types (list, struct, map, union).

Implementation: every step is a numpy operation over all rows (``uint32`` arithmetic with
wraparound). Variable-length values are processed word position by word position over the rows
that still have words left; Arrow buffers (validity, offsets, data) are read directly with the
array offset applied, so slices and chunked arrays cost no copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, assert_never

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from appendtable.errors import InvalidArgumentError

__all__ = [
    "bucket_ids",
    "bucket_of_values",
    "spark_hash",
    "unsupported_bucket_key_reason",
]

_U32 = npt.NDArray[np.uint32]
_I64 = npt.NDArray[np.int64]

#: Spark's default seed for ``hash(...)``.
SPARK_HASH_SEED = 42

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_MAX_BUCKETS = 2**31 - 1
_MILLIS_PER_DAY = 86_400_000
_FLOAT_CANONICAL_NAN = 0x7FC00000
_DOUBLE_CANONICAL_NAN = 0x7FF8000000000000
_MAX_SPARK_DECIMAL_PRECISION = 38
_MAX_LONG_DIGITS = 18
#: Variable-length hashing switches to a per-row h1 chain once at most this many rows are left
#: with more than _LONG_TAIL_WORDS words still to mix (a few huge values among short ones).
_FEW_ROWS = 16
_LONG_TAIL_WORDS = 256


# --------------------------------------------------------------------------------------------
# Murmur3 x86 32-bit building blocks. All of them work in place on uint32 arrays that the
# caller owns (never on views of Arrow buffers).
# --------------------------------------------------------------------------------------------


def _rotl(x: _U32, r: int) -> None:
    high = x >> (32 - r)
    x <<= r
    x |= high


def _mix_k1(k: _U32) -> None:
    k *= _C1
    _rotl(k, 15)
    k *= _C2


def _mix_h1(h: _U32, k: _U32) -> None:
    h ^= k
    _rotl(h, 13)
    h *= 5
    h += 0xE6546B64


def _fmix(h: _U32, length: _U32 | int) -> None:
    h ^= length
    h ^= h >> 16
    h *= 0x85EBCA6B
    h ^= h >> 13
    h *= 0xC2B2AE35
    h ^= h >> 16


def _hash_int(values: npt.NDArray[np.integer], seed: _U32) -> _U32:
    """``hashInt`` of int32-range values (any integer dtype; sign-extended to 32 bits)."""
    k = values.astype(np.int32).view(np.uint32)
    h = seed.copy()
    _mix_k1(k)
    _mix_h1(h, k)
    _fmix(h, 4)
    return h


def _hash_long(values: npt.NDArray[np.integer], seed: _U32) -> _U32:
    """``hashLong``: low word first, then high word, finalised with length 8."""
    v = values.astype(np.int64, copy=False)
    low = v.astype(np.uint32)  # truncation keeps the low 32 bits
    high = (v >> 32).astype(np.uint32)
    h = seed.copy()
    _mix_k1(low)
    _mix_h1(h, low)
    _mix_k1(high)
    _mix_h1(h, high)
    _fmix(h, 8)
    return h


def _hash_bytes(data: pa.Buffer | bytes, starts: _I64, lengths: _I64, seed: _U32) -> _U32:
    """Spark's ``hashUnsafeBytes`` of ``data[starts[i] : starts[i] + lengths[i]]`` per row.

    Loops over word positions, never over rows. The rows are first put in an order where, for
    every word position ``j``, the rows that still have a whole 4-byte word at ``j`` form one
    contiguous run inside each of four groups (grouped by ``length % 4``, longest first), and the
    rows with at least ``t + 1`` trailing bytes form a prefix. Every step then works in place on
    contiguous slices; only the data words themselves are gathered.
    """
    n = len(starts)
    size = len(data)
    n_words = lengths >> 2
    max_words = int(n_words.max()) if n else 0
    # Sort key: trailing-byte count descending, then word count descending.
    span = max_words + 1
    key = (3 - (lengths & 3)) * span + (max_words - n_words)
    key_dtype = np.uint16 if 4 * span <= 2**16 else np.int64
    order = np.argsort(key.astype(key_dtype), kind="stable")
    # hist[g, c]: rows with (3 - length % 4) == g and (max_words - n_words) == c.
    hist = np.bincount(key, minlength=4 * span).reshape(4, span)
    group_start = np.concatenate(([0], np.cumsum(hist.sum(axis=1))))
    # longer[g, j]: rows of group g with more than j words (a prefix of the group).
    longer = np.cumsum(hist, axis=1)[:, ::-1][:, 1:]

    h = seed[order]
    pos = starts[order]
    if max_words:
        # Every (unaligned) little-endian 32-bit word of the data buffer: element p is the word
        # starting at byte p. A zero-copy, read-only view.
        words = np.ndarray(shape=(size - 3,), dtype="<u4", buffer=data, strides=(1,))
        total_longer = longer.sum(axis=0)
        # Pathologically long values: once only a few rows are left with many words to go,
        # finish those rows with the (inherently sequential) h1 chain in plain Python.
        few = np.flatnonzero(total_longer <= _FEW_ROWS)
        cut = int(few[0]) if few.size and max_words - few[0] > _LONG_TAIL_WORDS else max_words
        for j in range(cut):
            for g in range(4):
                count = int(longer[g, j])
                if count:
                    lo = int(group_start[g])
                    run = slice(lo, lo + count)
                    k = words[pos[run]].astype(np.uint32)
                    pos[run] += 4
                    _mix_k1(k)
                    _mix_h1(h[run], k)
        if cut < max_words:
            for g in range(4):
                lo = int(group_start[g])
                for i in range(lo, lo + int(longer[g, cut])):
                    remaining = int(n_words[order[i]]) - cut
                    h[i], pos[i] = _finish_long_row(words, int(h[i]), int(pos[i]), remaining)
    signed_bytes = np.frombuffer(data, dtype=np.int8, count=size)
    for t in range(3):
        count = int(group_start[3 - t])  # rows with more than t trailing bytes
        if count:
            k = signed_bytes[pos[:count] + t].astype(np.int32).view(np.uint32)
            _mix_k1(k)
            _mix_h1(h[:count], k)
    _fmix(h, lengths[order].astype(np.uint32))
    out = np.empty_like(h)
    out[order] = h
    return out


def _finish_long_row(words: _U32, h: int, pos: int, remaining: int) -> tuple[int, int]:
    """Mix the ``remaining`` words of one very long value starting at byte ``pos`` into ``h``.

    ``mix_k1`` is vectorised over the words; only the h1 chain, which is sequential by nature,
    runs in Python. Returns the new running hash and the position after the last word.
    """
    stop = pos + 4 * remaining
    ks = words[pos:stop:4].astype(np.uint32)
    _mix_k1(ks)
    for k in ks.tolist():
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    return h, stop


# --------------------------------------------------------------------------------------------
# Reading Arrow buffers.
# --------------------------------------------------------------------------------------------


def _bits(buf: pa.Buffer, offset: int, length: int) -> npt.NDArray[np.bool_]:
    packed = np.frombuffer(buf, dtype=np.uint8, count=(offset + length + 7) // 8)
    return np.unpackbits(packed, count=offset + length, bitorder="little")[offset:].view(np.bool_)


def _fixed(arr: pa.Array, dtype: str) -> npt.NDArray[np.generic]:
    """The values buffer of a fixed-width array as a (read-only) numpy view."""
    width = np.dtype(dtype).itemsize
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * width)


def _var_width(arr: pa.Array, offset_dtype: str) -> tuple[pa.Buffer | bytes, _I64, _I64]:
    bufs = arr.buffers()
    width = np.dtype(offset_dtype).itemsize
    offsets = np.frombuffer(
        bufs[1], dtype=offset_dtype, count=len(arr) + 1, offset=arr.offset * width
    ).astype(np.int64)
    data: pa.Buffer | bytes = bufs[2] if bufs[2] is not None else b""
    return data, offsets[:-1], np.diff(offsets)


def _unit_to_micros(values: _I64, unit: Literal["s", "ms", "us", "ns"]) -> _I64:
    match unit:
        case "s":
            return values * 1_000_000
        case "ms":
            return values * 1000
        case "us":
            return values
        case "ns":
            return values // 1000  # floor division, as Spark when it ingests Arrow nanoseconds
        case _:
            assert_never(unit)


def _decimal_bytes_hash(arr: pa.Array, width: int, seed: _U32) -> _U32:
    """``hashUnsafeBytes(BigInteger.toByteArray())`` of the unscaled values of a wide decimal."""
    n = len(arr)
    raw = np.frombuffer(
        arr.buffers()[1], dtype=np.uint8, count=n * width, offset=arr.offset * width
    )
    # Precision <= 38 fits in the low 16 bytes (for decimal256 the rest is sign extension).
    big_endian = raw.reshape(n, width)[:, 15::-1]
    negative = big_endian[:, 0] >= 0x80
    sign_byte = np.where(negative, np.uint8(0xFF), np.uint8(0x00))
    is_sign = big_endian == sign_byte[:, None]
    all_sign = is_sign.all(axis=1)
    # Leading bytes equal to the sign byte (all 16 for 0 and -1, whose encoding is one byte).
    lead = np.where(all_sign, 15, is_sign.argmin(axis=1))
    # A leading sign byte can be dropped only if the byte after it still carries the sign bit.
    first_kept = big_endian[np.arange(n), lead]
    sign_bit_kept = (first_kept >= 0x80) == negative
    lead = np.where(all_sign | sign_bit_kept, lead, lead - 1)
    lengths = (16 - lead).astype(np.int64)
    keep = np.arange(16)[None, :] >= lead[:, None]
    data = np.ascontiguousarray(big_endian[keep]).tobytes()
    starts = np.cumsum(lengths) - lengths
    return _hash_bytes(data, starts, lengths, seed)


def _decimal_precision_ok(data_type: pa.DataType) -> bool:
    return bool(data_type.precision <= _MAX_SPARK_DECIMAL_PRECISION)


def _is_decimal(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_decimal32(data_type)
        or pa.types.is_decimal64(data_type)
        or pa.types.is_decimal128(data_type)
        or pa.types.is_decimal256(data_type)
    )


def _hash_chunk(arr: pa.Array, seed: _U32) -> _U32:
    """Hash one non-empty Arrow array with a per-row running seed; returns a new array."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_string_view(t):
        arr = arr.cast(pa.large_string())
        t = arr.type
    elif pa.types.is_binary_view(t):
        arr = arr.cast(pa.large_binary())
        t = arr.type
    n = len(arr)
    if arr.null_count == n:
        return seed.copy()

    if pa.types.is_boolean(t):
        out = _hash_int(_bits(arr.buffers()[1], arr.offset, n).astype(np.int32), seed)
    elif pa.types.is_int8(t):
        out = _hash_int(_fixed(arr, "<i1").astype(np.int32), seed)
    elif pa.types.is_int16(t):
        out = _hash_int(_fixed(arr, "<i2").astype(np.int32), seed)
    elif pa.types.is_int32(t) or pa.types.is_date32(t):
        out = _hash_int(_fixed(arr, "<i4").astype(np.int32), seed)
    elif pa.types.is_uint8(t):
        out = _hash_int(_fixed(arr, "<u1").astype(np.int32), seed)
    elif pa.types.is_uint16(t):
        out = _hash_int(_fixed(arr, "<u2").astype(np.int32), seed)
    elif pa.types.is_uint32(t):
        out = _hash_long(_fixed(arr, "<u4").astype(np.int64), seed)
    elif pa.types.is_int64(t):
        out = _hash_long(_fixed(arr, "<i8").astype(np.int64), seed)
    elif pa.types.is_date64(t):
        out = _hash_int(_fixed(arr, "<i8").astype(np.int64) // _MILLIS_PER_DAY, seed)
    elif pa.types.is_timestamp(t):
        out = _hash_long(_unit_to_micros(_fixed(arr, "<i8").astype(np.int64), t.unit), seed)
    elif pa.types.is_float32(t):
        floats = _fixed(arr, "<f4")
        bits = floats.view("<u4").astype(np.uint32)
        bits[floats == 0] = 0  # -0.0 hashes like 0.0
        bits[np.isnan(floats)] = _FLOAT_CANONICAL_NAN
        out = _hash_int(bits.view(np.int32), seed)
    elif pa.types.is_float64(t):
        doubles = _fixed(arr, "<f8")
        bits64 = doubles.view("<i8").astype(np.int64)
        bits64[doubles == 0] = 0
        bits64[np.isnan(doubles)] = _DOUBLE_CANONICAL_NAN
        out = _hash_long(bits64, seed)
    elif pa.types.is_string(t) or pa.types.is_binary(t):
        out = _hash_bytes(*_var_width(arr, "<i4"), seed)
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        out = _hash_bytes(*_var_width(arr, "<i8"), seed)
    elif _is_decimal(t) and _decimal_precision_ok(t):
        width = t.byte_width
        if t.precision <= _MAX_LONG_DIGITS:
            # The unscaled value fits in 64 bits: its low word, sign included.
            word = "<i4" if width == 4 else "<i8"
            count = n * width // np.dtype(word).itemsize
            unscaled = np.frombuffer(
                arr.buffers()[1], dtype=word, count=count, offset=arr.offset * width
            ).reshape(n, -1)[:, 0]
            out = _hash_long(unscaled.astype(np.int64), seed)
        else:
            out = _decimal_bytes_hash(arr, width, seed)
    elif pa.types.is_fixed_size_binary(t):  # after decimals, whose types derive from it
        width = t.byte_width
        data = arr.buffers()[1]
        starts = (np.arange(n, dtype=np.int64) + arr.offset) * width
        out = _hash_bytes(data, starts, np.full(n, width, dtype=np.int64), seed)
    else:
        raise InvalidArgumentError(f"columns: {_reason(t) or f'cannot hash Arrow type {t}'}")

    if arr.null_count:
        valid = _bits(arr.buffers()[0], arr.offset, n)
        out = np.where(valid, out, seed)
    return out


# --------------------------------------------------------------------------------------------
# Type support.
# --------------------------------------------------------------------------------------------


def _reason(t: pa.DataType) -> str | None:
    if pa.types.is_dictionary(t):
        inner = _reason(t.value_type)
        return None if inner is None else f"dictionary values: {inner}"
    if (
        pa.types.is_boolean(t)
        or pa.types.is_int8(t)
        or pa.types.is_int16(t)
        or pa.types.is_int32(t)
        or pa.types.is_int64(t)
        or pa.types.is_uint8(t)
        or pa.types.is_uint16(t)
        or pa.types.is_uint32(t)
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_date32(t)
        or pa.types.is_date64(t)
        or pa.types.is_timestamp(t)
    ):
        return None
    if _is_decimal(t):
        if _decimal_precision_ok(t):
            return None
        return (
            f"decimal precision {t.precision} exceeds Spark's maximum of "
            f"{_MAX_SPARK_DECIMAL_PRECISION}"
        )
    if pa.types.is_fixed_size_binary(t):
        return None
    if pa.types.is_null(t):
        return "a column of type null has no values to hash"
    if pa.types.is_uint64(t):
        return "uint64 has no Spark equivalent (values above 2**63-1 do not fit a bigint)"
    if pa.types.is_float16(t):
        return "float16 has no Spark equivalent"
    if pa.types.is_nested(t):
        return f"nested type {t} cannot be a bucket key"
    return f"type {t} is not supported as a bucket key"


def unsupported_bucket_key_reason(data_type: pa.DataType) -> str | None:
    """None when the type can be a bucket key, else a short human reason."""
    return _reason(data_type)


# --------------------------------------------------------------------------------------------
# Public API.
# --------------------------------------------------------------------------------------------


def spark_hash(
    columns: Sequence[pa.Array | pa.ChunkedArray], seed: int = SPARK_HASH_SEED
) -> npt.NDArray[np.int32]:
    """int32 array: Spark's ``Murmur3Hash(columns..., seed)`` per row.

    Columns are chained left to right (each column's hash seeds the next); a null leaves the
    running hash unchanged. All columns must have the same length; chunk layouts may differ.
    Raises ``InvalidArgumentError`` (a ``ValueError``) for an empty column list, unequal
    lengths or unsupported types.
    """
    if not columns:
        raise InvalidArgumentError("columns: hash needs at least one column")
    n = len(columns[0])
    for col in columns:
        if len(col) != n:
            raise InvalidArgumentError(f"columns have different lengths: {len(col)} != {n}")
        reason = _reason(col.type)
        if reason is not None:
            raise InvalidArgumentError(f"columns: {reason}")
    h = np.full(n, seed & 0xFFFFFFFF, dtype=np.uint32)
    for col in columns:
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        start = 0
        for chunk in chunks:
            stop = start + len(chunk)
            if stop > start:
                h[start:stop] = _hash_chunk(chunk, h[start:stop])
            start = stop
    return h.view(np.int32)


def bucket_ids(
    columns: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int
) -> npt.NDArray[np.int32]:
    """int32 array in ``[0, num_buckets)``: ``pmod(spark_hash(columns), num_buckets)``."""
    if isinstance(num_buckets, bool) or not 1 <= num_buckets <= _MAX_BUCKETS:
        raise InvalidArgumentError(
            f"num_buckets must be in [1, {_MAX_BUCKETS}], got {num_buckets!r}"
        )
    return _pmod(spark_hash(columns), num_buckets)


def _pmod(hashes: npt.NDArray[np.int32], num_buckets: int) -> npt.NDArray[np.int32]:
    """``((h % N) + N) % N`` for ``1 <= N < 2**31``, i.e. the floor modulo ``h - floor(h / N) * N``.

    numpy's integer ``%`` is an order of magnitude slower than its ``//`` by a scalar, so the
    remainder is rebuilt from the floor quotient. ``quotient * N`` may wrap around in int32 for
    large N, but the true remainder lies in ``[0, N)`` and int32 arithmetic is exact modulo 2**32,
    so the wrapped subtraction still yields it.
    """
    if num_buckets & (num_buckets - 1) == 0:
        return hashes & np.int32(num_buckets - 1)  # two's complement: floor mod by a power of 2
    product = hashes // num_buckets
    product *= num_buckets
    return hashes - product


def bucket_of_values(
    values: Sequence[object], types: Sequence[pa.DataType], num_buckets: int
) -> int:
    """The bucket of one key given as Python scalars (``None`` for null).

    Each value is converted exactly as ``pyarrow.array([value], type=...)`` converts it: ints,
    floats, bools, str, bytes, ``decimal.Decimal``, ``datetime.date``, ``datetime.datetime``
    (pyarrow reads a naive datetime given for a zoned timestamp type as UTC) or the raw integer
    encoding of dates and timestamps. For a dictionary type the value is of the value type.
    Raises ``InvalidArgumentError`` (a ``ValueError``) if a value does not fit its type.
    """
    if len(values) != len(types):
        raise InvalidArgumentError(f"values: {len(values)} values for {len(types)} types")
    arrays: list[pa.Array] = []
    for value, data_type in zip(values, types, strict=True):
        target = data_type.value_type if pa.types.is_dictionary(data_type) else data_type
        try:
            arrays.append(pa.array([value], type=target))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise InvalidArgumentError(
                f"values: cannot use {value!r} as a {data_type} key: {exc}"
            ) from exc
    return int(bucket_ids(arrays, num_buckets)[0])
