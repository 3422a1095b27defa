"""The chaos checker itself (tests/groups/chaos.py): it must accept every history the group
can produce, including a last commit whose process was killed before logging its outcome,
and refuse lost, doubled or unchained commits, and a member kept in the group after its lease
ran out."""

from __future__ import annotations

import pytest

from tests.groups.chaos import Attempt, Outage, check_exactly_once, check_removals

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


def _poll(kind: str, t0: float, t: float, g: int, **fields: object) -> dict[str, object]:
    return {"e": kind, "t0": t0, "t": t, "g": g, **fields}


def _removal_logs(kept_until: int) -> dict[str, list[dict[str, object]]]:
    """p1 (member m1) sees p0 (member m0, killed at 10.0, lease 1 s) in generations up to
    ``kept_until``, one poll a second from 10.5 on; generation 3 removes it."""
    both = {"m0": [0], "m1": [1]}
    events: list[dict[str, object]] = [_poll("assign", 9.0, 9.1, 2, a=[1], members=both)]
    for second in range(6):
        t0 = 10.5 + second
        g = 2 if second < kept_until else 3
        if g == 3 and events[-1]["g"] == 2:
            events.append(_poll("assign", t0, t0 + 0.1, 3, a=[0, 1], members={"m1": [0, 1]}))
        else:
            events.append(_poll("idle", t0, t0 + 0.1, g))
    return {"p0": [], "p1": events}


def test_a_member_kept_by_a_poll_after_its_lease_ran_out_is_refused() -> None:
    kill = [Outage("p0", 10.0, "kill", [0], 9.1)]
    members = {"p0": "m0", "p1": "m1"}
    timeline = [(0.0, "p0", "start"), (0.0, "p1", "start"), (10.0, "p0", "kill")]
    # the poll from 10.5 started before the lease ran out (11.0): it may keep m0
    assert check_removals(kill, _removal_logs(1), members, timeline, 1.0) == 5
    with pytest.raises(AssertionError, match=r"'m0'.* generation 2"):
        check_removals(kill, _removal_logs(2), members, timeline, 1.0)
    # woken at 11.4 (it renews its lease), or its name taken by a new process: it may stay
    woken = [*timeline, (11.4, "p0", "cont")]
    stop = [Outage("p0", 10.0, "stop", [0], 9.1)]
    assert check_removals(stop, _removal_logs(6), members, woken, 1.0) == 0
    taken = [*timeline, (11.4, "p2", "start")]
    assert check_removals(kill, _removal_logs(6), {**members, "p2": "m0"}, taken, 1.0) == 0


def test_a_process_of_the_name_running_through_the_outage_exempts_it() -> None:
    # p0 was killed before it joined; p2, of the same name, ran on until stopped at 12.0
    kill = [Outage("p0", 10.0, "kill", [], 9.1)]
    members = {"p0": "m0", "p1": "m1", "p2": "m0"}
    timeline = [
        (0.0, "p1", "start"),
        (5.0, "p2", "start"),
        (9.5, "p0", "start"),
        (10.0, "p0", "kill"),
        (12.0, "p2", "stop"),
        (14.0, "p2", "cont"),
    ]
    assert check_removals(kill, _removal_logs(6), members, timeline, 1.0) == 0
