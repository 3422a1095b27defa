"""Commit latency per store: a one-row append's commit (write-only, so the commit protocol
alone) on local disk and on each object store the test suite races, each a real server on
127.0.0.1 started for the benchmark: SeaweedFS (S3), fake-gcs-server (GCS), Azurite (Azure).

The object stores are emulators on this machine, so the figures measure the protocol's round
trips (a commit is a handful of requests: read the latest snapshot, write a manifest and two
manifest lists, the create-only publish) against each server's request cost, not a cloud's
network latency; multiply the request count by a region's latency for that."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from benchmarks.data import SCHEMA
from benchmarks.harness import Result
from benchmarks.rows import limit_row
from benchmarks.workspace import Workspace, commit_samples
from tests.emulators import EmulatorUnavailable, start_azurite, start_fake_gcs
from tests.s3.seaweedfs import SeaweedFSUnavailable, start_seaweedfs

__all__ = ["bench_stores"]


def _local(ws: Workspace) -> tuple[str, dict[str, Any], Callable[[], None]]:
    return ws.fresh_path("store-local"), {}, lambda: None


def _s3(ws: Workspace) -> tuple[str, dict[str, Any], Callable[[], None]]:
    server = start_seaweedfs("bench")
    return server.uri("commits"), server.storage_options, server.stop


def _gcs(ws: Workspace) -> tuple[str, dict[str, Any], Callable[[], None]]:
    server = start_fake_gcs()
    return server.fresh_uri(), server.storage_options, server.stop


def _azure(ws: Workspace) -> tuple[str, dict[str, Any], Callable[[], None]]:
    server = start_azurite()
    return server.fresh_uri(), server.storage_options, server.stop


STORES = {
    "local disk": _local,
    "S3 (SeaweedFS)": _s3,
    "GCS (fake-gcs-server)": _gcs,
    "Azure Blob (Azurite)": _azure,
}


def bench_stores(ws: Workspace) -> list[Result]:
    rows: list[Result] = []
    count = max(20, ws.config.commit_samples)
    for name, start in STORES.items():
        try:
            uri, options, stop = start(ws)
        except (EmulatorUnavailable, SeaweedFSUnavailable) as exc:
            print(f"  {name}: unavailable ({str(exc).splitlines()[0]})", flush=True)
            continue
        try:
            table = at.create_table(
                uri, SCHEMA, options={"write-only": True}, storage_options=options
            )
            list(commit_samples(table, 0, 5))  # warm-up: connections, caches
            commits = sorted(c for c, _ in commit_samples(table, 5, count))
        finally:
            flush_hints()  # LATEST hints are written in the background: before the server goes
            stop()
        p50 = statistics.median(commits) * 1000
        p99 = commits[min(len(commits) - 1, int(len(commits) * 0.99))] * 1000
        details = {"commits": count, "samples_ms": [round(c * 1000, 2) for c in commits]}
        rows.append(limit_row("stores", f"commit p50, {name}", p50, limit_ms=None, details=details))
        rows.append(limit_row("stores", f"commit p99, {name}", p99, limit_ms=None))
    return rows
