"""The chaos checker itself (tests/groups/chaos.py): it must accept every history the group
can produce, including a last commit whose process was killed before logging its outcome,
and refuse lost, doubled or unchained commits."""

from __future__ import annotations

import pytest

from tests.groups.chaos import Attempt, check_exactly_once

START = (1, True)


def _ok(process: str, start: tuple[int, bool], end: tuple[int, bool], rows: list[int]) -> Attempt:
    return Attempt(process, 0, start, end, rows, outcome="ok")


def test_a_last_commit_killed_before_its_log_line_ends_the_chain() -> None:
    # p1 commits up to snapshot 3; p2 delivers rows 3..5, its commit lands, and it is killed
    # before it logs the outcome; nothing more is written to the bucket
    attempts = [
        _ok("p1", START, (3, False), [0, 1, 2]),
        Attempt("p2", 0, (3, False), (5, False), [3, 4, 5], outcome=None),
    ]
    check_exactly_once(attempts, {0: [0, 1, 2, 3, 4, 5]}, START, {0: (5, False)})
    # the same history whose unknown commit did not land: the group is at snapshot 3, and the
    # table's rows 3..5 were not committed by anyone
    with pytest.raises(AssertionError, match="committed 3 rows"):
        check_exactly_once(attempts, {0: [0, 1, 2, 3, 4, 5]}, START, {0: (3, False)})


def test_a_position_no_logged_commit_reaches_is_refused() -> None:
    attempts = [_ok("p1", START, (3, False), [0, 1, 2])]
    with pytest.raises(AssertionError, match="do not chain"):
        check_exactly_once(attempts, {0: [0, 1, 2, 3]}, START, {0: (4, False)})


def test_two_commits_from_one_position_are_refused() -> None:
    attempts = [_ok("p1", START, (3, False), [0, 1, 2]), _ok("p2", START, (3, False), [0, 1, 2])]
    with pytest.raises(AssertionError, match="two commits"):
        check_exactly_once(attempts, {0: [0, 1, 2]}, START, {0: (3, False)})


def test_rows_delivered_twice_or_out_of_order_are_refused() -> None:
    attempts = [_ok("p1", START, (3, False), [0, 2, 1])]
    with pytest.raises(AssertionError, match="committed 3 rows"):
        check_exactly_once(attempts, {0: [0, 1, 2]}, START, {0: (3, False)})
    attempts = [_ok("p1", START, (3, False), [0, 1]), _ok("p2", (3, False), (4, False), [1, 2])]
    with pytest.raises(AssertionError, match=r"committed 4 rows \(3 distinct\)"):
        check_exactly_once(attempts, {0: [0, 1, 2]}, START, {0: (4, False)})


def test_fenced_attempts_do_not_count() -> None:
    attempts = [
        Attempt("p1", 0, START, (3, False), [0, 1, 2], outcome="fenced"),
        _ok("p2", START, (3, False), [0, 1, 2]),
    ]
    check_exactly_once(attempts, {0: [0, 1, 2]}, START, {0: (3, False)})
