"""Streams and deletes: a delete emits nothing; a stream (or consumer, or consumer group, or an
engine reading a unit's splits) that has not delivered the deleted rows yet never does, and
keeps the write order of the rest per bucket, even when the files it reads were compacted or
rewritten since (see appendtable/stream_deletes.py, docs/queue.md). The oracle is the list of
rows appended, per bucket in write order, less those the deletes matched (pyarrow compute)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable import deletes as deletes_module
from tests.streaming.helpers import drain

SCHEMA = pa.schema([("user", pa.int64()), ("seq", pa.int64()), ("tag", pa.string())])
MODES = {"dv": "true", "cow": "false"}


def batch(start: int, count: int) -> pa.Table:
    seq = np.arange(start, start + count)
    return pa.table({"user": seq % 7, "seq": seq, "tag": [f"t{s % 5}" for s in seq]}, schema=SCHEMA)


def make(tmp_path: Path, mode: str, **options: str) -> at.Table:
    return at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={
            "bucket": "2",
            "bucket-key": "user",
            "deletion-vectors.enabled": MODES[mode],
            "write-only": "true",  # compaction only when the test runs it
            **options,
        },
    )


def delivered(reader: at.StreamReader, table: at.Table | None = None) -> pa.Table:
    """What the reader delivers now (through ``table.read`` of the splits when given: an
    engine's worker), in delivery order."""
    batches = []
    for unit in drain(reader):
        if table is None:
            batches.extend(reader.read(unit))
        else:
            for split in unit.splits:
                batches.extend(table.read(at.Split.from_bytes(split.to_bytes())))
    return pa.Table.from_batches(batches, SCHEMA) if batches else SCHEMA.empty_table()


def per_bucket(rows: pa.Table) -> dict[int, list[int]]:
    """seq values per bucket, in order (the bucket of each row as Spark's hash gives it)."""
    buckets = at.bucket_ids([rows["user"].combine_chunks()], 2) if rows.num_rows else []
    found: dict[int, list[int]] = {}
    for bucket, seq in zip(list(buckets), rows["seq"].to_pylist(), strict=True):
        found.setdefault(int(bucket), []).append(seq)
    return found


def without(rows: pa.Table, mask: Callable[[pa.Table], pa.ChunkedArray]) -> pa.Table:
    return rows.filter(pc.invert(mask(rows).fill_null(False)))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_delete_emits_nothing_and_a_late_stream_never_delivers_the_rows(
    tmp_path: Path, mode: str
) -> None:
    table = make(tmp_path, mode)
    appended = [batch(0, 40), batch(40, 40), batch(80, 40)]
    table.append(appended[0])
    early = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="early")
    late = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="late")
    for rows in appended[1:]:
        table.append(rows)
    everything = pa.concat_tables(appended)
    got_early = delivered(early)
    assert per_bucket(got_early) == per_bucket(everything)
    early.commit()
    mask = lambda t: pc.equal(t["tag"], "t2")  # noqa: E731
    result = table.delete([("tag", "=", "t2")])
    assert result.rows == pc.sum(mask(everything)).as_py()
    assert early.poll() is None  # a delete emits nothing
    got_late = delivered(late)
    assert per_bucket(got_late) == per_bucket(without(everything, mask))
    # a consumer restarted from its saved position later reads the same
    restarted = table.stream(consumer_id="late")
    assert per_bucket(delivered(restarted)) == per_bucket(without(everything, mask))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_compaction_then_delete_then_a_late_stream(tmp_path: Path, mode: str) -> None:
    """The late stream reads the deltas of the appends from their original files, which were
    compacted (their rows now in other files) before the delete: the vectors (or rewrites)
    of the delete are on the compacted files, so the stream applies the delete by its filter."""
    table = make(tmp_path, mode)
    appended = [batch(n * 30, 30) for n in range(6)]
    table.append(appended[0])
    late = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="late")
    first = delivered(late)
    assert first.num_rows == 30
    late.commit()
    for rows in appended[1:]:
        table.append(rows)
    assert table.compact(full=True) is not None
    mask = lambda t: pc.or_(pc.equal(t["tag"], "t1"), pc.equal(t["user"], 3))  # noqa: E731
    table.delete([[("tag", "=", "t1")], [("user", "=", 3)]])
    tail = table.stream(consumer_id="late")
    got = delivered(tail)
    assert per_bucket(got) == per_bucket(without(pa.concat_tables(appended[1:]), mask))
    # an engine's worker reading the unit's splits (serialised) drops the same rows
    engine = table.stream(mode="from-snapshot", snapshot_id=2)
    assert per_bucket(delivered(engine, table)) == per_bucket(got)
    # a full read of an older snapshot drops them too (they were not delivered yet)
    full = table.stream(mode="from-snapshot-full", snapshot_id=3)
    expected_full = without(pa.concat_tables(appended[:3]), mask)
    expected_full = pa.concat_tables([expected_full, without(pa.concat_tables(appended[3:]), mask)])
    assert per_bucket(delivered(full)) == per_bucket(expected_full)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rows_appended_after_the_delete_planned_are_kept(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete applies to the rows of its base snapshot: an append that lands while it is
    being planned is not deleted, and a stream delivers those rows, while it drops the rows
    of the base the delete removed, even when reading a snapshot after the base in full."""
    table = make(tmp_path, mode)
    old = batch(0, 50)
    table.append(old)
    other = at.open_table(table.uri)
    racing = batch(100, 50)
    original = deletes_module._write_record
    landed: list[int] = []

    def append_first(*args: object, **kwargs: object) -> str:
        if not landed:  # the delete has planned: an append lands before it commits
            snapshot = other.append(racing)
            assert snapshot is not None
            landed.append(snapshot.id)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(deletes_module, "_write_record", append_first)
    result = table.delete([("tag", "=", "t0")])
    assert result.snapshot is not None and result.snapshot.id == landed[0] + 1
    mask = lambda t: pc.equal(t["tag"], "t0")  # noqa: E731
    expected_now = pa.concat_tables([without(old, mask), racing])
    assert sorted(table.scan().to_arrow()["seq"].to_pylist()) == sorted(
        expected_now["seq"].to_pylist()
    )
    full = table.stream(mode="from-snapshot-full", snapshot_id=landed[0])
    assert per_bucket(delivered(full)) == per_bucket(expected_now)
    delta = table.stream(mode="from-snapshot", snapshot_id=1)
    assert per_bucket(delivered(delta)) == per_bucket(expected_now)


def test_a_consumer_group_never_delivers_deleted_rows(tmp_path: Path) -> None:
    table = make(tmp_path, "dv")
    appended = [batch(0, 40), batch(40, 40)]
    for rows in appended:
        table.append(rows)
    table.delete([("seq", "<", 60), ("tag", "!=", "t4")])
    mask = lambda t: pc.and_(pc.less(t["seq"], 60), pc.not_equal(t["tag"], "t4"))  # noqa: E731
    reader = table.stream(group="g", mode="from-snapshot", snapshot_id=1)
    got = pa.Table.from_batches(list(reader.batches(timeout=0.2)), SCHEMA)
    reader.close()
    assert per_bucket(got) == per_bucket(without(pa.concat_tables(appended), mask))


def test_stream_splits_serialise_their_stream_flag(tmp_path: Path) -> None:
    table = make(tmp_path, "dv")
    table.append(batch(0, 10))
    unit = table.stream(mode="from-snapshot", snapshot_id=1).poll()
    assert unit is not None
    assert all(at.Split.from_bytes(s.to_bytes()).stream for s in unit.splits)
    assert not any(s.stream for s in table.scan().plan())


def test_a_unit_read_again_after_a_delete_leaves_the_rows_out(tmp_path: Path) -> None:
    table = make(tmp_path, "dv")
    table.append(batch(0, 40))
    reader = table.stream(mode="from-snapshot", snapshot_id=1)
    unit = reader.poll()
    assert unit is not None
    first = pa.Table.from_batches(list(reader.read(unit)), SCHEMA)
    assert first.num_rows == 40
    table.delete([("tag", "=", "t0")])
    again = pa.Table.from_batches(list(reader.read(unit)), SCHEMA)
    assert sorted(again["seq"].to_pylist()) == [s for s in range(40) if s % 5 != 0]


@pytest.mark.parametrize(
    "trailing", [["delete"], ["delete", "delete"], ["compact"], ["alter"], ["delete", "append"]]
)
def test_batches_leave_the_position_past_snapshots_without_rows(
    tmp_path: Path, trailing: list[str]
) -> None:
    """Found by a docs-only hunt: a consumer draining ``batches(timeout=...)`` and committing
    stayed on a trailing DELETE (or COMPACT, ALTER) snapshot, so ``purge()`` refused to run,
    naming a consumer with nothing left to read, and the snapshot stayed pinned. The position
    now moves past such snapshots with the unit before them (or at once, when none)."""
    table = make(tmp_path, "dv")
    table.append(batch(0, 20))
    reader = table.stream(consumer_id="c", mode="from-snapshot-full", snapshot_id=1)
    expected = set(range(20))
    for step, kind in enumerate(trailing):
        if kind == "delete":
            table.delete([("seq", "=", step)])
            expected.discard(step)
        elif kind == "compact":
            table.append(batch(20, 5))
            expected |= set(range(20, 25))
            table.compact(full=True)
        elif kind == "alter":
            table.set_options({"snapshot.num-retained.min": "3"})
        else:
            table.append(batch(100, 3))
            expected |= {100, 101, 102}
    got = [s for b in reader.batches(timeout=0.2) for s in b.column("seq").to_pylist()]
    assert sorted(got) == sorted(expected)
    latest = table.latest_snapshot()
    assert latest is not None and reader.position == at.StreamPosition(latest.id + 1, False)
    reader.commit()
    table.purge(older_than=0)  # not blocked: the consumer read everything
    assert table.consumers() == {"c": latest.id + 1}


def test_batches_stopped_early_keep_the_unit_not_taken(tmp_path: Path) -> None:
    """Past snapshots without rows only once the unit before them is taken: a loop left after
    the first unit (with a delete and another unit planned ahead) resumes at the delete."""
    table = make(tmp_path, "cow")
    table.append(batch(0, 10))  # 1
    table.delete([("seq", "=", 3)])  # 2
    table.append(batch(10, 10))  # 3
    reader = table.stream(consumer_id="c", mode="from-snapshot", snapshot_id=1)
    taken = []
    for b in reader.batches(timeout=0.2):
        taken += b.column("seq").to_pylist()
        if reader.position != at.StreamPosition(1, False):
            break  # the last batch of snapshot 1's unit
    assert sorted(taken) == [s for s in range(10) if s != 3]
    assert reader.position == at.StreamPosition(2, False)
    reader.commit()
    resumed = table.stream(consumer_id="c")
    rest = [s for b in resumed.batches(timeout=0.2) for s in b.column("seq").to_pylist()]
    assert sorted(rest) == list(range(10, 20))
    assert resumed.position == at.StreamPosition(4, False)


def test_a_delete_landing_while_batches_wait_is_passed_too(tmp_path: Path) -> None:
    table = make(tmp_path, "dv")
    table.append(batch(0, 10))
    reader = table.stream(consumer_id="c", mode="from-snapshot-full", snapshot_id=1)
    other = at.open_table(str(tmp_path / "t"))
    timer = threading.Timer(0.3, lambda: other.delete([("seq", "=", 4)]))
    got: list[int] = []
    for b in reader.batches(timeout=1.5):
        got += b.column("seq").to_pylist()
        if len(got) == 10:
            timer.start()  # the delete lands while the loop waits for more
    timer.join()
    assert sorted(got) == list(range(10))
    assert [s.kind for s in table.snapshots()] == [at.CommitKind.APPEND, at.CommitKind.DELETE]
    assert reader.position == at.StreamPosition(3, False)


def test_a_purge_blocked_by_a_consumer_with_nothing_to_read_says_so(tmp_path: Path) -> None:
    """A consumer that committed before a delete landed is still at the delete: the purge
    names it, says it has nothing to read, and runs once the consumer polled and committed."""
    table = make(tmp_path, "dv")
    table.append(batch(0, 10))
    reader = table.stream(consumer_id="c", mode="from-snapshot-full", snapshot_id=1)
    assert reader.poll() is not None
    reader.commit()  # at snapshot 2
    table.delete([("seq", "=", 1)])  # snapshot 2: no rows for a stream
    with pytest.raises(at.PurgeBlockedError) as blocked:
        table.purge(older_than=0)
    assert "consumer 'c' (at snapshot 2, from which on no snapshot carries rows" in str(
        blocked.value
    )
    table.append(batch(10, 1))  # snapshot 3: a row to read, so no such hint
    with pytest.raises(at.PurgeBlockedError) as blocked:
        table.purge(older_than=0)
    assert "consumer 'c' (at snapshot 2) has not consumed" in str(blocked.value)
    assert [s for b in reader.batches(timeout=0.2) for s in b.column("seq").to_pylist()] == [10]
    reader.commit()
    table.purge(older_than=0)


def test_a_consumer_about_to_read_a_deletes_snapshot_whole_is_not_called_done(
    tmp_path: Path,
) -> None:
    """A full position reads the whole snapshot, rows and all, even a DELETE's: no hint."""
    table = make(tmp_path, "dv")
    table.append(batch(0, 10))
    table.delete([("seq", "=", 1)])  # snapshot 2
    table.stream(consumer_id="c", mode="from-snapshot-full", snapshot_id=2)  # registers at 2
    assert table.consumer_lag().to_pylist()[0]["rows_behind"] == 9
    with pytest.raises(at.PurgeBlockedError) as blocked:
        table.purge(older_than=0)
    assert "consumer 'c' (at snapshot 2) has not consumed" in str(blocked.value)
