"""Spark-compatible bucket hash: golden values from real Spark, plus invariants.

Every literal in ``GOLDEN`` was computed once with Spark 4.3.0 SQL (``hash(<literal>)``,
``pmod(hash(<literal>), 7)`` and ``pmod(hash(<literal>), 64)``, session time zone UTC), using the
Spark literal that corresponds to the Arrow value (e.g. ``cast(255 as smallint)`` for uint8 255,
``cast(timestamp_micros(-2) as timestamp_ntz)`` for ``timestamp[ns]`` -1999, ``X'80FF7F'`` for
binary). ``tests/spark/test_bucket_hash_spark.py`` re-checks random data against a live Spark.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import struct
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.errors import InvalidArgumentError
from appendtable.planning.bucket import (
    bucket_ids,
    bucket_of_values,
    spark_hash,
    unsupported_bucket_key_reason,
)

NAN = float("nan")
INF = float("inf")

# (case id, [(arrow type, python value), ...], hash, pmod(hash, 7), pmod(hash, 64))
GOLDEN: list[tuple[str, list[tuple[pa.DataType, object]], int, int, int]] = [
    ("bool true", [(pa.bool_(), True)], -559580957, 2, 35),
    ("bool false", [(pa.bool_(), False)], 933211791, 1, 15),
    ("int8 -128", [(pa.int8(), -128)], 1110053733, 5, 37),
    ("int8 -1", [(pa.int8(), -1)], -1604776387, 3, 61),
    ("int8 0", [(pa.int8(), 0)], 933211791, 1, 15),
    ("int8 127", [(pa.int8(), 127)], 1135925485, 2, 45),
    ("int16 -32768", [(pa.int16(), -32768)], -1871935946, 1, 54),
    ("int16 32767", [(pa.int16(), 32767)], 1249274084, 2, 36),
    ("int32 -2147483648", [(pa.int32(), -2147483648)], 723455942, 6, 6),
    ("int32 -1", [(pa.int32(), -1)], -1604776387, 3, 61),
    ("int32 0", [(pa.int32(), 0)], 933211791, 1, 15),
    ("int32 1", [(pa.int32(), 1)], -559580957, 2, 35),
    ("int32 42", [(pa.int32(), 42)], 29417773, 0, 45),
    ("int32 2147483647", [(pa.int32(), 2147483647)], 133916647, 4, 39),
    ("int64 -9223372036854775808", [(pa.int64(), -9223372036854775808)], -853646085, 2, 59),
    ("int64 -4294967296", [(pa.int64(), -4294967296)], -896650895, 0, 49),
    ("int64 -1", [(pa.int64(), -1)], -939490007, 6, 41),
    ("int64 0", [(pa.int64(), 0)], -1670924195, 4, 29),
    ("int64 1", [(pa.int64(), 1)], -1712319331, 5, 29),
    ("int64 4294967296", [(pa.int64(), 4294967296)], -1307033787, 4, 5),
    ("int64 9223372036854775807", [(pa.int64(), 9223372036854775807)], -1604625029, 0, 59),
    ("uint8 255", [(pa.uint8(), 255)], -673326395, 0, 5),
    ("uint16 65535", [(pa.uint16(), 65535)], -1629199920, 2, 16),
    ("uint32 4294967295", [(pa.uint32(), 4294967295)], -1758433029, 4, 59),
    ("uint32 7", [(pa.uint32(), 7)], 1293116811, 0, 11),
    ("float32 0.0", [(pa.float32(), 0.0)], 933211791, 1, 15),
    ("float32 -0.0", [(pa.float32(), -0.0)], 933211791, 1, 15),
    ("float32 1.5", [(pa.float32(), 1.5)], -221251528, 6, 56),
    ("float32 -1.5", [(pa.float32(), -1.5)], 1765572753, 0, 17),
    ("float32 0.1", [(pa.float32(), 0.1)], 38965448, 4, 8),
    ("float32 3.4028234663852886e38", [(pa.float32(), 3.4028234663852886e38)], -338752985, 3, 39),
    ("float32 1e-45", [(pa.float32(), 1e-45)], -559580957, 2, 35),
    ("float32 NaN", [(pa.float32(), NAN)], -349261430, 0, 10),
    ("float32 Infinity", [(pa.float32(), INF)], 2026854605, 6, 13),
    ("float32 -Infinity", [(pa.float32(), -INF)], 427440766, 4, 62),
    ("float64 0.0", [(pa.float64(), 0.0)], -1670924195, 4, 29),
    ("float64 -0.0", [(pa.float64(), -0.0)], -1670924195, 4, 29),
    ("float64 1.5", [(pa.float64(), 1.5)], 1290763749, 2, 37),
    ("float64 -1.5", [(pa.float64(), -1.5)], 2099784398, 5, 14),
    ("float64 0.1", [(pa.float64(), 0.1)], -1777758357, 3, 43),
    ("float64 1.7976931348623157e308", [(pa.float64(), 1.7976931348623157e308)], -508695674, 3, 6),
    ("float64 5e-324", [(pa.float64(), 5e-324)], -1712319331, 5, 29),
    ("float64 -123456.789", [(pa.float64(), -123456.789)], -1362105337, 2, 7),
    ("float64 NaN", [(pa.float64(), NAN)], -1281358385, 1, 15),
    ("float64 Infinity", [(pa.float64(), INF)], 833680482, 5, 34),
    ("float64 -Infinity", [(pa.float64(), -INF)], 461104036, 1, 36),
    ("string ''", [(pa.string(), "")], 142593372, 5, 28),
    ("string 'a'", [(pa.string(), "a")], 1485273170, 3, 18),
    ("string 'ab'", [(pa.string(), "ab")], -97053317, 3, 59),
    ("string 'abc'", [(pa.string(), "abc")], 1322437556, 6, 52),
    ("string 'abcd'", [(pa.string(), "abcd")], -396302900, 0, 12),
    ("string 'abcde'", [(pa.string(), "abcde")], 814637928, 6, 40),
    ("string 'abcdef'", [(pa.string(), "abcdef")], 724255765, 2, 21),
    ("string 'abcdefg'", [(pa.string(), "abcdefg")], 2132013596, 6, 28),
    ("string 'abcdefgh'", [(pa.string(), "abcdefgh")], -804741815, 4, 9),
    ("string 'abcdefghi'", [(pa.string(), "abcdefghi")], -1830117711, 5, 49),
    ("string 'ü'", [(pa.string(), "ü")], -1098725648, 1, 48),
    ("string '日本語'", [(pa.string(), "日本語")], -1143049834, 4, 22),
    ("string '😀'", [(pa.string(), "😀")], 1877935379, 5, 19),
    ("string 'ÿÿÿ'", [(pa.string(), "ÿÿÿ")], 883061003, 6, 11),
    ("string 'Grüße, 世界! 🎉'", [(pa.string(), "Grüße, 世界! 🎉")], 1341435620, 0, 36),
    (
        "string 'hello world, this is a longer key'",
        [(pa.string(), "hello world, this is a longer key")],
        2044208047,
        0,
        47,
    ),
    ("large_string 'ü'", [(pa.large_string(), "ü")], -1098725648, 1, 48),
    ("string_view 'abcde'", [(pa.string_view(), "abcde")], 814637928, 6, 40),
    ("binary b''", [(pa.binary(), b"")], 142593372, 5, 28),
    ("binary b'\\x00'", [(pa.binary(), b"\x00")], -783713497, 0, 39),
    ("binary b'\\xff'", [(pa.binary(), b"\xff")], 1398487324, 3, 28),
    ("binary b'\\x80\\xff\\x7f'", [(pa.binary(), b"\x80\xff\x7f")], 1911184379, 6, 59),
    (
        "binary b'\\x01\\x02\\x03\\x04\\x05'",
        [(pa.binary(), b"\x01\x02\x03\x04\x05")],
        -2064006189,
        0,
        19,
    ),
    (
        "binary b'\\xde\\xad\\xbe\\xef\\xca\\xfe\\xba'",
        [(pa.binary(), b"\xde\xad\xbe\xef\xca\xfe\xba")],
        1072729373,
        2,
        29,
    ),
    ("large_binary", [(pa.large_binary(), b"\x80\xff\x7f")], 1911184379, 6, 59),
    ("fixed_size_binary(3)", [(pa.binary(3), b"\x80\xff\x7f")], 1911184379, 6, 59),
    ("binary_view", [(pa.binary_view(), b"\x01\x02\x03\x04\x05")], -2064006189, 0, 19),
    ("date32 1970-01-01", [(pa.date32(), 0)], 933211791, 1, 15),
    ("date32 1970-01-02", [(pa.date32(), 1)], -559580957, 2, 35),
    ("date32 1969-12-31", [(pa.date32(), -1)], -1604776387, 3, 61),
    ("date32 2022-01-08", [(pa.date32(), 19000)], -779492372, 6, 44),
    ("date32 9999-12-31", [(pa.date32(), 2932896)], 1135886659, 5, 3),
    ("date32 0001-01-01", [(pa.date32(), -719162)], -1147107224, 3, 40),
    ("date32 python date", [(pa.date32(), datetime.date(2024, 2, 29))], 653915859, 2, 19),
    ("date64 2022-01-08", [(pa.date64(), 1641600000000)], -779492372, 6, 44),
    ("date64 -1 ms", [(pa.date64(), -1)], -1604776387, 3, 61),
    ("timestamp[us] 0", [(pa.timestamp("us"), 0)], -1670924195, 4, 29),
    ("timestamp[us, UTC] 0", [(pa.timestamp("us", tz="UTC"), 0)], -1670924195, 4, 29),
    ("timestamp[us] 1", [(pa.timestamp("us"), 1)], -1712319331, 5, 29),
    ("timestamp[us, UTC] 1", [(pa.timestamp("us", tz="UTC"), 1)], -1712319331, 5, 29),
    ("timestamp[us] -1", [(pa.timestamp("us"), -1)], -939490007, 6, 41),
    ("timestamp[us, UTC] -1", [(pa.timestamp("us", tz="UTC"), -1)], -939490007, 6, 41),
    (
        "timestamp[us] 1700000000123456",
        [(pa.timestamp("us"), 1700000000123456)],
        -1935367823,
        3,
        49,
    ),
    (
        "timestamp[us, UTC] 1700000000123456",
        [(pa.timestamp("us", tz="UTC"), 1700000000123456)],
        -1935367823,
        3,
        49,
    ),
    ("timestamp[s] 1700000000", [(pa.timestamp("s"), 1700000000)], -872124635, 3, 37),
    (
        "timestamp[s, UTC] 1700000000",
        [(pa.timestamp("s", tz="UTC"), 1700000000)],
        -872124635,
        3,
        37,
    ),
    ("timestamp[s] -1", [(pa.timestamp("s"), -1)], 346627249, 3, 49),
    ("timestamp[s, UTC] -1", [(pa.timestamp("s", tz="UTC"), -1)], 346627249, 3, 49),
    ("timestamp[ms] -1", [(pa.timestamp("ms"), -1)], -993842656, 5, 32),
    ("timestamp[ms, UTC] -1", [(pa.timestamp("ms", tz="UTC"), -1)], -993842656, 5, 32),
    ("timestamp[ms] 1700000000123", [(pa.timestamp("ms"), 1700000000123)], 940468915, 1, 51),
    (
        "timestamp[ms, UTC] 1700000000123",
        [(pa.timestamp("ms", tz="UTC"), 1700000000123)],
        940468915,
        1,
        51,
    ),
    ("timestamp[ns] -1", [(pa.timestamp("ns"), -1)], -939490007, 6, 41),
    ("timestamp[ns, UTC] -1", [(pa.timestamp("ns", tz="UTC"), -1)], -939490007, 6, 41),
    ("timestamp[ns] -1999", [(pa.timestamp("ns"), -1999)], -981642528, 1, 32),
    ("timestamp[ns, UTC] -1999", [(pa.timestamp("ns", tz="UTC"), -1999)], -981642528, 1, 32),
    ("timestamp[ns] 1999", [(pa.timestamp("ns"), 1999)], -1712319331, 5, 29),
    ("timestamp[ns, UTC] 1999", [(pa.timestamp("ns", tz="UTC"), 1999)], -1712319331, 5, 29),
    (
        "timestamp[ns] 1700000000123456789",
        [(pa.timestamp("ns"), 1700000000123456789)],
        -1935367823,
        3,
        49,
    ),
    (
        "timestamp[ns, UTC] 1700000000123456789",
        [(pa.timestamp("ns", tz="UTC"), 1700000000123456789)],
        -1935367823,
        3,
        49,
    ),
    (
        "timestamp[ms, America/New_York]",
        [(pa.timestamp("ms", tz="America/New_York"), 1700000000123)],
        940468915,
        1,
        51,
    ),
    (
        "timestamp[us, +05:30] python datetime",
        [
            (
                pa.timestamp("us", tz="+05:30"),
                datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=datetime.UTC),
            )
        ],
        -1935367823,
        3,
        49,
    ),
    (
        "timestamp_ntz python datetime",
        [(pa.timestamp("us"), datetime.datetime(2023, 11, 14, 22, 13, 20, 123456))],
        -1935367823,
        3,
        49,
    ),
    (
        "timestamp_ntz literal",
        [(pa.timestamp("us"), datetime.datetime(1900, 1, 1, 0, 0, 0, 1))],
        -201624734,
        4,
        34,
    ),
    ("decimal128(10,2) -123.45", [(pa.decimal128(10, 2), Decimal("-123.45"))], -1959512858, 5, 38),
    ("decimal128(10,2) 0.00", [(pa.decimal128(10, 2), Decimal("0.00"))], -1670924195, 4, 29),
    (
        "decimal128(10,2) 99999999.99",
        [(pa.decimal128(10, 2), Decimal("99999999.99"))],
        -138896179,
        5,
        13,
    ),
    (
        "decimal128(18,0) 999999999999999999",
        [(pa.decimal128(18, 0), Decimal("999999999999999999"))],
        -1795328666,
        2,
        38,
    ),
    (
        "decimal128(18,0) -999999999999999999",
        [(pa.decimal128(18, 0), Decimal("-999999999999999999"))],
        1962370902,
        2,
        22,
    ),
    (
        "decimal128(18,6) -0.000001",
        [(pa.decimal128(18, 6), Decimal("-0.000001"))],
        -939490007,
        6,
        41,
    ),
    ("decimal128(19,0) 0", [(pa.decimal128(19, 0), Decimal("0"))], -783713497, 0, 39),
    ("decimal128(19,0) 1", [(pa.decimal128(19, 0), Decimal("1"))], -386724586, 4, 22),
    ("decimal128(19,0) -1", [(pa.decimal128(19, 0), Decimal("-1"))], 1398487324, 3, 28),
    ("decimal128(19,0) 127", [(pa.decimal128(19, 0), Decimal("127"))], 1185089389, 1, 45),
    ("decimal128(19,0) 128", [(pa.decimal128(19, 0), Decimal("128"))], -544401882, 4, 38),
    ("decimal128(19,0) -128", [(pa.decimal128(19, 0), Decimal("-128"))], 775851899, 4, 59),
    ("decimal128(19,0) -129", [(pa.decimal128(19, 0), Decimal("-129"))], -771458971, 4, 37),
    ("decimal128(19,0) 255", [(pa.decimal128(19, 0), Decimal("255"))], 1246198977, 2, 1),
    ("decimal128(19,0) 256", [(pa.decimal128(19, 0), Decimal("256"))], 188218374, 1, 6),
    ("decimal128(19,0) 32768", [(pa.decimal128(19, 0), Decimal("32768"))], -99371362, 1, 30),
    ("decimal128(19,0) -32769", [(pa.decimal128(19, 0), Decimal("-32769"))], 2014060947, 3, 19),
    (
        "decimal128(19,0) 9999999999999999999",
        [(pa.decimal128(19, 0), Decimal("9999999999999999999"))],
        584036537,
        0,
        57,
    ),
    (
        "decimal128(19,0) -9999999999999999999",
        [(pa.decimal128(19, 0), Decimal("-9999999999999999999"))],
        -66784248,
        1,
        8,
    ),
    ("decimal128(20,2) -123.45", [(pa.decimal128(20, 2), Decimal("-123.45"))], 265069572, 5, 4),
    (
        "decimal128(38,0) 9223372036854775808",
        [(pa.decimal128(38, 0), Decimal("9223372036854775808"))],
        1479175736,
        3,
        56,
    ),
    (
        "decimal128(38,0) -9223372036854775808",
        [(pa.decimal128(38, 0), Decimal("-9223372036854775808"))],
        -1794377518,
        4,
        18,
    ),
    (
        "decimal128(38,0) 18446744073709551616",
        [(pa.decimal128(38, 0), Decimal("18446744073709551616"))],
        1074617613,
        6,
        13,
    ),
    (
        "decimal128(38,10) 9999999999999999999999999999.9999999999",
        [(pa.decimal128(38, 10), Decimal("9999999999999999999999999999.9999999999"))],
        -817514053,
        1,
        59,
    ),
    (
        "decimal128(38,10) -9999999999999999999999999999.9999999999",
        [(pa.decimal128(38, 10), Decimal("-9999999999999999999999999999.9999999999"))],
        1400911110,
        4,
        6,
    ),
    (
        "decimal128(38,37) -0.0000000000000000000000000000000000001",
        [(pa.decimal128(38, 37), Decimal("-0.0000000000000000000000000000000000001"))],
        1398487324,
        3,
        28,
    ),
    (
        "decimal128(25,3) -1234567890123456789012.345",
        [(pa.decimal128(25, 3), Decimal("-1234567890123456789012.345"))],
        -241151136,
        5,
        32,
    ),
    ("decimal256(10,2) -123.45", [(pa.decimal256(10, 2), Decimal("-123.45"))], -1959512858, 5, 38),
    (
        "decimal256(38,2) big negative",
        [(pa.decimal256(38, 2), Decimal("-123456789012345678901234567890123456.78"))],
        988508472,
        0,
        56,
    ),
    ("decimal256(30,2) 1.00", [(pa.decimal256(30, 2), Decimal("1.00"))], -295670906, 1, 6),
    ("decimal64(18,4) 12.3456", [(pa.decimal64(18, 4), Decimal("-12.3456"))], -894763966, 2, 2),
    ("decimal32(9,2) 1234567.89", [(pa.decimal32(9, 2), Decimal("1234567.89"))], 198011545, 4, 25),
    ("null int", [(pa.int32(), None)], 42, 0, 42),
    ("null string", [(pa.string(), None)], 42, 0, 42),
    ("(int, string)", [(pa.int32(), 1), (pa.string(), "a")], -936062819, 1, 29),
    ("(string, int)", [(pa.string(), "a"), (pa.int32(), 1)], 532252686, 0, 14),
    (
        "(string, null, long)",
        [(pa.string(), "abc"), (pa.int32(), None), (pa.int64(), 123456789012)],
        -31807534,
        4,
        18,
    ),
    ("(null, null)", [(pa.string(), None), (pa.int64(), None)], 42, 0, 42),
    (
        "(date, timestamp, decimal(25,3), double)",
        [
            (pa.date32(), datetime.date(2024, 2, 29)),
            (pa.timestamp("us", tz="UTC"), 1700000000123456),
            (pa.decimal128(25, 3), Decimal("-42.001")),
            (pa.float64(), -0.0),
        ],
        1897521373,
        6,
        29,
    ),
    (
        "(bool, int8, binary, float32)",
        [(pa.bool_(), True), (pa.int8(), -7), (pa.binary(), b"\x00\xff"), (pa.float32(), NAN)],
        -2119901199,
        4,
        49,
    ),
]

SINGLE = [case for case in GOLDEN if len(case[1]) == 1]


def _arrays(cols: list[tuple[pa.DataType, object]]) -> list[pa.Array]:
    return [pa.array([value], type=data_type) for data_type, value in cols]


# ------------------------------------------------------------------------------------------
# Golden values, one key at a time.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cols", "expected", "mod7", "mod64"), [c[1:] for c in GOLDEN], ids=[c[0] for c in GOLDEN]
)
def test_golden(
    cols: list[tuple[pa.DataType, object]], expected: int, mod7: int, mod64: int
) -> None:
    arrays = _arrays(cols)
    hashes = spark_hash(arrays)
    assert hashes.dtype == np.int32
    assert hashes.tolist() == [expected]
    assert bucket_ids(arrays, 1).tolist() == [0]
    assert bucket_ids(arrays, 7).tolist() == [mod7]
    assert bucket_ids(arrays, 64).tolist() == [mod64]
    values = [value for _, value in cols]
    types = [data_type for data_type, _ in cols]
    assert bucket_of_values(values, types, 7) == mod7
    assert bucket_of_values(values, types, 64) == mod64
    assert bucket_of_values(values, types, 1) == 0


def _golden_by_type() -> dict[pa.DataType, list[tuple[object, int, int, int]]]:
    groups: dict[pa.DataType, list[tuple[object, int, int, int]]] = {}
    for _, cols, expected, mod7, mod64 in SINGLE:
        ((data_type, value),) = cols
        groups.setdefault(data_type, []).append((value, expected, mod7, mod64))
    return groups


GOLDEN_BY_TYPE = _golden_by_type()


@pytest.mark.parametrize("data_type", list(GOLDEN_BY_TYPE), ids=str)
def test_golden_batched_sliced_and_chunked(data_type: pa.DataType) -> None:
    """All golden values of one type in one array (mixed lengths), also sliced and chunked."""
    rows = GOLDEN_BY_TYPE[data_type]
    values = [value for value, *_ in rows]
    expected = [h for _, h, _, _ in rows]
    arr = pa.array(values, type=data_type)
    assert spark_hash([arr]).tolist() == expected
    assert bucket_ids([arr], 7).tolist() == [m for _, _, m, _ in rows]
    assert bucket_ids([arr], 64).tolist() == [m for _, _, _, m in rows]
    # Reversed order, nulls interleaved, then sliced out of a padded array.
    padded = pa.array([values[0], None, *values[::-1], None, values[-1]], type=data_type)
    inner = padded.slice(2, len(values))
    assert spark_hash([inner]).tolist() == expected[::-1]
    assert spark_hash([padded]).tolist() == [expected[0], 42, *expected[::-1], 42, expected[-1]]
    # Chunked, with an empty chunk and odd chunk sizes.
    chunked = pa.chunked_array(
        [arr.slice(0, 1), pa.array([], type=data_type), arr.slice(1)], type=data_type
    )
    assert spark_hash([chunked]).tolist() == expected


def test_golden_multi_column_batched() -> None:
    """Multi-column golden keys repeated in a batch, with an all-null row (hash 42)."""
    for _, cols, expected, mod7, mod64 in GOLDEN:
        if len(cols) < 2:
            continue
        columns = [pa.array([v, None, v], type=t) for t, v in cols]
        assert spark_hash(columns).tolist() == [expected, 42, expected]
        assert bucket_ids(columns, 7).tolist() == [mod7, 42 % 7, mod7]
        assert bucket_ids(columns, 64).tolist() == [mod64, 42 % 64, mod64]


# ------------------------------------------------------------------------------------------
# Specific behaviours.
# ------------------------------------------------------------------------------------------


def test_null_leaves_running_hash_unchanged() -> None:
    a = pa.array([1, None, 3], type=pa.int32())
    b = pa.array(["x", "y", None])
    both = spark_hash([a, b])
    assert both[0] == spark_hash([pa.array([1], pa.int32()), pa.array(["x"])])[0]
    assert both[1] == spark_hash([pa.array(["y"])])[0]
    assert both[2] == spark_hash([pa.array([3], pa.int32())])[0]
    assert spark_hash([pa.array([None, None], pa.int64())]).tolist() == [42, 42]
    assert spark_hash([pa.nulls(3, pa.string())]).tolist() == [42, 42, 42]


def test_seed_parameter() -> None:
    # Spark: hash(1, 'a') == Murmur3('a', seed=hash(1)).
    first = spark_hash([pa.array([1], pa.int32())])
    chained = spark_hash([pa.array(["a"])], seed=int(first[0]))
    assert chained.tolist() == spark_hash([pa.array([1], pa.int32()), pa.array(["a"])]).tolist()
    assert spark_hash([pa.array([None], pa.int32())], seed=-7).tolist() == [-7]


def test_empty_arrays() -> None:
    for data_type in [pa.int32(), pa.string(), pa.decimal128(38, 2), pa.float64(), pa.bool_()]:
        empty = pa.array([], type=data_type)
        assert spark_hash([empty]).dtype == np.int32
        assert spark_hash([empty]).shape == (0,)
        assert bucket_ids([empty, empty], 7).shape == (0,)
        assert spark_hash([pa.chunked_array([], type=data_type)]).shape == (0,)


def test_strings_all_empty_and_only_tails() -> None:
    empty = spark_hash([pa.array(["", "", ""])])
    assert empty.tolist() == [142593372] * 3
    one = spark_hash([pa.array(["a", "", "a"], type=pa.large_string())]).tolist()
    assert one == [1485273170, 142593372, 1485273170]


def test_string_and_binary_and_views_agree() -> None:
    values = ["", "a", "ü", "日本語", "abcdefghi", "x" * 1000, None]
    expected = spark_hash([pa.array(values, pa.string())]).tolist()
    encoded = [None if v is None else v.encode() for v in values]
    for arr in [
        pa.array(values, pa.large_string()),
        pa.array(values, pa.string_view()),
        pa.array(encoded, pa.binary()),
        pa.array(encoded, pa.large_binary()),
        pa.array(encoded, pa.binary_view()),
        pa.array(values).dictionary_encode(),
    ]:
        assert spark_hash([arr]).tolist() == expected, arr.type


def test_float_canonicalisation() -> None:
    payload_nan32 = struct.unpack("<f", struct.pack("<I", 0xFFC00001))[0]
    floats = pa.array([NAN, payload_nan32, -0.0, 0.0], pa.float32())
    assert spark_hash([floats]).tolist() == [-349261430, -349261430, 933211791, 933211791]
    payload_nan64 = struct.unpack("<d", struct.pack("<Q", 0xFFF0000000000001))[0]
    doubles = pa.array([NAN, payload_nan64, -0.0, 0.0], pa.float64())
    assert spark_hash([doubles]).tolist() == [-1281358385, -1281358385, -1670924195, -1670924195]


def test_decimal_sliced_with_nulls() -> None:
    values = [Decimal("-129"), None, Decimal("128"), Decimal("0")]
    arr = pa.array([Decimal("1"), *values], pa.decimal128(19, 0)).slice(1)
    # Golden: decimal(19,0) -129, 128 and 0.
    expected = {v: h for v, h, _, _ in GOLDEN_BY_TYPE[pa.decimal128(19, 0)]}
    assert spark_hash([arr]).tolist() == [
        expected[Decimal("-129")],
        42,
        expected[Decimal("128")],
        expected[Decimal("0")],
    ]


def test_long_values_among_short_ones() -> None:
    """A few huge values (the per-row h1 chain path) next to many short ones."""
    short = [f"k{i}" for i in range(200)]
    huge = ["é" * 3001, "z" * 40_003, "q" * 5_000]
    values = [*short[:50], huge[0], *short[50:150], huge[1], *short[150:], huge[2]]
    hashes = spark_hash([pa.array(values)]).tolist()
    for value, got in zip(values, hashes, strict=True):
        assert got == _ref_hash_bytes(value.encode(), 42)


def test_chunk_layouts_may_differ_between_columns() -> None:
    ints = pa.chunked_array([[1, 2], [3, 4, 5]], type=pa.int64())
    strs = pa.chunked_array([["a"], ["b", "c", None], ["e"]])
    flat = spark_hash([pa.array([1, 2, 3, 4, 5]), pa.array(["a", "b", "c", None, "e"])])
    assert spark_hash([ints, strs]).tolist() == flat.tolist()


def test_bucket_of_values_python_scalars() -> None:
    types = [pa.date32(), pa.timestamp("us", tz="UTC"), pa.decimal128(25, 3), pa.float64()]
    values = [
        datetime.date(2024, 2, 29),
        datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=datetime.UTC),
        Decimal("-42.001"),
        -0.0,
    ]
    arrays = [pa.array([v], type=t) for v, t in zip(values, types, strict=True)]
    for n in (1, 7, 64, 1000):
        assert bucket_of_values(values, types, n) == int(bucket_ids(arrays, n)[0])
    dict_type = pa.dictionary(pa.int32(), pa.string())
    assert bucket_of_values(["abc"], [dict_type], 7) == 6  # golden: pmod(hash('abc'), 7)
    with pytest.raises(InvalidArgumentError, match="values for"):
        bucket_of_values([1, 2], [pa.int32()], 7)
    with pytest.raises(InvalidArgumentError, match="cannot use"):
        bucket_of_values([300], [pa.int8()], 7)
    with pytest.raises(InvalidArgumentError, match="cannot use"):
        bucket_of_values(["x"], [pa.int64()], 7)


# ------------------------------------------------------------------------------------------
# Type support and argument errors.
# ------------------------------------------------------------------------------------------

SUPPORTED = [
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.string_view(),
    pa.binary(),
    pa.large_binary(),
    pa.binary_view(),
    pa.binary(16),
    pa.date32(),
    pa.date64(),
    pa.timestamp("s"),
    pa.timestamp("ms", tz="Europe/Berlin"),
    pa.timestamp("us"),
    pa.timestamp("ns", tz="UTC"),
    pa.decimal32(9, 2),
    pa.decimal64(18, 2),
    pa.decimal128(38, 10),
    pa.decimal256(38, 0),
    pa.dictionary(pa.int8(), pa.string()),
]

UNSUPPORTED = [
    pa.null(),
    pa.uint64(),
    pa.float16(),
    pa.decimal256(39, 0),
    pa.list_(pa.int32()),
    pa.large_list(pa.string()),
    pa.struct([("a", pa.int32())]),
    pa.map_(pa.string(), pa.int32()),
    pa.time32("s"),
    pa.time64("us"),
    pa.duration("us"),
    pa.month_day_nano_interval(),
    pa.dictionary(pa.int8(), pa.list_(pa.int32())),
]


@pytest.mark.parametrize("data_type", SUPPORTED, ids=str)
def test_supported_types(data_type: pa.DataType) -> None:
    assert unsupported_bucket_key_reason(data_type) is None
    nulls = pa.nulls(2, data_type)
    assert spark_hash([nulls]).tolist() == [42, 42]


@pytest.mark.parametrize("data_type", UNSUPPORTED, ids=str)
def test_unsupported_types(data_type: pa.DataType) -> None:
    reason = unsupported_bucket_key_reason(data_type)
    assert isinstance(reason, str)
    assert reason
    with pytest.raises(InvalidArgumentError):
        spark_hash([pa.nulls(1, data_type)])
    with pytest.raises(InvalidArgumentError):
        bucket_ids([pa.array([1], pa.int32()), pa.nulls(1, data_type)], 4)


def test_argument_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="at least one column"):
        spark_hash([])
    with pytest.raises(InvalidArgumentError, match="different lengths"):
        spark_hash([pa.array([1, 2]), pa.array([1])])
    for bad in (0, -3, 2**31, True):
        with pytest.raises(InvalidArgumentError, match="num_buckets"):
            bucket_ids([pa.array([1])], bad)
    assert bucket_ids([pa.array([1, 2, 3])], 2**31 - 1).tolist() == [
        h % (2**31 - 1) for h in spark_hash([pa.array([1, 2, 3])]).tolist()
    ]


# ------------------------------------------------------------------------------------------
# Property tests against a slow scalar reference (itself pinned by the golden values above).
# ------------------------------------------------------------------------------------------

_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _k(k: int) -> int:
    return (_rotl((k * 0xCC9E2D51) & _M, 15) * 0x1B873593) & _M


def _h(h: int, k: int) -> int:
    return (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _M


def _final(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def _ref_hash_int(v: int, seed: int) -> int:
    return _final(_h(seed & _M, _k(v & _M)), 4)


def _ref_hash_long(v: int, seed: int) -> int:
    v &= (1 << 64) - 1
    return _final(_h(_h(seed & _M, _k(v & _M)), _k(v >> 32)), 8)


def _ref_hash_bytes(data: bytes, seed: int) -> int:
    h = seed & _M
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        h = _h(h, _k(int.from_bytes(data[i : i + 4], "little")))
    for byte in data[whole:]:
        h = _h(h, _k((byte - 256 if byte >= 128 else byte) & _M))
    return _final(h, len(data))


def _ref_decimal(unscaled: int, precision: int, seed: int) -> int:
    if precision <= 18:
        return _ref_hash_long(unscaled, seed)
    size = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    return _ref_hash_bytes(unscaled.to_bytes(size, "big", signed=True), seed)


def test_reference_matches_golden() -> None:
    checked = 0
    for _, cols, expected, _, _ in SINGLE:
        ((data_type, value),) = cols
        if value is None:
            continue
        if data_type == pa.int32():
            assert isinstance(value, int)
            assert _ref_hash_int(value, 42) == expected
        elif data_type == pa.int64():
            assert isinstance(value, int)
            assert _ref_hash_long(value, 42) == expected
        elif data_type == pa.string():
            assert isinstance(value, str)
            assert _ref_hash_bytes(value.encode(), 42) == expected
        elif data_type == pa.binary():
            assert isinstance(value, bytes)
            assert _ref_hash_bytes(value, 42) == expected
        elif pa.types.is_decimal(data_type):
            assert isinstance(value, Decimal)
            with decimal.localcontext(prec=100):
                unscaled = int(value.scaleb(data_type.scale))
            assert _ref_decimal(unscaled, data_type.precision, 42) == expected
        else:
            continue
        checked += 1
    assert checked > 60


_SETTINGS = settings(max_examples=60, deadline=None)


def _splits(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, n), max_size=4).map(sorted)


def _chunked(arr: pa.Array, cuts: list[int]) -> pa.ChunkedArray:
    bounds = [0, *cuts, len(arr)]
    return pa.chunked_array(
        [arr.slice(a, b - a) for a, b in itertools.pairwise(bounds)], type=arr.type
    )


@_SETTINGS
@given(
    values=st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60),
    seed=st.integers(-(2**31), 2**31 - 1),
    data=st.data(),
)
def test_bytes_match_reference_under_slicing_and_chunking(
    values: list[bytes | None], seed: int, data: st.DataObject
) -> None:
    expected = [seed if v is None else _ref_hash_bytes(v, seed) for v in values]
    for data_type in (pa.binary(), pa.large_binary()):
        arr = pa.array([b"pad", *values, b"pad"], type=data_type).slice(1, len(values))
        assert spark_hash([arr], seed=seed).tolist() == expected
        cuts = data.draw(_splits(len(values)))
        assert spark_hash([_chunked(arr, cuts)], seed=seed).tolist() == expected


@_SETTINGS
@given(values=st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=60))
def test_strings_match_reference(values: list[str | None]) -> None:
    expected = [42 if v is None else _ref_hash_bytes(v.encode(), 42) for v in values]
    assert spark_hash([pa.array(values, pa.string())]).tolist() == expected
    assert spark_hash([pa.array(values, pa.string_view())]).tolist() == expected


@_SETTINGS
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=60),
    offset=st.integers(0, 3),
    data=st.data(),
)
def test_ints_match_reference(values: list[int | None], offset: int, data: st.DataObject) -> None:
    longs = pa.array([0] * offset + values, pa.int64()).slice(offset)
    expected = [42 if v is None else _ref_hash_long(v, 42) for v in values]
    assert spark_hash([longs]).tolist() == expected
    assert spark_hash([_chunked(longs, data.draw(_splits(len(values))))]).tolist() == expected
    small = [None if v is None else (v + 2**31) % 2**32 - 2**31 for v in values]
    ints = pa.array([0] * offset + small, pa.int32()).slice(offset)
    assert spark_hash([ints]).tolist() == [42 if v is None else _ref_hash_int(v, 42) for v in small]
    bools = pa.array(
        [True] * offset + [None if v is None else v % 2 == 1 for v in values], pa.bool_()
    )
    assert spark_hash([bools.slice(offset)]).tolist() == [
        42 if v is None else _ref_hash_int(v % 2, 42) for v in values
    ]


@_SETTINGS
@given(
    values=st.lists(
        st.one_of(st.none(), st.integers(-(10**38) + 1, 10**38 - 1)), min_size=1, max_size=40
    ),
    precision=st.sampled_from([1, 9, 18, 19, 20, 27, 38]),
)
def test_decimals_match_reference(values: list[int | None], precision: int) -> None:
    bound = 10**precision  # unscaled values lie in (-bound, bound)
    unscaled = [None if v is None else v % (2 * bound - 1) - (bound - 1) for v in values]
    expected = [42 if v is None else _ref_decimal(v, precision, 42) for v in unscaled]
    scale = min(2, precision)
    decimals = [None if u is None else Decimal(f"{u}E-{scale}") for u in unscaled]
    for data_type in (pa.decimal128(precision, scale), pa.decimal256(precision, scale)):
        arr = pa.array([Decimal(0), *decimals], type=data_type).slice(1)
        assert spark_hash([arr]).tolist() == expected


@_SETTINGS
@given(values=st.lists(st.one_of(st.none(), st.floats(width=32)), max_size=40))
def test_floats_match_reference(values: list[float | None]) -> None:
    def bits32(f: float) -> int:
        if f != f:
            return 0x7FC00000
        return 0 if f == 0 else struct.unpack("<i", struct.pack("<f", f))[0]

    def bits64(f: float) -> int:
        if f != f:
            return 0x7FF8000000000000
        return 0 if f == 0 else struct.unpack("<q", struct.pack("<d", f))[0]

    f32 = pa.array(values, pa.float32())
    assert spark_hash([f32]).tolist() == [
        42 if v is None else _ref_hash_int(bits32(v), 42) for v in values
    ]
    f64 = pa.array(values, pa.float64())
    assert spark_hash([f64]).tolist() == [
        42 if v is None else _ref_hash_long(bits64(v), 42) for v in values
    ]


@_SETTINGS
@given(
    ints=st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), min_size=1, max_size=50),
    num_buckets=st.one_of(st.sampled_from([1, 2, 7, 64, 2**31 - 1]), st.integers(1, 2**31 - 1)),
    data=st.data(),
)
def test_buckets_in_range_and_match_scalar_lookup(
    ints: list[int | None], num_buckets: int, data: st.DataObject
) -> None:
    texts = data.draw(
        st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=len(ints), max_size=len(ints))
    )
    columns = [pa.array(ints, pa.int32()), pa.array(texts, pa.string())]
    hashes = spark_hash(columns).tolist()
    buckets = bucket_ids(columns, num_buckets)
    assert buckets.dtype == np.int32
    assert buckets.tolist() == [h % num_buckets for h in hashes]  # Python % is Spark's pmod
    assert all(0 <= b < num_buckets for b in buckets.tolist())
    row = data.draw(st.integers(0, len(ints) - 1))
    types = [pa.int32(), pa.string()]
    assert bucket_of_values([ints[row], texts[row]], types, num_buckets) == buckets[row]
    cuts = data.draw(_splits(len(ints)))
    chunked = [_chunked(c, cuts) for c in columns]
    assert bucket_ids(chunked, num_buckets).tolist() == buckets.tolist()
