"""Watermark alignment across readers, and the cost of polling an unchanged table."""

from __future__ import annotations

from pathlib import Path

import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.storage import LocalStorage
from appendtable.table import Table
from tests.helpers.data import EVENTS, events
from tests.streaming.helpers import ALIGNED, one_second_apart


def test_a_reader_does_not_run_more_than_max_drift_ahead(uri: str) -> None:
    table = one_second_apart(uri)
    options = ALIGNED
    fast = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="fast", options=options)
    slow = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="slow", options=options)
    assert slow.poll() is not None  # slow reaches watermark 1000
    got = []
    while (unit := fast.poll()) is not None:
        got.append(unit.watermark)
    assert got == [1000, 2000, 3000]  # at most 2 s ahead of the slowest member
    assert slow.poll() is not None and slow.poll() is not None  # slow at 3000
    while (unit := fast.poll()) is not None:
        got.append(unit.watermark)
    assert got[-1] == 5000
    slow.close()  # leaving the group releases the others
    while (unit := fast.poll()) is not None:
        got.append(unit.watermark)
    assert got[-1] == 10_000


def test_alignment_needs_a_max_drift(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    with pytest.raises(at.InvalidOptionError, match="max-drift"):
        table.stream(options={"scan.watermark.alignment.group": "g"})


class _CountingStorage(LocalStorage):
    def __init__(self, root: str) -> None:
        super().__init__(root, fsync=False)
        self.calls = 0

    def read(self, path: str) -> bytes:
        self.calls += 1
        return super().read(path)

    def exists(self, path: str) -> bool:
        self.calls += 1
        return super().exists(path)

    def listdir(self, directory: str) -> list:  # type: ignore[type-arg]
        self.calls += 1000  # listing is what O(1) polling must never do
        return super().listdir(directory)


def test_polling_an_unchanged_table_is_constant_cost(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, options={"commit.fsync": False, "write-only": True})
    for i in range(300):
        table.append(events(i, 1))
    storage = _CountingStorage(uri)
    counted = Table(TableState(storage, at.open_table(uri)._state.schema))
    reader = counted.stream(mode="latest")
    storage.calls = 0
    for _ in range(50):
        assert reader.poll() is None
    assert storage.calls <= 50 * 2 + 6  # about one existence check per poll
    table.append(events(300, 1))
    unit = reader.poll()  # a new snapshot is seen at the next poll
    assert unit is not None and unit.snapshot_id == 301
