"""Ordering guarantees of a stream, the way a queue consumer relies on them."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pyarrow as pa

import appendtable as at
from appendtable.planning.bucket import bucket_ids
from tests.helpers.data import EVENTS, events
from tests.streaming.helpers import drain, rows_of


def _by_bucket(
    rows: list[dict[str, object]], table: at.Table
) -> dict[tuple[object, int], list[int]]:
    """Row seqs grouped by (day, bucket), in delivery order."""
    keys = pa.array([r["key"] for r in rows], pa.int64())
    buckets = bucket_ids([keys], table.bucket).tolist() if rows else []
    grouped: dict[tuple[object, int], list[int]] = defaultdict(list)
    for row, bucket in zip(rows, buckets, strict=True):
        grouped[(row["day"], bucket)].append(int(row["seq"]))  # type: ignore[call-overload]
    return grouped


def test_each_bucket_is_delivered_in_write_order_across_many_commits(uri: str) -> None:
    table = at.create_table(
        uri,
        EVENTS,
        partition_by=["day"],
        options={"bucket": 3, "bucket-key": "key", "source.split.target-size": "2 KB"},
    )
    reader = table.stream(mode="latest")
    delivered: list[dict[str, object]] = []
    written = 0
    for commit in range(30):
        table.append(events(written, 40, keys=9, days=2, seed=commit))
        written += 40
        if commit % 4 == 0:  # the reader keeps up now and then, across several commits
            delivered.extend(rows_of(reader, drain(reader)))
    delivered.extend(rows_of(reader, drain(reader)))
    assert sorted(int(r["seq"]) for r in delivered) == list(range(written))  # type: ignore[call-overload]
    for key, seqs in _by_bucket(delivered, table).items():
        assert seqs == sorted(seqs), f"{key} out of order"
    # partitions come in creation order inside each unit
    assert delivered[0]["day"] in (dt.date(2024, 1, 1), dt.date(2024, 1, 2))


def test_disjoint_bucket_subsets_see_every_row_exactly_once(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 4, "bucket-key": "key"})
    readers = [
        table.stream(mode="latest", buckets=[0, 3]),
        table.stream(mode="latest", buckets=[1, 2]),
    ]
    seen: list[list[dict[str, object]]] = [[], []]
    for commit in range(12):
        table.append(events(commit * 50, 50, seed=commit))
        for reader, rows in zip(readers, seen, strict=True):
            rows.extend(rows_of(reader, drain(reader)))
    everything = [int(r["seq"]) for rows in seen for r in rows]  # type: ignore[call-overload]
    assert sorted(everything) == list(range(600))
    for index, subset in enumerate(({0, 3}, {1, 2})):
        buckets = {b for (_, b) in _by_bucket(seen[index], table)}
        assert buckets <= subset
        for seqs in _by_bucket(seen[index], table).values():
            assert seqs == sorted(seqs)


def test_unaware_tables_deliver_every_row_once_in_snapshot_order(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    reader = table.stream(mode="latest")
    units = []
    for commit in range(10):
        table.append(events(commit * 30, 30, seed=commit))
        units.extend(drain(reader))
    appends = [s.id for s in table.snapshots() if s.kind == at.CommitKind.APPEND]
    assert [u.snapshot_id for u in units] == appends  # every append, in order; compactions skipped
    per_unit = [sorted(int(r["seq"]) for r in rows_of(reader, [u])) for u in units]  # type: ignore[call-overload]
    assert per_unit == [list(range(c * 30, c * 30 + 30)) for c in range(10)]


def test_overwrites_are_skipped_unless_asked_for(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    plain = table.stream(mode="latest")
    with_overwrites = table.stream(
        mode="latest", options={"streaming-read-append-overwrite": "true"}
    )
    table.append(events(0, 5))
    table.overwrite(events(100, 3))
    table.append(events(200, 2))
    assert [u.snapshot_id for u in drain(plain)] == [1, 3]
    units = drain(with_overwrites)
    assert [(u.snapshot_id, u.commit_kind) for u in units] == [
        (1, at.CommitKind.APPEND),
        (2, at.CommitKind.OVERWRITE),
        (3, at.CommitKind.APPEND),
    ]
    assert sorted(int(r["seq"]) for r in rows_of(with_overwrites, units[1:2])) == [100, 101, 102]  # type: ignore[call-overload]


def test_filters_and_projection_apply_to_streams(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    reader = table.stream(
        mode="latest", columns=["seq"], filter=[("day", "=", dt.date(2024, 1, 2))]
    )
    data = events(0, 300, days=3)
    table.append(data)
    rows = rows_of(reader, drain(reader))
    assert set(rows[0]) == {"seq"}
    expected = sorted(r["seq"] for r in data.to_pylist() if r["day"] == dt.date(2024, 1, 2))
    assert sorted(int(r["seq"]) for r in rows) == expected  # type: ignore[call-overload]
