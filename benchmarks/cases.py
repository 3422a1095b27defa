"""The benchmarks of DESIGN.md §12. Each takes the workspace and returns result rows."""

from __future__ import annotations

import gc
import itertools
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import appendtable as at
from benchmarks.data import SCHEMA, make_table, one_row
from benchmarks.harness import TIMES, Case, Result, Timing, measure, timed
from benchmarks.workspace import Workspace, grow_history, remove, tree_bytes, write_plain

__all__ = ["BENCHMARKS"]

Benchmark = Callable[[Workspace], list[Result]]


# ---- shared helpers ---------------------------------------------------------------------------


def _speed_row(
    group: str,
    benchmark: str,
    ours: Timing,
    baseline: Timing,
    *,
    unit: str,
    target_ratio: float | None,
    details: Mapping[str, Any] | None = None,
) -> Result:
    """A row comparing two timings by median; ratio = baseline / appendtable."""
    scale = 1000.0 if unit == "ms" else 1.0
    ratio = baseline.median / ours.median
    return Result(
        group=group,
        benchmark=benchmark,
        value=ours.median * scale,
        unit=unit,
        baseline=baseline.median * scale,
        ratio=ratio,
        target="—" if target_ratio is None else f"≥ {target_ratio:g}{TIMES} plain",
        passed=None if target_ratio is None else ratio >= target_ratio,
        details={
            "appendtable": ours.summary(scale),
            "baseline": baseline.summary(scale),
            **(details or {}),
        },
    )


