"""A stream reader with a consumer id, SIGKILLed at random points and restarted with the same
id, delivers every row at least once, re-delivers only the unit it was in when killed (and
only if that unit's commit had not landed), and keeps each bucket in write order.

The reader child (``crash_children.reader_child``) logs each delivered row durably before it
``commit()``s the unit; between runs the parent expires every snapshot the consumer does not
protect, so the test also checks that consumer progress fences expiration."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.orphans import TEMP_FILE_MIN_AGE_MS
from tests.helpers.clock import age, past_every_file_ms
from tests.helpers.crash import fork_context, read_log, run_child
from tests.reliability import crash_children as children

SCHEMA = pa.schema([("k", pa.int64()), ("seq", pa.int64())])
SNAPSHOTS = 150
ROWS = 8
CONSUMER = "reader"


@dataclass
class Delivery:
    """One unit as one run delivered it."""

    run: int
    snapshot_id: int
    rows: list[int] = field(default_factory=list)
    delivered: bool = False
    committed: bool = False


def write_table(uri: str, rng: random.Random) -> tuple[list[int], dict[int, list[int]]]:
    """SNAPSHOTS appends (a full compaction after every 25th, so streams must skip COMPACT
    snapshots); (ids of the append snapshots, each one's seqs in written order)."""
    table = at.create_table(
        uri,
        SCHEMA,
        options={"bucket": 4, "bucket-key": "k", "write-only": True, "commit.fsync": False},
    )
    appends: dict[int, list[int]] = {}
    for index in range(SNAPSHOTS):
        seqs = list(range(index * ROWS, (index + 1) * ROWS))
        keys = [rng.randrange(1000) for _ in seqs]
        snapshot = table.append(pa.table({"k": keys, "seq": seqs}, schema=SCHEMA))
        assert snapshot is not None
        appends[snapshot.id] = seqs
        if index % 25 == 24 and index < SNAPSHOTS - 1:
            assert table.compact(full=True) is not None
    return sorted(appends), appends


def bucket_of_rows(table: at.Table) -> dict[int, int]:
    buckets = {}
    for split in table.scan().plan():
        for batch in table.read(split, columns=["seq"]):
            buckets.update(dict.fromkeys(batch.column("seq").to_pylist(), split.bucket))
    return buckets


def parse(log_path: str) -> tuple[list[Delivery], set[int], list[str]]:
    """(units in delivery order, runs that finished, errors)."""
    deliveries: list[Delivery] = []
    done: set[int] = set()
    errors: list[str] = []
    for line in read_log(log_path):
        event, run = line[0], int(line[1])
        if event == "unit":
            deliveries.append(Delivery(run, int(line[2])))
        elif event == "row":
            current = deliveries[-1]
            assert (current.run, current.snapshot_id) == (run, int(line[2]))
            current.rows.append(int(line[3]))
        elif event in ("delivered", "committed"):
            current = deliveries[-1]
            assert (current.run, current.snapshot_id) == (run, int(line[2]))
            setattr(current, event, True)
        elif event == "done":
            done.add(run)
        elif event == "error":
            errors.append(" ".join(line[2:]).replace("\\n", "\n"))
    return deliveries, done, errors


@pytest.mark.slow
def test_killed_reader_resumes_without_loss_or_duplication(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log_path = str(tmp_path / "log")
    rng = random.Random(7)
    append_ids, rows_of = write_table(uri, rng)
    table = at.open_table(uri)
    bucket = bucket_of_rows(table)
    context = fork_context(["tests.reliability.crash_children"])

    kills = 0
    expired = 0
    run = 0
    committed = 0
    stretch = 1.0  # on a loaded machine a run may commit nothing before its kill: wait longer
    while True:
        run += 1
        assert run <= 300, "the reader never finished"
        code = run_child(
            context,
            children.reader_child,
            (uri, log_path, run, CONSUMER, 0.02),
            kill_after=rng.uniform(0.04, 0.2) * stretch,
        )
        deliveries, done, errors = parse(log_path)
        assert not errors, errors[0]
        progress = sum(d.committed for d in deliveries) > committed
        committed = sum(d.committed for d in deliveries)
        stretch = 1.0 if progress else min(stretch * 1.5, 20.0)
        if run in done:
            assert code == 0
            break
        assert code == -9, f"reader run {run} exited with {code}"
        kills += 1
        if table.consumers():
            # everything the consumer does not need may go: its next unit must survive
            result = table.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1)
            expired += len(result.expired_snapshots)
            earliest = table.earliest_snapshot()
            assert earliest is not None and earliest.id <= table.consumers()[CONSUMER]

    # the units, in order: each run continues where the last committed one left off
    position = {snapshot_id: i for i, snapshot_id in enumerate(append_ids)}
    by_run: dict[int, list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        by_run[delivery.run].append(delivery)
    repeated: list[Delivery] = []
    in_progress_kills = 0
    last: Delivery | None = None
    for r in sorted(by_run):
        units = by_run[r]
        indexes = [position[u.snapshot_id] for u in units]
        assert indexes == list(range(indexes[0], indexes[0] + len(units))), (r, indexes)
        first = indexes[0]
        if last is None:
            assert first == 0
        elif last.committed:
            assert first == position[last.snapshot_id] + 1, (r, last)
        else:
            assert first in (position[last.snapshot_id], position[last.snapshot_id] + 1)
            if first == position[last.snapshot_id]:
                repeated.append(last)
        for unit in units[:-1]:
            assert unit.committed  # only the last unit of a run can be cut short
        if r not in done and not units[-1].committed:
            in_progress_kills += 1
        last = units[-1]
    assert last is not None and last.snapshot_id == append_ids[-1]
    # the last unit was committed: its log line says so, or the reader was killed between its
    # durable commit and that line, and the final run found nothing left to deliver
    assert last.committed or run not in by_run, last
    assert table.consumers()[CONSUMER] > append_ids[-1]

    # rows: whole units exactly once; a unit cut short delivered a prefix of its rows
    delivered: Counter[int] = Counter()
    for delivery in deliveries:
        expected = rows_of[delivery.snapshot_id]
        assert len(set(delivery.rows)) == len(delivery.rows)
        if delivery.delivered:
            assert sorted(delivery.rows) == expected, delivery
        else:
            assert set(delivery.rows) <= set(expected), delivery
        delivered.update(delivery.rows)
    assert set(delivered) == {seq for seqs in rows_of.values() for seq in seqs}
    # a unit is delivered once, plus once per run that started again inside it
    repeats = Counter(unit.snapshot_id for unit in repeated)
    assert Counter(d.snapshot_id for d in deliveries) == Counter(
        {snapshot_id: 1 + repeats[snapshot_id] for snapshot_id in append_ids}
    )
    snapshot_of = {seq: snapshot_id for snapshot_id, seqs in rows_of.items() for seq in seqs}
    for seq, count in delivered.items():
        assert count <= 1 + repeats[snapshot_of[seq]], (seq, count)
    duplicated = {seq for seq, count in delivered.items() if count > 1}

    # per-bucket write order within each run (seq grows in write order)
    for r, units in by_run.items():
        per_bucket: dict[int, list[int]] = defaultdict(list)
        for unit in units:
            for seq in unit.rows:
                per_bucket[bucket[seq]].append(seq)
        for b, seqs in per_bucket.items():
            assert seqs == sorted(seqs), f"run {r} delivered bucket {b} out of order"

    print(
        f"\n{kills} reader kills over {run} runs; {in_progress_kills} inside a unit not yet "
        f"committed, {len(repeated)} units re-delivered ({len(duplicated)} rows); "
        f"{expired} snapshots expired meanwhile"
    )
    assert kills >= 30
    assert in_progress_kills >= 10
    assert len(repeated) >= 3 and duplicated
    assert expired > 0
    assert table.consumers()[CONSUMER] == append_ids[-1] + 1


def test_reader_killed_inside_its_commit(tmp_path: Path) -> None:
    """Killed after writing the new progress to a temp file but before renaming it into
    place: the old progress stands, the unit is delivered again, and orphan removal reclaims
    the temp file."""
    uri = str(tmp_path / "t")
    log_path = str(tmp_path / "log")
    table = at.create_table(uri, SCHEMA, options={"bucket": 2, "bucket-key": "k"})
    for index in range(5):
        table.append(pa.table({"k": [index, index + 7], "seq": [2 * index, 2 * index + 1]}))
    context = fork_context(["tests.reliability.crash_children"])
    # writes of progress: 1 registers the consumer at snapshot 1, 2 and 3 commit units 1, 2
    arguments = (uri, log_path, 1, CONSUMER, 0.0, 3)
    assert run_child(context, children.reader_child, arguments) == -9
    assert read_log(log_path)[-1][:3] == ["kill", "1", "consumer-commit"]
    assert table.consumers() == {CONSUMER: 2}
    temps = list((tmp_path / "t" / "consumer").glob(".*.tmp"))
    assert len(temps) == 1

    assert run_child(context, children.reader_child, (uri, log_path, 2, CONSUMER, 0.0)) == 0
    deliveries, done, errors = parse(log_path)
    assert not errors and done == {2}
    assert [(d.run, d.snapshot_id, d.committed) for d in deliveries] == [
        (1, 1, True),
        (1, 2, False),
        (2, 2, True),
        (2, 3, True),
        (2, 4, True),
        (2, 5, True),
    ]
    assert sorted(deliveries[1].rows) == sorted(deliveries[2].rows) == [2, 3]
    assert table.consumers() == {CONSUMER: 6}

    assert table.remove_orphan_files(older_than=past_every_file_ms()).files == []  # may be live
    age(temps, seconds=TEMP_FILE_MIN_AGE_MS / 1000 + 60)  # an hour later: surely dead
    removed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert [f"consumer/{temps[0].name}"] == removed.files
    assert not temps[0].exists() and table.consumers() == {CONSUMER: 6}
