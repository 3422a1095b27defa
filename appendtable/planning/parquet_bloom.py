"""Probing Parquet split-block bloom filters (SBBF) with a few literal values.

Data files carry Parquet's own bloom filters (written by pyarrow's C++ writer, one per indexed
column and row group). A filter's bitset is ``num_blocks`` blocks of eight little-endian 32-bit
words. A value's 64-bit XXH64 hash (seed 0) of its PLAIN encoding picks block
``((h >> 32) * num_blocks) >> 32``; in word ``i`` of that block, bit
``((h & 0xFFFFFFFF) * SALT[i] mod 2**32) >> 27`` is set. Only literals are hashed here (a scan
probes each filter with the few values of its ``=`` / ``in`` predicates), so plain Python is
fast enough; the writer hashes every row in C++.

PLAIN encodings (Parquet's physical types): INT32 for integers of up to 32 bits and dates in days
(4 bytes, little-endian, two's complement; unsigned values by their bits), INT64 for 64-bit
integers and timestamps (8 bytes; seconds are written as milliseconds), INT32 / INT64 for
times (seconds as milliseconds), FLOAT / DOUBLE (4 / 8
bytes, IEEE 754), BYTE_ARRAY for strings (UTF-8) and binaries (the bytes, without a length),
FIXED_LEN_BYTE_ARRAY for fixed-size binaries and decimals (big-endian two's complement of the
unscaled value, in the minimal width for the precision).
"""

from __future__ import annotations

import math
import struct

import pyarrow as pa

from appendtable.metadata.values import unscaled

__all__ = [
    "BLOCK_BYTES",
    "bitset_of",
    "parquet_physical_type",
    "block_has",
    "block_index",
    "plain_encodings",
    "sbbf_may_contain",
    "unsupported_bloom_reason",
    "xxh64",
]

_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_M64 = (1 << 64) - 1
_SALT = (
    0x47B6137B,
    0x44974D91,
    0x8824AD5B,
    0xA2B7289D,
    0x705495C7,
    0x2DF1424B,
    0x9EFC4947,
    0x5C6BFB31,
)
_BLOCK = struct.Struct("<8I")
#: Bytes of one block: eight 32-bit words.
BLOCK_BYTES = 32


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M64
    return (_rotl(acc, 31) * _P1) & _M64


