"""Random Spark write cases for the property test: schemas of every supported type, random
nullability on the DataFrame's and the table's side, partitions, buckets, task counts and
write paths, each with the rows it writes (the model to compare reads against)."""

from __future__ import annotations

import datetime as dt
import decimal
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

UTC = dt.UTC
PATHS = ("native", "python", "format", "foreach")


@dataclass(frozen=True)
class ColumnKind:
    """A column type on both sides, and a generator of its values (``partition``: values
    from a small set, for partition columns)."""

    name: str
    spark: Callable[[bool], T.DataType]  # argument: whether nested values may be null
    arrow: Callable[[bool], pa.DataType]
    value: Callable[[random.Random, bool], Any]  # (rng, nested nulls allowed) -> value
    hashable: bool = True  # may be a bucket key
    partitionable: bool = True
    sortable: bool = True


def _float(rng: random.Random) -> float:
    return rng.choice([0.0, -0.0, 1.5, -2.25, 1e300, -1e-300, float("inf"), rng.random()])


def _ts(rng: random.Random) -> dt.datetime:
    return dt.datetime(1900, 1, 1, tzinfo=UTC) + dt.timedelta(
        microseconds=rng.randrange(0, 300 * 365 * 86_400 * 10**6)
    )


KINDS = [
    ColumnKind(
        "long",
        lambda n: T.LongType(),
        lambda n: pa.int64(),
        lambda r, n: r.randrange(-(2**63), 2**63),
    ),
    ColumnKind(
        "int",
        lambda n: T.IntegerType(),
        lambda n: pa.int32(),
        lambda r, n: r.randrange(-(2**31), 2**31),
    ),
    ColumnKind(
        "short",
        lambda n: T.ShortType(),
        lambda n: pa.int16(),
        lambda r, n: r.randrange(-(2**15), 2**15),
    ),
    ColumnKind(
        "byte", lambda n: T.ByteType(), lambda n: pa.int8(), lambda r, n: r.randrange(-128, 128)
    ),
    ColumnKind(
        "double",
        lambda n: T.DoubleType(),
        lambda n: pa.float64(),
        lambda r, n: _float(r),
        partitionable=False,
    ),
    ColumnKind(
        "float",
        lambda n: T.FloatType(),
        lambda n: pa.float32(),
        lambda r, n: r.choice([0.5, -1.25, 3.0, 0.0]),
        partitionable=False,
    ),
    ColumnKind(
        "dec5",
        lambda n: T.DecimalType(5, 2),
        lambda n: pa.decimal128(5, 2),
        lambda r, n: decimal.Decimal(r.randrange(-99999, 100000)).scaleb(-2),
    ),
    ColumnKind(
        "dec15",
        lambda n: T.DecimalType(15, 3),
        lambda n: pa.decimal128(15, 3),
        lambda r, n: decimal.Decimal(r.randrange(-(10**15) + 1, 10**15)).scaleb(-3),
    ),
    ColumnKind(
        "dec30",
        lambda n: T.DecimalType(30, 4),
        lambda n: pa.decimal128(30, 4),
        lambda r, n: decimal.Decimal(r.randrange(-(10**30) + 1, 10**30)).scaleb(-4),
    ),
    ColumnKind(
        "string",
        lambda n: T.StringType(),
        lambda n: pa.string(),
        lambda r, n: r.choice(["", "a", "ünï", "x" * r.randrange(0, 40), "日本"]),
    ),
    ColumnKind(
        "binary",
        lambda n: T.BinaryType(),
        lambda n: pa.binary(),
        lambda r, n: bytes(r.randrange(256) for _ in range(r.randrange(0, 9))),
        hashable=False,
        partitionable=False,
    ),
    ColumnKind(
        "date",
        lambda n: T.DateType(),
        lambda n: pa.date32(),
        lambda r, n: dt.date(1, 1, 1) + dt.timedelta(days=r.randrange(0, 3_652_000)),
    ),
    ColumnKind(
        "ts",
        lambda n: T.TimestampType(),
        lambda n: pa.timestamp("us", tz="UTC"),
        lambda r, n: _ts(r),
    ),
    ColumnKind(
        "ts_ntz",
        lambda n: T.TimestampNTZType(),
        lambda n: pa.timestamp("us"),
        lambda r, n: _ts(r).replace(tzinfo=None),
    ),
    ColumnKind(
        "bool", lambda n: T.BooleanType(), lambda n: pa.bool_(), lambda r, n: r.random() < 0.5
    ),
    ColumnKind(
        "array",
        lambda n: T.ArrayType(T.LongType(), containsNull=n),
        lambda n: pa.list_(pa.field("item", pa.int64(), nullable=n)),
        lambda r, n: [
            None if n and r.random() < 0.2 else r.randrange(-50, 50)
            for _ in range(r.randrange(0, 4))
        ],
        hashable=False,
        partitionable=False,
        sortable=False,
    ),
    ColumnKind(
        "struct",
        lambda n: T.StructType(
            [T.StructField("a", T.LongType(), n), T.StructField("b", T.StringType(), True)]
        ),
        lambda n: pa.struct([pa.field("a", pa.int64(), nullable=n), pa.field("b", pa.string())]),
        lambda r, n: {
            "a": None if n and r.random() < 0.2 else r.randrange(100),
            "b": r.choice(["p", None, "q"]),
        },
        hashable=False,
        partitionable=False,
        sortable=False,
    ),
    ColumnKind(
        "map",
        lambda n: T.MapType(T.StringType(), T.LongType(), valueContainsNull=n),
        lambda n: pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=n)),
        lambda r, n: {
            f"k{i}": (None if n and r.random() < 0.2 else i) for i in range(r.randrange(0, 3))
        },
        hashable=False,
        partitionable=False,
        sortable=False,
    ),
]


