"""Everything at once, for a bounded time: three processes appending, one compacting in a
loop, one expiring in a loop (fenced by consumers), and two stream readers with consumer ids
on disjoint bucket subsets. At the end the table holds exactly the acknowledged appends, and
each reader saw each row of its buckets exactly once, every bucket in commit order."""

from __future__ import annotations

import faulthandler
import os
import random
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.processes import run_in_processes

SCHEMA = pa.schema(
    [
        ("p", pa.int32()),
        ("k", pa.int64()),
        ("writer", pa.int32()),
        ("n", pa.int32()),
        ("i", pa.int32()),
    ]
)
ROWS = 8
APPENDERS = 3
READER_BUCKETS = ([0, 1], [2, 3])
DURATION_S = 22.0  # from just before the workers start; imports take a few seconds of it
EXPIRE_AFTER_S = 0  # expire everything the consumers allow, at once
READ_GRACE_S = 60.0  # how long readers may take to catch up after the writers stop
Row = tuple[int, int, int]  # (writer, n, i)


def rows(writer: int, n: int) -> pa.Table:
    rng = random.Random(writer * 1_000_003 + n)
    return pa.table(
        {
            "p": pa.array([rng.randrange(2) for _ in range(ROWS)], pa.int32()),
            "k": pa.array([rng.randrange(10_000) for _ in range(ROWS)], pa.int64()),
            "writer": pa.array([writer] * ROWS, pa.int32()),
            "n": pa.array([n] * ROWS, pa.int32()),
            "i": pa.array(range(ROWS), pa.int32()),
        },
        schema=SCHEMA,
    )


def _appender(table: at.Table, index: int, stop_at: float, control: str) -> Any:
    acknowledged = []
    n = 0
    try:
        while time.time() < stop_at:
            snapshot = table.append(rows(index, n))
            assert snapshot is not None
            acknowledged.append((n, snapshot.id))
            n += 1
    finally:
        Path(control, f"done-{index}").touch()  # also on failure: readers must not wait
    return acknowledged


def _compactor(table: at.Table, index: int, stop_at: float, control: str) -> Any:
    rng = random.Random(index)
    committed = conflicts = 0
    while time.time() < stop_at:
        try:
            if table.compact(full=rng.random() < 0.5) is not None:
                committed += 1
        except at.CommitConflictError:
            conflicts += 1  # re-planned and lost three times in a row: try again later
        time.sleep(0.05)
    return committed, conflicts


def _expirer(table: at.Table, index: int, stop_at: float, control: str) -> Any:
    snapshots = data_files = 0
    # Expire everything the consumers allow, as fast as possible: commits in flight then
    # often lose their base snapshot, and must neither fail nor re-create an expired snapshot
    # id (test_expiration_races.py pins both interleavings deterministically).
    while time.time() < stop_at:
        cut = int((time.time() - EXPIRE_AFTER_S) * 1000)
        result = table.expire_snapshots(retain_min=1, older_than_ms=cut)
        snapshots += len(result.expired_snapshots)
        data_files += len(result.deleted_data_files)
        time.sleep(0.1)
    return snapshots, data_files


def _reader(table: at.Table, index: int, stop_at: float, control: str) -> Any:
    reader = table.stream(consumer_id=f"reader-{index}", buckets=READER_BUCKETS[index])
    delivered: list[Row] = []
    units = 0
    while True:
        assert time.time() < stop_at + READ_GRACE_S, f"reader {index} never caught up"
        # all appenders were done before this poll: nothing more can come
        finished = all(Path(control, f"done-{w}").exists() for w in range(APPENDERS))
        unit = reader.poll()
        if unit is None:
            if finished:
                return delivered, units
            time.sleep(0.02)
            continue
        for batch in reader.read(unit):
            delivered.extend(
                zip(
                    batch.column("writer").to_pylist(),
                    batch.column("n").to_pylist(),
                    batch.column("i").to_pylist(),
                    strict=True,
                )
            )
        reader.commit()
        units += 1


ROLES = {
    "appender": _appender,
    "compactor": _compactor,
    "expirer": _expirer,
    "reader": _reader,
}


def _worker(role: str, index: int, uri: str, stop_at: float, control: str, queue: Any) -> None:
    # a worker stuck past every deadline prints its stack and dies: run_in_processes then fails
    hang_s = stop_at - time.time() + READ_GRACE_S + 30
    faulthandler.dump_traceback_later(hang_s, exit=True)
    try:
        result = ROLES[role](at.open_table(uri), index, stop_at, control)
    except BaseException:
        queue.put((role, index, "error", traceback.format_exc()))
        return
    queue.put((role, index, "ok", result))


