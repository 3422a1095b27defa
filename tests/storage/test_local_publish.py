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


def test_a_directory_removed_by_another_handle_is_made_again(tmp_path: Path) -> None:
    # a Spark worker's cached handle wrote a micro-batch's staging area, the driver's handle
    # removed it, and the next query's batch of the same name was written by the worker again
    worker, driver = LocalStorage(str(tmp_path)), LocalStorage(str(tmp_path))
    worker.ensure_parent("_staging/stream-a-0/bucket-0/f1.parquet")
    Path(worker.local_path("_staging/stream-a-0/bucket-0/f1.parquet") or "").write_bytes(b"1")
    driver.delete_tree("_staging/stream-a-0")
    assert not (tmp_path / "_staging" / "stream-a-0").exists()
    worker.ensure_parent("_staging/stream-a-0/bucket-0/f2.parquet")
    Path(worker.local_path("_staging/stream-a-0/bucket-0/f2.parquet") or "").write_bytes(b"2")
    assert worker.read("_staging/stream-a-0/bucket-0/f2.parquet") == b"2"
