"""Tables of many files built fast, for the million-file benchmark: data-file metadata that
names files never written, committed through the table's own committer (``Table.committer``),
so the manifests, manifest lists, merges and snapshots are exactly what real appends of those
files would produce. Planning never opens a data file, so it cannot tell.

The shape: ``files`` live files over ``partitions`` daily partitions (``day``, a date) in
``snapshots`` APPEND snapshots. Commit ``i`` appends its share of the files (about
``files / snapshots``) to partition ``i * partitions // snapshots``: the history of a table
ingested day after day. Statistics are realistic for the benchmark's schema: row counts of
tens of thousands, ``key`` ranges spread over the key domain, ``value`` in [0, 1), strings of
8 to 12 letters, a few null counts; every file has a footer checksum.

File names are derived from the file's index (``data-<seed><index>-0.parquet``), so the
paths of a shape are known without reading the table (``expected_paths``), to check a plan
against, and to create the files on disk (empty) where a benchmark lists them.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

import appendtable as at
from appendtable.metadata.models import CommitMessage, DataFileMeta

__all__ = [
    "FIRST_DAY",
    "SCHEMA",
    "BuildReport",
    "Shape",
    "build_table",
    "commit_files",
    "day_of",
    "days_since_epoch",
    "expected_paths",
    "file_messages",
    "partition_dir",
    "touch_files",
]

SCHEMA = pa.schema(
    [("day", pa.date32()), ("key", pa.int64()), ("value", pa.float64()), ("text", pa.string())]
)
FIRST_DAY = dt.date(2000, 1, 1)
_EPOCH = dt.date(1970, 1, 1)
#: Options of the built tables: no automatic compaction or expiration (the files do not
#: exist to be rewritten; the benchmark expires explicitly), a limit that lets one
#: expiration run take 10,000 snapshots, and fsync off while building (``build_table``
#: turns it on at the end: the measurements run with the default).
BUILD_OPTIONS = {
    "write-only": "true",
    "commit.fsync": "false",
    "snapshot.expire.limit": "100000",
}
_CHUNK = 50_000  # files whose statistics are drawn at once
_KEYS = 100_000
_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)


@dataclass(frozen=True)
class Shape:
    """``files`` live files over ``partitions`` partitions in ``snapshots`` snapshots."""

    files: int
    partitions: int
    snapshots: int
    seed: int = 7

    def __post_init__(self) -> None:
        if not 1 <= self.partitions <= self.snapshots <= self.files:
            raise ValueError(f"need 1 <= partitions <= snapshots <= files: {self}")

    def commit_partition(self, commit: int) -> int:
        """The partition (0-based) commit ``commit`` (0-based) appends to."""
        return commit * self.partitions // self.snapshots

    def commit_files(self, commit: int) -> range:
        """The indices of the files commit ``commit`` appends."""
        return range(
            commit * self.files // self.snapshots, (commit + 1) * self.files // self.snapshots
        )

    def file_name(self, index: int) -> str:
        return f"data-{self.seed:08x}{index:024x}-0.parquet"


def day_of(partition: int) -> dt.date:
    return FIRST_DAY + dt.timedelta(days=partition)


def days_since_epoch(partition: int) -> int:
    """The stored value of the partition (a date is stored as days since 1970-01-01)."""
    return (day_of(partition) - _EPOCH).days


def partition_dir(partition: int) -> str:
    return f"day={day_of(partition).isoformat()}/bucket-0"


def expected_paths(shape: Shape) -> Iterator[tuple[int, str]]:
    """(partition, path) of every file of ``shape``, from the shape alone."""
    for commit in range(shape.snapshots):
        directory = partition_dir(shape.commit_partition(commit))
        for index in shape.commit_files(commit):
            yield shape.commit_partition(commit), f"{directory}/{shape.file_name(index)}"


@dataclass(frozen=True)
class _Stats:
    """Statistics of a chunk of files, as Python lists (one element per file)."""

    rows: list[int]
    sizes: list[int]
    crcs: list[int]
    key_min: list[int]
    key_max: list[int]
    value_min: list[float]
    value_max: list[float]
    value_nulls: list[int]
    text_min: list[str]
    text_max: list[str]


def _words(rng: np.random.Generator, count: int, first: tuple[int, int]) -> list[str]:
    """``count`` random lowercase words of 8 to 12 letters whose first letter is in the
    half-open range ``first`` (indices into the alphabet)."""
    letters = _ALPHABET[rng.integers(0, 26, size=(count, 12))]
    letters[:, 0] = _ALPHABET[rng.integers(*first, size=count)]
    lengths = rng.integers(8, 13, size=count)
    raw = letters.tobytes()
    return [raw[i * 12 : i * 12 + n].decode("ascii") for i, n in enumerate(lengths.tolist())]


def _stats(rng: np.random.Generator, count: int) -> _Stats:
    rows = rng.integers(20_000, 200_000, size=count)
    keys = np.sort(rng.integers(0, _KEYS, size=(count, 2)), axis=1)
    nulls = np.where(rng.random(count) < 0.1, rng.integers(1, 50, size=count), 0)
    return _Stats(
        rows=rows.tolist(),
        sizes=(rows * 21 + rng.integers(2_000, 9_000, size=count)).tolist(),
        crcs=rng.integers(0, 2**32, size=count).tolist(),
        key_min=keys[:, 0].tolist(),
        key_max=keys[:, 1].tolist(),
        value_min=(rng.random(count) * 1e-4).tolist(),
        value_max=(1 - rng.random(count) * 1e-4).tolist(),
        value_nulls=nulls.tolist(),
        text_min=_words(rng, count, (0, 2)),
        text_max=_words(rng, count, (24, 26)),
    )


def file_messages(shape: Shape, now_ms: int) -> Iterator[tuple[int, tuple[DataFileMeta, ...]]]:
    """(partition, files) of each commit of ``shape``, in commit order (the files' sequence
    numbers are local to the commit, as a writer's are)."""
    rng = np.random.default_rng(shape.seed)
    stats: _Stats | None = None
    chunk_start = 0
    for commit in range(shape.snapshots):
        partition = shape.commit_partition(commit)
        directory = partition_dir(partition)
        day = days_since_epoch(partition)
        files = []
        for index in shape.commit_files(commit):
            if stats is None or index - chunk_start >= _CHUNK:
                chunk_start = index
                stats = _stats(rng, min(_CHUNK, shape.files - index))
            i = index - chunk_start
            rows = stats.rows[i]
            files.append(
                DataFileMeta(
                    path=f"{directory}/{shape.file_name(index)}",
                    file_size=stats.sizes[i],
                    row_count=rows,
                    min_seq=0,
                    max_seq=rows - 1,
                    schema_id=0,
                    creation_time_ms=now_ms,
                    source=0,
                    null_counts=(0, 0, stats.value_nulls[i], 0),
                    min_values=(day, stats.key_min[i], stats.value_min[i], stats.text_min[i]),
                    max_values=(day, stats.key_max[i], stats.value_max[i], stats.text_max[i]),
                    footer_crc=stats.crcs[i],
                )
            )
        yield partition, tuple(files)


@dataclass(frozen=True)
class BuildReport:
    """How long building took."""

    seconds: float
    snapshots: int
    files: int


def commit_files(table: at.Table, shape: Shape) -> BuildReport:
    """Commit the files of ``shape`` to ``table`` (created with ``SCHEMA`` partitioned by
    ``day`` and ``BUILD_OPTIONS``), one snapshot per commit of the shape."""
    start = time.perf_counter()
    committer = table.committer("fabricate")
    now_ms = int(time.time() * 1000)
    for partition, files in file_messages(shape, now_ms):
        message = CommitMessage(
            partition=(days_since_epoch(partition),),
            bucket=0,
            total_buckets=-1,
            schema_id=0,
            new_files=files,
        )
        if committer.commit([message]) is None:
            raise RuntimeError("a fabricated commit committed nothing")
    return BuildReport(time.perf_counter() - start, shape.snapshots, shape.files)


def build_table(uri: str, shape: Shape) -> tuple[at.Table, BuildReport]:
    """A new table at ``uri`` holding ``shape``'s files (metadata only), with fsync back on
    (the default) once built: one ALTER snapshot after the shape's APPEND snapshots."""
    table = at.create_table(uri, SCHEMA, partition_by=["day"], options=BUILD_OPTIONS)
    report = commit_files(table, shape)
    table.unset_options(["commit.fsync"])
    return table, report


def touch_files(uri: str, shape: Shape) -> float:
    """Create every data file of ``shape`` under ``uri`` as an empty file (for listing);
    returns the seconds it took."""
    start = time.perf_counter()
    made: set[str] = set()
    flags = os.O_CREAT | os.O_WRONLY | os.O_EXCL
    for _partition, path in expected_paths(shape):
        directory = path.rsplit("/", 1)[0]
        if directory not in made:
            os.makedirs(os.path.join(uri, directory), exist_ok=True)
            made.add(directory)
        os.close(os.open(os.path.join(uri, path), flags, 0o644))
    return time.perf_counter() - start
