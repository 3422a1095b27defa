"""Several processes appending to one table at once lose nothing and duplicate nothing."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.processes import run_in_processes

SCHEMA = pa.schema([("writer", pa.int32()), ("n", pa.int32())])


def _append_many(uri: str, writer: int, commits: int, queue: Any) -> None:
    table = at.open_table(uri)
    acknowledged = []
    for n in range(commits):
        snapshot = table.append(pa.table({"writer": [writer], "n": [n]}, schema=SCHEMA))
        assert snapshot is not None
        acknowledged.append(snapshot.id)
    queue.put((writer, acknowledged))


@pytest.mark.slow
def test_two_processes_append_200_times_each(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, SCHEMA, options={"commit.min-retry-wait": "1 ms"})
    results = dict(run_in_processes(_append_many, [(uri, writer, 200) for writer in (0, 1)]))
    table = at.open_table(uri)
    rows = table.scan().to_arrow().to_pylist()
    assert sorted((r["writer"], r["n"]) for r in rows) == [
        (w, n) for w in (0, 1) for n in range(200)
    ]
    snapshots = table.snapshots()
    ids = [s.id for s in snapshots]
    assert ids == list(range(ids[0], ids[-1] + 1))  # no gaps
    appends = [s.id for s in snapshots if s.kind == at.CommitKind.APPEND]
    acknowledged = sorted(results[0] + results[1])
    assert len(set(acknowledged)) == 400  # every acknowledged commit is its own snapshot
    assert appends == [i for i in acknowledged if i >= ids[0]]
    assert all(s.delta_record_count == 1 for s in snapshots if s.kind == at.CommitKind.APPEND)
    # both processes also compacted after their commits: the table stays compact
    assert any(s.kind == at.CommitKind.COMPACT for s in snapshots)
    assert snapshots[-1].total_record_count == 400
    assert table.files().num_rows < 100
