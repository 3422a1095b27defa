"""Compaction benchmarks: throughput against plain Parquet, 500 one-row files, and
file counts after many small commits with automatic and with dedicated compaction."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import appendtable as at
from benchmarks.data import SCHEMA, make_table, one_row
from benchmarks.harness import Case, Result, measure, sync_then
from benchmarks.rows import count_row, limit_row, speed_row
from benchmarks.workspace import Workspace, remove, tree_bytes

__all__ = [
    "BUCKETED",
    "WRITE_ONLY",
    "SmallFiles",
    "bench_compaction",
    "copy_table",
    "plain_rewrite",
    "small_file_table",
]

GROUP = "compaction"
WRITE_ONLY = {"write-only": "true"}
BUCKETED: Mapping[str, object] = {"bucket": 8, "bucket-key": "key"}
#: (label, options) of the two bucket modes.
MODES: tuple[tuple[str, Mapping[str, object]], ...] = (
    ("bucket=-1", {}),
    ("bucket=8, bucket-key=key", BUCKETED),
)


@dataclass(frozen=True)
class SmallFiles:
    """A table that was never compacted (each repetition compacts a copy of it)."""

    uri: str
    paths: list[str]  # absolute paths of its data files, in scan order
    rows: int

    @property
    def files(self) -> int:
        return len(self.paths)


def small_file_table(
    ws: Workspace, stem: str, pieces: Iterable[pa.Table], options: Mapping[str, object]
) -> SmallFiles:
    """A ``write-only`` table (fsync on, the default) with one commit per piece."""
    table = at.create_table(ws.fresh_path(stem), SCHEMA, options={**options, **WRITE_ONLY})
    for piece in pieces:
        table.append(piece)
    return _small_files(table)


def _small_files(table: at.Table) -> SmallFiles:
    paths = [os.path.join(table.uri, f.path) for split in table.scan().plan() for f in split.files]
    snapshot = table.latest_snapshot()
    return SmallFiles(table.uri, paths, snapshot.total_record_count if snapshot else 0)


def copy_table(ws: Workspace, uri: str) -> at.Table:
    """A fresh handle on a copy of the table at ``uri`` (untimed setup of one repetition)."""
    target = ws.fresh_path("copy")
    shutil.copytree(uri, target)
    os.sync()
    return at.open_table(target)


def _compact_full(table: at.Table) -> at.Table:
    snapshot = table.compact(full=True)
    assert snapshot is not None, "compaction had nothing to do"
    return table


def plain_rewrite(paths: list[str], out: str) -> str:
    """The baseline: read the same files with pyarrow and write them as one zstd file."""
    pq.write_table(pq.read_table(paths), out, compression="zstd")
    return out


def _compaction_cases(ws: Workspace, fixture: SmallFiles, check_order: bool) -> list[Case]:
    """appendtable's ``compact(full=True)`` on a copy of the fixture, against plain pyarrow."""

    def verify(table: at.Table) -> None:
        files = table.files()
        assert sum(files.column("rows").to_pylist()) == fixture.rows, "rows lost"
        if check_order:
            values = table.scan(columns=["value"]).to_arrow().column("value")
            expected = pq.read_table(fixture.paths, columns=["value"]).column("value")
            assert values.equals(expected), "compaction changed the row order"
        remove(table.uri)

    return [
        Case(
            "appendtable",
            run=_compact_full,
            setup=lambda: copy_table(ws, fixture.uri),
            teardown=verify,
        ),
        Case(
            "plain",
            run=lambda out: plain_rewrite(fixture.paths, out),
            setup=sync_then(lambda: ws.fresh_path("plain-compact") + ".parquet"),
            teardown=remove,
        ),
    ]


