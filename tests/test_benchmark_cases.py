"""Every benchmark case runs, at the smallest sizes (``benchmarks.workspace.SMOKE``), so that
``make bench-quick`` and ``make bench`` cannot break unnoticed. The figures mean nothing here
and are not checked; only that each case runs to its result rows."""

from __future__ import annotations

import pytest

from benchmarks.cases import BENCHMARKS
from benchmarks.workspace import SMOKE, Workspace

#: Cases that need more than the fast tier has: Spark, the object-store emulators, and those
#: with fixed sizes or subprocesses that take over ten seconds even at the smallest sizes.
_MARKS = {
    "spark": [pytest.mark.spark],
    "stores": [pytest.mark.s3, pytest.mark.gcs, pytest.mark.azure],
    "peers": [pytest.mark.slow],
    "integrity": [pytest.mark.slow],
    "memory": [pytest.mark.slow],
}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=_MARKS.get(name, [])) for name in BENCHMARKS]
)
def test_each_benchmark_case_runs_at_its_smallest_size(name: str, tmp_path: object) -> None:
    with Workspace(SMOKE, str(tmp_path)) as workspace:
        rows = BENCHMARKS[name](workspace)
    assert rows, name
    assert all(row.group for row in rows)
