"""Streams and deletes: a delete emits nothing; a stream (or consumer, or consumer group, or an
engine reading a unit's splits) that has not delivered the deleted rows yet never does, and
keeps the write order of the rest per bucket, even when the files it reads were compacted or
rewritten since (see appendtable/stream_deletes.py, docs/queue.md). The oracle is the list of
rows appended, per bucket in write order, less those the deletes matched (pyarrow compute)."""

from __future__ import annotations

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
