"""A unit whose read fails is never skipped: ``poll()`` moved past it when it handed it out,
so a failed ``read(unit)`` moves the reader back to it (found by a docs-only hunt: a reader
whose ``read`` raised SchemaMismatchError polled the next unit and committed past the failed
one, whose rows no consumer then ever delivered)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.data import EVENTS, events
from tests.streaming.helpers import ALIGNED, one_second_apart, seqs

NARROW = pa.schema([("k", pa.int64()), ("v", pa.int32())])


def _rows(keys: list[int], values: list[int], type_: pa.DataType) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, type_)})


Reader = TypeVar("Reader", at.StreamReader, at.GroupReader)


def _widened_with_a_value_too_wide(
    uri: str, open_reader: Callable[[at.Table], Reader]
) -> tuple[at.Table, Reader, at.Snapshot]:
    """A reader that read and committed snapshot 1; then ``v`` widened (2), a unit holding a
    value the reader's (narrow) type cannot hold (3) and one that fits (4). Returns the table,
    the reader and snapshot 3."""
    table = at.create_table(uri, NARROW, options={"bucket": 2, "bucket-key": "k"})
    table.append(_rows([1, 2], [1, 2], pa.int32()))
    reader = open_reader(table)
    unit = reader.poll()
    assert unit is not None
    assert sum(b.num_rows for b in reader.read(unit)) == 2
    reader.commit()
    with table.update_schema() as update:
        update.update_column("v", type=pa.int64())
    failing = table.append(_rows([3, 4], [2**40, 4], pa.int64()))
    assert failing is not None
    table.append(_rows([5], [5], pa.int64()))
    return table, reader, failing


def _consumer(table: at.Table) -> at.StreamReader:
    return table.stream(consumer_id="c")


def _member(table: at.Table) -> at.GroupReader:
    return table.stream(group="g", member="m", poll_interval=0.01)


def _keys_of(batches: list[pa.RecordBatch]) -> list[int]:
    return [row["k"] for batch in batches for row in batch.to_pylist()]


def test_a_failed_read_hands_the_unit_out_again_and_commit_stays_before_it(uri: str) -> None:
    table, reader, failing = _widened_with_a_value_too_wide(uri, _consumer)
    for _ in range(3):  # the same reader never moves past the unit it cannot read
        unit = reader.poll()
        assert unit is not None and unit.snapshot_id == failing.id
        with pytest.raises(at.SchemaMismatchError, match="'v'"):
            list(reader.read(unit))
        assert reader.position == at.StreamPosition(failing.id, False)
    reader.commit()
    assert table.consumers() == {"c": failing.id}
    resumed = at.open_table(uri).stream(consumer_id="c")  # the wide type now
    assert sorted(_keys_of(list(resumed.batches(timeout=0)))) == [3, 4, 5]


def test_a_failed_read_moves_back_past_units_polled_after_it(uri: str) -> None:
    _, reader, failing = _widened_with_a_value_too_wide(uri, _consumer)
    first, second = reader.poll(), reader.poll()
    assert first is not None and second is not None and second.snapshot_id == failing.id + 1
    assert _keys_of(list(reader.read(second))) == [5]
    with pytest.raises(at.SchemaMismatchError):
        list(reader.read(first))
    assert reader.position == at.StreamPosition(failing.id, False)
    again = reader.poll()
    assert again is not None and again.snapshot_id == failing.id


def test_stopping_early_is_not_a_failure(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"target-file-size": "1kb"})
    for i in range(3):
        table.append(events(i * 10, 10))
    reader = table.stream(mode="from-snapshot-full", snapshot_id=3, consumer_id="c")
    unit = reader.poll()
    assert unit is not None and unit.file_count == 3
    for _ in reader.read(unit):
        break  # the caller took what it wanted
    assert reader.position == unit.next_position
    assert reader.poll() is None


def test_a_unit_whose_file_was_unreadable_is_delivered_whole_once_it_is_back(
    tmp_path: Path,
) -> None:
    """A storage error mid-unit (a file moved away, then back): the rows read before the
    error are delivered again with the rest, and nothing after the unit is lost."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    reader = table.stream(mode="latest", consumer_id="c")
    table.append(events(0, 40))
    table.append(events(40, 10))
    unit = reader.poll()
    assert unit is not None and unit.file_count == 2
    moved = tmp_path / "aside.parquet"
    victim = Path(uri) / unit.splits[-1].files[-1].path
    victim.rename(moved)
    got: list[int] = []
    with pytest.raises(at.AppendTableError):
        for batch in reader.read(unit):
            got += seqs(batch.to_pylist())
    assert got  # the first file's rows were handed out before the error
    reader.commit()  # a pipeline committing whatever it reached: still before the unit
    moved.rename(victim)
    resumed = at.open_table(uri).stream(consumer_id="c")
    assert sorted(seqs([r for b in resumed.batches(timeout=0) for r in b.to_pylist()])) == list(
        range(50)
    )


def test_a_group_member_whose_read_failed_keeps_the_units_buckets_before_it(uri: str) -> None:
    _, member, failing = _widened_with_a_value_too_wide(uri, _member)
    for _ in range(2):
        unit = member.poll()
        assert unit is not None and unit.snapshot_id == failing.id
        with pytest.raises(at.SchemaMismatchError, match="'v'"):
            list(member.read(unit))
    member.commit()
    member.close()
    rejoined = at.open_table(uri).stream(group="g", member="m")
    assert sorted(_keys_of(list(rejoined.batches(timeout=0.1)))) == [3, 4, 5]
    rejoined.close()


def test_a_failed_read_takes_back_the_watermark_it_published_for_alignment(
    tmp_path: Path,
) -> None:
    """An alignment group holds the others within max-drift of its slowest member. A member
    whose read of a unit failed moves back before it, so the watermark its ``poll()``
    published for that unit is taken back too: the others stay within max-drift of the rows
    it has yet to deliver."""
    uri = str(tmp_path / "t")
    table = one_second_apart(uri)
    options = ALIGNED
    slow = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="slow", options=options)
    fast = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="fast", options=options)
    for _ in range(2):
        unit = slow.poll()
        assert unit is not None and sum(b.num_rows for b in slow.read(unit)) == 1
    failing = slow.poll()
    assert failing is not None and failing.watermark == 3000
    victim = Path(uri) / failing.splits[0].files[0].path
    moved = tmp_path / "aside.parquet"
    victim.rename(moved)
    with pytest.raises(at.AppendTableError):
        list(slow.read(failing))
    got = []
    while (unit := fast.poll()) is not None:
        got.append(unit.watermark)
    assert got == [1000, 2000, 3000, 4000]  # within 2 s of slow's 2000, not of 3000
    moved.rename(victim)
    again = slow.poll()
    assert again is not None and again.snapshot_id == failing.snapshot_id
    assert sum(b.num_rows for b in slow.read(again)) == 1
    while (unit := fast.poll()) is not None:
        got.append(unit.watermark)
    assert got[-1] == 5000
    slow.close()
    fast.close()
