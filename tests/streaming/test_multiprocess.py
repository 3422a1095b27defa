"""A writer process appends while two reader processes split the buckets between them."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.planning.bucket import bucket_ids
from tests.helpers.processes import run_in_processes

SCHEMA = pa.schema([("key", pa.int64()), ("seq", pa.int64())])
COMMITS = 60
ROWS = 25


def _writer(uri: str) -> None:
    table = at.open_table(uri)
    for commit in range(COMMITS):
        start = commit * ROWS
        keys = [(start + i) * 7919 % 17 for i in range(ROWS)]
        table.append(
            pa.table({"key": keys, "seq": list(range(start, start + ROWS))}, schema=SCHEMA)
        )
        time.sleep(0.01)


def _reader(uri: str, name: str, buckets: list[int], expected: int, queue: Any) -> None:
    table = at.open_table(uri)
    reader = table.stream(mode="latest-full", consumer_id=name, buckets=buckets, poll_interval=0.01)
    delivered: list[tuple[int, int]] = []
    deadline = time.monotonic() + 120
    while len(delivered) < expected and time.monotonic() < deadline:
        unit = reader.poll()
        if unit is None:
            time.sleep(0.01)
            continue
        for batch in reader.read(unit):
            delivered.extend(
                zip(batch.column("key").to_pylist(), batch.column("seq").to_pylist(), strict=True)
            )
        reader.commit()
    queue.put((name, delivered))


@pytest.mark.slow
def test_writer_and_two_bucket_split_readers(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, SCHEMA, options={"bucket": 4, "bucket-key": "key"})
    all_keys = pa.array([(s * 7919) % 17 for s in range(COMMITS * ROWS)], pa.int64())
    buckets = bucket_ids([all_keys], 4)
    expected = {
        name: int(sum(1 for b in buckets if b in subset))
        for name, subset in (("r1", {0, 1}), ("r2", {2, 3}))
    }
    writer = multiprocessing.get_context("spawn").Process(target=_writer, args=(uri,))
    writer.start()
    results = dict(
        run_in_processes(
            _reader,
            [(uri, "r1", [0, 1], expected["r1"]), (uri, "r2", [2, 3], expected["r2"])],
        )
    )
    writer.join(timeout=60)
    assert writer.exitcode == 0
    everything = sorted(seq for rows in results.values() for _, seq in rows)
    assert everything == list(range(COMMITS * ROWS))  # exactly once across both readers
    for name, subset in (("r1", {0, 1}), ("r2", {2, 3})):
        rows = results[name]
        row_buckets = bucket_ids([pa.array([k for k, _ in rows], pa.int64())], 4).tolist()
        assert set(row_buckets) <= subset
        per_bucket: dict[int, list[int]] = {}
        for (_, seq), bucket in zip(rows, row_buckets, strict=True):
            per_bucket.setdefault(bucket, []).append(seq)
        for seqs in per_bucket.values():
            assert seqs == sorted(seqs)  # write order within each bucket
    # the writer compacted as it went; readers skipped those snapshots and caught up fully
    table = at.open_table(uri)
    kinds = {s.kind for s in table.snapshots()}
    assert at.CommitKind.COMPACT in kinds
    last_append = max(s.id for s in table.snapshots() if s.kind == at.CommitKind.APPEND)
    assert table.consumers() == {"r1": last_append + 1, "r2": last_append + 1}
