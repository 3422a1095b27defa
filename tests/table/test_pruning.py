"""Pruning by partition, statistics and bucket, and exact filtering against a model."""

from __future__ import annotations

import datetime as dt
import operator
import random
from collections.abc import Sequence

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.metadata.models import PartitionValues
from appendtable.planning.filters import Filter
from tests.helpers.data import EVENTS, events


def _files_planned(scan: at.Scan) -> int:
    return sum(len(split.files) for split in scan.plan())


def test_partition_pruning(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    for i in range(4):
        table.append(events(i * 300, 300, days=3))
    total = _files_planned(table.scan())
    assert total == 12
    one_day = table.scan(filter=[("day", "=", dt.date(2024, 1, 2))])
    assert _files_planned(one_day) == 4
    assert {r["day"] for r in one_day.to_arrow().to_pylist()} == {dt.date(2024, 1, 2)}
    assert _files_planned(table.scan(filter=[("day", ">", dt.date(2024, 1, 9))])) == 0
    # OR of two clauses keeps both partitions
    either = table.scan(filter=[[("day", "=", dt.date(2024, 1, 1))], [("day", "=", "2024-01-03")]])
    assert _files_planned(either) == 8


def test_a_partition_filter_is_decided_once_per_partition_not_per_file(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning cost with many files per partition (benchmarks "million"): a manifest merged
    over many partitions is read whole, and deciding the filter per file was most of a
    filtered plan. The plan must stay exact."""
    table = at.create_table(
        str(tmp_path) + "/t", EVENTS, partition_by=["day"], options={"write-only": True}
    )
    for i in range(8):
        table.append(events(i * 300, 300, days=3))  # a file in each of 3 partitions
    decided: list[PartitionValues] = []
    original = Filter.matches_partition

    def counted(self: Filter, keys: Sequence[str], values: PartitionValues) -> bool:
        decided.append(values)
        return original(self, keys, values)

    monkeypatch.setattr(Filter, "matches_partition", counted)
    day = dt.date(2024, 1, 2)
    scan = at.open_table(table.uri).scan(filter=[("day", "=", day)])
    assert _files_planned(scan) == 8
    assert sorted(scan.to_arrow().column("seq").to_pylist()) == sorted(
        r["seq"] for r in table.scan().to_arrow().to_pylist() if r["day"] == day
    )
    assert len(decided) == len(set(decided)) == 3  # not 24 (one per file)


def test_statistics_pruning(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(10):
        table.append(events(i * 100, 100))  # seq ranges [0,99], [100,199], ...
    scan = table.scan(filter=[("seq", ">=", 250), ("seq", "<", 420)])
    assert _files_planned(scan) == 3
    assert sorted(scan.to_arrow().column("seq").to_pylist()) == list(range(250, 420))
    assert _files_planned(table.scan(filter=[("seq", "in", [5, 905])])) == 2
    assert _files_planned(table.scan(filter=[("seq", "is null")])) == 0
    assert _files_planned(table.scan(filter=[("name", "=", "zzz")])) == 0


def test_point_query_on_bucket_key_reads_one_bucket(tmp_path: object) -> None:
    table = at.create_table(
        str(tmp_path) + "/t", EVENTS, options={"bucket": 64, "bucket-key": "key"}
    )
    for i in range(3):
        table.append(events(i * 5000, 5000, keys=5000))
    total = _files_planned(table.scan())
    assert total == 64 * 3
    point = table.scan(filter=[("key", "=", 1234)])
    assert _files_planned(point) <= total / 64
    expected = sorted(r["seq"] for r in table.scan().to_arrow().to_pylist() if r["key"] == 1234)
    assert sorted(point.to_arrow().column("seq").to_pylist()) == expected
    several = table.scan(filter=[("key", "in", [1, 2, 3])])
    assert _files_planned(several) <= 3 * 3


def test_bucket_pruning_with_multi_column_key(uri: str) -> None:
    schema = pa.schema([("a", pa.string()), ("b", pa.int32()), ("v", pa.int64())])
    table = at.create_table(uri, schema, options={"bucket": 16, "bucket-key": "a,b"})
    rows = pa.table(
        {
            "a": [f"k{i % 40}" for i in range(2000)],
            "b": pa.array([i % 7 for i in range(2000)], pa.int32()),
            "v": list(range(2000)),
        },
        schema=schema,
    )
    table.append(rows)
    both = table.scan(filter=[("a", "=", "k3"), ("b", "=", 3)])
    assert _files_planned(both) == 1
    expected = [r["v"] for r in rows.to_pylist() if r["a"] == "k3" and r["b"] == 3]
    assert sorted(both.to_arrow().column("v").to_pylist()) == expected
    # only part of the key pinned: no bucket pruning, still exact
    partial = table.scan(filter=[("a", "=", "k3")])
    assert _files_planned(partial) == _files_planned(table.scan())
    assert partial.count() == sum(1 for r in rows.to_pylist() if r["a"] == "k3")


_OPS = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _model(
    rows: list[dict[str, object]], clauses: list[list[tuple[str, str, object]]]
) -> list[int]:
    def holds(row: dict[str, object], column: str, op: str, value: object) -> bool:
        cell = row[column]
        if op == "is null":
            return cell is None
        if op == "is not null":
            return cell is not None
        if cell is None:
            return False
        if op == "in":
            return cell in value  # type: ignore[operator]
        if op == "not in":
            return cell not in value  # type: ignore[operator]
        return bool(_OPS[op](cell, value))

    return sorted(
        int(row["seq"])  # type: ignore[call-overload]
        for row in rows
        if any(all(holds(row, *term) for term in clause) for clause in clauses)
    )


def test_random_filters_match_a_model(tmp_path: object) -> None:
    schema = pa.schema(
        [
            ("day", pa.date32()),
            ("key", pa.int64()),
            ("seq", pa.int64()),
            ("name", pa.string()),
            ("score", pa.float64()),
        ]
    )
    table = at.create_table(
        str(tmp_path) + "/t",
        schema,
        partition_by=["day"],
        options={"bucket": 4, "bucket-key": "key"},
    )
    rng = random.Random(7)
    rows: list[dict[str, object]] = []
    for _commit in range(6):
        batch = []
        for _ in range(300):
            seq = len(rows) + len(batch)
            batch.append(
                {
                    "day": dt.date(2024, 1, 1 + rng.randrange(4)),
                    "key": rng.randrange(30),
                    "seq": seq,
                    "name": rng.choice(["ant", "bee", "cat", None, "dog"]),
                    "score": None if rng.random() < 0.1 else round(rng.uniform(-5, 5), 2),
                }
            )
        table.append(pa.Table.from_pylist(batch, schema=schema))
        rows.extend(batch)

    def term() -> tuple[str, str, object]:
        column = rng.choice(["day", "key", "seq", "name", "score"])
        op = rng.choice(["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"])
        pick = {
            "day": lambda: dt.date(2024, 1, 1 + rng.randrange(5)),
            "key": lambda: rng.randrange(32),
            "seq": lambda: rng.randrange(len(rows)),
            "name": lambda: rng.choice(["ant", "bee", "cow", "dog"]),
            "score": lambda: round(rng.uniform(-6, 6), 1),
        }[column]
        if op in ("in", "not in"):
            return (column, op, [pick() for _ in range(rng.randrange(1, 4))])
        if op in ("is null", "is not null"):
            return (column, op, None)  # (a value would be refused: they take none)
        return (column, op, pick())

    for _ in range(40):
        clauses = [[term() for _ in range(rng.randrange(1, 3))] for _ in range(rng.randrange(1, 3))]
        scan = table.scan(filter=clauses)
        got = sorted(scan.to_arrow().column("seq").to_pylist())
        assert got == _model(rows, clauses), clauses
        assert scan.count() == len(got)


def test_invalid_filters_name_the_problem(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    with pytest.raises(at.InvalidFilterError, match="unknown column 'nope'"):
        table.scan(filter=[("nope", "=", 1)])
    with pytest.raises(at.InvalidFilterError, match="operator"):
        table.scan(filter=[("key", "~", 1)])
    with pytest.raises(at.InvalidFilterError, match="column 'key'"):
        table.scan(filter=[("key", "=", "seven")])
    with pytest.raises(at.InvalidFilterError, match="is null"):
        table.scan(filter=[("key", "=", None)])


def test_bucket_pinning_with_values_the_key_cannot_hold(uri: str) -> None:
    schema = pa.schema([("k", pa.int8()), ("v", pa.int64())])
    table = at.create_table(uri, schema, options={"bucket": 4, "bucket-key": "k"})
    table.append(pa.table({"k": pa.array([1, 2, 3], pa.int8()), "v": [1, 2, 3]}))
    assert table.scan(filter=[("k", "=", 1000)]).count() == 0
    assert table.scan(filter=[("k", "=", 2.5)]).count() == 0
    assert table.scan(filter=[("k", "in", [2, 1000])]).to_arrow().column("v").to_pylist() == [2]
