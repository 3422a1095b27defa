"""Compaction in both modes: file counts go down, rows and order never change."""

from __future__ import annotations

import datetime as dt
import os
import pickle
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.planning.compaction_selection import COMPACT_AGE, REMOVE_AGE, UnawareCoordinator
from tests.helpers.data import EVENTS, events

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

WRITE_ONLY = {"write-only": True}


def _rows(table: at.Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("seq").to_pylist())


def _bucket_orders(table: at.Table) -> dict[tuple[object, int], list[int]]:
    orders: dict[tuple[object, int], list[int]] = {}
    for split in table.scan().plan():
        key = (tuple(split.partition.values()), split.bucket)
        for batch in table.read(split, columns=["seq"]):
            orders.setdefault(key, []).extend(batch.column("seq").to_pylist())
    return orders


def test_queue_mode_merges_adjacent_files_and_keeps_write_order(uri: str) -> None:
    table = at.create_table(
        uri,
        EVENTS,
        partition_by=["day"],
        options={
            "bucket": 2,
            "bucket-key": "key",
            "compaction.min.file-num": 2,
            "compaction.max.file-num": 4,
            **WRITE_ONLY,
        },
    )
    for i in range(12):
        table.append(events(i * 40, 40, days=2, seed=i))
    before = table.files()
    snapshot = table.compact()
    assert snapshot is not None and snapshot.kind == at.CommitKind.COMPACT
    after = table.files()
    assert after.num_rows < before.num_rows
    assert _rows(table) == list(range(480))
    for key, seqs in _bucket_orders(table).items():
        assert seqs == sorted(seqs), key
    # sequence ranges of a bucket stay disjoint and increasing; compacted files cover their inputs
    for row in after.to_pylist():
        assert row["max_sequence"] - row["min_sequence"] + 1 >= row["rows"]
    compacted = [r for r in after.to_pylist() if r["source"] == "COMPACT"]
    assert compacted
    # a stream started afterwards reads the compacted full snapshot in order, then deltas
    reader = table.stream(mode="latest-full")
    unit = reader.poll()
    assert unit is not None and unit.full
    streamed: dict[tuple[object, int], list[int]] = {}
    for split in unit.splits:
        for batch in table.read(split, columns=["seq"]):
            streamed.setdefault((tuple(split.partition.values()), split.bucket), []).extend(
                batch.column("seq").to_pylist()
            )
    assert streamed == _bucket_orders(table)


def test_min_and_max_file_num_decide_what_is_ripe(uri: str) -> None:
    options = {
        "bucket": 1,
        "bucket-key": "key",
        "target-file-size": "64 KB",
        "compaction.min.file-num": 3,
        "compaction.max.file-num": 6,
        **WRITE_ONLY,
    }
    table = at.create_table(uri, EVENTS, options=options)
    # tiny files: a window becomes ripe only when it holds max.file-num files
    for i in range(6):
        sizes = table.files().column("bytes").to_pylist()
        assert table.compact() is None, sizes
        table.append(events(i * 5, 5))
    assert table.compact() is not None
    assert table.files().num_rows == 1
    # bigger files: ripe once at least min.file-num files together reach the target. Below
    # 2 x target the window never slides, so the rule is exact: n >= 3 and total >= target.
    start = 100
    while True:
        sizes = table.files().column("bytes").to_pylist()
        assert sum(sizes) < 2 * 64 * 1024
        ripe = (len(sizes) >= 3 and sum(sizes) >= 64 * 1024) or len(sizes) >= 6
        compacted = table.compact() is not None
        assert compacted == ripe, sizes
        if compacted:
            break
        table.append(events(start, 2000))
        start += 2000
    assert len(sizes) == 4  # the small compacted file and three ~26 KB files
    assert _rows(table) == list(range(30)) + list(range(100, start))