def _limit_row(
    group: str,
    benchmark: str,
    value_ms: float,
    *,
    limit_ms: float | None,
    baseline_ms: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> Result:
    """A row checking a latency against an absolute limit; ratio = baseline / appendtable."""
    return Result(
        group=group,
        benchmark=benchmark,
        value=value_ms,
        unit="ms",
        baseline=baseline_ms,
        ratio=None if baseline_ms is None else baseline_ms / value_ms,
        target="—" if limit_ms is None else f"≤ {limit_ms:g} ms",
        passed=None if limit_ms is None else value_ms <= limit_ms,
        details=dict(details or {}),
    )


def _sync_then(make: Callable[[], Any]) -> Callable[[], Any]:
    """A setup that first flushes dirty pages, so no rep pays for an earlier rep's writeback."""

    def setup() -> Any:
        os.sync()
        return make()

    return setup


def _cycle(values: list[Any]) -> Callable[[], Any]:
    """A setup handing out ``values`` round-robin."""
    iterator = itertools.cycle(values)
    return lambda: next(iterator)


# ---- 1, 2: append ----------------------------------------------------------------------------


def _append_benchmark(
    group: str, label: str, options: Mapping[str, object], target_ratio: float
) -> Benchmark:
    def run(ws: Workspace) -> list[Result]:
        data = ws.big_table
        observed: dict[str, Any] = {}

        def table_teardown(table: at.Table) -> None:
            snapshot = table.latest_snapshot()
            observed["files"] = snapshot.total_file_count if snapshot else 0
            observed["appendtable_bytes"] = tree_bytes(table.uri)
            remove(table.uri)

        def plain_teardown(path: str) -> None:
            observed["plain_bytes"] = os.path.getsize(path)
            remove(path)

        timings = measure(
            [
                Case(
                    "appendtable",
                    run=lambda table: table.append(data),
                    setup=_sync_then(
                        lambda: at.create_table(ws.fresh_path(group), SCHEMA, options=options)
                    ),
                    teardown=table_teardown,
                ),
                Case(
                    "plain",
                    run=lambda path: write_plain(data, path),
                    setup=_sync_then(lambda: ws.fresh_path("plain") + ".parquet"),
                    teardown=plain_teardown,
                ),
            ],
            reps=ws.config.big_reps,
        )
        benchmark = f"append {data.num_rows / 1e6:g} M rows, {label}"
        return [
            _speed_row(
                group,
                benchmark,
                timings["appendtable"],
                timings["plain"],
                unit="s",
                target_ratio=target_ratio,
                details={"rows": data.num_rows, "options": dict(options), **observed},
            )
        ]

    return run


# ---- 3: full read ------------------------------------------------------------------------------


def bench_read(ws: Workspace) -> list[Result]:
    uri, path, rows = ws.big_unaware_table, ws.big_plain_file, ws.big_table.num_rows

    def check(name: str, returned: object) -> None:
        assert isinstance(returned, pa.Table) and returned.num_rows == rows, name

    timings = measure(
        [
            Case("appendtable", run=lambda _: at.open_table(uri).scan().to_arrow()),
            Case("plain", run=lambda _: pq.read_table(path)),
        ],
        reps=ws.config.big_reps,
        check=check,
    )
    files = len(at.open_table(uri).files())
    return [
        _speed_row(
            "read",
            f"full read {rows / 1e6:g} M rows (fresh handle)",
            timings["appendtable"],
            timings["plain"],
            unit="s",
            target_ratio=1.0,
            details={"rows": rows, "files": files},
        )
    ]


# ---- 4: point query ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _PointFixture:
    uri: str
    plain: str
    keys: list[int]
    expected: dict[int, int]  # rows per queried key


def _point_fixture(ws: Workspace) -> _PointFixture:
    config = ws.config
    data = make_table(config.point_rows, seed=7)
    table = at.create_table(
        ws.fresh_path("point"),
        SCHEMA,
        options={"bucket": config.point_buckets, "bucket-key": "key"},
    )
    step = -(-data.num_rows // config.point_commits)
    for offset in range(0, data.num_rows, step):
        table.append(data.slice(offset, step))
    plain = write_plain(data, ws.fresh_path("point-plain") + ".parquet")
    rng = np.random.default_rng(11)
    column = data.column("key").to_numpy()
    keys = [int(k) for k in rng.choice(column, size=config.point_queries, replace=False)]
    counts = pc.value_counts(data.column("key")).flatten()
    found = dict(zip(counts[0].to_pylist(), counts[1].to_pylist(), strict=True))
    return _PointFixture(table.uri, plain, keys, {k: found[k] for k in keys})


def _files(scan: at.Scan) -> int:
    return sum(len(split.files) for split in scan.plan())


def bench_point_query(ws: Workspace) -> list[Result]:
    fixture = _point_fixture(ws)
    buckets = ws.config.point_buckets
    handle = at.open_table(fixture.uri)
    total = _files(handle.scan())
    planned = [_files(handle.scan(filter=[("key", "=", k)])) for k in fixture.keys]

    def query(table: at.Table, key: int) -> tuple[int, int]:
        return key, table.scan(filter=[("key", "=", key)]).to_arrow().num_rows

    def check(name: str, returned: object) -> None:
        key, rows = returned  # type: ignore[misc]
        assert fixture.expected[key] == rows, (name, key, rows)

    timings = measure(
        [
            Case(
                "appendtable",
                run=lambda key: query(at.open_table(fixture.uri), key),
                setup=_cycle(fixture.keys),
            ),
            Case(
                "appendtable-warm", run=lambda key: query(handle, key), setup=_cycle(fixture.keys)
            ),
            Case(
                "plain",
                run=lambda key: (
                    key,
                    pq.read_table(fixture.plain, filters=[("key", "=", key)]).num_rows,
                ),
                setup=_cycle(fixture.keys),
            ),
        ],
        reps=ws.config.point_queries,
        warmup=2,
        check=check,
    )
    fraction = max(planned) / total
    shape = {
        "rows": ws.config.point_rows,
        "commits": ws.config.point_commits,
        "buckets": buckets,
        "total_files": total,
        "planned_files": planned,
    }
    return [
        Result(
            group="point-query",
            benchmark=f"point query, {buckets} buckets: files read (max over keys) / total",
            value=max(planned),
            unit="files",
            baseline=total,
            ratio=fraction,
            target=f"≤ 1/{buckets}",
            passed=fraction <= 1 / buckets,
            details=shape,
        ),
        _speed_row(
            "point-query",
            "point query latency (fresh handle) vs filtered pq.read_table",
            timings["appendtable"],
            timings["plain"],
            unit="ms",
            target_ratio=None,
            details=shape,
        ),
        _speed_row(
            "point-query",
            "point query latency (warm handle) vs filtered pq.read_table",
            timings["appendtable-warm"],
            timings["plain"],
            unit="ms",
            target_ratio=None,
        ),
    ]


# ---- 5: commit latency -------------------------------------------------------------------------


def _publish_once(directory: str, name: str, payload: bytes) -> None:
    """The floor of a commit: publish one small file as the local storage does (write a temp
    file, fsync it, hard-link it to its name, drop the temp, fsync the directory)."""
    final = os.path.join(directory, name)
    temp = f"{final}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.link(temp, final)
    os.unlink(temp)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass(frozen=True)
class _Window:
    """Samples taken at one history size."""

    history: int
    commit: Timing
    append: Timing  # write the one-row file + commit
    floor: Timing


def _commit_samples(table: at.Table, start: int, count: int) -> Iterator[tuple[float, float]]:
    """(commit seconds, whole append seconds) of ``count`` one-row appends."""
    committer = table.committer("bench")
    for index in range(start, start + count):
        gc.collect()
        begin = time.perf_counter()
        with table.writer() as writer:
            writer.write(one_row(index))
            messages = writer.prepare_commit()
        middle = time.perf_counter()
        snapshot = committer.commit(messages)
        end = time.perf_counter()
        assert snapshot is not None
        yield end - middle, end - begin


def _measure_window(ws: Workspace, uri: str, floor_dir: str) -> _Window:
    """Commit latency right after the table reached its current history size: a fresh handle,
    a few untimed commits, then timed ones, each followed by one timed floor publish."""
    table = at.open_table(uri)
    latest = table.latest_snapshot()
    history = latest.id if latest is not None else 0
    payload = os.urandom(os.path.getsize(os.path.join(uri, "snapshot", f"snapshot-{history}")))
    list(_commit_samples(table, history, 5))
    commits, appends, floors = [], [], []
    for offset, (commit, append) in enumerate(
        _commit_samples(table, history + 5, ws.config.commit_samples)
    ):
        commits.append(commit)
        appends.append(append)
        floor, _ = timed(
            lambda offset=offset: _publish_once(floor_dir, f"{history}-{offset}", payload)
        )
        floors.append(floor)
    return _Window(history, Timing(tuple(commits)), Timing(tuple(appends)), Timing(tuple(floors)))


def _window_rows(window: _Window) -> list[Result]:
    at_size = f"at {window.history:,} snapshots"
    details = {
        "commit_ms": window.commit.summary(1000),
        "append_ms": window.append.summary(1000),
        "floor_ms": window.floor.summary(1000),
    }
    return [
        _limit_row(
            "commit",
            f"commit 1-row append p50, {at_size}",
            window.commit.median * 1000,
            limit_ms=3,
            baseline_ms=window.floor.median * 1000,
            details=details,
        ),
        _limit_row(
            "commit",
            f"commit 1-row append p99, {at_size}",
            window.commit.percentile(99) * 1000,
            limit_ms=10,
            baseline_ms=window.floor.percentile(99) * 1000,
        ),
        _limit_row(
            "commit",
            f"whole 1-row append (write + commit) p50, {at_size}",
            window.append.median * 1000,
            limit_ms=None,
            baseline_ms=window.floor.median * 1000,
        ),
    ]


def bench_commit(ws: Workspace) -> list[Result]:
    """Commit latency at growing history sizes, on one table created with fsync on (the
    default), so the history is built and measured with fsync."""
    table = at.create_table(ws.fresh_path("history"), SCHEMA)
    floor_dir = ws.fresh_path("publish-floor")
    os.makedirs(floor_dir)
    windows, build_seconds = [], 0.0
    for size in ws.config.history_sizes:
        build_start = time.perf_counter()
        grow_history(table, size)
        build_seconds += time.perf_counter() - build_start
        windows.append(_measure_window(ws, table.uri, floor_dir))
    ws.history_uri = table.uri
    rows = [row for window in windows for row in _window_rows(window)]
    first, last = windows[0], windows[-1]
    growth = last.commit.median / first.commit.median
    rows.append(
        Result(
            group="commit",
            benchmark=(f"commit p50 growth, {first.history:,} → {last.history:,} snapshots"),
            value=growth,
            unit="x",
            baseline=None,
            ratio=None,
            target="flat",
            passed=None,
            details={"history_build_seconds": build_seconds, "fsync": True},
        )
    )
    return rows


# ---- 6: planning -------------------------------------------------------------------------------


def _manifest_count(table: at.Table) -> int | None:
    """Manifests of the latest snapshot (reads an internal; diagnostics only)."""
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return None
    try:
        return len(table._state.manifests.all_manifests(snapshot))
    except AttributeError:
        return None


def bench_plan(ws: Workspace) -> list[Result]:
    uri = ws.history_table()
    warm = at.open_table(uri)
    snapshot = warm.latest_snapshot()
    assert snapshot is not None
    files = snapshot.total_file_count
    warm.scan().plan()

    def check(name: str, returned: object) -> None:
        assert sum(len(s.files) for s in returned) == files, name  # type: ignore[attr-defined]

    timings = measure(
        [
            Case("cold", run=lambda _: at.open_table(uri).scan().plan()),
            Case("warm", run=lambda _: warm.scan().plan()),
        ],
        reps=ws.config.plan_reps,
        warmup=2,
        check=check,
    )
    details = {"snapshots": snapshot.id, "files": files, "manifests": _manifest_count(warm)}
    label = f"after {snapshot.id:,} commits"
    return [
        _limit_row(
            "plan",
            f"plan a full scan {label}, cold (open_table + plan)",
            timings["cold"].median * 1000,
            limit_ms=20,
            details={"cold_ms": timings["cold"].summary(1000), **details},
        ),
        _limit_row(
            "plan",
            f"plan a full scan {label}, warm (same handle)",
            timings["warm"].median * 1000,
            limit_ms=None,
            details={"warm_ms": timings["warm"].summary(1000)},
        ),
    ]


BENCHMARKS: dict[str, Benchmark] = {
    "append-unaware": _append_benchmark("append-unaware", "bucket=-1", {}, 1.2),
    "append-bucketed": _append_benchmark(
        "append-bucketed", "bucket=8, bucket-key=key", {"bucket": 8, "bucket-key": "key"}, 0.8
    ),
    "read": bench_read,
    "point-query": bench_point_query,
    "commit": bench_commit,
    "plan": bench_plan,
}
