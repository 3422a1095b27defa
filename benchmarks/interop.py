"""What the Iceberg mirror costs a commit (option ``metadata.iceberg.storage``).

Two tables with the same history, write-only, fsync on (the default): one with the mirror
off, one with it on. At each history size, one-row commits are timed alternately on both, so
the rows compare the commit with and without the mirror under the same machine state. The
mirror lists the newest ``metadata.iceberg.max-snapshots`` (100) snapshots and reuses what it
wrote before, so its cost should not grow with the history."""

from __future__ import annotations

import statistics
import time

import appendtable as at
from benchmarks.data import SCHEMA
from benchmarks.harness import Result
from benchmarks.rows import limit_row
from benchmarks.workspace import Workspace, commit_samples, grow_history

__all__ = ["bench_iceberg"]

GROUP = "iceberg"


def _percentile(samples: list[float], percent: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))
    return ordered[index]


def bench_iceberg(ws: Workspace) -> list[Result]:
    rows: list[Result] = []
    for history in (ws.config.history_sizes[0], ws.config.history_sizes[-1]):
        tables = {}
        build_start = time.perf_counter()
        for mirror in (False, True):
            table = at.create_table(
                ws.fresh_path(f"mirror-{mirror}-{history}"),
                SCHEMA,
                options={"commit.fsync": "false", "write-only": "true"},
            )
            grow_history(table, history)
            options = {"commit.fsync": "true"}
            if mirror:
                options["metadata.iceberg.storage"] = "table-location"
            table.set_options(options)  # the mirror catches up here, once
            tables[mirror] = at.open_table(table.uri)  # re-opened: fsync on from here
        build_seconds = time.perf_counter() - build_start
        samples: dict[bool, list[float]] = {False: [], True: []}
        start = history + 1
        for index in range(ws.config.commit_samples):
            for mirror in (False, True):
                ((commit, _),) = list(commit_samples(tables[mirror], start + index * 2 + mirror, 1))
                samples[mirror].append(commit)
        snapshots = f"{history:,} snapshot{'s' if history != 1 else ''}"
        for label, percent in (("p50", 50.0), ("p99", 99.0)):
            off = _percentile(samples[False], percent) * 1000
            on = _percentile(samples[True], percent) * 1000
            rows.append(
                limit_row(
                    GROUP,
                    f"commit {label} with the Iceberg mirror (baseline: mirror off), at "
                    + snapshots,
                    on,
                    limit_ms=None,
                    baseline_ms=off,
                    details={
                        "history_build_seconds": round(build_seconds, 1),
                        "median_overhead_ms": round(
                            (statistics.median(samples[True]) - statistics.median(samples[False]))
                            * 1000,
                            2,
                        ),
                    },
                )
            )
    return rows