def queue_of_rows(table: at.Table) -> dict[Row, tuple[Any, int]]:
    """Each row's ordered queue: (partition values, bucket)."""
    queues: dict[Row, tuple[Any, int]] = {}
    for split in table.scan().plan():
        queue = (split.partition_values, split.bucket)
        for batch in table.read(split, columns=["writer", "n", "i"]):
            columns = (batch.column(c).to_pylist() for c in ("writer", "n", "i"))
            queues.update(dict.fromkeys(zip(*columns, strict=True), queue))
    return queues


@pytest.mark.slow
def test_appenders_compactor_expirer_and_readers_at_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    control = str(tmp_path / "control")
    os.mkdir(control)
    table = at.create_table(
        uri,
        SCHEMA,
        partition_by=["p"],
        options={
            "bucket": 4,
            "bucket-key": "k",
            "write-only": True,
            "commit.fsync": False,
            "commit.max-retries": 200,
            "commit.min-retry-wait": "1 ms",
            "commit.max-retry-wait": "100 ms",
            # small targets: compaction has work all along, and compacted files stop being
            # rewritten once they are big, so compactions stay cheap
            "target-file-size": "16 KB",
            "compaction.min.file-num": 3,
        },
    )
    seed = table.append(rows(-1, 0))
    assert seed is not None and seed.id == 1
    for index, buckets in enumerate(READER_BUCKETS):  # register both consumers at snapshot 1
        table.stream(
            consumer_id=f"reader-{index}", mode="from-snapshot", snapshot_id=1, buckets=buckets
        )
    assert table.consumers() == {"reader-0": 1, "reader-1": 1}

    workers = [("appender", w) for w in range(APPENDERS)]
    workers += [("compactor", 0), ("expirer", 0), ("reader", 0), ("reader", 1)]
    stop_at = time.time() + DURATION_S
    started = time.monotonic()
    results = run_in_processes(
        _worker, [(role, index, uri, stop_at, control) for role, index in workers], timeout=240
    )
    elapsed = time.monotonic() - started
    errors = [result for result in results if result[2] == "error"]
    assert not errors, errors[0][3]
    outcome = {(role, index): result for role, index, _, result in results}

    # the table: exactly the acknowledged appends, contiguous history, time travel works
    acked: dict[tuple[int, int], int] = {(-1, 0): 1}
    for w in range(APPENDERS):
        acknowledged = outcome[("appender", w)]
        assert len(acknowledged) >= 20, f"appender {w} made only {len(acknowledged)} appends"
        acked.update({(w, n): snapshot_id for n, snapshot_id in acknowledged})
    # one snapshot per acknowledged append
    shared = Counter(acked.values())
    assert len(shared) == len(acked), sorted(
        (snapshot_id, append) for append, snapshot_id in acked.items() if shared[snapshot_id] > 1
    )
    table = at.open_table(uri)
    expected = Counter((w, n, i) for w, n in acked for i in range(ROWS))
    scanned = table.scan(columns=["writer", "n", "i"]).to_arrow()
    found = Counter(
        zip(*(scanned.column(c).to_pylist() for c in ("writer", "n", "i")), strict=True)
    )
    assert found == expected
    snapshots = table.snapshots()
    ids = [s.id for s in snapshots]
    assert ids == list(range(ids[0], ids[-1] + 1))
    for snapshot in snapshots:
        assert table.scan(snapshot_id=snapshot.id).count() == snapshot.total_record_count

    # each reader: each row of its buckets exactly once, each (partition, bucket) queue in
    # commit order (and an append's rows in their written order)
    queue_of = queue_of_rows(table)
    for index, buckets in enumerate(READER_BUCKETS):
        delivered, units = outcome[("reader", index)]
        mine = Counter(row for row in expected if queue_of[row][1] in buckets)
        assert Counter(delivered) == mine, f"reader {index}: lost or repeated rows"
        per_queue: dict[tuple[Any, int], list[Row]] = defaultdict(list)
        for row in delivered:
            per_queue[queue_of[row]].append(row)
        assert len(per_queue) == 2 * len(buckets)  # two partitions
        for queue, sequence in per_queue.items():
            order = [(acked[(w, n)], i) for w, n, i in sequence]
            assert order == sorted(order), f"reader {index}: queue {queue} out of commit order"
        assert units > 0

    compactions, conflicts = outcome[("compactor", 0)]
    expired, deleted_files = outcome[("expirer", 0)]
    kinds = Counter(s.kind for s in snapshots)
    print(
        f"\n{elapsed:.1f} s: {len(acked) - 1} appends, {compactions} compactions "
        f"({conflicts} gave up on conflicts), {expired} snapshots and {deleted_files} data "
        f"files expired, readers {[outcome[('reader', i)][1] for i in (0, 1)]} units; "
        f"{len(snapshots)} snapshots retained ({dict(kinds)})"
    )
    assert compactions >= 3
    assert expired >= 20 and deleted_files > 0
    consumers = table.consumers()
    assert len(consumers) == 2 and all(p > max(acked.values()) for p in consumers.values())
