"""Per-(partition, bucket) write order across many commits, read through fresh handles."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.data import EVENTS, events


def _commits(table: at.Table, count: int, rows: int) -> pa.Table:
    written = []
    for i in range(count):
        batch = events(i * rows, rows, keys=7, days=2, seed=i)
        table.append(batch)
        written.append(batch)
    return pa.concat_tables(written)


def test_each_bucket_reads_back_in_exact_write_order(uri: str) -> None:
    table = at.create_table(
        uri,
        EVENTS,
        partition_by=["day"],
        options={"bucket": 3, "bucket-key": "key", "source.split.target-size": "4 KB"},
    )
    written = _commits(table, 25, 120)
    fresh = at.open_table(uri)  # nothing from in-process caches
    splits = fresh.scan().plan()
    assert len(splits) > 6  # several splits per bucket, so order across splits matters
    per_bucket: dict[tuple[object, int], list[int]] = {}
    for split in splits:
        key = (split.partition["day"], split.bucket)
        for batch in fresh.read(split):
            per_bucket.setdefault(key, []).extend(batch.column("seq").to_pylist())
    for (day, bucket), seqs in per_bucket.items():
        assert seqs == sorted(seqs), f"bucket {bucket} of {day} out of write order"
    assert sorted(itertools.chain(*per_bucket.values())) == sorted(
        written.column("seq").to_pylist()
    )
    # the full scan keeps each bucket's rows in order too (a key lives in one bucket)
    last: dict[tuple[object, int], int] = {}
    for row in fresh.scan().to_arrow().to_pylist():
        key = (row["day"], row["key"])
        assert row["seq"] > last.get(key, -1)
        last[key] = row["seq"]


def test_splits_of_a_bucket_are_consecutive_and_sequence_ranges_contiguous(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    _commits(table, 10, 50)
    files = at.open_table(uri).files().to_pylist()
    for bucket in (0, 1):
        ranges = [(f["min_sequence"], f["max_sequence"]) for f in files if f["bucket"] == bucket]
        assert ranges == sorted(ranges)
        for (_, high), (low, _) in itertools.pairwise(ranges):
            assert low > high
    all_ranges = sorted((f["min_sequence"], f["max_sequence"]) for f in files)
    # the table's sequence space is covered without gaps or overlaps
    assert all_ranges[0][0] == 0
    for (_, high), (low, _) in itertools.pairwise(all_ranges):
        assert low == high + 1
    assert all_ranges[-1][1] == 499


@pytest.mark.parametrize("sort_partitions", [False, True])
def test_partition_order_creation_or_value(uri: str, sort_partitions: bool) -> None:
    schema = pa.schema([("p", pa.string()), ("v", pa.int64())])
    options = {"scan.plan-sort-partition": str(sort_partitions).lower()}
    table = at.create_table(uri, schema, partition_by=["p"], options=options)
    for name in ["m", "c", "x", "a"]:
        table.append(pa.table({"p": [name], "v": [1]}, schema=schema))
    order = [split.partition["p"] for split in at.open_table(uri).scan().plan()]
    assert order == (["a", "c", "m", "x"] if sort_partitions else ["m", "c", "x", "a"])


@pytest.mark.parametrize("where", ["table", "stream"])
def test_a_stream_orders_partitions_by_its_own_read_option_too(uri: str, where: str) -> None:
    """``scan.plan-sort-partition`` given per stream (``stream(options=...)``, as options.md
    allows for every ``scan.*`` option) was ignored: units came in creation order. Both the
    full unit and the delta units follow it; the table's value is the default."""
    schema = pa.schema([("p", pa.string()), ("v", pa.int64())])
    sort = {"scan.plan-sort-partition": "true"}
    table = at.create_table(
        uri, schema, partition_by=["p"], options=sort if where == "table" else {}
    )
    for name in ["m", "c", "x"]:
        table.append(pa.table({"p": [name], "v": [1]}, schema=schema))
    reader = table.stream(mode="latest-full", options=sort if where == "stream" else None)
    unit = reader.poll()
    assert unit is not None and [s.partition["p"] for s in unit.splits] == ["c", "m", "x"]
    table.append(pa.table({"p": ["z", "a", "q"], "v": [1, 2, 3]}, schema=schema))
    unit = reader.poll()
    assert unit is not None and [s.partition["p"] for s in unit.splits] == ["a", "q", "z"]
    plain = table.stream(mode="latest-full").poll()
    assert plain is not None
    order = [s.partition["p"] for s in plain.splits]
    assert order == (sorted(order) if where == "table" else ["m", "c", "x", "z", "a", "q"])