def _merge(acc: int, value: int) -> int:
    acc ^= _round(0, value)
    return (acc * _P1 + _P4) & _M64


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (the reference algorithm, for short inputs in plain Python)."""
    length = len(data)
    offset = 0
    if length >= 32:
        v1 = (seed + _P1 + _P2) & _M64
        v2 = (seed + _P2) & _M64
        v3 = seed & _M64
        v4 = (seed - _P1) & _M64
        while offset + 32 <= length:
            a, b, c, d = struct.unpack_from("<4Q", data, offset)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            offset += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _M64
    h = (h + length) & _M64
    while offset + 8 <= length:
        (lane,) = struct.unpack_from("<Q", data, offset)
        h ^= _round(0, lane)
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        offset += 8
    if offset + 4 <= length:
        (word,) = struct.unpack_from("<I", data, offset)
        h ^= (word * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        offset += 4
    while offset < length:
        h ^= (data[offset] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        offset += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h


def block_index(h: int, num_bytes: int) -> int:
    """The block of a filter of ``num_bytes`` bytes that a value with hash ``h`` maps to."""
    return ((h >> 32) * (num_bytes // BLOCK_BYTES)) >> 32


def block_has(block: bytes, h: int) -> bool:
    """Whether the 32-byte ``block`` has every bit of a value with hash ``h``."""
    key = h & 0xFFFFFFFF
    words = _BLOCK.unpack(block)
    return all(
        word >> (((key * salt) & 0xFFFFFFFF) >> 27) & 1
        for word, salt in zip(words, _SALT, strict=True)
    )


def sbbf_may_contain(bitset: bytes, hashes: list[int]) -> bool:
    """True if any value with one of these XXH64 hashes may be in the filter ``bitset``;
    True also for a bitset that is not whole blocks (damaged: the file is kept)."""
    if not bitset or len(bitset) % BLOCK_BYTES:
        return True
    for h in hashes:
        start = block_index(h, len(bitset)) * BLOCK_BYTES
        if block_has(bitset[start : start + BLOCK_BYTES], h):
            return True
    return False


def plain_encodings(value: object, data_type: pa.DataType) -> list[bytes] | None:
    """The PLAIN encodings a column of ``data_type`` may hold ``value`` (a Python value, or an
    Arrow scalar: exact for dates and instants beyond Python's year 9999) as (two for a float
    zero: ``0.0`` and ``-0.0`` are equal but encoded apart); [] when no value of the column
    can equal it; None when it cannot be told (the filter must not be used)."""
    if pa.types.is_dictionary(data_type):
        return plain_encodings(value, data_type.value_type)
    try:
        if isinstance(value, pa.Scalar):
            scalar = value if value.type == data_type else value.cast(data_type)
        else:
            scalar = pa.scalar(value, type=data_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return []
    if not scalar.is_valid:
        return None
    if pa.types.is_date32(data_type):
        days = scalar.cast(pa.int32()).as_py()
        return [(days & 0xFFFFFFFF).to_bytes(4, "little")]
    if pa.types.is_date64(data_type):  # written as date32 days
        days = scalar.cast(pa.int64()).as_py() // 86_400_000
        return [(days & 0xFFFFFFFF).to_bytes(4, "little")]
    if pa.types.is_integer(data_type):
        width = 8 if data_type.bit_width == 64 else 4
        return [(int(scalar.as_py()) & ((1 << (8 * width)) - 1)).to_bytes(width, "little")]
    if pa.types.is_timestamp(data_type) or pa.types.is_time64(data_type):
        raw = scalar.cast(pa.int64()).as_py() * (1000 if data_type.unit == "s" else 1)
        return [(raw & _M64).to_bytes(8, "little")]  # seconds are written as milliseconds
    if pa.types.is_time32(data_type):
        raw = scalar.cast(pa.int32()).as_py() * (1000 if data_type.unit == "s" else 1)
        return [(raw & 0xFFFFFFFF).to_bytes(4, "little")]
    if pa.types.is_floating(data_type) and not pa.types.is_float16(data_type):
        number = float(scalar.as_py())
        if math.isnan(number):
            return None  # NaN has many encodings
        fmt = "<f" if pa.types.is_float32(data_type) else "<d"
        if number == 0:
            return [struct.pack(fmt, 0.0), struct.pack(fmt, -0.0)]
        return [struct.pack(fmt, number)]
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return [str(scalar.as_py()).encode("utf-8")]
    if pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return [bytes(scalar.as_py())]
    if pa.types.is_fixed_size_binary(data_type) and not pa.types.is_decimal(data_type):
        return [bytes(scalar.as_py())]
    if pa.types.is_decimal128(data_type):
        unscaled_value = unscaled(scalar.as_py(), data_type.scale)
        width = _decimal_width(data_type.precision)
        return [unscaled_value.to_bytes(width, "big", signed=True)]
    return None


def _decimal_width(precision: int) -> int:
    """Bytes of Parquet's FIXED_LEN_BYTE_ARRAY for a decimal of ``precision`` digits: the
    fewest that hold ``10**precision - 1`` in two's complement."""
    width = 1
    while 2 ** (8 * width - 1) < 10**precision:
        width += 1
    return width


def unsupported_bloom_reason(data_type: pa.DataType) -> str | None:
    """Why a column of ``data_type`` cannot have a Parquet bloom filter, or None if it can."""
    if parquet_physical_type(data_type) is None:
        return f"Parquet bloom filters do not support {data_type} columns"
    return None


def bitset_of(head: bytes, length: int) -> int | None:
    """The bitset size of a serialized bloom filter of ``length`` bytes whose first bytes are
    ``head`` (a Thrift compact ``BloomFilterHeader``: field 1, ``numBytes``, comes first; the
    bitset ends the filter), or None if the header is not understood."""
    if len(head) < 2 or head[0] != 0x15:  # field 1, type i32
        return None
    value, shift, position = 0, 0, 1
    while position < len(head):
        byte = head[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            break
        shift += 7
    num_bytes = (value >> 1) ^ -(value & 1)
    if num_bytes <= 0 or num_bytes % BLOCK_BYTES or num_bytes > length - position:
        return None
    return num_bytes


def parquet_physical_type(data_type: pa.DataType) -> str | None:
    """The Parquet physical type pyarrow stores a column of ``data_type`` as, which is the
    encoding its bloom filters hash; None for the types that cannot have a filter (booleans,
    float16, decimal256, nested types)."""
    t = data_type.value_type if pa.types.is_dictionary(data_type) else data_type
    if pa.types.is_decimal(t) and not pa.types.is_decimal128(t):
        return None  # decimal256 is a fixed-size binary to pyarrow's type tests
    if pa.types.is_date(t) or pa.types.is_time32(t):
        return "INT32"
    if pa.types.is_integer(t):
        return "INT64" if t.bit_width == 64 else "INT32"
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return "INT64"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_decimal128(t) or pa.types.is_fixed_size_binary(t):
        return "FIXED_LEN_BYTE_ARRAY"
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return "BYTE_ARRAY"
    return None
