"""Manifest merging keeps metadata per commit and per scan bounded as history grows."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pyarrow as pa

import appendtable as at
from appendtable.metadata.models import CommitMessage, DataFileMeta

SCHEMA = pa.schema([("n", pa.int64())])
WIDE = pa.schema([("key", pa.int64()), ("value", pa.float64()), ("text", pa.string())])


def _written_file(table: at.Table) -> DataFileMeta:
    """The metadata of one real file of ``table`` (a template for many more)."""
    table.append(pa.table({"key": [7], "value": [0.5], "text": ["abcdefghij"]}, schema=WIDE))
    (split,) = table.scan().plan()
    (file,) = split.files
    return file


def test_manifest_count_stays_bounded_over_many_commits(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(
        uri,
        SCHEMA,
        options={"manifest.merge-min-count": 4, "commit.fsync": False, "write-only": True},
    )
    counts = []
    for n in range(600):
        snapshot = table.append(pa.table({"n": [n]}, schema=SCHEMA))
        assert snapshot is not None
        counts.append(len(table._state.manifests.all_manifests(snapshot)))
    # tiers of at most 4 manifests each: the list never grows with history
    assert max(counts[100:]) <= 4 * 4
    fresh = at.open_table(uri)
    assert sorted(fresh.scan().to_arrow().column("n").to_pylist()) == list(range(600))
    files = fresh.files()
    assert files.num_rows == 600
    assert files.column("min_sequence").to_pylist() == list(range(600))


def test_merged_manifests_are_rolled_full_and_never_merged_again(tmp_path: Path) -> None:
    """A merge rolls its output at the target size; those full manifests must leave the
    merge tiers. They were rolled by an estimate of the encoded size that ran above it (a
    manifest of the benchmarks' schema came out at 77 % of the target), so they stayed
    "small": once ``merge-min-count`` of them existed, every commit merged them all and
    re-rolled them into as many again (benchmarks "million": from 960,000 files on, each
    commit rewrote 186 MB of manifests). The bytes of manifests written must stay a small
    multiple of the bytes of manifests live."""
    uri = str(tmp_path / "t")
    target = 64 * 1024
    table = at.create_table(
        uri,
        WIDE,
        options={
            "manifest.target-file-size": target,
            "manifest.merge-min-count": 4,
            "commit.fsync": False,
            "write-only": True,
        },
    )
    committer = table.committer("c")
    template = _written_file(table)
    for commit in range(150):
        files = tuple(
            msgspec.structs.replace(template, path=f"bucket-0/data-{commit:016x}{i:016x}-0.parquet")
            for i in range(20)
        )
        committer.commit(
            [CommitMessage(partition=(), bucket=0, total_buckets=-1, schema_id=0, new_files=files)]
        )
    latest = table.latest_snapshot()
    assert latest is not None and latest.total_file_count == 150 * 20 + 1
    live = table._state.manifests.all_manifests(latest)
    live_bytes = sum(m.file_size for m in live)
    written = sum(
        p.stat().st_size
        for p in (tmp_path / "t" / "manifest").glob("manifest-*")
        if not p.name.startswith("manifest-list-")
    )
    assert written <= 6 * live_bytes, (written, live_bytes)
    # below the target: at most merge-min-count - 1 in each of tiers 0 and 1 (16-64 KiB)
    assert sum(1 for m in live if m.file_size < target) <= 2 * 3
