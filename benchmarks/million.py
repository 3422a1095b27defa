"""A million files: tables of N live data files over N/100 daily
partitions and N/10 snapshots (N = 10 k, 100 k and 1 M in the full sizes), built from
fabricated file metadata through the table's own committer (``benchmarks.fabricate``), and
the same shapes as delta-rs transaction logs (``benchmarks.delta_scale``) up to
``scale_delta_max`` files. At each size:

* **commit**: one-row files written into the newest partition (untimed), then
  ``TableCommit.commit`` of each timed, fsync on (the default), in ``scale_rounds`` rounds of
  ``scale_commits`` after 5 untimed ones; the worst round's p99 counts. delta-rs: one
  ``create_write_transaction`` of one ``add`` action each, on one loaded ``DeltaTable``.
* **partition-filtered plan, cold**: ``open_table`` + ``scan(filter=day = D).plan()`` of a
  partition in the middle of the history, after emptying the process's metadata caches
  (nothing of the table decoded), ``scale_rounds`` + 2 times; the slowest counts. delta-rs:
  ``DeltaTable(uri).file_uris(file_pruning_predicate=...)``.
* **full plan, cold**: ``open_table`` + ``scan().plan()`` in a fresh process
  (``benchmarks.scale_probe``) with its peak RSS (the whole process), ``scale_rounds`` times;
  the slowest and the largest count. delta-rs: ``DeltaTable(uri).file_uris()`` likewise.
* **idle poll**: the median of 200 ``poll()`` calls of a stream at the latest snapshot, per
  round; the worst round counts. delta-rs: ``update_incremental()`` with nothing new.
* **orphan removal by listing**: every data file created on disk as an empty file (up to
  ``scale_touch_max`` files) plus ``ORPHANS`` files no snapshot references, then
  ``remove_orphan_files(dry_run=True)`` in a fresh process, with its peak RSS; it must find
  exactly those orphans. delta-rs: ``vacuum(dry_run=True)`` over the same files.
* **expiration**: ``expire_snapshots`` of the oldest 10,000 snapshots (all but 10 where the
  table has fewer), ``scale_rounds`` times where the history allows, else once.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import appendtable as at
from appendtable.commit.metadata_cache import clear_metadata_caches
from benchmarks.delta_scale import build_delta, touch_delta_files
from benchmarks.fabricate import (
    SCHEMA,
    Shape,
    build_table,
    day_of,
    partition_dir,
    touch_files,
)
from benchmarks.harness import Result, Timing, median_call_ms, nested_value
from benchmarks.workspace import Workspace, remove, tree_bytes

__all__ = ["bench_million", "shape_for"]

GROUP = "million"
REPO = Path(__file__).resolve().parent.parent
COMMIT_P99_MS = 10.0
FILTER_PLAN_MS = 50.0
FULL_PLAN_MS = 3000.0
PEAK_MB = 500.0
EXPIRE_SNAPSHOTS = 10_000
EXPIRE_MS = 10_000.0
POLL_MS = 1.0
POLLS = 200
WARMUP_COMMITS = 5
#: Unreferenced data files added before orphan removal, which must find exactly these.
ORPHANS = 10
PROBE_TIMEOUT_S = 900


def shape_for(files: int) -> Shape:
    """The benchmark's shape for ``files`` files: 100 files a partition, 10 a snapshot."""
    return Shape(files=files, partitions=max(1, files // 100), snapshots=max(1, files // 10))


def _one_row(partition: int, index: int) -> pa.Table:
    return pa.table(
        {
            "day": [day_of(partition)],
            "key": [index],
            "value": [float(index)],
            "text": [f"row{index:07d}"],
        },
        schema=SCHEMA,
    )


def _probe(module: str, case: str, uri: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", module, case, uri],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=PROBE_TIMEOUT_S,
    )
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def _probes(module: str, case: str, uri: str, reps: int, expected: int) -> dict[str, Any]:
    """``reps`` runs of a probe: the slowest time and the largest peak, each checked to have
    returned ``expected``."""
    runs = [_probe(module, case, uri) for _ in range(reps)]
    for run in runs:
        if run["count"] != expected:
            raise AssertionError(f"{module} {case}: {run['count']} instead of {expected}")
    return {
        "ms": max(r["seconds"] for r in runs) * 1000,
        "median_ms": statistics.median(r["seconds"] for r in runs) * 1000,
        "peak_mb": max(r["peak_rss_mb"] for r in runs),
        "loaded_mb": max(r["loaded_rss_mb"] for r in runs),
    }


def _worst_p99(rounds: list[list[float]]) -> dict[str, Any]:
    timings = [Timing(tuple(samples)) for samples in rounds]
    return {
        "p99_ms": max(t.percentile(99) for t in timings) * 1000,
        "p50_ms": statistics.median(s for samples in rounds for s in samples) * 1000,
        "round_p99_ms": [t.percentile(99) * 1000 for t in timings],
    }


def _timed_ms(run: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    returned = run()
    return (time.perf_counter() - start) * 1000, returned


# ---- appendtable ---------------------------------------------------------------------------


def _commits(table: at.Table, shape: Shape, rounds: int, per_round: int) -> dict[str, Any]:
    """One-row files into the newest partition; only ``TableCommit.commit`` is timed."""
    committer = table.committer("bench")
    partition = shape.partitions - 1
    samples: list[list[float]] = []
    for index in range(WARMUP_COMMITS + rounds * per_round):
        with table.writer() as writer:
            writer.write(_one_row(partition, index))
            messages = writer.prepare_commit()
        ms, snapshot = _timed_ms(lambda m=messages: committer.commit(m))
        assert snapshot is not None
        if index >= WARMUP_COMMITS:
            if (index - WARMUP_COMMITS) % per_round == 0:
                samples.append([])
            samples[-1].append(ms / 1000)
    return _worst_p99(samples)


def _idle_poll(uri: str, rounds: int) -> dict[str, Any]:
    reader = at.open_table(uri).stream(mode="latest")
    assert reader.poll() is None
    medians = [median_call_ms(reader.poll, POLLS, check=_nothing_new) for _ in range(rounds)]
    return {"ms": max(medians), "round_medians_ms": medians}


def _nothing_new(unit: object) -> None:
    assert unit is None


def _filtered_plan(uri: str, shape: Shape, reps: int) -> dict[str, Any]:
    """A cold plan of one partition in the middle of the history (its files are known from
    the shape: no measured commit went there)."""
    partition = shape.partitions // 2
    expected = sum(
        len(shape.commit_files(c))
        for c in range(shape.snapshots)
        if shape.commit_partition(c) == partition
    )
    row_filter = [("day", "=", day_of(partition))]

    def plan() -> int:
        splits = at.open_table(uri).scan(filter=row_filter).plan()
        return sum(len(split.files) for split in splits)

    samples = []
    for _ in range(reps):
        clear_metadata_caches()
        ms, planned = _timed_ms(plan)
        if planned != expected:
            raise AssertionError(f"the filtered plan has {planned} files, not {expected}")
        samples.append(ms)
    return {"ms": max(samples), "median_ms": statistics.median(samples), "files": expected}


def _add_orphans(uri: str, directory: str) -> None:
    """``ORPHANS`` empty data files no snapshot references, a week old."""
    week_ago = time.time() - 7 * 86_400
    for index in range(ORPHANS):
        path = os.path.join(uri, directory, f"data-{index:032x}-9.parquet")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        os.utime(path, (week_ago, week_ago))


def _orphans(table: at.Table, shape: Shape, reps: int) -> dict[str, Any]:
    touch_s = touch_files(table.uri, shape)
    _add_orphans(table.uri, partition_dir(0))
    measured = _probes("benchmarks.scale_probe", "orphans", table.uri, reps, ORPHANS)
    return {**measured, "touch_s": touch_s, "listed_files": shape.files + ORPHANS}


def _expire(table: at.Table, rounds: int) -> dict[str, Any]:
    """Expire the oldest ``EXPIRE_SNAPSHOTS`` snapshots (fewer: all but 10), per round."""
    earliest, latest = table.earliest_snapshot(), table.latest_snapshot()
    assert earliest is not None and latest is not None
    count = latest.id - earliest.id + 1
    expire = min(EXPIRE_SNAPSHOTS, count - 10)
    reps = max(1, min(rounds, (count - 10) // expire))
    samples = []
    for rep in range(reps):
        retained = count - rep * expire
        ms, result = _timed_ms(lambda r=retained: table.expire_snapshots(retain_max=r - expire))
        assert isinstance(result, at.ExpireResult)
        if len(result.expired_snapshots) != expire or result.deleted_data_files:
            raise AssertionError(f"expired {len(result.expired_snapshots)}, not {expire}")
        samples.append(ms)
    return {"ms": max(samples), "snapshots": expire, "reps": reps}


def _appendtable_point(ws: Workspace, shape: Shape) -> dict[str, Any]:
    config = ws.config
    rounds = config.scale_rounds
    table, report = build_table(ws.fresh_path(f"million-{shape.files}"), shape)
    print(f"    built {shape} in {report.seconds:.1f} s", flush=True)
    clear_metadata_caches()  # the build filled them; measurements start from a cold process
    point: dict[str, Any] = {
        "build_s": report.seconds,
        "metadata_mb": tree_bytes(table.uri) / 1e6,
        "filtered_plan": _filtered_plan(table.uri, shape, rounds + 2),
    }
    point["commit"] = _commits(table, shape, rounds, config.scale_commits)
    point["poll"] = _idle_poll(table.uri, rounds)
    live = shape.files + WARMUP_COMMITS + rounds * config.scale_commits
    point["full_plan"] = _probes("benchmarks.scale_probe", "plan", table.uri, rounds, live)
    if shape.files <= config.scale_touch_max:
        point["orphans"] = _orphans(table, shape, rounds if shape.files <= 100_000 else 1)
    point["expire"] = _expire(table, rounds)
    remove(table.uri)
    return point


# ---- delta-rs ------------------------------------------------------------------------------


def _delta_commits(uri: str, shape: Shape, rounds: int, per_round: int) -> dict[str, Any]:
    table = DeltaTable(uri)
    partition = shape.partitions - 1
    samples: list[list[float]] = []
    for index in range(WARMUP_COMMITS + rounds * per_round):
        row = _one_row(partition, index)
        ms, _ = _timed_ms(lambda r=row: write_deltalake(table, r, mode="append"))
        if index >= WARMUP_COMMITS:
            if (index - WARMUP_COMMITS) % per_round == 0:
                samples.append([])
            samples[-1].append(ms / 1000)
    return _worst_p99(samples)


def _delta_filtered_plan(uri: str, shape: Shape, reps: int, expected: int) -> dict[str, Any]:
    day = day_of(shape.partitions // 2).isoformat()
    samples = []
    for _ in range(reps):
        ms, files = _timed_ms(
            lambda: DeltaTable(uri).file_uris(file_pruning_predicate=[("day", "=", day)])
        )
        assert isinstance(files, list)
        if len(files) != expected:
            raise AssertionError(f"delta-rs planned {len(files)} files, not {expected}")
        samples.append(ms)
    return {"ms": max(samples), "median_ms": statistics.median(samples)}


def _delta_poll(uri: str, rounds: int) -> dict[str, Any]:
    table = DeltaTable(uri)
    version = table.version()
    medians = [median_call_ms(table.update_incremental, POLLS) for _ in range(rounds)]
    assert table.version() == version
    return {"ms": max(medians), "round_medians_ms": medians}


def _delta_point(ws: Workspace, shape: Shape, filtered_files: int) -> dict[str, Any]:
    config = ws.config
    rounds = config.scale_rounds
    uri = ws.fresh_path(f"million-delta-{shape.files}")
    point: dict[str, Any] = {"build_s": build_delta(uri, shape)}
    print(f"    built the delta-rs log of {shape} in {point['build_s']:.1f} s", flush=True)
    point["metadata_mb"] = tree_bytes(uri) / 1e6
    point["filtered_plan"] = _delta_filtered_plan(uri, shape, rounds + 2, filtered_files)
    point["full_plan"] = _probes("benchmarks.delta_scale", "plan", uri, rounds, shape.files)
    point["poll"] = _delta_poll(uri, rounds)
    if shape.files <= config.scale_touch_max:
        touch_s = touch_delta_files(uri, shape)
        reps = rounds if shape.files <= 100_000 else 1
        point["orphans"] = {
            **_probes("benchmarks.delta_scale", "vacuum", uri, reps, 0),
            "touch_s": touch_s,
        }
    point["commit"] = _delta_commits(uri, shape, rounds, config.scale_delta_commits)
    remove(uri)
    return point


# ---- rows ----------------------------------------------------------------------------------


def _row(
    benchmark: str,
    value: float,
    unit: str,
    *,
    limit: float | None,
    baseline: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> Result:
    """A row checked against an absolute limit (None: information); ratio = baseline /
    appendtable (above 1: appendtable is faster or smaller)."""
    return Result(
        group=GROUP,
        benchmark=benchmark,
        value=value,
        unit=unit,
        baseline=baseline,
        ratio=None if baseline is None or value <= 0 else baseline / value,
        target="—" if limit is None else f"≤ {limit:g} {unit}",
        passed=None if limit is None else value <= limit,
        details=dict(details or {}),
    )


def _delta(point: Mapping[str, Any] | None, *keys: str) -> float | None:
    return nested_value(point, keys)


def _rows(shape: Shape, ours: Mapping[str, Any], delta: Mapping[str, Any] | None) -> list[Result]:
    size = f"{shape.files:,} files"
    rounds = len(ours["commit"]["round_p99_ms"])
    vs = " (baseline: delta-rs)" if delta is not None else ""
    rows = [
        _row(
            f"{size}: build {shape.partitions:,} partitions x {shape.snapshots:,} snapshots "
            "(metadata only, s)",
            ours["build_s"],
            "s",
            limit=None,
            baseline=_delta(delta, "build_s"),
        ),
        _row(
            f"{size}: commit p99 of a one-file commit (worst of {rounds} rounds){vs}",
            ours["commit"]["p99_ms"],
            "ms",
            limit=COMMIT_P99_MS,
            baseline=_delta(delta, "commit", "p99_ms"),
            details={"appendtable": ours["commit"], "deltalake": (delta or {}).get("commit")},
        ),
        _row(
            f"{size}: plan with a partition filter, cold (empty metadata caches){vs}",
            ours["filtered_plan"]["ms"],
            "ms",
            limit=FILTER_PLAN_MS,
            baseline=_delta(delta, "filtered_plan", "ms"),
        ),
        _row(
            f"{size}: full plan, cold (fresh process){vs}",
            ours["full_plan"]["ms"],
            "ms",
            limit=FULL_PLAN_MS,
            baseline=_delta(delta, "full_plan", "ms"),
        ),
        _row(
            f"{size}: full plan, peak RSS of the process{vs}",
            ours["full_plan"]["peak_mb"],
            "MB",
            limit=PEAK_MB,
            baseline=_delta(delta, "full_plan", "peak_mb"),
            details={"loaded_mb": ours["full_plan"]["loaded_mb"]},
        ),
        _row(
            f"{size}: idle stream poll (nothing new){vs}",
            ours["poll"]["ms"],
            "ms",
            limit=POLL_MS,
            baseline=_delta(delta, "poll", "ms"),
        ),
    ]
    orphans = ours.get("orphans")
    if orphans is not None:
        vacuum = " (baseline: delta-rs vacuum dry run)" if delta is not None else ""
        rows += [
            _row(
                f"{size}: orphan removal by listing {orphans['listed_files']:,} data files, "
                f"dry run{vacuum}",
                orphans["ms"],
                "ms",
                limit=None,
                baseline=_delta(delta, "orphans", "ms"),
                details={"touch_s": orphans["touch_s"]},
            ),
            _row(
                f"{size}: orphan removal, peak RSS of the process{vacuum}",
                orphans["peak_mb"],
                "MB",
                limit=PEAK_MB,
                baseline=_delta(delta, "orphans", "peak_mb"),
            ),
        ]
    expire = ours["expire"]
    rows.append(
        _row(
            f"{size}: expire {expire['snapshots']:,} snapshots",
            expire["ms"],
            "ms",
            limit=EXPIRE_MS if expire["snapshots"] >= EXPIRE_SNAPSHOTS else None,
            details={"reps": expire["reps"]},
        )
    )
    return rows


def bench_million(ws: Workspace) -> list[Result]:
    config = ws.config
    rows: list[Result] = []
    series: list[dict[str, Any]] = []
    for files in config.scale_files:
        shape = shape_for(files)
        ours = _appendtable_point(ws, shape)
        delta = None
        if files <= config.scale_delta_max:
            delta = _delta_point(ws, shape, ours["filtered_plan"]["files"])
        series.append(
            {
                "files": shape.files,
                "partitions": shape.partitions,
                "snapshots": shape.snapshots,
                "appendtable": ours,
                "deltalake": delta,
            }
        )
        rows.extend(_rows(shape, ours, delta))
    rows[0].details["million_series"] = series
    rows[0].details["checked_at"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return rows
