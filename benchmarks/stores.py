"""Commit latency per store: a one-row append's commit (write-only, so the commit protocol
alone) on local disk and on each object store the test suite races, each a real server on
127.0.0.1 started for the benchmark: SeaweedFS (S3), fake-gcs-server (GCS), Azurite (Azure).

The object stores are emulators on this machine, so the figures measure the protocol's round
trips (a commit is a handful of requests: read the latest snapshot, write a manifest and two
manifest lists, the create-only publish) against each server's request cost, not a cloud's
network latency; multiply the request count by a region's latency for that."""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import appendtable as at
from benchmarks.data import SCHEMA
from benchmarks.harness import Result
from benchmarks.rows import limit_row
from benchmarks.servers import serving
from benchmarks.workspace import Workspace, commit_samples
from tests.emulators import EmulatorUnavailable, start_azurite, start_fake_gcs
from tests.s3.seaweedfs import SeaweedFSUnavailable, start_seaweedfs

__all__ = ["bench_stores"]

#: Where one store's table goes: (uri, storage options), valid inside the block.
Location = AbstractContextManager[tuple[str, dict[str, Any]]]


@contextmanager
def _local(ws: Workspace) -> Iterator[tuple[str, dict[str, Any]]]:
    yield ws.fresh_path("store-local"), {}


@contextmanager
def _s3(ws: Workspace) -> Iterator[tuple[str, dict[str, Any]]]:
    with serving(ws.servers.s3, lambda: start_seaweedfs("bench")) as server:
        yield server.uri(f"commits-{uuid.uuid4().hex[:8]}"), server.storage_options


@contextmanager
def _gcs(ws: Workspace) -> Iterator[tuple[str, dict[str, Any]]]:
    with serving(ws.servers.gcs, start_fake_gcs) as server:
        yield server.fresh_uri(), server.storage_options


@contextmanager
def _azure(ws: Workspace) -> Iterator[tuple[str, dict[str, Any]]]:
    with serving(ws.servers.azure, start_azurite) as server:
        yield server.fresh_uri(), server.storage_options


STORES: dict[str, Callable[[Workspace], Location]] = {
    "local disk": _local,
    "S3 (SeaweedFS)": _s3,
    "GCS (fake-gcs-server)": _gcs,
    "Azure Blob (Azurite)": _azure,
}


def _commit_seconds(ws: Workspace, uri: str, options: dict[str, Any], count: int) -> list[float]:
    """Sorted commit seconds of ``count`` one-row appends, after the untimed warm-up ones."""
    table = at.create_table(uri, SCHEMA, options={"write-only": True}, storage_options=options)
    warmup = ws.config.warmup_commits
    list(commit_samples(table, 0, warmup))  # connections, caches
    return sorted(c for c, _ in commit_samples(table, warmup, count))


def bench_stores(ws: Workspace) -> list[Result]:
    rows: list[Result] = []
    count = max(ws.config.min_store_commits, ws.config.commit_samples)
    for name, location in STORES.items():
        try:
            with location(ws) as (uri, options):
                commits = _commit_seconds(ws, uri, options, count)
        except (EmulatorUnavailable, SeaweedFSUnavailable) as exc:  # raised by a server's start
            print(f"  {name}: unavailable ({str(exc).splitlines()[0]})", flush=True)
            continue
        p50 = statistics.median(commits) * 1000
        p99 = commits[min(len(commits) - 1, int(len(commits) * 0.99))] * 1000
        details = {"commits": count, "samples_ms": [round(c * 1000, 2) for c in commits]}
        rows.append(limit_row("stores", f"commit p50, {name}", p50, limit_ms=None, details=details))
        rows.append(limit_row("stores", f"commit p99, {name}", p99, limit_ms=None))
    return rows
