"""Scaling curves: commit latency, scan planning and an idle streaming poll against
the number of snapshots; write throughput against partitions x buckets; compaction time against
the number of small files. The series go into the rows' details; ``plots.py`` draws them."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import appendtable as at
from benchmarks.compaction import WRITE_ONLY, copy_table, plain_rewrite, small_file_table
from benchmarks.data import SCHEMA, make_table, one_row
from benchmarks.harness import (
    TIMES,
    Case,
    Result,
    Timing,
    measure,
    median_call_ms,
    sync_then,
    timed,
)
from benchmarks.rows import count_row
from benchmarks.workspace import Workspace, commit_samples, grow_history, remove

__all__ = ["bench_scaling"]

GROUP = "scaling"
#: The target: the largest grid point (1,600 open (partition, bucket) groups) at
#: least this share of pyarrow's ``write_to_dataset`` rows per second.
GRID_TARGET = 0.8
PLAN_REPS = 10
POLLS = 200


def _median_ms(run: Callable[[], object], reps: int) -> float:
    return statistics.median(timed(run)[0] for _ in range(reps)) * 1000


def _idle_poll_ms(uri: str) -> float:
    """Median cost of ``poll()`` on a stream that is at the latest snapshot (nothing new)."""
    reader = at.open_table(uri).stream(mode="latest")
    assert reader.poll() is None
    return median_call_ms(reader.poll, POLLS, check=_nothing_new)


def _nothing_new(unit: object) -> None:
    assert unit is None


def _history_point(table: at.Table, point: int, commits: int) -> dict[str, float]:
    """At ``point`` snapshots: plan (cold and warm) and an idle poll; then ``commits`` timed
    one-row commits starting there."""
    uri = table.uri
    warm = at.open_table(uri)
    warm.scan().plan()
    measured = {
        "snapshots": point,
        "plan_cold_ms": _median_ms(lambda: at.open_table(uri).scan().plan(), PLAN_REPS),
        "plan_warm_ms": _median_ms(lambda: warm.scan().plan(), PLAN_REPS),
        "idle_poll_ms": _idle_poll_ms(uri),
    }
    pairs = list(commit_samples(table, point, commits))
    measured["commit_p50_ms"] = statistics.median(c for c, _ in pairs) * 1000
    measured["append_p50_ms"] = statistics.median(a for _, a in pairs) * 1000
    return measured


def _history_curve(ws: Workspace) -> list[Result]:
    """One ``write-only`` table (fsync on) grown by one-row appends through the curve points."""
    config = ws.config
    points = [p for p in config.curve_points if p <= config.history_sizes[-1]]
    table = at.create_table(ws.fresh_path("curve"), SCHEMA, options=WRITE_ONLY)
    table.append(one_row(0))
    series = []
    for point, following in zip(points, [*points[1:], None], strict=True):
        grow_history(table, point)
        room = config.curve_commits if following is None else following - point
        series.append(_history_point(table, point, max(1, min(config.curve_commits, room))))
    remove(table.uri)
    first, last = series[0], series[-1]
    details = {"history_curve": series, "commits_per_point": config.curve_commits}
    return [
        count_row(
            GROUP,
            f"commit p50 (write-only, fsync on) at {last['snapshots']:,} snapshots; "
            f"baseline: at {first['snapshots']:,}",
            last["commit_p50_ms"],
            "ms",
            baseline=first["commit_p50_ms"],
            details=details,
        ),
        count_row(
            GROUP,
            f"plan a full scan, cold, at {last['snapshots']:,} snapshots; baseline: at "
            f"{first['snapshots']:,}",
            last["plan_cold_ms"],
            "ms",
            baseline=first["plan_cold_ms"],
        ),
        count_row(
            GROUP,
            f"idle streaming poll (no new snapshot) at {last['snapshots']:,} snapshots; "
            f"baseline: at {first['snapshots']:,}",
            last["idle_poll_ms"],
            "ms",
            baseline=first["idle_poll_ms"],
        ),
    ]


def _partitioned(data: pa.Table, partitions: int) -> pa.Table:
    """``data`` plus an int32 ``part`` column with ``partitions`` distinct values."""
    part = pc.cast(pc.remainder(data["key"], partitions), pa.int32())
    return data.append_column("part", part)


def _write_case(name: str, make: Callable[[], Any], write: Callable[[Any], object]) -> Case:
    """Write into what ``make`` creates (after a sync); the teardown deletes it."""

    def teardown(target: Any) -> None:
        remove(target.uri if isinstance(target, at.Table) else target)

    return Case(name, run=write, setup=sync_then(make), teardown=teardown)


def _grid_timings(ws: Workspace, data: pa.Table) -> dict[str, Timing]:
    """One append per bucket setting into ``part`` partitions, and pyarrow's
    ``write_to_dataset`` partitioned the same way (the baseline: no buckets there)."""
    cases = [
        _write_case(
            "plain",
            lambda: ws.fresh_path("grid-plain"),
            lambda root: pq.write_to_dataset(
                data, root, partition_cols=["part"], compression="zstd"
            ),
        )
    ]
    for buckets in (-1, *ws.config.grid_buckets):
        options: dict[str, object] = {"bucket": buckets}
        if buckets > 0:
            options["bucket-key"] = "key"
        cases.append(
            _write_case(
                str(buckets),
                lambda o=options: at.create_table(
                    ws.fresh_path("grid"), data.schema, partition_by=["part"], options=o
                ),
                lambda table: table.append(data),
            )
        )
    return measure(cases, reps=ws.config.grid_reps, warmup=ws.config.grid_warmup)


def _write_grid(ws: Workspace) -> list[Result]:
    """Rows per second of one append into partitions x buckets (bucket -1: unbucketed)."""
    config = ws.config
    base = make_table(config.grid_rows, seed=17)
    grid: list[dict[str, Any]] = []
    for partitions in config.grid_partitions:
        data = _partitioned(base, partitions)
        timings = _grid_timings(ws, data)
        for name, timing in timings.items():
            grid.append(
                {
                    "partitions": partitions,
                    "buckets": None if name == "plain" else int(name),
                    "rows_per_s": data.num_rows / timing.median,
                    "seconds": timing.summary(),
                }
            )
    largest = max(
        (g for g in grid if g["buckets"] is not None),
        key=lambda g: (g["partitions"], g["buckets"]),
    )
    plain = next(
        g for g in grid if g["buckets"] is None and g["partitions"] == largest["partitions"]
    )
    ratio = largest["rows_per_s"] / plain["rows_per_s"]
    return [
        Result(
            group=GROUP,
            benchmark=f"write {config.grid_rows / 1e6:g} M rows into {largest['partitions']} "
            f"partitions x {largest['buckets']} buckets, M rows/s (baseline: pyarrow "
            f"write_to_dataset, {largest['partitions']} partitions)",
            value=largest["rows_per_s"] / 1e6,
            unit="Mrows/s",
            baseline=plain["rows_per_s"] / 1e6,
            ratio=ratio,
            target=f"≥ {GRID_TARGET:g}{TIMES} write_to_dataset",
            passed=ratio >= GRID_TARGET,
            details={"write_grid": grid, "rows": config.grid_rows},
        )
    ]


def _compaction_point(ws: Workspace, uri: str, paths: Sequence[str]) -> dict[str, Any]:
    """Time ``compact(full=True)`` of a copy of the table, and pyarrow's read + write of the
    same files."""
    reps = max(1, ws.config.compact_reps - 1)
    ours, plain = [], []
    for _ in range(reps):
        table = copy_table(ws, uri)
        ours.append(timed(lambda t=table: t.compact(full=True))[0])
        assert len(table.files()) == 1
        remove(table.uri)
        out = ws.fresh_path("curve-plain") + ".parquet"
        plain.append(timed(lambda o=out: plain_rewrite(list(paths), o))[0])
        remove(out)
    return {
        "files": len(paths),
        "compact_ms": statistics.median(ours) * 1000,
        "plain_ms": statistics.median(plain) * 1000,
    }


def _compaction_curve(ws: Workspace) -> list[Result]:
    """One ``write-only`` table grown by one-row appends; at each point a copy is compacted."""
    points = ws.config.compaction_points
    fixture = small_file_table(ws, "compact-curve", [one_row(0)], {})
    table = at.open_table(fixture.uri)
    series = []
    for point in points:
        grow_history(table, point)
        paths = [os.path.join(table.uri, f.path) for s in table.scan().plan() for f in s.files]
        series.append(_compaction_point(ws, table.uri, paths))
    remove(table.uri)
    last = series[-1]
    return [
        count_row(
            GROUP,
            f"compact(full=True) of {last['files']:,} one-row files (baseline: pyarrow read + "
            "write of the same files)",
            last["compact_ms"],
            "ms",
            baseline=last["plain_ms"],
            details={"compaction_curve": series},
        )
    ]


def bench_scaling(ws: Workspace) -> list[Result]:
    return [*_history_curve(ws), *_write_grid(ws), *_compaction_curve(ws)]
