"""Ordering live files and packing them into read splits."""

from __future__ import annotations

import datetime as dt
import functools
from collections import defaultdict
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.metadata.models import (
    DataFileMeta,
    FileKind,
    ManifestEntry,
    PartitionValues,
    Split,
)
from appendtable.metadata.types import TypeSpec
from appendtable.planning.splits import group_files, pack_splits, partition_sort_key

KEYS = ("n", "s")
TYPES = (TypeSpec(kind="int32"), TypeSpec(kind="string"))


def data_file(path: str, min_seq: int, size: int, rows: int = 1) -> DataFileMeta:
    return DataFileMeta(
        path=path,
        file_size=size,
        row_count=rows,
        min_seq=min_seq,
        max_seq=min_seq + rows - 1,
        schema_id=0,
        creation_time_ms=0,
        source=0,
    )


def entry(partition: PartitionValues, bucket: int, file: DataFileMeta) -> ManifestEntry:
    return ManifestEntry(FileKind.ADD, partition, bucket, 4, file)


def pack(
    entries: list[ManifestEntry],
    *,
    target: int,
    cost: int,
    sort_partitions: bool = False,
    types: tuple[TypeSpec, ...] = TYPES,
    keys: tuple[str, ...] = KEYS,
) -> list[Split]:
    groups = group_files(entries, sort_partitions=sort_partitions, partition_types=types)
    return pack_splits(
        groups,
        snapshot_id=9,
        partition_keys=keys,
        partition_types=types,
        target_size=target,
        open_file_cost=cost,
    )


def weight(files: tuple[DataFileMeta, ...] | list[DataFileMeta], cost: int) -> int:
    return sum(f.file_size + cost for f in files)


def value_order(a: PartitionValues, b: PartitionValues) -> int:
    """Partition values compared column by column, a null after every value."""
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        if x is None:
            return 1
        if y is None:
            return -1
        return -1 if x < y else 1  # type: ignore[operator]
    return 0


@st.composite
def live_entries(draw: st.DrawFn) -> list[ManifestEntry]:
    partitions = draw(
        st.lists(
            st.tuples(st.none() | st.integers(-3, 3), st.none() | st.text("ab", max_size=2)),
            min_size=1,
            max_size=5,
            unique=True,
        )
    )
    files = draw(
        st.lists(
            st.tuples(
                st.integers(0, 10**6),  # min_seq
                st.integers(0, len(partitions) - 1),
                st.integers(0, 3),  # bucket
                st.integers(0, 300),  # size
                st.integers(1, 1000),  # rows
            ),
            max_size=40,
            unique_by=lambda t: t[0],
        )
    )
    entries = [
        entry(partitions[p], bucket, data_file(f"p/bucket/data-{i}.parquet", seq, size, rows))
        for i, (seq, p, bucket, size, rows) in enumerate(files)
    ]
    return draw(st.permutations(entries))


@settings(max_examples=150, deadline=None)
@given(live_entries(), st.integers(1, 1200), st.integers(0, 100), st.booleans())
def test_packing_properties(
    entries: list[ManifestEntry], target: int, cost: int, sort_partitions: bool
) -> None:
    splits = pack(entries, target=target, cost=cost, sort_partitions=sort_partitions)
    origin = {e.file.path: (e.partition, e.bucket) for e in entries}

    # Every file in exactly one split, and in the split of its own (partition, bucket).
    seen = [f.path for s in splits for f in s.files]
    assert sorted(seen) == sorted(origin)
    for split in splits:
        assert split.files
        assert split.snapshot_id == 9
        assert split.partition_keys == KEYS
        assert split.partition_types == TYPES
        for file in split.files:
            assert origin[file.path] == (split.partition_values, split.bucket)

    # Splits of one (partition, bucket) are consecutive; their files concatenate in seq order.
    by_group: dict[tuple[Any, int], list[Split]] = defaultdict(list)
    order: list[tuple[Any, int]] = []
    for split in splits:
        key = (split.partition_values, split.bucket)
        if not by_group[key]:
            order.append(key)
        else:
            assert order[-1] == key, "splits of one (partition, bucket) must be adjacent"
        by_group[key].append(split)
    for key, group in by_group.items():
        files = [f for s in group for f in s.files]
        expected = sorted(
            (e.file for e in entries if (e.partition, e.bucket) == key), key=lambda f: f.min_seq
        )
        assert files == expected
        # Greedy packing: a split closes as soon as the file just added makes it reach the
        # target; so every split but the group's last reaches it, and none reached it earlier.
        for index, split in enumerate(group):
            assert weight(split.files[:-1], cost) < target
            if index < len(group) - 1:
                assert weight(split.files, cost) >= target

    # A partition's groups are adjacent, buckets ascending.
    partitions_in_order: list[Any] = []
    for partition, bucket in order:
        if partitions_in_order and partitions_in_order[-1][0] == partition:
            assert bucket > partitions_in_order[-1][1]
            partitions_in_order[-1] = (partition, bucket)
        else:
            assert partition not in [p for p, _ in partitions_in_order]
            partitions_in_order.append((partition, bucket))
    listed = [p for p, _ in partitions_in_order]

    if sort_partitions:
        expected_order = sorted(set(listed), key=functools.cmp_to_key(value_order))
    else:  # creation order: the smallest sequence number a partition holds
        first = {p: min(e.file.min_seq for e in entries if e.partition == p) for p in listed}
        expected_order = sorted(set(listed), key=first.__getitem__)
    assert listed == expected_order


