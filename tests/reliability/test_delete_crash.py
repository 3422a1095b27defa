"""Processes SIGKILLed at random times inside deletes (deletion vectors and copy-on-write),
compactions of files with vectors, and purges: each delete is visible whole or not at all, an
acknowledged delete is never undone, a row once seen deleted never comes back, the table stays
intact (every referenced file present and readable), and a final purge leaves no byte of any
deleted row under the table's location.

Each child (a fresh process from the forkserver) deletes disjoint ranges of ids, logging
``begin``/``ack`` durably around each delete, and now and then compacts or purges; the parent
kills it after a random delay and checks the table against the log."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from tests.helpers.crash import DurableLog, fork_context, read_log, run_child
from tests.helpers.deleted_bytes import (
    find_values,
    local_files,
    marked_rows,
    marked_table,
)
from tests.helpers.integrity import assert_table_intact
from tests.helpers.long_runs import scaled

ROWS = 12_000
RANGE = 5  # ids per delete
PER_RUN = 60  # deletes a child attempts (more than it has time for, mostly)

pytestmark = pytest.mark.slow


def _range_of(run: int, j: int) -> tuple[int, int]:
    start = (run * PER_RUN + j) * RANGE
    return start, start + RANGE


def delete_child(uri: str, log_path: str, run: int, seed: int) -> None:
    """Delete this run's ranges, compacting and purging now and then."""
    log = DurableLog(log_path)
    rng = random.Random(seed)
    table = at.open_table(uri)
    for j in range(PER_RUN):
        low, high = _range_of(run, j)
        log.write(f"begin {run} {j}")
        table.delete([("id", ">=", low), ("id", "<", high)])
        log.write(f"ack {run} {j}")
        roll = rng.random()
        if roll < 0.25:
            table.compact(full=True)
        elif roll < 0.4:
            table.purge(older_than=dt.timedelta(0))


def _visible(table: at.Table) -> pa.Array:
    return table.scan(columns=["id"]).to_arrow()["id"].combine_chunks()


@pytest.mark.parametrize("mode", ["dv", "cow"])
def test_kills_inside_deletes_compactions_and_purges(tmp_path: Path, mode: str) -> None:
    uri = str(tmp_path / "t")
    table = marked_table(uri, mode)
    for start in range(0, ROWS, ROWS // 8):
        table.append(marked_rows(range(start, start + ROWS // 8)))
    context = fork_context(["tests.reliability.crash_children"])
    rng = random.Random(f"delete-crash-{mode}")
    log_path = str(tmp_path / "log")
    runs = scaled(60, 24)
    assert runs * PER_RUN * RANGE <= ROWS
    seen_deleted: set[tuple[int, int]] = set()
    killed = 0
    for run in range(runs):
        code = run_child(
            context,
            delete_child,
            (uri, log_path, run, rng.randrange(2**32)),
            kill_after=rng.uniform(0.05, 1.5),
            timeout=120,
        )
        assert code in (0, -9), f"child {run} failed with exit code {code}"
        killed += code == -9
        lines = read_log(log_path)
        begun = {(int(r), int(j)) for e, r, j in lines if e == "begin"}
        acked = {(int(r), int(j)) for e, r, j in lines if e == "ack"}
        visible = _visible(at.open_table(uri))
        for r in range(run + 1):
            for j in range(PER_RUN):
                low, high = _range_of(r, j)
                inside = pc.sum(
                    pc.and_(pc.greater_equal(visible, low), pc.less(visible, high))
                ).as_py()
                inside = inside or 0
                key = (r, j)
                if key not in begun:
                    assert inside == RANGE, f"range {key} never deleted, yet {inside} visible"
                elif key in acked or key in seen_deleted:
                    assert inside == 0, f"delete {key} acknowledged or seen, {inside} rows back"
                else:
                    assert inside in (0, RANGE), f"delete {key} half visible: {inside} rows"
                if inside == 0 and key in begun:
                    seen_deleted.add(key)
        assert visible.null_count == 0 and len(pc.unique(visible)) == len(visible)
        assert_table_intact(uri)
    assert killed >= runs // 2, f"only {killed} of {runs} children were killed mid-run"
    # a purge completes what the killed ones left, and no deleted byte survives it
    table = at.open_table(uri)
    table.purge(older_than=dt.timedelta(0))
    assert_table_intact(uri)
    visible = _visible(table)
    gone = sorted(set(range(ROWS)) - set(visible.to_pylist()))
    assert set(gone) == {i for (r, j) in seen_deleted for i in range(*_range_of(r, j))}
    assert find_values(local_files(tmp_path / "t"), gone) == []
