"""How the suite spreads over pytest-xdist workers (``make test``: ``-n 2 --dist loadgroup``).

Each worker is a process of its own with its own session fixtures: its own local Spark session,
SeaweedFS, fake-gcs-server and Azurite (free ports, fresh temporary directories), started only
when it runs a test that needs them. Tests run one by one on whichever worker is free, except
those :func:`xdist_group` puts in a group, which run on one worker, one after another:

* every test of a module with a module- or class-scoped fixture (a Spark table built once per
  module, a standalone Spark cluster): building it again on each worker costs more than the
  parallelism gains;
* every test of a module that uses the shared Spark session: its catalog tables and temporary
  views live in that session, and the module's tests stay on one of the few workers that pay
  for a Spark driver;
* the tests whose assertions depend on timing (leases, stall detection, kills at a moment):
  they take turns, so that two of them never starve each other's processes.

``--dist loadgroup`` starts the groups with the most tests first, then the other tests in the
order of :func:`longest_first`: the slow tier (multi-process, crash injection, Spark drivers of
their own) before the rest, so that no minute-long test starts last and runs alone.
"""

from __future__ import annotations

import pytest

__all__ = ["TIMED", "longest_first", "mark_group", "xdist_group"]

#: Modules whose tests measure or depend on time (leases expiring, members stalling, processes
#: killed at a moment): one group, so that they never run at the same time as each other.
TIMED = frozenset(
    {
        "tests/groups/test_kill_rejoin.py",
        "tests/groups/test_group_reader.py",
        "tests/reliability/test_torture.py",
    }
)

_WIDE_SCOPES = frozenset({"module", "class", "package"})
#: Markers of tests that take seconds to minutes each, in the order they should start.
_LONG_MARKERS = ("slow", "spark", "s3", "gcs", "azure")


def xdist_group(item: pytest.Item) -> str | None:
    """The group ``item`` runs in (on one worker, in order), or None to run anywhere."""
    if any(True for _ in item.iter_markers("xdist_group")):
        return None  # the test chose its group
    module = item.nodeid.split("::", 1)[0]
    if module in TIMED:
        return "timed"
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    if any(d.scope in _WIDE_SCOPES for defs in definitions for d in defs):
        return module
    if "spark" in getattr(item, "fixturenames", ()):
        return module
    return None


def longest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place (a stable sort, the same on every worker): slow tests first,
    then Spark and object-store tests, then the rest, each in collection order."""

    def rank(item: pytest.Item) -> int:
        for index, marker in enumerate(_LONG_MARKERS):
            if item.get_closest_marker(marker) is not None:
                return index
        return len(_LONG_MARKERS)

    items.sort(key=rank)


def mark_group(item: pytest.Item, group: str) -> None:
    """Put ``item`` in ``group``: the ``xdist_group`` mark, and the ``@group`` suffix of its node
    id that ``--dist loadgroup`` schedules by. pytest-xdist 3.8 writes the suffix to the legacy
    ``_nodeid`` field, which pytest 9.2's structured node ids no longer read, so the groups were
    silently ignored (pytest-dev/pytest-xdist#1386); the suffix is set here as xdist's pending
    fix does, and xdist's own write stays harmless."""
    item.add_marker(pytest.mark.xdist_group(group))
    structured = getattr(item, "_id", None)
    if structured is not None and not item.nodeid.endswith(f"@{group}"):
        item._id = type(structured).parse(f"{item.nodeid}@{group}")
