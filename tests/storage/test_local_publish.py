"""Local publish: many processes race to create the same names; exactly one wins each."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from appendtable.storage import LocalStorage
from tests.helpers.processes import run_in_processes


def _racer(root: str, name: int, rounds: int, barrier: Any, queue: Any) -> None:
    storage = LocalStorage(root)
    won = []
    for index in range(rounds):
        barrier.wait(timeout=60)
        if storage.put_if_absent(f"snapshot/snapshot-{index}", f"{name}:{index}".encode()):
            won.append(index)
    queue.put((name, won))


@pytest.mark.slow
def test_processes_racing_on_names_have_exactly_one_winner(tmp_path: Path) -> None:
    barrier = multiprocessing.get_context("spawn").Barrier(3)
    rounds = 150
    results = dict(
        run_in_processes(_racer, [(str(tmp_path), n, rounds, barrier) for n in range(3)])
    )
    wins = sorted(index for won in results.values() for index in won)
    assert wins == list(range(rounds))  # every round exactly one winner
    storage = LocalStorage(str(tmp_path))
    for name, won in results.items():
        for index in won:
            assert storage.read(f"snapshot/snapshot-{index}") == f"{name}:{index}".encode()
    leftovers = [p.name for p in (tmp_path / "snapshot").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []  # temp files are cleaned up
