"""Compaction losing races to other writers is ordinary: it re-plans within the commit time
budget (``commit.timeout``) as commits do, and background maintenance that still gives way logs
one line, keeping tracebacks for real faults. Checked with real rivals: another handle (or
process) compacting the planned files first."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest

import appendtable as at
from appendtable.after_commit.guard import run_maintenance
from appendtable.errors import CommitConflictError
from tests.helpers.data import EVENTS, events
from tests.helpers.processes import run_in_processes


def _rival_steals(rival: at.Table, start: int) -> None:
    """Another writer compacts everything first, then appends small files (so that the next
    plan has work)."""
    rival.compact(full=True)
    for i in range(3):
        rival.append(events(start + i * 10, 10))


def test_compaction_re_plans_past_three_conflicts_within_the_budget(tmp_path: Path) -> None:
    """Compaction gave up after three re-plans."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(4):
        table.append(events(i * 10, 10))
    rival = at.open_table(uri)
    compactor = table.compactor()
    planned = 0

    def planner() -> Any:
        nonlocal planned
        plan = compactor.plan(full=True)
        planned += 1
        if planned <= 5:  # the files just planned are compacted by the rival first
            _rival_steals(rival, 1000 * planned)
        return plan

    snapshot = compactor.run(planner)
    assert planned == 6
    assert snapshot is not None and snapshot.kind == at.CommitKind.COMPACT
    assert table.scan().count() == 40 + 5 * 30


def test_compaction_gives_up_when_the_budget_is_spent(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, options={"write-only": True, "commit.timeout": "300 ms"})
    for i in range(4):
        table.append(events(i * 10, 10))
    rival = at.open_table(uri)
    compactor = table.compactor()
    planned = 0

    def planner() -> Any:
        nonlocal planned
        plan = compactor.plan(full=True)
        planned += 1
        _rival_steals(rival, 1000 * planned)
        return plan

    with pytest.raises(CommitConflictError):
        compactor.run(planner)
    assert planned >= 2
    assert table.scan().count() == 40 + planned * 30


def test_maintenance_that_gives_way_logs_one_line_and_faults_a_traceback(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS)
    snapshot = table.append(events(0, 1))
    assert snapshot is not None

    def contended() -> None:
        raise CommitConflictError("3 file(s) this commit removes are no longer live")

    def broken() -> None:
        raise RuntimeError("disk on fire")

    with caplog.at_level(logging.INFO, logger="appendtable"):
        run_maintenance(contended, snapshot)
        run_maintenance(broken, snapshot)
    gave_way, fault = (r for r in caplog.records if r.name == "appendtable")
    assert gave_way.exc_info is None and "\n" not in gave_way.getMessage()
    assert (
        "concurrent" in gave_way.getMessage() and f"snapshot {snapshot.id}" in gave_way.getMessage()
    )
    assert fault.exc_info is not None and "disk on fire" in fault.getMessage()


#: Batches each appender writes at least, and at most while no process has seen a race.
_BATCHES, _MAX_BATCHES = 30, 400


def _appender(uri: str, number: int, raced: str, results: Any) -> None:
    """Appends small batches of 5 rows with background maintenance, at least ``_BATCHES`` and
    then until some process's compaction has re-planned (the file ``raced`` exists; bounded);
    returns its process's log and how many batches it appended."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("appendtable")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    marker = Path(raced)
    batches = 0
    with at.open_table(uri) as table:
        while batches < _BATCHES or (not marker.exists() and batches < _MAX_BATCHES):
            table.append(events(number * 10_000 + batches * 5, 5))
            batches += 1
            if "re-planning" in buffer.getvalue():
                marker.touch()
        assert table.wait_for_maintenance(timeout=120)
    results.put((buffer.getvalue(), batches))


@pytest.mark.slow
def test_processes_appending_to_one_table_log_no_tracebacks(tmp_path: Path) -> None:
    """4 processes appending to one table: compaction kept losing races and logged a 25-line
    traceback. The processes keep appending (bounded) until one has lost a race."""
    uri = str(tmp_path / "t")
    raced = str(tmp_path / "raced")
    at.create_table(uri, EVENTS, options={"compaction.min.file-num": 3})
    results = run_in_processes(_appender, [(uri, n, raced) for n in range(4)], timeout=600)
    text = "\n".join(log for log, _ in results)
    assert "Traceback" not in text, text[text.find("Traceback") - 300 :][:3000]
    assert "re-planning" in text  # the races happened
    for line in filter(None, text.splitlines()):
        assert line.startswith(("INFO ", "WARNING ")), line
    assert at.open_table(uri).scan().count() == 5 * sum(batches for _, batches in results)
