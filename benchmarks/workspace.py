"""Benchmark sizes and the temporary workspace holding shared fixtures (data, files, tables)."""

from __future__ import annotations

import gc
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
import pyarrow.parquet as pq

import appendtable as at
from appendtable.storage.base import is_temp_name
from benchmarks.data import SCHEMA, make_numeric, make_table, one_row
from benchmarks.servers import Servers

__all__ = [
    "FULL",
    "QUICK",
    "SMOKE",
    "Config",
    "Workspace",
    "commit_samples",
    "grow_history",
    "remove",
]


@dataclass(frozen=True)
class Config:
    """Sizes and repetitions of one benchmark mode."""

    mode: str
    big_rows: int  # rows of the append and full-read benchmarks
    big_reps: int
    point_rows: int
    point_commits: int
    point_buckets: int
    point_queries: int  # timed point queries per case (each on a different key)
    history_sizes: tuple[int, ...]  # snapshot counts at which commit latency is measured
    commit_samples: int  # commits timed per history size
    plan_reps: int
    compact_files: int  # files holding big_table in the compaction throughput benchmark
    compact_reps: int
    tiny_files: int  # one-row files compacted at once (the DESIGN target is about 500)
    small_commits: int  # commits of the file-count, peer and incremental-read benchmarks
    small_rows: int  # rows per small commit
    spark_rows: int
    spark_reps: int
    stream_appends: int  # appends timed through the Spark streaming query
    peer_rows: int  # rows of the peer bulk benchmarks
    peer_reps: int
    curve_points: tuple[int, ...]  # history sizes sampled on the scaling curves
    curve_commits: int  # commits timed at each point
    grid_rows: int  # rows written per point of the partitions x buckets grid
    grid_reps: int
    grid_warmup: int
    grid_partitions: tuple[int, ...]
    grid_buckets: tuple[int, ...]
    compaction_points: tuple[int, ...]  # small-file counts of the compaction curve
    # Fixed in the full and quick modes, smaller in the smoke profile only:
    warmup_commits: int = 5  # untimed commits before commit latencies are sampled
    min_store_commits: int = 20  # commits timed per store, at least
    max_warmup: int | None = None  # cap on the Spark benchmarks' untimed rounds (None: none)
    group_appends: int = 20  # 1,000-row appends before the consumer-group idle poll
    group_idle_polls: int = 3000  # polls per median of the consumer-group idle poll
    group_deaths: int = 6  # member deaths timed by the consumer-group rebalance benchmark
    keep_up_members: int = 4  # member processes of the consumer-group keep-up benchmark
    integrity_files: int = 500  # one-row files read by the integrity benchmark
    memory_partitions: int = 100  # partitions of the many-writers memory benchmark
    index_files: int = 100  # one-append files of the file-index lookups
    delete_appends: int = 10  # appends building each table of the delete benchmark
    tailing_seconds: float = 6.0  # how long the writer of the tailing benchmark appends
    append_latency_appends: int = 600  # timed one-row appends per mode and pattern
    # The million-file tables (group "million", run only when named: ``make bench-scale``):
    scale_files: tuple[int, ...] = (10_000, 100_000, 1_000_000)  # live files of each table
    scale_commits: int = 100  # one-file commits timed per round
    scale_delta_commits: int = 20  # the same for delta-rs (0.1-0.4 s each at 10-100 k files)
    scale_rounds: int = 3  # rounds (repetitions) of each measurement where cheap
    scale_touch_max: int = 1_000_000  # largest table whose data files are created (empty)
    scale_delta_max: int = 100_000  # largest table also built as a delta-rs log


FULL = Config(
    mode="full",
    big_rows=10_000_000,
    big_reps=5,
    point_rows=2_000_000,
    point_commits=4,
    point_buckets=64,
    point_queries=30,
    history_sizes=(1, 1_000, 10_000),
    commit_samples=200,
    plan_reps=30,
    compact_files=500,
    compact_reps=3,
    tiny_files=500,
    small_commits=1_000,
    small_rows=100,
    spark_rows=4_000_000,
    spark_reps=5,
    stream_appends=10,
    peer_rows=2_000_000,
    peer_reps=3,
    curve_points=(1, 10, 100, 1_000, 3_000, 10_000),
    curve_commits=30,
    grid_rows=1_000_000,
    grid_reps=2,
    grid_warmup=1,
    grid_partitions=(1, 10, 100),
    grid_buckets=(1, 4, 16),
    compaction_points=(50, 200, 500, 1_000, 2_000),
    index_files=1_000,
)
QUICK = Config(
    mode="quick",
    big_rows=1_000_000,
    big_reps=3,
    point_rows=200_000,
    point_commits=4,
    point_buckets=64,
    point_queries=15,
    history_sizes=(1, 100, 300),
    commit_samples=40,
    plan_reps=15,
    compact_files=100,
    compact_reps=2,
    tiny_files=200,
    small_commits=100,
    small_rows=100,
    spark_rows=200_000,
    spark_reps=1,
    stream_appends=2,
    peer_rows=200_000,
    peer_reps=1,
    curve_points=(1, 10, 100, 300),
    curve_commits=10,
    grid_rows=100_000,
    grid_reps=1,
    grid_warmup=0,
    grid_partitions=(1, 8, 32),
    grid_buckets=(1, 4, 16),
    compaction_points=(50, 150, 300),
    scale_files=(1_000, 10_000, 100_000),
    append_latency_appends=100,
)

