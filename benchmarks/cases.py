"""The benchmark cases. Each takes the workspace and returns result rows."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import appendtable as at
from benchmarks.append_latency import bench_append_latency
from benchmarks.compaction import bench_compaction
from benchmarks.data import SCHEMA, make_table
from benchmarks.deletes import bench_deletes
from benchmarks.file_index import bench_file_index
from benchmarks.groups import bench_groups
from benchmarks.harness import Case, Result, Timing, cycle_setup, measure, sync_then, timed
from benchmarks.integrity import bench_integrity
from benchmarks.interop import bench_iceberg
from benchmarks.memory import bench_memory
from benchmarks.million import bench_million
from benchmarks.peers import bench_peers
from benchmarks.rows import limit_row, speed_row
from benchmarks.scaling import bench_scaling
from benchmarks.spark import bench_spark
from benchmarks.stores import bench_stores
from benchmarks.system_tables import bench_system_tables
from benchmarks.tailing import bench_tailing
from benchmarks.workspace import (
    Workspace,
    commit_samples,
    grow_history,
    remove,
    tree_bytes,
    write_plain,
)

__all__ = ["BENCHMARKS", "OPT_IN"]

Benchmark = Callable[[Workspace], list[Result]]


# ---- shared helpers ---------------------------------------------------------------------------


# ---- 1, 2: append ----------------------------------------------------------------------------


def _append_benchmark(
    group: str,
    label: str,
    options: Mapping[str, object],
    target_ratio: float,
    *,
    numeric: bool = False,
) -> Benchmark:
    def run(ws: Workspace) -> list[Result]:
        data = ws.big_numeric if numeric else ws.big_table
        schema = data.schema
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
                    setup=sync_then(
                        lambda: at.create_table(ws.fresh_path(group), schema, options=options)
                    ),
                    teardown=table_teardown,
                ),
                Case(
                    "plain",
                    run=lambda path: write_plain(data, path),
                    setup=sync_then(lambda: ws.fresh_path("plain") + ".parquet"),
                    teardown=plain_teardown,
                ),
            ],
            reps=ws.config.big_reps,
        )
        shape = ", narrow numeric rows" if numeric else ""
        benchmark = f"append {data.num_rows / 1e6:g} M rows{shape}, {label}"
        return [
            speed_row(
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
        speed_row(
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
        assert isinstance(returned, tuple)
        key, rows = returned
        assert fixture.expected[key] == rows, (name, key, rows)

    timings = measure(
        [
            Case(
                "appendtable",
                run=lambda key: query(at.open_table(fixture.uri), key),
                setup=cycle_setup(fixture.keys),
            ),
            Case(
                "appendtable-warm",
                run=lambda key: query(handle, key),
                setup=cycle_setup(fixture.keys),
            ),
            Case(
                "plain",
                run=lambda key: (
                    key,
                    pq.read_table(fixture.plain, filters=[("key", "=", key)]).num_rows,
                ),
                setup=cycle_setup(fixture.keys),
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
        speed_row(
            "point-query",
            "point query latency (fresh handle) vs filtered pq.read_table",
            timings["appendtable"],
            timings["plain"],
            unit="ms",
            target_ratio=None,
            details=shape,
        ),
        speed_row(
            "point-query",
            "point query latency (warm handle) vs filtered pq.read_table",
            timings["appendtable-warm"],
            timings["plain"],
            unit="ms",
            target_ratio=None,
        ),
    ]


# ---- 5: commit latency -------------------------------------------------------------------------

#: No compaction or expiration after a commit: the commit protocol alone.
WRITE_ONLY = {"write-only": "true"}


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
class _LatencyTable:
    """A table whose commit latency is sampled once it has ``history`` snapshots."""

    label: str
    options: Mapping[str, str]
    history: int
    p50_ms: float | None  # the targets (None: information only)
    p99_ms: float | None
    copy_of: int | None = None  # index of a table built the same way, to copy instead


#: Maintenance inside the commit call: the default before background maintenance.
INLINE = {"commit.maintenance": "inline"}


def _latency_tables(ws: Workspace) -> list[_LatencyTable]:
    sizes = ws.config.history_sizes
    ends = [sizes[0], sizes[-1]]
    write_only = [_LatencyTable("write-only", WRITE_ONLY, size, 3, 10) for size in sizes]
    default = [_LatencyTable("default options", {}, size, None, 5) for size in ends]
    first_default = len(write_only)
    inline = [
        _LatencyTable(
            "default options, maintenance inline", INLINE, size, None, None, first_default + i
        )
        for i, size in enumerate(ends)
    ]
    return write_only + default + inline


@dataclass(frozen=True)
class _Latencies:
    commit: Timing
    append: Timing  # write the one-row file + commit


def _build_latency_table(ws: Workspace, spec: _LatencyTable, built: list[at.Table]) -> at.Table:
    """Create the table (fsync on, the default) and grow it to its history size, or copy the
    table ``copy_of`` and change its options (the same files and history, built once)."""
    if spec.copy_of is not None:
        path = ws.fresh_path("history")
        shutil.copytree(built[spec.copy_of].uri, path)
        at.open_table(path).set_options(dict(spec.options))
        return at.open_table(path)
    table = at.create_table(ws.fresh_path("history"), SCHEMA, options=spec.options)
    grow_history(table, spec.history)
    table.close()  # its background maintenance, if any, finished
    return at.open_table(table.uri)  # a fresh handle, as a new writer process would have


def _sample_interleaved(
    tables: list[at.Table], rounds: int, warmup: int, floor_dir: str
) -> tuple[list[_Latencies], Timing]:
    """One commit per table per round (tables in rotating order) and one floor publish per
    round, so drift on the shared machine hits every history size alike."""
    streams = []
    for table in tables:
        latest = table.latest_snapshot()
        start = latest.id if latest is not None else 0
        list(commit_samples(table, start, warmup))  # untimed warm-up
        streams.append(commit_samples(table, start + warmup, rounds))
    payload = os.urandom(512)
    samples: list[list[tuple[float, float]]] = [[] for _ in tables]
    floors = []
    for round_index in range(rounds):
        shift = round_index % len(tables)
        for position in [*range(shift, len(tables)), *range(shift)]:
            samples[position].append(next(streams[position]))
        seconds, _ = timed(partial(_publish_once, floor_dir, f"p{round_index}", payload))
        floors.append(seconds)
    latencies = [
        _Latencies(Timing(tuple(c for c, _ in pairs)), Timing(tuple(a for _, a in pairs)))
        for pairs in samples
    ]
    return latencies, Timing(tuple(floors))


def _snapshots(count: int) -> str:
    return f"{count:,} snapshot{'' if count == 1 else 's'}"


def _latency_rows(spec: _LatencyTable, latencies: _Latencies, floor: Timing) -> list[Result]:
    where = f"{spec.label}, at {_snapshots(spec.history)}"
    details = {
        "options": dict(spec.options),
        "commit_ms": latencies.commit.summary(1000),
        "append_ms": latencies.append.summary(1000),
        "floor_ms": floor.summary(1000),
    }
    return [
        limit_row(
            "commit",
            f"commit of a 1-row append p50, {where}",
            latencies.commit.median * 1000,
            limit_ms=spec.p50_ms,
            baseline_ms=floor.median * 1000,
            details=details,
        ),
        limit_row(
            "commit",
            f"commit of a 1-row append p99, {where}",
            latencies.commit.percentile(99) * 1000,
            limit_ms=spec.p99_ms,
            baseline_ms=floor.percentile(99) * 1000,
        ),
    ]


def _file_count_rows(specs: list[_LatencyTable], tables: list[at.Table]) -> list[Result]:
    """Live files of each default-options table after its samples and its maintenance, beside
    the inline-maintenance copy that took the same commits."""
    rows = []
    for spec, table in zip(specs, tables, strict=True):
        if spec.copy_of is None:
            continue
        background = tables[spec.copy_of]
        for handle in (table, background):
            handle.close()
        files, inline_files = (
            len(at.open_table(background.uri).files()),
            len(at.open_table(table.uri).files()),
        )
        rows.append(
            Result(
                group="commit",
                benchmark="live files after the samples, default options (background "
                f"maintenance) vs inline, at {_snapshots(spec.history)}",
                value=files,
                unit="files",
                baseline=inline_files,
                ratio=None,
                target="same",
                passed=None,
            )
        )
    return rows


def bench_commit(ws: Workspace) -> list[Result]:
    """Commit latency at several history sizes, all tables with fsync on (the default)."""
    specs = _latency_tables(ws)
    build_start = time.perf_counter()
    tables: list[at.Table] = []
    for spec in specs:
        tables.append(_build_latency_table(ws, spec, tables))
    build_seconds = time.perf_counter() - build_start
    floor_dir = ws.fresh_path("publish-floor")
    os.makedirs(floor_dir)
    os.sync()
    config = ws.config
    latencies, floor = _sample_interleaved(
        tables, config.commit_samples, config.warmup_commits, floor_dir
    )
    rows = [
        row
        for spec, measured in zip(specs, latencies, strict=True)
        for row in _latency_rows(spec, measured, floor)
    ]
    rows += _file_count_rows(specs, tables)
    targeted = [i for i, spec in enumerate(specs) if spec.label == "write-only"]
    first, last = targeted[0], targeted[-1]
    ws.history_uri = tables[last].uri
    rows.append(
        limit_row(
            "commit",
            "whole 1-row append (write + commit) p50, write-only, at "
            + _snapshots(specs[last].history),
            latencies[last].append.median * 1000,
            limit_ms=None,
            baseline_ms=floor.median * 1000,
        )
    )
    rows.append(
        Result(
            group="commit",
            benchmark=f"commit p50 growth, write-only, {specs[first].history:,} → "
            + _snapshots(specs[last].history),
            value=latencies[last].commit.median / latencies[first].commit.median,
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
        assert isinstance(returned, list)
        assert sum(len(split.files) for split in returned) == files, name

    timings = measure(
        [
            Case("cold", run=lambda _: at.open_table(uri).scan().plan()),
            Case("warm", run=lambda _: warm.scan().plan()),
            Case(
                "empty-cache",
                setup=at.clear_metadata_caches,
                run=lambda _: at.open_table(uri).scan().plan(),
            ),
        ],
        reps=ws.config.plan_reps,
        warmup=2,
        check=check,
    )
    details = {"snapshots": snapshot.id, "files": files, "manifests": _manifest_count(warm)}
    label = f"after {snapshot.id:,} commits"
    rows = [
        ("cold", "cold (open_table + plan)", 10.0),
        ("empty-cache", "new handle with an empty metadata cache (a fresh process)", None),
        ("warm", "warm (same handle)", None),
    ]
    return [
        limit_row(
            "plan",
            f"plan a full scan {label}, {what}",
            timings[case].median * 1000,
            limit_ms=limit,
            details={
                f"{case.replace('-', '_')}_ms": timings[case].summary(1000),
                **(details if case == "cold" else {}),
            },
        )
        for case, what, limit in rows
    ]


BENCHMARKS: dict[str, Benchmark] = {
    "append-unaware": _append_benchmark("append-unaware", "bucket=-1", {}, 1.2),
    "append-bucketed": _append_benchmark(
        "append-bucketed", "bucket=8, bucket-key=key", {"bucket": 8, "bucket-key": "key"}, 0.8
    ),
    "append-unaware-numeric": _append_benchmark(
        "append-unaware-numeric", "bucket=-1", {}, 1.5, numeric=True
    ),
    "append-bucketed-numeric": _append_benchmark(
        "append-bucketed-numeric",
        "bucket=8, bucket-key=key",
        {"bucket": 8, "bucket-key": "key"},
        1.0,
        numeric=True,
    ),
    "read": bench_read,
    "point-query": bench_point_query,
    "commit": bench_commit,
    "stores": bench_stores,
    "plan": bench_plan,
    "system-tables": bench_system_tables,
    "integrity": bench_integrity,
    "deletes": bench_deletes,
    "iceberg": bench_iceberg,
    "file-index": bench_file_index,
    "compaction": bench_compaction,
    "groups": bench_groups,
    "scaling": bench_scaling,
    "memory": bench_memory,
    "peers": bench_peers,
    "tailing": bench_tailing,
    "append-latency": bench_append_latency,
    "spark": bench_spark,
    "million": bench_million,
}
#: Benchmarks that run only when named (``--only``): the million-file tables take about ten
#: minutes (``make bench-scale``).
OPT_IN = frozenset({"million"})
