"""Watermark alignment across processes: members coordinate only through the table directory."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import appendtable as at
from tests.helpers.data import EVENTS, events
from tests.helpers.processes import run_in_processes

OPTIONS = {
    "scan.watermark.alignment.group": "g",
    "scan.watermark.alignment.max-drift": "2 s",
    "scan.watermark.alignment.update-interval": "20 ms",
}


def _reader(uri: str, name: str, pause: float, gate: str, queue: Any) -> None:
    """Read 12 units; the slow reader opens ``gate`` after its first unit, the fast one waits on it.

    The gate makes the start order deterministic however slowly the processes boot: the fast
    reader joins the group only once the slow one is a member with a published watermark.
    """
    table = at.open_table(uri)
    if name == "fast":
        while not Path(gate).exists():
            time.sleep(0.01)
    reader = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id=name, options=OPTIONS)
    log: list[tuple[float, int]] = []
    deadline = time.monotonic() + 60
    while len(log) < 12 and time.monotonic() < deadline:
        unit = reader.poll()
        if unit is None:
            time.sleep(0.01)
            continue
        assert unit.watermark is not None
        log.append((time.time(), unit.watermark))
        if name == "slow":
            Path(gate).touch()
        time.sleep(pause)  # processing the unit
    reader.close()
    queue.put((name, log))


@pytest.mark.slow
def test_a_fast_reader_waits_for_a_slow_one_in_another_process(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(12):
        table.append(events(i, 1), watermark=1000 * (i + 1))
    gate = str(tmp_path / "slow-started")
    logs = dict(
        run_in_processes(
            _reader, [(uri, "slow", 0.25, gate), (uri, "fast", 0.0, gate)], timeout=120
        )
    )
    slow, fast = logs["slow"], logs["fast"]
    assert [w for _, w in slow] == [w for _, w in fast] == [1000 * (i + 1) for i in range(12)]
    checked = 0
    for emitted_at, watermark in fast:
        reached = [w for t, w in slow if t <= emitted_at]
        if len(reached) < len(slow):  # while the slow reader was still going
            assert reached, "the fast reader ran before the slow one had published anything"
            assert watermark <= max(reached) + 2000, (watermark, max(reached))
            checked += 1
    assert checked, "the fast reader emitted nothing while the slow one was still going"
    # and it was really held back: it finished well after it could have alone
    assert fast[-1][0] > slow[-3][0]