def test_greedy_packing_example() -> None:
    files = [data_file(f"f{i}", i * 10, size) for i, size in enumerate([40, 50, 5, 100, 1, 1])]
    entries = [entry((1, "a"), 0, f) for f in reversed(files)]
    splits = pack(entries, target=100, cost=10)
    # 50+60 = 110 >= 100 | 15+110 = 125 | 11+11 = 22 (last, under target)
    assert [[f.path for f in s.files] for s in splits] == [
        ["f0", "f1"],
        ["f2", "f3"],
        ["f4", "f5"],
    ]
    # One file bigger than the target is a split of its own.
    big = [data_file("big", 0, 1000), data_file("small", 5, 1)]
    splits = pack([entry((1, "a"), 0, f) for f in big], target=100, cost=0)
    assert [[f.path for f in s.files] for s in splits] == [["big"], ["small"]]


def test_open_file_cost_limits_files_per_split() -> None:
    entries = [entry((1, "a"), 0, data_file(f"f{i:02}", i, 0)) for i in range(10)]
    splits = pack(entries, target=30, cost=10)
    assert [len(s.files) for s in splits] == [3, 3, 3, 1]


def test_order_across_partitions_and_buckets() -> None:
    entries = [
        entry((2, "b"), 1, data_file("b1", 5, 1)),
        entry((1, "a"), 0, data_file("a0", 30, 1)),
        entry((2, "b"), 0, data_file("b0", 7, 1)),
        entry((None, "a"), 0, data_file("n0", 1, 1)),
        entry((1, "a"), 1, data_file("a1", 20, 1)),
        entry((1, None), 0, data_file("x0", 40, 1)),
    ]
    by_creation = pack(entries, target=1000, cost=0)
    assert [s.files[0].path for s in by_creation] == ["n0", "b0", "b1", "a0", "a1", "x0"]
    by_value = pack(entries, target=1000, cost=0, sort_partitions=True)
    assert [s.files[0].path for s in by_value] == ["a0", "a1", "x0", "b0", "b1", "n0"]


def test_decimal_and_date_partitions_sort_by_value() -> None:
    types = (TypeSpec(kind="decimal", precision=10, scale=1),)
    values = ["10.5", "9.1", "-2.0", "-10.0", None, "0.0"]
    entries = [entry((v,), 0, data_file(f"f{i}", i, 1)) for i, v in enumerate(values)]
    splits = pack(entries, target=1000, cost=0, sort_partitions=True, types=types, keys=("d",))
    assert [s.partition_values[0] for s in splits] == ["-10.0", "-2.0", "0.0", "9.1", "10.5", None]
    assert partition_sort_key(("10.5",), types) > partition_sort_key(("9.1",), types)
    assert partition_sort_key((None,), types) > partition_sort_key(("99",), types)
    day = (TypeSpec(kind="date32"),)
    assert partition_sort_key((-5,), day) < partition_sort_key((3,), day)


def test_partition_sort_key_nulls_last_per_column() -> None:
    keys = [(None, "a"), (1, None), (1, "a"), (0, "z"), (None, None)]
    assert sorted(keys, key=partition_sort_key) == [
        (0, "z"),
        (1, "a"),
        (1, None),
        (None, "a"),
        (None, None),
    ]


def test_empty_input_gives_no_splits() -> None:
    assert pack([], target=10, cost=1) == []
    assert group_files([], sort_partitions=True) == []


def test_split_partition_and_totals() -> None:
    types = (TypeSpec(kind="date32"), TypeSpec(kind="decimal", precision=5, scale=2))
    files = (data_file("a", 0, 10, rows=3), data_file("b", 3, 20, rows=4))
    split = Split(
        snapshot_id=1,
        partition_keys=("day", "price"),
        partition_types=types,
        partition_values=(19_753, "1.50"),
        bucket=0,
        files=files,
    )
    assert split.partition == {"day": dt.date(2024, 1, 31), "price": Decimal("1.50")}
    assert split.row_count == 7
    assert split.file_size == 30