@dataclass
class Column:
    name: str
    kind: ColumnKind
    df_nullable: bool  # the DataFrame's flag
    table_nullable: bool  # the table's flag (only declared when the test creates the table)
    has_nulls: bool  # whether the data holds nulls (never when either side forbids them)
    nested_nulls: bool  # nested values may be null (both sides allow it)


@dataclass
class WriteCase:
    seed: int
    columns: list[Column]
    partition: str | None
    bucket_key: str | None
    buckets: int
    table_first: bool  # the test creates the table (with its own nullability) before writing
    writes: list[tuple[str, int, int]]  # (path, rows, tasks)
    options: dict[str, object] = field(default_factory=dict)

    def spark_schema(self) -> T.StructType:
        fields = [T.StructField("seq", T.LongType(), False)]
        fields += [
            T.StructField(c.name, c.kind.spark(c.nested_nulls), c.df_nullable) for c in self.columns
        ]
        return T.StructType(fields)

    def arrow_schema(self) -> pa.Schema:
        fields = [pa.field("seq", pa.int64(), nullable=False)]
        fields += [
            pa.field(c.name, c.kind.arrow(c.nested_nulls), nullable=c.table_nullable)
            for c in self.columns
        ]
        return pa.schema(fields)

    def rows(self, write: int, count: int) -> list[dict[str, Any]]:
        """The rows of write number ``write``: ``seq`` = write * 1_000_000 + row."""
        rng = random.Random(self.seed * 1000 + write)
        out = []
        for i in range(count):
            row: dict[str, Any] = {"seq": write * 1_000_000 + i}
            for column in self.columns:
                if column.has_nulls and rng.random() < 0.15:
                    row[column.name] = None
                elif column.name == self.partition:
                    row[column.name] = _partition_value(column.kind, rng)
                else:
                    row[column.name] = column.kind.value(rng, column.nested_nulls)
            out.append(row)
        return out

    def __str__(self) -> str:
        described = ", ".join(
            f"{c.name}:{c.kind.name}{'?' if c.df_nullable else '!'}"
            f"{'?' if c.table_nullable else '!'}{'~' if c.has_nulls else ''}"
            for c in self.columns
        )
        return (
            f"case {self.seed}: [{described}] partition={self.partition} "
            f"bucket={self.buckets}/{self.bucket_key} table_first={self.table_first} "
            f"writes={self.writes} options={self.options}"
        )