#: The smallest sizes that still run every code path of every benchmark (tests run them all, so
#: that ``make bench-quick`` and ``make bench`` cannot break unnoticed; the numbers mean nothing).
SMOKE = Config(
    mode="smoke",
    big_rows=2_000,
    big_reps=1,
    point_rows=2_000,
    point_commits=2,
    point_buckets=4,
    point_queries=3,
    history_sizes=(1, 3),
    commit_samples=2,
    plan_reps=1,
    compact_files=4,
    compact_reps=1,
    tiny_files=4,
    small_commits=4,
    small_rows=10,
    spark_rows=2_000,
    spark_reps=1,
    stream_appends=1,
    peer_rows=2_000,
    peer_reps=1,
    curve_points=(1, 3),
    curve_commits=2,
    grid_rows=2_000,
    grid_reps=1,
    grid_warmup=0,
    grid_partitions=(1, 2),
    grid_buckets=(1, 2),
    compaction_points=(4, 8),
    warmup_commits=1,
    min_store_commits=1,
    max_warmup=0,
    group_appends=2,
    group_idle_polls=10,
    group_deaths=1,
    keep_up_members=2,
    integrity_files=4,
    memory_partitions=4,
    index_files=4,
    delete_appends=2,
    tailing_seconds=0.2,
    append_latency_appends=3,
    scale_files=(100, 1_000),
    scale_commits=2,
    scale_delta_commits=2,
    scale_rounds=1,
)


def remove(path: str) -> None:
    """Delete a file or directory tree if it exists."""
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.unlink(path)


def tree_bytes(path: str) -> int:
    """Total size of the table's files under ``path``: temporary files of writes in flight
    (such as the LATEST hint a commit writes in the background) are not the table's, and may
    vanish while they are counted (``appendtable.storage.base.is_temp_name``)."""
    total = 0
    for directory, _dirs, names in os.walk(path):
        for name in names:
            if is_temp_name(name):
                continue
            try:
                total += os.path.getsize(os.path.join(directory, name))
            except FileNotFoundError:
                continue
    return total


class Workspace:
    """A temporary directory (deleted on exit), fixtures built on first use, and the running
    servers the caller lends (``servers``; by default none: benchmarks start their own)."""

    def __init__(
        self, config: Config, parent: str | None = None, servers: Servers | None = None
    ) -> None:
        self.config = config
        self.servers = servers if servers is not None else Servers()
        self.root = tempfile.mkdtemp(prefix="appendtable-bench-", dir=parent)
        self._counter = itertools.count()
        #: A table with ``history_sizes[-1]`` or more one-row snapshots, once built.
        self.history_uri: str | None = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_exc: object) -> None:
        remove(self.root)

    def warmup(self, rounds: int) -> int:
        """Untimed warm-up rounds: ``rounds``, or fewer where the sizes cap them."""
        cap = self.config.max_warmup
        return rounds if cap is None else min(rounds, cap)

    def fresh_path(self, stem: str) -> str:
        """A path under the workspace that does not exist yet."""
        return os.path.join(self.root, f"{stem}-{next(self._counter)}")

    @cached_property
    def big_table(self) -> pa.Table:
        """The in-memory data of the append and read benchmarks (one copy, reused)."""
        return make_table(self.config.big_rows, seed=42)

    @cached_property
    def big_numeric(self) -> pa.Table:
        """All-numeric rows of the same count (the narrow-row append benchmarks)."""
        return make_numeric(self.config.big_rows)

    @cached_property
    def big_plain_file(self) -> str:
        return write_plain(self.big_table, self.fresh_path("plain") + ".parquet")

    @cached_property
    def big_unaware_table(self) -> str:
        """URI of a bucket = -1 table holding ``big_table`` in one snapshot."""
        table = at.create_table(self.fresh_path("read"), SCHEMA)
        table.append(self.big_table)
        return table.uri

    def history_table(self) -> str:
        """URI of a table with ``history_sizes[-1]`` one-row snapshots and no compaction
        (built quickly, with fsync off, unless the commit benchmark already left one)."""
        if self.history_uri is None:
            table = at.create_table(
                self.fresh_path("history"),
                SCHEMA,
                options={"commit.fsync": "false", "write-only": "true"},
            )
            grow_history(table, self.config.history_sizes[-1])
            self.history_uri = table.uri
        return self.history_uri


def write_plain(data: pa.Table, path: str) -> str:
    """The baseline: one Parquet file, zstd, pyarrow defaults otherwise."""
    pq.write_table(data, path, compression="zstd")
    return path


def grow_history(table: at.Table, snapshots: int) -> None:
    """Append one-row batches until the table has ``snapshots`` snapshots."""
    latest = table.latest_snapshot()
    for index in range(latest.id if latest is not None else 0, snapshots):
        table.append(one_row(index))


def commit_samples(table: at.Table, start: int, count: int) -> Iterator[tuple[float, float]]:
    """(commit seconds, whole append seconds) of ``count`` one-row appends. The commit is
    ``TableCommit.commit`` of an already written file (so it includes whatever maintenance
    the table runs after a commit)."""
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
