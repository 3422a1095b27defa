"""A model of a streaming pipeline's source table, for the restart tests: which rows a stream
must deliver, from the test's own record of what it appended (not from the code under test).

The source table is bucketed; every row has a ``seq`` that counts writes, so each bucket's
write order is ``seq`` order. A stream's start is resolved once, by the run that plans its
first micro-batch (with a consumer id, by the first run that resolves it at all: the consumer
is registered there and later resolutions start from its progress).
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

import appendtable as at

SCHEMA = pa.schema([("key", pa.int64()), ("seq", pa.int64())])
MODES = (
    "latest-full",
    "latest",
    "from-snapshot",
    "from-snapshot-full",
    "compacted-full",
    "from-timestamp",
)
FULL_MODES = frozenset({"latest-full", "from-snapshot-full", "compacted-full"})
LIMITS = ("maxFilesPerTrigger", "maxRowsPerTrigger")


@dataclass(frozen=True)
class Start:
    """Where a stream started: the whole table at its start (``full``), else the rows of the
    snapshots from ``first`` on."""

    full: bool
    first: int


@dataclass
class SourceModel:
    """The source table and what each of its snapshots added."""

    uri: str
    buckets: int
    table: at.Table = field(init=False)
    added: dict[int, list[int]] = field(default_factory=dict)  # APPEND snapshot -> seqs
    times: dict[int, int] = field(default_factory=dict)
    keys: dict[int, int] = field(default_factory=dict)  # seq -> key
    next_seq: int = 0

    def __post_init__(self) -> None:
        self.table = at.create_table(
            self.uri,
            SCHEMA,
            options={
                "bucket": self.buckets,
                "bucket-key": "key",
                "write-only": True,
                "snapshot.num-retained.min": 1,
            },
        )

    # ---- changes between runs -------------------------------------------------------------

    def append(self, rng: random.Random, rows: int) -> None:
        seqs = list(range(self.next_seq, self.next_seq + rows))
        keys = [rng.randrange(0, 40) for _ in seqs]
        self.next_seq += rows
        snapshot = self.table.append(pa.table({"key": keys, "seq": seqs}, SCHEMA))
        assert snapshot is not None
        self.added[snapshot.id] = seqs
        self.times[snapshot.id] = snapshot.time_ms
        self.keys.update(zip(seqs, keys, strict=True))
        time.sleep(0.002)  # distinct commit times, so from-timestamp starts are exact

    def compact(self, full: bool) -> None:
        snapshot = self.table.compact(full=full)
        if snapshot is not None:
            self.times[snapshot.id] = snapshot.time_ms

    def expire(self, keep: int) -> None:
        """Expire all but the ``keep`` latest snapshots (consumers still protect theirs)."""
        self.table.expire_snapshots(retain_min=keep, retain_max=keep, older_than_ms=2**62)

    def expire_below(self, snapshot_id: int) -> None:
        """Expire the snapshots before ``snapshot_id`` (and never the latest)."""
        latest = self.latest()
        keep = max(1, latest - snapshot_id + 1)
        self.expire(keep)

    # ---- what a stream must deliver --------------------------------------------------------

    def latest(self) -> int:
        snapshot = self.table.latest_snapshot()
        return snapshot.id if snapshot is not None else 0

    def earliest(self) -> int:
        snapshot = self.table.earliest_snapshot()
        return snapshot.id if snapshot is not None else 0

    def last_compaction(self) -> int | None:
        compactions = [s.id for s in self.table.snapshots() if s.kind == at.CommitKind.COMPACT]
        return max(compactions) if compactions else None

    def resolve(self, options: Mapping[str, str]) -> Start:
        """The start the options resolve to now (the table's state at a run's start)."""
        mode = options.get("scan.mode", "latest-full")  # the core's default without others
        latest = self.latest()
        if mode in FULL_MODES:
            return Start(True, 0)
        if mode == "latest":
            return Start(False, latest + 1)
        if mode == "from-snapshot":
            return Start(False, int(options["scan.snapshot-id"]))
        assert mode == "from-timestamp", mode
        wanted = int(options["scan.timestamp-millis"])
        found = [s for s, t in sorted(self.times.items()) if t >= wanted]
        return Start(False, found[0] if found else latest + 1)

    def expected(self, start: Start) -> list[int]:
        """The seqs the stream must deliver, in write order."""
        return sorted(
            seq
            for sid, seqs in self.added.items()
            if start.full or sid >= start.first
            for seq in seqs
        )

    def snapshot_of(self, seq: int) -> int:
        for sid, seqs in self.added.items():
            if seqs and seqs[0] <= seq <= seqs[-1]:
                return sid
        raise KeyError(seq)

    def bucket_of(self, seqs: Sequence[int]) -> list[int]:
        keys = pa.array([self.keys[s] for s in seqs], pa.int64())
        return at.bucket_ids([keys], self.buckets).tolist()  # type: ignore[no-any-return]

    def start_options(self, rng: random.Random) -> dict[str, str]:
        """Random start options that are valid now."""
        mode = rng.choice(MODES)
        options = {"scan.mode": mode}
        latest = self.latest()
        if mode in ("from-snapshot", "from-snapshot-full"):
            options["scan.snapshot-id"] = str(rng.randint(1, latest + 1) if latest else 1)
            if mode == "from-snapshot-full" and latest:
                options["scan.snapshot-id"] = str(rng.randint(1, latest))
            elif mode == "from-snapshot-full":
                options["scan.mode"] = "latest-full"
                del options["scan.snapshot-id"]
        if mode == "from-timestamp":
            moments = list(self.times.values())
            options["scan.timestamp-millis"] = str(
                rng.choice(moments) if moments and rng.random() < 0.8 else int(time.time() * 1000)
            )
        return options


def limit_options(rng: random.Random) -> dict[str, str]:
    choice = rng.choice((None, *LIMITS))
    if choice is None:
        return {}
    bound = rng.randint(1, 4) if choice == "maxFilesPerTrigger" else rng.randint(5, 60)
    return {choice: str(bound)}


def check_delivery(model: SourceModel, delivered: Iterable[int], expected: list[int]) -> None:
    """Exactly the expected rows, each once, every bucket in write order."""
    rows = list(delivered)
    counts = collections.Counter(rows)
    duplicates = sorted(seq for seq, count in counts.items() if count > 1)
    assert not duplicates, f"delivered twice: {duplicates[:20]}"
    missing = sorted(set(expected) - set(rows))
    extra = sorted(set(rows) - set(expected))
    assert not missing and not extra, f"missing {missing[:20]}, unexpected {extra[:20]}"
    check_order(model, rows)


def check_order(model: SourceModel, rows: list[int]) -> None:
    """Each bucket's rows in write (seq) order."""
    if not rows:
        return
    per_bucket: dict[int, list[int]] = {}
    for seq, bucket in zip(rows, model.bucket_of(rows), strict=True):
        per_bucket.setdefault(bucket, []).append(seq)
    for bucket, seqs in per_bucket.items():
        assert seqs == sorted(seqs), f"bucket {bucket} out of write order: {seqs[:30]}"
