"""The million-file benchmark's builder (``benchmarks.fabricate``): a fabricated table plans
exactly the files and partitions its shape says, with metadata shaped like a real write's."""

from __future__ import annotations

import collections
import datetime as dt
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from benchmarks.fabricate import (
    SCHEMA,
    Shape,
    build_table,
    day_of,
    expected_paths,
    partition_dir,
    touch_files,
)


@pytest.mark.parametrize(
    "shape", [Shape(10, 1, 10), Shape(2_345, 17, 230), Shape(1_000, 100, 100), Shape(7, 3, 5)]
)
def test_a_shape_spreads_every_file_once_over_its_commits_and_partitions(shape: Shape) -> None:
    indices = [i for c in range(shape.snapshots) for i in shape.commit_files(c)]
    assert indices == list(range(shape.files))
    partitions = [shape.commit_partition(c) for c in range(shape.snapshots)]
    assert partitions == sorted(partitions)  # day after day
    assert set(partitions) == set(range(shape.partitions))
    assert all(len(shape.commit_files(c)) >= 1 for c in range(shape.snapshots))


def test_a_shape_refuses_more_partitions_than_snapshots_or_snapshots_than_files() -> None:
    with pytest.raises(ValueError, match="partitions <= snapshots"):
        Shape(files=10, partitions=11, snapshots=10)
    with pytest.raises(ValueError, match="snapshots <= files"):
        Shape(files=10, partitions=1, snapshots=11)


def _planned(table: at.Table, row_filter: object = None) -> list[at.Split]:
    return at.open_table(table.uri).scan(filter=row_filter).plan()


def test_a_fabricated_table_plans_exactly_the_files_and_partitions_built(
    tmp_path: Path,
) -> None:
    shape = Shape(files=2_345, partitions=17, snapshots=230)
    table, report = build_table(str(tmp_path / "t"), shape)
    assert (report.files, report.snapshots) == (2_345, 230)
    expected = list(expected_paths(shape))
    latest = table.latest_snapshot()
    assert latest is not None
    assert latest.id == shape.snapshots + 1  # the APPEND snapshots, then fsync back on
    assert latest.total_file_count == shape.files
    assert table.option("commit.fsync") is True
    # the real committer merged manifests as appends do: far fewer than one per commit
    manifests = table._state.manifests.all_manifests(latest)
    assert len(manifests) < shape.snapshots / 4

    splits = _planned(table)
    planned = collections.Counter(f.path for s in splits for f in s.files)
    assert planned == collections.Counter(path for _, path in expected)
    per_partition = collections.Counter(p for p, _ in expected)
    for partition in (0, 8, 16):
        one_day = _planned(table, [("day", "=", day_of(partition))])
        paths = {f.path for s in one_day for f in s.files}
        assert paths == {path for p, path in expected if p == partition}
        assert len(paths) == per_partition[partition]
        assert {s.partition["day"] for s in one_day} == {day_of(partition)}
    rows = sum(f.row_count for s in splits for f in s.files)
    assert rows == latest.total_record_count


def test_fabricated_file_metadata_is_shaped_like_a_real_write(tmp_path: Path) -> None:
    shape = Shape(files=40, partitions=2, snapshots=4)
    table, _ = build_table(str(tmp_path / "t"), shape)
    real = pa.table(
        {"day": [day_of(1)], "key": [5], "value": [0.5], "text": ["abcdefgh"]}, schema=SCHEMA
    )
    table.append(real)
    files = [f for s in _planned(table, [("day", "=", day_of(1))]) for f in s.files]
    written = [f for f in files if (tmp_path / "t" / f.path).exists()]
    fabricated = [f for f in files if f not in written]
    assert len(written) == 1 and len(fabricated) == 20
    for file in fabricated:
        assert file.path.rsplit("/", 1)[0] == written[0].path.rsplit("/", 1)[0]
        for field in ("min_values", "max_values", "null_counts"):
            assert [type(v) for v in getattr(file, field)] == [
                type(v) for v in getattr(written[0], field)
            ], field
        assert file.min_values[0] == file.max_values[0] == written[0].min_values[0]
        assert all(lo <= hi for lo, hi in zip(file.min_values, file.max_values, strict=True))
        assert file.footer_crc is not None and file.row_count > 0 and file.file_size > 0


def test_touch_files_creates_every_data_file_where_the_table_says(tmp_path: Path) -> None:
    shape = Shape(files=30, partitions=3, snapshots=6)
    table, _ = build_table(str(tmp_path / "t"), shape)
    touch_files(table.uri, shape)
    on_disk = {
        str(p.relative_to(tmp_path / "t")) for p in (tmp_path / "t").glob("day=*/bucket-0/*")
    }
    assert on_disk == {path for _, path in expected_paths(shape)}
    assert all(path.startswith(partition_dir(p)) for p, path in expected_paths(shape))
    # listed, every file is referenced: only a file no snapshot names is an orphan
    stray = f"{partition_dir(1)}/data-{'f' * 32}-0.parquet"
    (tmp_path / "t" / stray).touch()
    an_hour_ago = time.time() - 3600  # older than the cut-off below, whatever the clock's grain
    os.utime(tmp_path / "t" / stray, (an_hour_ago, an_hour_ago))
    result = table.remove_orphan_files(older_than=dt.timedelta(0), dry_run=True)
    assert result.files == [stray]
