"""Every benchmark case runs, at the smallest sizes (``benchmarks.workspace.SMOKE``), so that
``make bench-quick`` and ``make bench`` cannot break unnoticed. The figures mean nothing here
and are not checked; only that each case runs to its result rows.

The cases borrow the test session's servers (SeaweedFS, fake-gcs-server, Azurite, the local
Spark session) instead of starting their own: the same code paths, one start-up per session."""

from __future__ import annotations

import gc
import shutil
from collections.abc import Iterator

import pytest

from benchmarks.cases import BENCHMARKS
from benchmarks.servers import Servers
from benchmarks.workspace import SMOKE, Workspace

#: Cases that need more than the fast tier has: Spark, the object-store emulators, and those
#: with fixed sizes or subprocesses that take over ten seconds even at the smallest sizes.
_MARKS = {
    "spark": [pytest.mark.spark],
    "stores": [pytest.mark.s3, pytest.mark.gcs, pytest.mark.azure],
    "peers": [pytest.mark.slow],
    "integrity": [pytest.mark.slow],
    "memory": [pytest.mark.slow],
    "million": [pytest.mark.slow],  # 12 probe subprocesses and two delta-rs tables
}

#: The session fixtures each case borrows, by ``Servers`` field.
_SERVERS = {
    "stores": {"s3": "seaweedfs", "gcs": "fake_gcs", "azure": "azurite"},
    "deletes": {"s3": "seaweedfs"},
    "system-tables": {"s3": "seaweedfs"},
    "spark": {"spark": "spark"},
}


def _servers(request: pytest.FixtureRequest, name: str) -> Servers:
    lent = {
        field: request.getfixturevalue(fixture)
        for field, fixture in _SERVERS.get(name, {}).items()
        # without node the azurite fixture skips; the case then reports Azure unavailable
        if fixture != "azurite" or shutil.which("node") is not None
    }
    return Servers(**lent)


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The session's objects frozen out of the garbage collector's reach during the case: the
    benchmarks call ``gc.collect()`` before every timed sample, and a full collection of the
    test session's heap (about 0.1 s each) was most of this module's time at these sizes."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=_MARKS.get(name, [])) for name in BENCHMARKS]
)
def test_each_benchmark_case_runs_at_its_smallest_size(
    name: str, tmp_path: object, request: pytest.FixtureRequest
) -> None:
    servers = _servers(request, name)
    request.getfixturevalue("frozen_heap")
    with Workspace(SMOKE, str(tmp_path), servers) as workspace:
        rows = BENCHMARKS[name](workspace)
    assert rows, name
    assert all(row.group for row in rows)
    # a peer that installed but whose workload failed is a broken benchmark, not "unavailable"
    failed = [
        f"{system}: {install['status']}"
        for row in rows
        for system, install in row.details.get("installs", {}).items()
        if "workload failed" in install.get("status", "")
    ]
    assert failed == [], failed