def test_full_compaction_rewrites_every_run_of_small_files(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key", **WRITE_ONLY})
    for i in range(4):
        table.append(events(i * 10, 10))
    assert table.compact() is None  # nothing ripe yet
    assert table.compact(full=True) is not None
    assert table.files().num_rows == 2  # one file per bucket
    assert _rows(table) == list(range(40))


def test_full_compaction_every_n_commits(uri: str) -> None:
    table = at.create_table(
        uri,
        EVENTS,
        options={"bucket": 1, "bucket-key": "key", "full-compaction.delta-commits": 3},
    )
    kinds = []
    for i in range(6):
        table.append(events(i * 10, 10))
        assert table.wait_for_maintenance(timeout=60)  # each commit's round, in turn
        kinds.append(table.latest_snapshot().kind)  # type: ignore[union-attr]
    assert kinds == ["APPEND", "APPEND", "COMPACT", "APPEND", "APPEND", "COMPACT"]
    assert table.files().num_rows == 1


def test_scalable_mode_packs_small_files_per_partition(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"], options=WRITE_ONLY)
    for i in range(10):
        table.append(events(i * 30, 30, days=2, seed=i))
    assert table.files().num_rows == 20
    assert table.compact() is not None  # 10 small files per partition >= min.file-num
    files = table.files()
    assert files.num_rows == 2
    assert _rows(table) == list(range(300))
    assert set(files.column("source").to_pylist()) == {"COMPACT"}


def test_writers_compact_after_committing_unless_write_only(uri: str) -> None:
    auto = at.create_table(uri, EVENTS)
    for i in range(12):
        auto.append(events(i * 10, 10))
    assert auto.wait_for_maintenance(timeout=60)
    kinds = [s.kind for s in auto.snapshots()]
    assert at.CommitKind.COMPACT in kinds
    assert auto.files().num_rows < 12
    assert _rows(auto) == list(range(120))
    manual = at.create_table(uri + "-w", EVENTS, options=WRITE_ONLY)
    for i in range(12):
        manual.append(events(i * 10, 10))
    assert {s.kind for s in manual.snapshots()} == {at.CommitKind.APPEND}
    assert manual.files().num_rows == 12


def test_idle_partition_leftovers_are_compacted_after_some_rounds(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    quiet, busy = dt.date(2024, 1, 1), dt.date(2024, 1, 2)

    def on(day: dt.date, start: int) -> pa.Table:
        data = events(start, 5, days=1)
        return data.set_column(0, "day", pa.array([day] * 5, pa.date32()))

    for i in range(3):  # fewer than min.file-num: not worth a task yet
        table.append(on(quiet, i * 5))
        assert table.wait_for_maintenance(timeout=60)
    assert table.files().num_rows == 3
    for i in range(7):  # the quiet partition ages while the other one gets writes
        table.append(on(busy, 100 + i * 5))
        assert table.wait_for_maintenance(timeout=60)  # one round per commit: ages counted
    quiet_files = [r for r in table.files().to_pylist() if r["partition"] == "day=2024-01-01"]
    assert len(quiet_files) == 1 and quiet_files[0]["source"] == "COMPACT"
    assert _rows(table) == list(range(15)) + list(range(100, 135))


def test_precommit_compaction_never_shows_small_files(uri: str) -> None:
    table = at.create_table(
        uri,
        EVENTS,
        partition_by=["day"],
        options={"precommit-compact": True, "write.parallelism": 4, **WRITE_ONLY},
    )
    messages = []
    for i in range(4):  # four writers, each with files in both partitions
        with table.writer() as writer:
            writer.write(events(i * 50, 50, days=2, seed=i))
            messages.extend(writer.prepare_commit())
    assert len(messages) == 8
    snapshot = table.committer("job").commit(messages)
    assert snapshot is not None and snapshot.kind == at.CommitKind.APPEND
    files = table.files()
    assert files.num_rows == 2  # one merged file per partition
    assert set(files.column("source").to_pylist()) == {"APPEND"}
    assert _rows(table) == list(range(200))
    on_disk = list(_data_files(table))
    assert sorted(on_disk) == sorted(files.column("path").to_pylist())  # originals deleted


def _data_files(table: at.Table) -> list[str]:
    root = table.uri
    if "://" in root:
        return list(table.files().column("path").to_pylist())
    found = []
    for directory, _dirs, names in os.walk(root):
        for name in names:
            if name.endswith(".parquet"):
                found.append(os.path.relpath(os.path.join(directory, name), root))
    return found


def _run_task(uri: str, payload: bytes) -> bytes:
    table = at.open_table(uri)
    return table.compactor().run_task(at.CompactionTask.from_bytes(payload)).to_bytes()


def test_tasks_run_in_other_processes(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, partition_by=["day"], options=WRITE_ONLY)
    for i in range(8):
        table.append(events(i * 25, 25, days=3, seed=i))
    compactor = table.compactor("spark-like-driver")
    plan = compactor.plan()
    assert len(plan.tasks) == 3
    assert pickle.loads(pickle.dumps(plan.tasks[0])) == plan.tasks[0]
    with ProcessPoolExecutor(max_workers=2) as pool:
        payloads = list(pool.map(_run_task, [uri] * 3, [t.to_bytes() for t in plan.tasks]))
    messages = [at.CommitMessage.from_bytes(p) for p in payloads]
    snapshot = compactor.commit(messages)
    assert snapshot is not None and snapshot.commit_user == "spark-like-driver"
    assert table.files().num_rows == 3
    assert _rows(table) == list(range(200))


def test_progress_is_reported(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"], options=WRITE_ONLY)
    for i in range(6):
        table.append(events(i * 10, 10, days=3, seed=i))
    seen: list[at.CompactionProgress] = []
    table.compact(progress=seen.append, parallelism=1)
    assert [p.tasks_done for p in seen] == [1, 2, 3]
    assert seen[-1].tasks_total == 3
    assert seen[-1].files_read == 18 and seen[-1].files_written == 3
    assert seen[-1].bytes_read > 0 and seen[-1].bytes_written > 0


def test_compaction_only_in_chosen_partitions(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"], options=WRITE_ONLY)
    for i in range(6):
        table.append(events(i * 10, 10, days=2, seed=i))
    table.compact(full=True, partitions=[{"day": dt.date(2024, 1, 1)}])
    per_partition: dict[str, int] = {}
    for row in table.files().to_pylist():
        per_partition[row["partition"]] = per_partition.get(row["partition"], 0) + 1
    assert per_partition == {"day=2024-01-01": 1, "day=2024-01-02": 6}
    with pytest.raises(at.InvalidFilterError, match="not a partition column"):
        table.compact(partitions=[{"key": 1}])


def test_idle_partitions_leave_memory_and_are_found_again_after_a_restart(uri: str) -> None:
    coordinator = UnawareCoordinator(target=1 << 20, open_cost=0, min_files=5, max_files_held=100)

    def small(name: str, seq: int) -> at.DataFileMeta:
        return at.DataFileMeta(f"bucket-0/{name}.parquet", 10, 1, seq, seq, 0, 0, 0)

    coordinator.add(("pair",), small("a", 0))
    coordinator.add(("pair",), small("b", 1))
    coordinator.add(("lone",), small("c", 2))
    tasks_by_round = [coordinator.plan() for _ in range(REMOVE_AGE + 2)]
    compacted = [i for i, tasks in enumerate(tasks_by_round) if tasks]
    assert compacted == [COMPACT_AGE]  # the pair's leftovers, once idle long enough
    assert tasks_by_round[COMPACT_AGE] == [(("pair",), [small("a", 0), small("b", 1)])]
    assert coordinator.partitions == {}  # the lone file's partition left memory, uncompacted
    # end to end: a fresh handle (a restarted writer) rescans and finds existing small files
    table = at.create_table(uri, EVENTS, partition_by=["day"], options=WRITE_ONLY)
    for i in range(4):
        table.append(events(i * 10, 10, days=1, seed=i))
    assert at.open_table(uri).files().num_rows == 4
    auto = at.create_table(uri + "-auto", EVENTS, partition_by=["day"])
    for i in range(4):  # below min.file-num: leftovers stay
        auto.append(events(i * 10, 10, days=1, seed=i))
    auto.close()
    assert auto.files().num_rows == 4
    with at.open_table(uri + "-auto") as again:  # a new writer process: its coordinator rescans
        again.append(events(40, 10, days=1, seed=9))  # the 5th small file makes a task
    assert again.files().num_rows == 1
    assert sorted(again.scan().to_arrow().column("seq").to_pylist()) == list(range(50))


def test_write_only_writers_never_expire(uri: str) -> None:
    table = at.create_table(
        uri,
        EVENTS,
        options={
            "write-only": True,
            "snapshot.time-retained": "1 ms",
            "snapshot.num-retained.min": 1,
        },
    )
    for i in range(15):
        table.append(events(i, 1))
    assert len(table.snapshots()) == 15
    expiring = at.create_table(
        uri + "-x",
        EVENTS,
        options={"snapshot.time-retained": "1 ms", "snapshot.num-retained.min": 1},
    )
    for i in range(15):
        expiring.append(events(i, 1))
    assert expiring.wait_for_maintenance(60)  # (rounds are spaced: see after_commit.worker)
    assert len(expiring.snapshots()) < 15
