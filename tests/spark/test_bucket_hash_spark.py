"""Row-for-row check of ``spark_hash`` / ``bucket_ids`` against a live Spark's ``hash`` / ``pmod``.

Random data of every supported Arrow type (seeded, with nulls and edge values) is hashed here and
by Spark in a single query. Arrow types Spark cannot ingest are handed to Spark as the Spark type
they stand for (uint8 -> smallint, uint16 -> int, uint32 -> bigint, string_view -> string,
binary_view -> binary, date64 -> date, decimal32/64 -> decimal); everything else goes to Spark
unchanged, so Spark's own ingestion (e.g. nanoseconds -> microseconds) is part of the check.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from appendtable.planning.bucket import bucket_ids, spark_hash

pytestmark = pytest.mark.spark

ROWS = 3000
NULL_FRACTION = 0.1
NUM_BUCKETS = (7, 64)
ALPHABET = [*"abcxyz019 _-", "ü", "é", "ß", "日", "本", "語", "😀", "🎉", "\u0000"]


def _with_nulls(rng: np.random.Generator, values: list[Any]) -> list[Any]:
    mask = rng.random(len(values)) < NULL_FRACTION
    return [None if m else v for v, m in zip(values, mask.tolist(), strict=True)]


def _ints(rng: np.random.Generator, lo: int, hi: int) -> list[int]:
    values = rng.integers(lo, hi, size=ROWS, endpoint=True).tolist()
    values[:4] = [lo, hi, 0, -1 if lo < 0 else 1]
    return values


def _floats(rng: np.random.Generator, width: int) -> list[float]:
    dtype, bits = (np.float32, np.uint32) if width == 32 else (np.float64, np.uint64)
    raw = rng.integers(0, np.iinfo(bits).max, size=ROWS, dtype=bits, endpoint=True)
    values = raw.view(dtype).tolist()  # every bit pattern, NaNs with payloads included
    normal = rng.normal(scale=1e6, size=ROWS // 2).astype(dtype).tolist()
    values[: len(normal)] = normal
    values[:8] = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1.5, -1.5, 0.1]
    return [float(v) for v in values]


def _texts(rng: np.random.Generator) -> list[str]:
    lengths = rng.integers(0, 24, size=ROWS)
    picks = rng.integers(0, len(ALPHABET), size=int(lengths.sum())).tolist()
    out: list[str] = []
    pos = 0
    for length in lengths.tolist():
        out.append("".join(ALPHABET[i] for i in picks[pos : pos + length]))
        pos += length
    out[:3] = ["", "ü" * 2500, "long key " * 700]  # two very long values among short ones
    return out


def _decimals(rng: np.random.Generator, precision: int, scale: int) -> list[Decimal]:
    digits = rng.integers(0, precision + 1, size=ROWS).tolist()
    signs = rng.choice([-1, 1], size=ROWS).tolist()
    out = []
    for n_digits, sign in zip(digits, signs, strict=True):
        unscaled = int("".join(str(d) for d in rng.integers(0, 10, size=n_digits)) or "0")
        out.append(Decimal(f"{sign * unscaled}E-{scale}"))
    largest = 10**precision - 1  # built from strings: Decimal arithmetic would round
    out[:3] = [Decimal(f"{largest}E-{scale}"), Decimal(f"-{largest}E-{scale}"), Decimal(0)]
    return out


def _tables(seed: int) -> tuple[pa.Table, pa.Table]:
    """(table hashed by appendtable, the same data as Spark can ingest it)."""
    rng = np.random.default_rng(seed)
    ours: dict[str, pa.Array] = {}
    for_spark: dict[str, pa.Array] = {}

    def add(name: str, arr: pa.Array, spark_arr: pa.Array | None = None) -> None:
        ours[name] = arr
        for_spark[name] = arr if spark_arr is None else spark_arr

    def column(values: list[Any], data_type: pa.DataType) -> pa.Array:
        return pa.array(_with_nulls(rng, values), type=data_type)

    add("b", column((rng.random(ROWS) < 0.5).tolist(), pa.bool_()))
    add("i8", column(_ints(rng, -(2**7), 2**7 - 1), pa.int8()))
    add("i16", column(_ints(rng, -(2**15), 2**15 - 1), pa.int16()))
    add("i32", column(_ints(rng, -(2**31), 2**31 - 1), pa.int32()))
    add("i64", column(_ints(rng, -(2**63), 2**63 - 1), pa.int64()))
    for name, data_type, spark_type, bits in [
        ("u8", pa.uint8(), pa.int16(), 8),
        ("u16", pa.uint16(), pa.int32(), 16),
        ("u32", pa.uint32(), pa.int64(), 32),
    ]:
        arr = column(_ints(rng, 0, 2**bits - 1), data_type)
        add(name, arr, arr.cast(spark_type))
    add("f32", column(_floats(rng, 32), pa.float32()))
    add("f64", column(_floats(rng, 64), pa.float64()))

    strings = column(_texts(rng), pa.string())
    add("s", strings)
    add("ls", strings.cast(pa.large_string()))
    add("sv", strings.cast(pa.string_view()), strings)
    add("sd", strings.dictionary_encode())
    blobs = column([rng.bytes(int(n)) for n in rng.integers(0, 30, size=ROWS)], pa.binary())
    add("bin", blobs)
    add("lbin", blobs.cast(pa.large_binary()))
    add("bv", blobs.cast(pa.binary_view()), blobs)
    add("fsb", column([rng.bytes(5) for _ in range(ROWS)], pa.binary(5)))

    days = column(_ints(rng, -719162, 2932896), pa.date32())  # 0001-01-01 .. 9999-12-31
    add("d32", days)
    millis = [
        None if d is None else d * 86_400_000 + int(ms)
        for d, ms in zip(
            days.cast(pa.int32()).to_pylist(), rng.integers(0, 86_400_000, size=ROWS), strict=True
        )
    ]
    add("d64", pa.array(millis, pa.int64()).cast(pa.date64()), days)

    seconds = _ints(rng, -62135596800, 253402300799)
    add("ts_s", column(seconds, pa.timestamp("s")))
    add("ts_ms_ny", column([s * 1000 + 7 for s in seconds], pa.timestamp("ms", "America/New_York")))
    add("ts_us", column(_ints(rng, -(2**62), 2**62), pa.timestamp("us")))
    add("ts_us_utc", column(_ints(rng, -(2**62), 2**62), pa.timestamp("us", "UTC")))
    # pyspark floors nanoseconds to microseconds with pc.floor_temporal, which misbehaves within
    # about a microsecond of the int64 limits, so stay clear of those.
    nanos = -(9 * 10**18), 9 * 10**18
    add("ts_ns", column(_ints(rng, *nanos), pa.timestamp("ns")))
    add("ts_ns_tokyo", column(_ints(rng, *nanos), pa.timestamp("ns", "Asia/Tokyo")))

    for name, data_type in [
        ("dec32", pa.decimal32(9, 2)),
        ("dec64", pa.decimal64(18, 4)),
    ]:
        arr = column(_decimals(rng, data_type.precision, data_type.scale), data_type)
        add(name, arr, arr.cast(pa.decimal128(data_type.precision, data_type.scale)))
    for name, data_type in [
        ("dec_10_2", pa.decimal128(10, 2)),
        ("dec_18_0", pa.decimal128(18, 0)),
        ("dec_19_0", pa.decimal128(19, 0)),
        ("dec_25_3", pa.decimal128(25, 3)),
        ("dec_38_0", pa.decimal128(38, 0)),
        ("dec_38_10", pa.decimal128(38, 10)),
        ("dec256_20_0", pa.decimal256(20, 0)),
        ("dec256_38_5", pa.decimal256(38, 5)),
    ]:
        add(name, column(_decimals(rng, data_type.precision, data_type.scale), data_type))

    ours["rid"] = for_spark["rid"] = pa.array(np.arange(ROWS, dtype=np.int64))
    return pa.table(ours), pa.table(for_spark)


KEYS: list[tuple[str, ...]] = [
    ("b",),
    ("i8",),
    ("i16",),
    ("i32",),
    ("i64",),
    ("u8",),
    ("u16",),
    ("u32",),
    ("f32",),
    ("f64",),
    ("s",),
    ("ls",),
    ("sv",),
    ("sd",),
    ("bin",),
    ("lbin",),
    ("bv",),
    ("fsb",),
    ("d32",),
    ("d64",),
    ("ts_s",),
    ("ts_ms_ny",),
    ("ts_us",),
    ("ts_us_utc",),
    ("ts_ns",),
    ("ts_ns_tokyo",),
    ("dec32",),
    ("dec64",),
    ("dec_10_2",),
    ("dec_18_0",),
    ("dec_19_0",),
    ("dec_25_3",),
    ("dec_38_0",),
    ("dec_38_10",),
    ("dec256_20_0",),
    ("dec256_38_5",),
    ("i32", "s"),
    ("s", "i64", "dec_38_10"),
    ("d32", "ts_us_utc", "f64", "bin"),
    ("b", "dec_19_0", "u8", "sv", "f32"),
    ("sd", "u32", "ts_ns", "dec64", "fsb", "i16"),
]


def _compare(spark: Any, seed: int, chunk_rows: int) -> None:
    ours, for_spark = _tables(seed)
    df = spark.createDataFrame(for_spark)
    exprs = ["rid"]
    for i, key in enumerate(KEYS):
        args = ", ".join(key)
        exprs.append(f"hash({args}) AS h{i}")
        exprs += [f"pmod(hash({args}), {n}) AS p{i}_{n}" for n in NUM_BUCKETS]
    # timestamp_ntz hashes exactly like timestamp (both are microsecond longs).
    exprs.append("hash(cast(ts_us AS timestamp_ntz)) AS h_ntz")
    result = df.selectExpr(*exprs).toArrow()
    assert result.column("rid").to_pylist() == list(range(ROWS))

    # Hash our side in uneven chunks to exercise chunked input too.
    chunked = pa.Table.from_batches(ours.to_batches(max_chunksize=chunk_rows))
    for i, key in enumerate(KEYS):
        columns = [chunked.column(name) for name in key]
        expected = result.column(f"h{i}").to_numpy()
        got = spark_hash(columns)
        mismatches = np.flatnonzero(got != expected)
        assert mismatches.size == 0, (
            key,
            [(int(r), [ours.column(c)[int(r)] for c in key]) for r in mismatches[:5]],
        )
        for n in NUM_BUCKETS:
            np.testing.assert_array_equal(
                bucket_ids(columns, n), result.column(f"p{i}_{n}").to_numpy(), err_msg=str(key)
            )
    np.testing.assert_array_equal(
        spark_hash([ours.column("ts_us")]), result.column("h_ntz").to_numpy()
    )


def test_session_time_zone_is_utc(spark: Any) -> None:
    # Naive Arrow timestamps are ingested by Spark as local wall-clock times; the comparison
    # below relies on the UTC session the fixture configures.
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.createDataFrame(
        pa.table({"t": pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("us"))})
    ).selectExpr("hash(t)").collect()[0][0] == int(
        spark_hash([pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("us"))])[0]
    )


def test_random_rows_match_spark(spark: Any) -> None:
    _compare(spark, seed=20240601, chunk_rows=777)
