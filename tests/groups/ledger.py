"""Bookkeeping for consumer-group tests: what each member delivered, what it committed, and
the check that the commits of each bucket tile its rows exactly once, in write order.

The oracle is independent of the group code: a row's bucket comes from ``bucket_ids`` (the
table's hash, itself tested against Spark), and the expected rows of a bucket are the rows the
writer appended (its ``seq`` column grows in write order)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

import appendtable as at

Position = tuple[int, bool]


def position(p: at.StreamPosition) -> Position:
    assert p.next_snapshot is not None
    return (p.next_snapshot, p.full)


@dataclass
class Interval:
    """One successful commit of one bucket: the rows its committer delivered between two
    positions of the bucket."""

    start: Position
    end: Position
    seqs: list[int]
    member: str


@dataclass
class MemberLog:
    """What one member delivered per bucket since its last commit of that bucket."""

    name: str
    delivered: dict[int, list[int]] = field(default_factory=dict)
    starts: dict[int, Position] = field(default_factory=dict)
    #: Where the last unit delivered of each bucket ended (a later unit before it: rewound).
    ends: dict[int, Position] = field(default_factory=dict)


@dataclass
class Ledger:
    """Committed intervals of every bucket, from every member."""

    buckets: int
    intervals: dict[int, list[Interval]] = field(default_factory=dict)
    #: Commits that raised ConsumerFencedError.
    fences: int = 0

    def delivered(self, log: MemberLog, reader: at.GroupReader, unit: at.StreamUnit) -> int:
        """Read ``unit`` through ``reader``, recording its rows per bucket; the row count."""
        committed = {b: position(p) for b, p in reader.committed.items()}
        here = (unit.snapshot_id, unit.full)
        for bucket in unit.group_units:
            rewound = here < log.ends.get(bucket, here)
            if log.starts.get(bucket) != committed[bucket] or rewound:
                # first delivery since the last commit, or the bucket was claimed again
                # meanwhile (what was delivered before will come again): start afresh
                log.starts[bucket] = committed[bucket]
                log.delivered[bucket] = []
            log.ends[bucket] = position(unit.next_position)
        count = 0
        for batch in reader.read(unit):
            seqs = batch.column("seq").to_numpy()
            buckets = at.bucket_ids([batch.column("key")], self.buckets)
            for bucket in np.unique(buckets):
                assert int(bucket) in unit.group_units, "a row of a bucket the unit does not cover"
                log.delivered[int(bucket)].extend(seqs[buckets == bucket].tolist())
            count += batch.num_rows
        return count

    def commit(self, log: MemberLog, reader: at.GroupReader) -> at.ConsumerFencedError | None:
        """``reader.commit()``, recording the intervals it committed."""
        ends = {b: position(p) for b, p in reader.positions.items()}
        starts = {b: position(p) for b, p in reader.committed.items()}
        moved = {b for b in ends if ends[b] != starts[b]}
        fenced: at.ConsumerFencedError | None = None
        try:
            reader.commit()
            succeeded = moved
        except at.ConsumerFencedError as exc:
            fenced = exc
            self.fences += 1
            succeeded = set(exc.committed)
            # fenced: buckets whose progress was refused, and buckets lost and claimed again
            # since the last commit (whose earlier reads are void, whether they moved or not)
            assert succeeded <= moved <= set(exc.fenced) | succeeded
        for bucket in moved & succeeded:
            valid = log.starts.get(bucket) == starts[bucket]
            rows = log.delivered.get(bucket, []) if valid else []
            self.intervals.setdefault(bucket, []).append(
                Interval(starts[bucket], ends[bucket], list(rows), log.name)
            )
        for bucket in moved | set(fenced.fenced if fenced is not None else ()):
            log.delivered.pop(bucket, None)
            log.starts.pop(bucket, None)
        return fenced

    def check(self, expected: dict[int, list[int]], start: Position) -> None:
        """The intervals of each bucket chain from ``start`` without gap or overlap, and
        their rows are the bucket's rows, each once, in write order."""
        for bucket, rows in expected.items():
            chain = self.intervals.get(bucket, [])
            at_position = start
            seqs: list[int] = []
            for interval in sorted(chain, key=lambda i: i.start):
                assert interval.start == at_position, (bucket, interval, at_position)
                at_position = interval.end
                seqs.extend(interval.seqs)
            assert seqs == rows, (
                f"bucket {bucket}: committed {len(seqs)} rows, table has {len(rows)}"
            )


def expected_rows(keys: np.ndarray, seqs: np.ndarray, buckets: int) -> dict[int, list[int]]:
    """The rows of each bucket in write order (``seqs`` grow in write order)."""
    order = np.argsort(seqs, kind="stable")
    keys, seqs = keys[order], seqs[order]
    ids = at.bucket_ids([pa.array(keys, pa.int64())], buckets)
    return {b: seqs[ids == b].tolist() for b in range(buckets)}
