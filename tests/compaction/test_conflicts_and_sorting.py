"""Compaction racing with appends, other compactions and overwrites; sort compaction."""

from __future__ import annotations

import datetime as dt
import threading

import fsspec
import msgspec
import numpy as np
import pyarrow as pa
import pytest

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from tests.helpers.data import EVENTS, events

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

WRITE_ONLY = {"write-only": True}


def _rows(table: at.Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("seq").to_pylist())


def test_compaction_racing_with_appends_loses_nothing(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"], options=WRITE_ONLY)
    for i in range(10):
        table.append(events(i * 20, 20, days=2, seed=i))
    compactor = table.compactor()
    plan = compactor.plan()
    messages = compactor.execute(plan.tasks)
    other = at.open_table(uri)
    for i in range(10, 15):  # appends land between planning and committing the compaction
        other.append(events(i * 20, 20, days=2, seed=i))
    assert compactor.commit(messages) is not None  # appends never conflict
    assert _rows(at.open_table(uri)) == list(range(300))


def test_two_compactions_of_the_same_files_exactly_one_lands(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options=WRITE_ONLY)
    for i in range(8):
        table.append(events(i * 10, 10))
    first, second = table.compactor(), at.open_table(uri).compactor()
    plan_a, plan_b = first.plan(), second.plan()
    messages_a, messages_b = first.execute(plan_a.tasks), second.execute(plan_b.tasks)
    assert first.commit(messages_a) is not None
    with pytest.raises(at.CommitConflictError, match="no longer live"):
        second.commit(messages_b)
    second.abort(messages_b)
    assert _rows(table) == list(range(80))
    assert table.files().num_rows == 1
    # Table.compact re-plans after a conflict instead of failing
    for i in range(8, 14):
        table.append(events(i * 10, 10))
    assert table.compact(full=True) is not None
    assert _rows(table) == list(range(140))


def test_concurrent_compact_calls_from_threads(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"], options=WRITE_ONLY)
    for i in range(12):
        table.append(events(i * 10, 10, days=3, seed=i))
    errors: list[BaseException] = []

    def compact() -> None:
        try:
            at.open_table(uri).compact(full=True)
        except at.CommitConflictError as exc:  # allowed: the other one won every round
            errors.append(exc)

    threads = [threading.Thread(target=compact) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _rows(at.open_table(uri)) == list(range(120))
    assert at.open_table(uri).files().num_rows == 3


def test_compaction_racing_with_an_overwrite_never_resurrects_rows(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options=WRITE_ONLY)
    for i in range(6):
        table.append(events(i * 10, 10))
    compactor = table.compactor()
    messages = compactor.execute(compactor.plan(full=True).tasks)
    table.overwrite(events(1000, 5))  # replaces the files the compaction read
    with pytest.raises(at.CommitConflictError):
        compactor.commit(messages)
    compactor.abort(messages)
    assert _rows(table) == list(range(1000, 1005))
    # and the other way round: an overwrite planned before a compaction landed
    for i in range(6):
        table.append(events(2000 + i * 10, 10))
    base = table.latest_snapshot()
    assert base is not None
    with table.writer() as writer:
        writer.write(events(3000, 3))
        replacement = writer.prepare_commit()
    table.compact(full=True)
    committer = table.committer("overwriter")
    # the compaction rewrote only rows the overwrite replaces: it lands, replacing the
    # compaction's output (no compacted row survives it)
    assert committer.overwrite(replacement, base_snapshot_id=base.id) is not None
    assert _rows(table) == list(range(3000, 3003))


def _clustered_table(uri: str) -> at.Table:
    schema = pa.schema([("x", pa.int64()), ("y", pa.float64()), ("seq", pa.int64())])
    table = at.create_table(
        uri, schema, options={"target-file-size": "16 KB", "write.parallelism": 1, **WRITE_ONLY}
    )
    rng = np.random.default_rng(3)
    for commit in range(4):
        rows = 5000
        table.append(
            pa.table(
                {
                    "x": rng.integers(0, 10_000, rows),
                    "y": rng.random(rows),
                    "seq": np.arange(commit * rows, (commit + 1) * rows),
                },
                schema=schema,
            )
        )
    return table


def _files_for(table: at.Table, flt: list[tuple[str, str, object]]) -> int:
    return sum(len(split.files) for split in table.scan(filter=flt).plan())


@pytest.mark.parametrize("strategy", ["order", "zorder", "hilbert"])
def test_sort_compaction_sharpens_statistics(uri: str, strategy: str) -> None:
    table = _clustered_table(uri)
    point_x = [("x", ">=", 5000), ("x", "<", 5100)]
    point_xy = [("x", ">=", 5000), ("x", "<", 5500), ("y", ">=", 0.5), ("y", "<", 0.55)]
    before_x, before_xy = _files_for(table, point_x), _files_for(table, point_xy)
    total = table.files().num_rows
    assert before_x == total  # random data: every file's range spans everything
    by = ["x"] if strategy == "order" else ["x", "y"]
    snapshot = table.sort_compact(by, strategy=strategy)
    assert snapshot is not None and snapshot.kind == at.CommitKind.COMPACT
    assert _rows(table) == list(range(20_000))
    after_x, after_xy = _files_for(table, point_x), _files_for(table, point_xy)
    if strategy == "order":
        assert after_x <= 2 < before_x
    else:
        assert after_xy < before_xy / 2  # clustered on both columns
    expected = sorted(
        r["seq"]
        for r in table.scan().to_arrow().to_pylist()
        if 5000 <= r["x"] < 5500 and 0.5 <= r["y"] < 0.55
    )
    assert sorted(table.scan(filter=point_xy).to_arrow().column("seq").to_pylist()) == expected


def test_sort_compaction_is_for_scalable_tables(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    with pytest.raises(at.InvalidOptionError, match="bucket = -1 tables only"):
        table.sort_compact(["seq"])
    plain = at.create_table(uri + "-plain", EVENTS, partition_by=["day"])
    with pytest.raises(at.InvalidArgumentError, match=r"strategy.*not one of"):
        plain.sort_compact(["seq"], strategy="peano")
    with pytest.raises(at.InvalidArgumentError, match=r"by.*unknown"):
        plain.sort_compact(["nope"])
    plain.append(events(0, 100, days=2))
    plain.sort_compact(["value"], partitions=[{"day": dt.date(2024, 1, 1)}])
    assert sorted(plain.scan().to_arrow().column("seq").to_pylist()) == list(range(100))


def test_a_task_of_an_unknown_sort_strategy_is_refused_not_run_in_another_order(
    uri: str,
) -> None:
    """A task travels as bytes (to Spark executors, to other processes): one naming a strategy
    this version does not know is refused, naming it, and writes nothing."""
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 50))
    table.append(events(50, 50))
    compactor = table.compactor()
    plan = compactor.plan_sort(["key", "value"], strategy="zorder")
    (task,) = plan.tasks
    renamed = msgspec.structs.replace(task, strategy="peano")
    fs, root = fsspec.core.url_to_fs(uri)
    flush_hints()  # the hints of the appends are written in the background
    before = fs.find(root)
    with pytest.raises(at.InvalidArgumentError, match="peano"):
        compactor.run_task(at.CompactionTask.from_bytes(renamed.to_bytes()))
    assert fs.find(root) == before


@pytest.mark.parametrize("options", [WRITE_ONLY, {**WRITE_ONLY, "bucket": 2, "bucket-key": "seq"}])
def test_a_compaction_whose_inputs_were_compacted_and_expired_meanwhile_re_plans(
    uri: str, options: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    """A user's writer with automatic compaction logged tracebacks 'data file ... is missing
    (deleted outside the table?)' while another process compacted and expired all but the
    latest snapshot: the files its compaction was reading had been removed by the table's own
    maintenance. That is a lost race: the compaction re-plans (one INFO line), nothing is
    logged as a fault, and the rows are untouched."""
    table = at.create_table(uri, EVENTS, options=options)
    for i in range(6):
        table.append(events(i * 10, 10, seed=i))
    other = at.open_table(uri)
    compactor = table.compactor()
    plans: list[at.CompactionPlan] = []

    def plan_then_lose_the_race() -> at.CompactionPlan:
        plan = compactor.plan(full=True)
        if not plans:
            assert other.compact(full=True) is not None
            other.expire_snapshots(retain_min=1, older_than_ms=2**62)
        plans.append(plan)
        return plan

    with caplog.at_level("INFO", logger="appendtable"):
        compactor.run(plan_then_lose_the_race)
    assert len(plans) == 2 and plans[0].tasks
    assert any("lost a race" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert _rows(at.open_table(uri)) == list(range(60))
