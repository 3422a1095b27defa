"""``in_order``: results in the order of the items whatever order the threads finish in, and
when work fails every other item still finishes before the first failure (by item order) is
raised, so that a caller's undo knows every file written."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from appendtable.datafiles.file_threads import file_threads, in_order
from appendtable.storage import open_storage


def test_results_keep_the_order_of_the_items_whatever_order_they_finish_in() -> None:
    rng = random.Random(3)
    delays = [rng.random() / 200 for _ in range(40)]

    def work(index: int) -> int:
        time.sleep(delays[index])
        return index * index

    assert in_order(work, list(range(40)), 4) == [i * i for i in range(40)]


def test_every_item_finishes_before_the_first_failure_by_item_order_is_raised() -> None:
    done: list[int] = []
    lock = threading.Lock()

    def work(index: int) -> int:
        time.sleep(0.02 if index == 2 else 0.001)  # the later failure finishes first
        if index in (2, 7):
            raise ValueError(f"item {index}")
        with lock:
            done.append(index)
        return index

    with pytest.raises(ValueError, match="item 2"):
        in_order(work, list(range(12)), 3)
    assert sorted(done) == [i for i in range(12) if i not in (2, 7)]


def test_threads_fit_the_store_and_never_exceed_the_files(tmp_path: Path) -> None:
    local = open_storage(str(tmp_path / "t"))
    memory = open_storage("memory://file-threads-test/t")
    assert 2 <= file_threads(local, 100) <= 64
    assert file_threads(memory, 100) == 8
    assert file_threads(local, 1) == file_threads(memory, 1) == 1
    assert file_threads(memory, 0) == 1