def _partition_value(kind: ColumnKind, rng: random.Random) -> Any:
    """One of a few values (a partition column must not make a partition per row)."""
    return kind.value(random.Random(rng.randrange(3)), False)


def make_case(seed: int) -> WriteCase:
    rng = random.Random(seed)
    kinds = rng.sample(KINDS, rng.randrange(1, 6))
    columns = []
    for index, kind in enumerate(kinds):
        df_nullable = rng.random() < 0.5
        table_nullable = rng.random() < 0.6
        columns.append(
            Column(
                name=f"c{index}_{kind.name}",
                kind=kind,
                df_nullable=df_nullable,
                table_nullable=table_nullable,
                has_nulls=df_nullable and table_nullable and rng.random() < 0.5,
                nested_nulls=rng.random() < 0.5,
            )
        )
    partitionable = [c.name for c in columns if c.kind.partitionable]
    partition = rng.choice(partitionable) if partitionable and rng.random() < 0.4 else None
    hashable = [c.name for c in columns if c.kind.hashable and c.name != partition]
    buckets = rng.choice([2, 3, 8]) if hashable and rng.random() < 0.5 else -1
    bucket_key = rng.choice(hashable) if buckets > 0 else None
    options: dict[str, object] = {
        "compaction.min.file-num": rng.randrange(2, 6),
        "target-file-size": rng.choice(["64 kb", "1 mb", "128 mb"]),
    }
    if buckets > 0:
        options |= {"bucket": buckets, "bucket-key": bucket_key}
        options["full-compaction.delta-commits"] = rng.choice([1, 2, 3])
    writes = [
        (rng.choice(PATHS), rng.randrange(1, 300), rng.randrange(1, 17))
        for _ in range(rng.randrange(1, 4))
    ]
    return WriteCase(
        seed=seed,
        columns=columns,
        partition=partition,
        bucket_key=bucket_key,
        buckets=buckets,
        table_first=rng.random() < 0.6,
        writes=writes,
        options=options,
    )


def case_features(case: WriteCase) -> frozenset[tuple[object, ...]]:
    """What a case exercises: each write path (with one task and with several), each type on
    both sides' nullability, with and without null values and nested nulls, as partition
    column and as bucket key, each layout, table creation before or by the write, the number
    of writes, and the options drawn."""
    features: set[tuple[object, ...]] = {
        ("table_first", case.table_first),
        ("layout", case.buckets > 0, case.partition is not None),
        ("writes", len(case.writes)),
        ("target-file-size", case.options["target-file-size"]),
    }
    if case.buckets > 0:
        features |= {
            ("buckets", case.buckets),
            ("full-compaction", case.options["full-compaction.delta-commits"]),
        }
    for how, _, tasks in case.writes:
        features.add(("path", how, tasks > 1))
    for column in case.columns:
        kind = column.kind.name
        features |= {
            ("nullability", kind, column.df_nullable, column.table_nullable),
            ("nulls", kind, column.has_nulls),
            ("nested nulls", kind, column.nested_nulls and not column.kind.sortable),
            ("partition", kind, column.name == case.partition),
            ("bucket key", kind, column.name == case.bucket_key),
        }
    return frozenset(features)


def covering_seeds(seeds: range) -> list[int]:
    """A small subset of ``seeds`` whose cases together exercise every feature
    (:func:`case_features`) that the cases of all of ``seeds`` exercise: greedily, the seed
    adding the most features not yet covered (the lowest seed on ties), until none is left."""
    features = {seed: case_features(make_case(seed)) for seed in seeds}
    left = frozenset().union(*features.values())
    chosen: list[int] = []
    while left:
        best = max(seeds, key=lambda seed: (len(features[seed] & left), -seed))
        chosen.append(best)
        left -= features[best]
    return sorted(chosen)
