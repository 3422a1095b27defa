"""Random interleavings of appends, compactions, expirations and stream reads, checked against
a model of the written rows after every step."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.planning.bucket import bucket_ids

SCHEMA = pa.schema([("day", pa.int32()), ("key", pa.int64()), ("seq", pa.int64())])
FUTURE = 10**15


class Model:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int]] = []  # (day, key, seq) in write order
        self.at_snapshot: dict[int, list[int]] = {}

    def append(self, rows: list[tuple[int, int, int]], snapshot: at.Snapshot) -> None:
        self.rows.extend(rows)
        self.record(snapshot.id)

    def record(self, snapshot_id: int) -> None:
        self.at_snapshot[snapshot_id] = sorted(seq for _, _, seq in self.rows)


def _per_bucket(rows: list[tuple[int, int, int]], buckets: int) -> dict[tuple[int, int], list[int]]:
    ids = (
        bucket_ids([pa.array([k for _, k, _ in rows], pa.int64())], buckets).tolist()
        if rows
        else []
    )
    grouped: dict[tuple[int, int], list[int]] = {}
    for (day, _, seq), bucket in zip(rows, ids, strict=True):
        grouped.setdefault((day, bucket), []).append(seq)
    return grouped


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_random_operations_match_the_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    buckets = 3
    uri = str(tmp_path / "t")
    table = at.create_table(
        uri,
        SCHEMA,
        partition_by=["day"],
        options={
            "bucket": buckets,
            "bucket-key": "key",
            "target-file-size": "4 KB",
            "compaction.min.file-num": 2,
            "compaction.max.file-num": 4,
            "commit.fsync": False,
            "write-only": rng.choice([True, False]),  # also exercise automatic compaction
        },
    )
    model = Model()
    reader = table.stream(mode="latest-full", consumer_id="checker")
    delivered: list[tuple[int, int, int]] = []
    seq = 0
    for step in range(35):
        action = rng.choices(
            ["append", "compact", "full", "expire", "stream", "travel"],
            weights=[10, 3, 1, 2, 3, 2],
        )[0]
        if action == "append":
            rows = [
                (rng.randrange(2), rng.randrange(20), seq + i) for i in range(rng.randrange(1, 60))
            ]
            seq += len(rows)
            snapshot = table.append(pa.table(list(zip(*rows, strict=True)), schema=SCHEMA))
            assert snapshot is not None
            model.append(rows, snapshot)
        elif action in ("compact", "full"):
            snapshot = table.compact(full=action == "full")
            if snapshot is not None:
                model.record(snapshot.id)
        elif action == "expire":
            table.expire_snapshots(retain_min=rng.randrange(1, 4), older_than_ms=FUTURE)
        elif action == "stream":
            while (unit := reader.poll()) is not None:
                for batch in reader.read(unit):
                    delivered.extend(
                        zip(
                            *(batch.column(c).to_pylist() for c in ("day", "key", "seq")),
                            strict=True,
                        )
                    )
            if rng.random() < 0.5:
                reader.commit()
        elif action == "travel" and model.at_snapshot:
            retained = {s.id for s in table.snapshots()}
            candidates = sorted(set(model.at_snapshot) & retained)
            if candidates:
                snapshot_id = rng.choice(candidates)
                got = sorted(
                    table.scan(snapshot_id=snapshot_id).to_arrow().column("seq").to_pylist()
                )
                assert got == model.at_snapshot[snapshot_id], (step, snapshot_id)

        # after every step: the latest snapshot holds exactly the written rows ...
        fresh = at.open_table(uri)
        assert sorted(fresh.scan().to_arrow().column("seq").to_pylist()) == sorted(
            s for *_, s in model.rows
        ), step
        # ... each bucket reads back in write order ...
        batch_rows: list[tuple[int, int, int]] = []
        for split in fresh.scan().plan():
            for batch in fresh.read(split):
                batch_rows.extend(
                    zip(*(batch.column(c).to_pylist() for c in ("day", "key", "seq")), strict=True)
                )
        for key, seqs in _per_bucket(batch_rows, buckets).items():
            assert seqs == sorted(seqs), (step, key)
        # ... and the stream delivered a prefix of the appends, once each, in bucket order
        assert len({s for *_, s in delivered}) == len(delivered)
        assert {s for *_, s in delivered} <= {s for *_, s in model.rows}
        for key, seqs in _per_bucket(delivered, buckets).items():
            assert seqs == sorted(seqs), (step, key)
    while (unit := reader.poll()) is not None:
        for batch in reader.read(unit):
            delivered.extend(
                zip(*(batch.column(c).to_pylist() for c in ("day", "key", "seq")), strict=True)
            )
    assert sorted(s for *_, s in delivered) == sorted(s for *_, s in model.rows)
