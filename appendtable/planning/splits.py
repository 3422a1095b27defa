"""Ordering live files and packing them into read splits (pure).

Order of splits: partitions in creation order (the smallest sequence number they hold, which
compaction preserves) or, with ``sort_partitions``, by partition value (nulls last); then buckets
ascending; within a bucket, files by ``min_seq``, i.e. write order. Packing is greedy and never
reorders: consecutive files of one (partition, bucket) fill a split until its weight (bytes plus
``open_file_cost`` per file) reaches ``target_size``.
"""

from __future__ import annotations

import decimal
import operator
from collections.abc import Iterable, Sequence

from appendtable.metadata.models import DataFileMeta, ManifestEntry, PartitionValues, Split
from appendtable.metadata.types import TypeSpec

__all__ = ["group_files", "pack_splits", "partition_sort_key"]

Group = tuple[PartitionValues, int, list[DataFileMeta]]
_READ_ORDER = operator.attrgetter("min_seq", "path")


def partition_sort_key(
    values: PartitionValues, types: Sequence[TypeSpec] | None = None
) -> tuple[tuple[bool, object], ...]:
    """Sort by value with nulls last. Decimals are stored as text: given the partition
    ``types``, they sort as numbers (else "10.5" would sort before "9.1")."""
    return tuple(
        (value is None, 0 if value is None else _comparable(value, types, index))
        for index, value in enumerate(values)
    )


def _comparable(value: object, types: Sequence[TypeSpec] | None, index: int) -> object:
    if types is not None and types[index].kind == "decimal" and isinstance(value, str):
        return decimal.Decimal(value)
    return value


def group_files(
    entries: Iterable[ManifestEntry],
    *,
    sort_partitions: bool,
    partition_types: Sequence[TypeSpec] | None = None,
) -> list[Group]:
    """Live entries grouped by (partition, bucket) in read order, files by ``min_seq``.
    ``partition_types`` make ``sort_partitions`` order decimal partitions numerically."""
    groups: dict[tuple[PartitionValues, int], list[DataFileMeta]] = {}
    for entry in entries:
        key = (entry.partition, entry.bucket)
        files = groups.get(key)
        if files is None:
            groups[key] = [entry.file]
        else:
            files.append(entry.file)
    for files in groups.values():
        files.sort(key=_READ_ORDER)
    first_seq: dict[PartitionValues, int] = {}
    for (partition, _), files in groups.items():
        seen = first_seq.get(partition)
        if seen is None or files[0].min_seq < seen:
            first_seq[partition] = files[0].min_seq

    def order(key: tuple[PartitionValues, int]) -> tuple[object, ...]:
        partition, bucket = key
        if sort_partitions:
            return (partition_sort_key(partition, partition_types), bucket)
        return (first_seq[partition], bucket)

    return [(key[0], key[1], groups[key]) for key in sorted(groups, key=order)]


def pack_splits(
    groups: Sequence[Group],
    *,
    snapshot_id: int,
    partition_keys: tuple[str, ...],
    partition_types: tuple[TypeSpec, ...],
    target_size: int,
    open_file_cost: int,
    schema_id: int | None = None,
) -> list[Split]:
    """Pack each group's files, in order, into splits of about ``target_size``; the splits
    read as schema ``schema_id``."""
    splits: list[Split] = []
    for partition, bucket, files in groups:
        current: list[DataFileMeta] = []
        weight = 0
        for file in files:
            current.append(file)
            weight += file.file_size + open_file_cost
            if weight >= target_size:
                splits.append(
                    Split(
                        snapshot_id=snapshot_id,
                        partition_keys=partition_keys,
                        partition_types=partition_types,
                        partition_values=partition,
                        bucket=bucket,
                        files=tuple(current),
                        schema_id=schema_id,
                    )
                )
                current, weight = [], 0
        if current:
            splits.append(
                Split(
                    snapshot_id=snapshot_id,
                    partition_keys=partition_keys,
                    partition_types=partition_types,
                    partition_values=partition,
                    bucket=bucket,
                    files=tuple(current),
                    schema_id=schema_id,
                )
            )
    return splits