def _throughput(ws: Workspace) -> list[Result]:
    """(a) Rewriting ``compact_files`` files holding ``big_table`` into target-size files."""
    data, files = ws.big_table, ws.config.compact_files
    step = -(-data.num_rows // files)
    fixture = small_file_table(
        ws, "compact-big", (data.slice(o, step) for o in range(0, data.num_rows, step)), {}
    )
    megabytes = tree_bytes(fixture.uri) / 1e6
    timings = measure(_compaction_cases(ws, fixture, check_order=True), reps=ws.config.compact_reps)
    ours = timings["appendtable"]
    return [
        speed_row(
            GROUP,
            f"compact(full=True) of {fixture.files} files, {megabytes:.0f} MB "
            f"({megabytes / ours.median:.0f} MB/s) vs pq.read_table + pq.write_table",
            ours,
            timings["plain"],
            unit="s",
            target_ratio=None,
            details={"files": fixture.files, "rows": fixture.rows, "megabytes": megabytes},
        )
    ]


def _one_row_files(ws: Workspace) -> list[Result]:
    """(b) Compacting ``tiny_files`` one-row files; the order of the rows is checked."""
    count = ws.config.tiny_files
    fixture = small_file_table(ws, "compact-tiny", (one_row(i) for i in range(count)), {})
    timings = measure(
        _compaction_cases(ws, fixture, check_order=True),
        reps=ws.config.compact_reps * 2,
    )
    ours, plain = timings["appendtable"], timings["plain"]
    return [
        limit_row(
            GROUP,
            f"compact {count} one-row files (order kept, checked) vs pq read + write",
            ours.median * 1000,
            limit_ms=70,
            baseline_ms=plain.median * 1000,
            details={"appendtable_ms": ours.summary(1000), "baseline_ms": plain.summary(1000)},
        )
    ]


@dataclass(frozen=True)
class _Counted:
    live_files: int
    seconds: float  # all the commits
    compact_seconds: float | None = None
    files_before_compact: int | None = None


def _small_commits(ws: Workspace, options: Mapping[str, object], compact: bool) -> _Counted:
    """``small_commits`` appends of ``small_rows`` rows each, fsync on; then, if ``compact``,
    one ``compact(full=True)``."""
    config = ws.config
    data = make_table(config.small_commits * config.small_rows, seed=3)
    table = at.create_table(ws.fresh_path("counts"), SCHEMA, options=options)
    start = time.perf_counter()
    for offset in range(0, data.num_rows, config.small_rows):
        table.append(data.slice(offset, config.small_rows))
    table.close()  # the last commits' background maintenance (counted in the time)
    seconds = time.perf_counter() - start
    try:
        live = len(table.files())
        if not compact:
            return _Counted(live, seconds)
        start = time.perf_counter()
        table.compact(full=True)
        compact_seconds = time.perf_counter() - start
        assert pc.sum(table.files().column("rows")).as_py() == data.num_rows
        return _Counted(len(table.files()), seconds, compact_seconds, live)
    finally:
        remove(table.uri)


def _file_counts(ws: Workspace) -> list[Result]:
    """(c) Live files after ``small_commits`` small commits, both bucket modes, with automatic
    compaction (default options) and with ``write-only`` + one full compaction."""
    config = ws.config
    rows = []
    what = f"{config.small_commits:,} commits of {config.small_rows} rows"
    for label, options in MODES:
        auto = _small_commits(ws, options, compact=False)
        dedicated = _small_commits(ws, {**options, **WRITE_ONLY}, compact=True)
        assert dedicated.files_before_compact is not None
        rows.append(
            count_row(
                GROUP,
                f"live files after {what}, {label}, default options (automatic compaction)",
                auto.live_files,
                "files",
                baseline=dedicated.files_before_compact,
                details={"commit_seconds": auto.seconds},
            )
        )
        rows.append(
            count_row(
                GROUP,
                f"live files after {what}, {label}, write-only, then one compact(full=True)",
                dedicated.live_files,
                "files",
                baseline=dedicated.files_before_compact,
                details={
                    "commit_seconds": dedicated.seconds,
                    "compact_seconds": dedicated.compact_seconds,
                },
            )
        )
    return rows


def bench_compaction(ws: Workspace) -> list[Result]:
    return [*_throughput(ws), *_one_row_files(ws), *_file_counts(ws)]
