"""The latency of ``Table.append()`` as users call it: one-row batches on one handle.

Each mode runs in a process of its own (``spawn``), on a table of its own, one after the
other: default options (fsync on, compaction and expiration on the handle's background
worker), ``commit.maintenance=inline`` (the same work inside ``append()``), and ``write-only``
(no maintenance: the commit protocol alone). Each process makes ``WARMUP`` untimed appends,
then times ``append_latency_appends`` appends of one row each, either back to back or one every
``STEADY_INTERVAL_S`` (a steady rate: the caller sleeps until the next one is due), then
closes the handle (untimed: it waits for the worker). The target compares tails: the p99 of
default options against the p99 of ``write-only`` measured in the same run.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

import appendtable as at
from benchmarks.data import SCHEMA, one_row
from benchmarks.harness import TIMES, Result
from benchmarks.rows import limit_row
from benchmarks.workspace import Workspace

__all__ = ["bench_append_latency"]

GROUP = "append-latency"
WARMUP = 20
STEADY_INTERVAL_S = 0.010
#: The issue's target: default options' p99 at most this many times write-only's p99.
P99_FACTOR = 2.0
MODES: Mapping[str, Mapping[str, Any]] = {
    "default options": {},
    "commit.maintenance=inline": {"commit.maintenance": "inline"},
    "write-only": {"write-only": True},
}
PATTERNS: Mapping[str, float] = {"back to back": 0.0, "one every 10 ms": STEADY_INTERVAL_S}


def _appends(uri: str, options: Mapping[str, Any], count: int, interval: float, out: str) -> None:
    """Time ``count`` one-row appends on one handle (in a process of its own)."""
    table = at.create_table(uri, SCHEMA, options=dict(options))
    for index in range(WARMUP):
        table.append(one_row(index))
    table.wait_for_maintenance()
    rows = [one_row(WARMUP + index) for index in range(count)]
    seconds = np.zeros(count)
    due = time.monotonic()
    for index, row in enumerate(rows):
        start = time.perf_counter()
        table.append(row)
        seconds[index] = time.perf_counter() - start
        if interval:
            due += interval
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    table.close()
    np.save(out, seconds)


def _run(
    ws: Workspace, options: Mapping[str, Any], count: int, interval: float
) -> npt.NDArray[Any]:
    out = ws.fresh_path("latency") + ".npy"
    process = multiprocessing.get_context("spawn").Process(
        target=_appends, args=(ws.fresh_path("append-latency"), options, count, interval, out)
    )
    process.start()
    process.join(count * (interval + 1.0) + 120)
    if process.is_alive():
        process.kill()
        process.join()
    if process.exitcode != 0:
        raise RuntimeError(f"the append-latency process failed (exit code {process.exitcode})")
    return np.load(out) * 1000


def bench_append_latency(ws: Workspace) -> list[Result]:
    count = ws.config.append_latency_appends
    results: list[Result] = []
    for pattern, interval in PATTERNS.items():
        p99: dict[str, float] = {}
        for mode, options in MODES.items():
            ms = _run(ws, options, count, interval)
            p50, p99[mode] = float(np.percentile(ms, 50)), float(np.percentile(ms, 99))
            details = {"appends": count, "max_ms": float(ms.max())}
            for name, value in (("p50", p50), ("p99", p99[mode])):
                results.append(
                    limit_row(
                        GROUP,
                        f"one-row append(), {pattern}, {mode}: {name}",
                        value,
                        limit_ms=None,
                        details=details,
                    )
                )
        ours, floor = p99["default options"], p99["write-only"]
        results.append(
            Result(
                group=GROUP,
                benchmark=(
                    f"one-row append() p99, {pattern}: default options "
                    "(baseline: write-only, the commit alone)"
                ),
                value=ours,
                unit="ms",
                baseline=floor,
                ratio=floor / ours,
                target=f"≥ {1 / P99_FACTOR:g}{TIMES} write-only",
                passed=floor / ours >= 1 / P99_FACTOR,
                details={"appends": count},
            )
        )
    return results
