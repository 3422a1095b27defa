"""Streams and rollbacks: a delete that a later rollback undid (the rollback restored a
snapshot older than the delete, and no rollback since restored one at or after it) no longer
hides rows from a stream that has not delivered them yet; a delete in effect at the latest
snapshot (after any chain of rollbacks) still does, but only for the rows it removed: rows of
an append that a rollback had undone before the delete planned were not in the table, and
streams deliver them (found by a docs-only hunt). The oracle models the table's history on its
own: the rows present and the deletes in effect after each step (a rollback restores both as
of its target), each delete removing the present rows its mask selects (pyarrow compute)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable.commit.changes import ROLLBACK_SEQUENCE_PROPERTY
from tests.security.hostile import Place, edit_snapshot
from tests.streaming.helpers import drain

SCHEMA = pa.schema([("user", pa.int64()), ("seq", pa.int64()), ("tag", pa.string())])

Mask = Callable[[pa.Table], pa.ChunkedArray]


def batch(start: int, count: int) -> pa.Table:
    seq = np.arange(start, start + count)
    return pa.table({"user": seq % 7, "seq": seq, "tag": [f"t{s % 5}" for s in seq]}, schema=SCHEMA)


@dataclass(frozen=True)
class Append:
    rows: pa.Table


@dataclass(frozen=True)
class Delete:
    filter: list[tuple[str, str, object]]
    mask: Mask


@dataclass(frozen=True)
class Rollback:
    #: index of the step whose snapshot is restored (START: the first append's)
    to_step: int


START = -1

Step = Append | Delete | Rollback

T1 = Delete([("tag", "=", "t1")], lambda t: pc.equal(t["tag"], "t1"))
U3 = Delete([("user", "=", 3)], lambda t: pc.equal(t["user"], 3))
LOW = Delete([("seq", "<", 15)], lambda t: pc.less(t["seq"], 15))
BELOW_50 = Delete([("seq", "<", 50)], lambda t: pc.less(t["seq"], 50))

SCENARIOS: dict[str, list[Step]] = {
    "rollback undoes the delete": [Append(batch(20, 20)), T1, Rollback(0)],
    "rollback then a new delete": [Append(batch(20, 20)), T1, Rollback(0), U3],
    "rollback of a rollback": [Append(batch(20, 20)), T1, Rollback(0), Rollback(1)],
    "rollback to between two deletes": [Append(batch(20, 20)), T1, U3, LOW, Rollback(2)],
    "appends after the rollback": [
        Append(batch(20, 20)),
        T1,
        Rollback(0),
        Append(batch(40, 20)),
        U3,
        Rollback(3),
        Append(batch(60, 20)),
    ],
    "undone, redone, undone": [
        Append(batch(20, 20)),
        T1,
        Rollback(0),
        Rollback(1),
        LOW,
        Rollback(2),
    ],
    "an undone append, then a delete": [Append(batch(20, 20)), Rollback(START), BELOW_50],
    "an undone append, new appends, deletes": [
        Append(batch(20, 20)),
        Append(batch(40, 20)),
        Rollback(0),
        Append(batch(60, 20)),
        T1,
        BELOW_50,
    ],
    "an undone append brought back after a delete": [
        Append(batch(20, 20)),
        Rollback(START),
        T1,
        Rollback(0),
        U3,
    ],
    "a delete, an undone append, a delete": [
        Append(batch(20, 20)),
        U3,
        Append(batch(40, 20)),
        Rollback(1),
        BELOW_50,
    ],
}


@dataclass(frozen=True)
class _State:
    present: frozenset[int]  # the seqs of the rows in the table
    removed: tuple[frozenset[int], ...]  # per delete in effect: the seqs it removed


def expected(first: pa.Table, steps: list[Step]) -> tuple[list[int], list[int]]:
    """(The rows of the table at the end; every row ever appended less those that a delete in
    effect at the end removed), as sorted seqs."""
    appended = [first]
    start = _State(frozenset(first["seq"].to_pylist()), ())
    states: list[_State] = []
    state = start
    for step in steps:
        if isinstance(step, Append):
            appended.append(step.rows)
            state = _State(state.present | set(step.rows["seq"].to_pylist()), state.removed)
        elif isinstance(step, Delete):
            everything = pa.concat_tables(appended)
            matching = set(everything.filter(step.mask(everything))["seq"].to_pylist())
            gone = frozenset(state.present & matching)
            state = _State(state.present - gone, (*state.removed, gone))
        else:
            state = start if step.to_step == START else states[step.to_step]
        states.append(state)
    every = {s for rows in appended for s in rows["seq"].to_pylist()}
    return sorted(state.present), sorted(every.difference(*state.removed))


def delivered(reader: at.StreamReader) -> list[int]:
    units = drain(reader)
    return sorted(s for unit in units for b in reader.read(unit) for s in b["seq"].to_pylist())


def _table(tmp_path: Path, dv: str) -> at.Table:
    """Write-only: no background compaction merges files across the steps."""
    options = {"bucket": "2", "bucket-key": "user", "deletion-vectors.enabled": dv}
    return at.create_table(str(tmp_path / "t"), SCHEMA, options={**options, "write-only": "true"})


def _as_written_before_the_property(tmp_path: Path, rollback: at.Snapshot) -> None:
    """The rollback snapshot as versions before it recorded ``rollback-sequence`` wrote it:
    readers take the first sequence of the undone rows from its target (while retained)."""
    assert ROLLBACK_SEQUENCE_PROPERTY in rollback.properties
    properties = dict(rollback.properties)
    del properties[ROLLBACK_SEQUENCE_PROPERTY]
    edit_snapshot(Place(tmp_path), rollback.id, properties=properties)


@pytest.mark.parametrize("legacy", [False, True], ids=["recorded", "without-rollback-sequence"])
@pytest.mark.parametrize("dv", ["true", "false"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_rollback_that_undoes_a_delete_gives_the_rows_back_to_streams(
    tmp_path: Path, dv: str, scenario: str, legacy: bool
) -> None:
    steps = SCENARIOS[scenario]
    table = _table(tmp_path, dv)
    first = batch(0, 20)
    table.append(first)
    latest = table.stream(mode="latest")  # (waits for the next snapshot)
    full = table.stream(mode="latest-full", consumer_id="full")
    restarted = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="restarted")
    unit = restarted.poll()
    assert unit is not None and sum(b.num_rows for b in restarted.read(unit)) == first.num_rows
    restarted.commit()  # (resumes after the first append)
    snapshots: list[int] = []
    for step in steps:
        if isinstance(step, Append):
            snapshot = table.append(step.rows)
        elif isinstance(step, Delete):
            assert table.delete(step.filter) is not None
            snapshot = table.latest_snapshot()
        else:
            restored = 1 if step.to_step == START else snapshots[step.to_step]
            snapshot = table.rollback_to(restored)
            if legacy:
                _as_written_before_the_property(tmp_path, snapshot)
        assert snapshot is not None
        snapshots.append(snapshot.id)
    in_table, to_streams = expected(first, steps)
    assert sorted(table.scan().to_arrow()["seq"].to_pylist()) == in_table
    appended_later = [s for s in to_streams if s >= 20]
    assert delivered(latest) == appended_later
    assert delivered(full) == to_streams
    restarted.close()
    again = table.stream(consumer_id="restarted")  # a consumer restarted after the rollbacks
    assert delivered(again) == appended_later


@pytest.mark.parametrize("dv", ["true", "false"])
def test_a_full_unit_of_an_undone_snapshot_keeps_the_undone_rows_a_delete_matched(
    tmp_path: Path, dv: str
) -> None:
    """A consumer saved at the whole of snapshot 2 (never read), then snapshot 2's append
    undone by a rollback and a delete matching rows on both sides: the full unit drops the
    rows the delete removed (of snapshot 1) and keeps the undone ones it never saw."""
    table = _table(tmp_path, dv)
    table.append(batch(0, 20))
    table.append(batch(20, 20))
    table.stream(mode="from-snapshot-full", snapshot_id=2, consumer_id="c").close()
    assert table.consumers() == {"c": 2}
    table.rollback_to(1)
    assert table.delete(T1.filter) is not None
    reader = table.stream(consumer_id="c")
    units = drain(reader)
    assert [(u.snapshot_id, u.full) for u in units] == [(2, True)]
    every = pa.concat_tables([batch(0, 20), batch(20, 20)])
    removed = pc.and_(T1.mask(every), pc.less(every["seq"], 20))
    want = sorted(every.filter(pc.invert(removed))["seq"].to_pylist())
    assert sorted(s for b in reader.read(units[0]) for s in b["seq"].to_pylist()) == want
