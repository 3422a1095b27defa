"""Manifest merging keeps metadata per commit and per scan bounded as history grows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import appendtable as at

SCHEMA = pa.schema([("n", pa.int64())])


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
