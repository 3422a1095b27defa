"""Streams and rollbacks that undo deletes: a delete that a later rollback undid (the rollback
restored a snapshot older than the delete, and no rollback since restored one at or after it)
no longer hides rows from a stream that has not delivered them yet; a delete in effect at the
latest snapshot (after any chain of rollbacks) still does. The oracle models the table's
history on its own: the deletes in effect after each step (a rollback restores the list of
its target), each applying to the rows appended before it (pyarrow compute)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
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
    #: index of the step whose snapshot is restored
    to_step: int


Step = Append | Delete | Rollback

T1 = Delete([("tag", "=", "t1")], lambda t: pc.equal(t["tag"], "t1"))
U3 = Delete([("user", "=", 3)], lambda t: pc.equal(t["user"], 3))
LOW = Delete([("seq", "<", 15)], lambda t: pc.less(t["seq"], 15))

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
}


def expected(first: pa.Table, steps: list[Step]) -> pa.Table:
    """Every appended row less those a delete in effect at the end removed (a delete
    removes rows appended before it)."""
    appended = [first]
    # per step: the deletes in effect, each as (mask, number of batches appended before it)
    effect: list[list[tuple[Mask, int]]] = []
    current: list[tuple[Mask, int]] = []
    for step in steps:
        if isinstance(step, Append):
            appended.append(step.rows)
        elif isinstance(step, Delete):
            current = [*current, (step.mask, len(appended))]
        else:
            current = effect[step.to_step]
        effect.append(current)
    kept = []
    for index, rows in enumerate(appended):
        for mask, before in current:
            if index < before:
                rows = rows.filter(pc.invert(mask(rows).fill_null(False)))
        kept.append(rows)
    return pa.concat_tables(kept)


def delivered(reader: at.StreamReader) -> list[int]:
    units = drain(reader)
    return sorted(s for unit in units for b in reader.read(unit) for s in b["seq"].to_pylist())


@pytest.mark.parametrize("dv", ["true", "false"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_rollback_that_undoes_a_delete_gives_the_rows_back_to_streams(
    tmp_path: Path, dv: str, scenario: str
) -> None:
    steps = SCENARIOS[scenario]
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={
            "bucket": "2",
            "bucket-key": "user",
            "deletion-vectors.enabled": dv,
            "write-only": "true",
        },
    )
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
            snapshot = table.rollback_to(snapshots[step.to_step])
        assert snapshot is not None
        snapshots.append(snapshot.id)
    want = expected(first, steps)
    assert sorted(table.scan().to_arrow()["seq"].to_pylist()) == sorted(want["seq"].to_pylist())
    appended_later = sorted(want.filter(pc.greater_equal(want["seq"], 20))["seq"].to_pylist())
    assert delivered(latest) == appended_later
    assert delivered(full) == sorted(want["seq"].to_pylist())
    restarted.close()
    again = table.stream(consumer_id="restarted")  # a consumer restarted after the rollbacks
    assert delivered(again) == appended_later
