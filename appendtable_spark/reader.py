"""Batch reads: a pinned snapshot, pruned by pushed filters, read as Arrow batches.

Trap-aware: Spark pickles the reader before ``partitions()`` runs, so everything ``read()`` needs
travels inside the ``InputPartition`` (split bytes, table location, columns, filter).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)
from pyspark.sql.types import StructType

import appendtable as at
from appendtable_spark.pinning import ReadPin, retarget
from appendtable_spark.settings import Settings
from appendtable_spark.tables import cached_table
from appendtable_spark.types import cast_batch, spark_arrow_schema

__all__ = ["BatchReader", "SplitsPartition", "default_target", "pack", "to_terms"]

#: A filter term as the core takes it: (column, op, value), or (column, op) for null tests.
Term = tuple[object, ...]
_DEFAULT_TARGET = 128 * 1024 * 1024
#: Without ``splitTargetBytes``: a read is spread over at least this many tasks when each would
#: still hold ``_MIN_TASK_BYTES`` (a small table in one task would leave the other cores idle).
_SPREAD_TASKS = 8
_MIN_TASK_BYTES = 16 * 1024 * 1024


@dataclass
class SplitsPartition(InputPartition):  # type: ignore[misc]
    """One Spark task: splits to read in order, and what reading them needs."""

    uri: str
    storage_options: dict[str, Any]
    splits: list[bytes]
    columns: list[str] | None
    terms: list[Term]


def pack(splits: Sequence[at.Split], target: int) -> list[list[at.Split]]:
    """Few, large groups of consecutive splits (a Python task costs ~30 ms to start)."""
    groups: list[list[at.Split]] = []
    current: list[at.Split] = []
    size = 0
    for split in splits:
        if current and size + split.file_size > target:
            groups.append(current)
            current, size = [], 0
        current.append(split)
        size += split.file_size
    if current:
        groups.append(current)
    return groups


def default_target(splits: Sequence[at.Split]) -> int:
    """The bytes per task when the ``splitTargetBytes`` option is not given: about 128 MB,
    less for a read too small to keep several cores busy at that size (never below 16 MB:
    each Python task costs ~30 ms)."""
    total = sum(split.file_size for split in splits)
    return min(_DEFAULT_TARGET, max(_MIN_TASK_BYTES, -(-total // _SPREAD_TASKS)))


def _value(value: object) -> object:
    """Spark filter values as the core expects them (instants in UTC)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    return value


def _maybe_rounded(item: Filter) -> bool:
    """Whether a filter holds a decimal of 28 or more digits: PySpark hands such literals
    over rounded to Python's default 28-digit context (31 digits arrive as
    ``1.234567890123456789012345679E+30``), so pushing them down would drop matching rows."""
    held = getattr(item, "value", getattr(getattr(item, "child", None), "value", None))
    values = held if isinstance(held, tuple | list) else [held]
    return any(isinstance(v, decimal.Decimal) and len(v.as_tuple().digits) >= 28 for v in values)


def to_terms(filters: Sequence[Filter], column_names: set[str]) -> list[Term]:
    """The pushable part of Spark's filters as DNF terms (all must hold)."""
    terms: list[Term] = []
    simple = {
        EqualTo: "=",
        GreaterThan: ">",
        GreaterThanOrEqual: ">=",
        LessThan: "<",
        LessThanOrEqual: "<=",
    }
    for item in filters:
        if _maybe_rounded(item):
            continue  # left to Spark, which compares the exact value
        attribute = getattr(item, "attribute", None)
        if isinstance(item, Not):
            inner = item.child
            attribute = getattr(inner, "attribute", None)
        if not attribute or len(attribute) != 1 or attribute[0] not in column_names:
            continue
        column = attribute[0]
        op = simple.get(type(item))
        if op is not None and getattr(item, "value", None) is not None:
            terms.append((column, op, _value(item.value)))
        elif isinstance(item, EqualNullSafe) and item.value is not None:
            terms.append((column, "=", _value(item.value)))
        elif isinstance(item, In):
            values = [_value(v) for v in item.value if v is not None]
            if values and len(values) == len(item.value):
                terms.append((column, "in", values))
        elif isinstance(item, IsNull):
            terms.append((column, "is null"))
        elif isinstance(item, IsNotNull):
            terms.append((column, "is not null"))
        elif (
            isinstance(item, Not)
            and isinstance(item.child, EqualTo)
            and item.child.value is not None
        ):
            terms.append((column, "!=", _value(item.child.value)))
    return terms


def _usable(table: at.Table, pin: ReadPin, terms: list[Term]) -> list[Term]:
    """Terms the core accepts (a value of an unexpected type is left to Spark alone)."""
    usable = []
    for term in terms:
        try:
            pin.scan(table, filter=[term])
        except at.InvalidFilterError:
            continue
        usable.append(term)
    return usable


class BatchReader(DataSourceReader):  # type: ignore[misc]
    """A batch read of one pinned snapshot, in the DataFrame's schema version (the snapshot's
    own for time travel): every split is read as that version, by field id."""

    def __init__(self, settings: Settings, schema: StructType, pin: ReadPin) -> None:
        self._settings = settings
        self._schema = schema
        self._pin = pin
        self._terms: list[Term] = []

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Prune with every filter the table understands, and hand all of them back: Spark
        re-checks them, so pruning never has to be exact. Only where the DataFrame has the
        snapshot's own schema (the filters name its columns)."""
        pin = self._pin
        if pin.snapshot_id is not None:
            table = cached_table(self._settings)
            scan = pin.scan(table)
            if scan.snapshot is not None and scan.snapshot.schema_id == pin.schema_id:
                terms = to_terms(filters, set(scan.output_schema.names))
                self._terms = _usable(table, pin, terms)
        yield from filters

    def partitions(self) -> list[SplitsPartition]:
        pin = self._pin
        if pin.snapshot_id is None and pin.missing is None:
            return []  # the table had no snapshot
        table = cached_table(self._settings)
        scan = pin.scan(table, filter=self._terms or None)
        splits = scan.plan()
        target = self._settings.integer("splittargetbytes") or default_target(splits)
        return [
            SplitsPartition(
                uri=self._settings.uri,
                storage_options=self._settings.storage_options,
                splits=[retarget(split, pin.schema_id).to_bytes() for split in group],
                columns=self._settings.columns(),
                terms=self._terms,
            )
            for group in pack(splits, target)
        ]

    def read(self, partition: SplitsPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SplitsPartition):
            return  # no split to read: Spark runs one task with its own empty partition
        table = cached_table(Settings(partition.uri, partition.storage_options))
        target = spark_arrow_schema(self._schema)
        for payload in partition.splits:
            split = at.Split.from_bytes(payload)
            for batch in table.read(split, columns=target.names, filter=partition.terms or None):
                yield cast_batch(batch, target)
