"""A handle's own commits and its background maintenance take turns (``commit.turns``): they
never race each other for a snapshot id (a lost race costs the loser a back-off of 10 ms or
more and a second round of metadata writes); a commit waits for the turn only until its
``commit.timeout``; a child forked while a turn was held commits."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import appendtable as at
from appendtable.after_commit import worker
from appendtable.commit.committer import Committer
from appendtable.errors import CommitConflictError
from tests.helpers.data import EVENTS, events

pytestmark = pytest.mark.usefixtures("tables_stay_intact")


@pytest.fixture
def lost_races(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The attempt numbers of every race a commit lost (recorded as it backs off)."""
    lost: list[int] = []
    backoff = Committer._backoff

    def recording(self: Committer, attempt: int) -> float:
        lost.append(attempt)
        return backoff(self, attempt)

    monkeypatch.setattr(Committer, "_backoff", recording)
    return lost


@contextmanager
def _turn_held_elsewhere(table: at.Table) -> Iterator[threading.Event]:
    """Another thread of the process holds ``table``'s turn until the yielded event is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with table._state.turns.turn(None):
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    try:
        yield release
    finally:
        release.set()
        holder.join(10)


def test_appends_and_their_background_compaction_never_race(
    tmp_path: Path, lost_races: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "_ROUND_INTERVAL_S", 0.0)  # a round after every few commits
    table = at.create_table(str(tmp_path / "t"), EVENTS)
    for i in range(120):
        table.append(events(i, 1))
    assert table.wait_for_maintenance(60)
    kinds = [s.kind for s in table.snapshots()]
    assert kinds.count(at.CommitKind.COMPACT) >= 5  # the worker committed all along
    assert lost_races == []
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(120))


def test_a_commit_waits_for_the_turn_another_thread_holds(
    tmp_path: Path, lost_races: list[int]
) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    done = threading.Event()
    appender = threading.Thread(target=lambda: (table.append(events(0, 3)), done.set()))
    with _turn_held_elsewhere(table):
        appender.start()
        assert not done.wait(0.5)  # no attempt while the turn is held
        assert table.latest_snapshot() is None
    appender.join(30)
    assert done.is_set()
    assert lost_races == []
    assert table.scan().count() == 3


def test_a_commit_waits_for_the_turn_no_longer_than_its_timeout(tmp_path: Path) -> None:
    options = {"write-only": True, "commit.timeout": "300 ms"}
    table = at.create_table(str(tmp_path / "t"), EVENTS, options=options)
    with _turn_held_elsewhere(table):
        started = time.monotonic()
        with pytest.raises(CommitConflictError, match="gave up committing") as caught:
            table.append(events(0, 3))
        assert time.monotonic() - started < 30
        # (it said other commits kept taking the snapshot id: none did; found by a user)
        assert "waited for this handle's own commit or maintenance" in str(caught.value)
        assert "lost the next snapshot id" not in str(caught.value)
    assert table.latest_snapshot() is None
    assert table.scan().count() == 0
    table.append(events(0, 3))  # the turn is free again
    assert table.scan().count() == 3


def _append_in_child(table: at.Table) -> None:
    table.append(events(100, 2))


def test_a_child_forked_while_a_turn_was_held_commits(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    table.append(events(0, 1))
    with _turn_held_elsewhere(table):
        child = multiprocessing.get_context("fork").Process(target=_append_in_child, args=(table,))
        child.start()
        child.join(60)
        if child.is_alive():
            child.kill()
            child.join()
    assert child.exitcode == 0
    assert table.scan().count() == 3
