"""Worker processes of the multi-process consumer-group tests, started with
``python -m tests.groups.processes member|writer CONFIG.json``.

Each writes a JSON-lines log (one line per event, flushed at once, so a process killed at any
moment leaves complete lines and at most one torn last line):

* the member: ``start``, ``assign`` (its generation and buckets whenever they change, with the
  time its poll started and returned), ``idle`` (a poll that returned nothing: when it started
  and returned, and the generation), ``unit`` (the rows it delivered per bucket, or all of
  them under ``-1`` for the file slots of an unbucketed table, with the committed position of
  each bucket then), ``pending`` (the positions a commit is about to
  save, before it tries), ``commit`` (which buckets landed and which were fenced), ``end``;
* the writer: ``append`` (the snapshot and the seq range of each append), ``end``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa

import appendtable as at

SCHEMA = pa.schema([("key", pa.int64()), ("seq", pa.int64())])


def _log(out: IO[str], event: str, **fields: Any) -> None:
    out.write(json.dumps({"e": event, "t": time.time(), **fields}) + "\n")
    out.flush()


def _pos(p: at.StreamPosition) -> list[Any]:
    return [p.next_snapshot, p.full]


def member(config: dict[str, Any]) -> None:
    name = config["name"]
    poll = config["poll"]
    rng = random.Random(os.getpid())
    hold = config.get("hold_before_commit")
    with open(config["log"], "a", encoding="utf-8") as out:
        table = at.open_table(config["uri"], storage_options=config["storage_options"])
        _log(out, "start", name=name, pid=os.getpid())
        reader = table.stream(group="g", member=name, poll_interval=poll)
        assignment: tuple[int, list[int]] | None = None
        held_once = False
        while not Path(config["stop"]).exists():
            started = time.time()
            try:
                unit = reader.poll()
            except at.ConsumerFencedError as exc:  # another process took this member's name
                _log(out, "replaced", error=str(exc))
                return
            now = (reader.generation, sorted(reader.assignment))
            if now != assignment:
                assignment = now
                _log(out, "assign", t0=started, g=now[0], a=now[1], members=reader.members)
            if unit is None:
                _log(out, "idle", t0=started, g=now[0])
                time.sleep(poll)
                continue
            committed = reader.committed
            try:
                rows = _rows_of(reader, unit, config["buckets"])
            except at.ConsumerFencedError as exc:  # taken over while stopped: not delivered
                _log(out, "lost", units=list(exc.fenced))
                continue
            _log(
                out,
                "unit",
                t0=started,
                g=reader.generation,
                s=unit.snapshot_id,
                f=unit.full,
                next=_pos(unit.next_position),
                units=list(unit.group_units),
                committed={b: _pos(committed[b]) for b in unit.group_units},
                rows=rows,
            )
            if hold and not held_once and any(rows.values()):
                held_once = True
                _log(out, "ready")
                while not Path(hold).exists():
                    time.sleep(0.01)
            time.sleep(rng.uniform(0, config.get("think", 0.0)))  # processing the rows
            if rng.random() < config.get("commit_every", 1.0):
                _commit(out, reader)
        _commit(out, reader)
        reader.close()
        _log(out, "end")


def _rows_of(reader: at.GroupReader, unit: at.StreamUnit, buckets: int) -> dict[int, list[int]]:
    """The ``seq`` of the unit's rows by bucket (all under -1 for file slots: the checker
    knows each row's file)."""
    rows: dict[int, list[int]] = {b: [] for b in unit.group_units}
    for batch in reader.read(unit):
        seqs = batch.column("seq").to_numpy()
        if buckets <= 0:
            rows.setdefault(-1, []).extend(seqs.tolist())
            continue
        ids = at.bucket_ids([batch.column("key")], buckets)
        for bucket in np.unique(ids):
            rows.setdefault(int(bucket), []).extend(seqs[ids == bucket].tolist())
    return rows


def _commit(out: IO[str], reader: at.GroupReader) -> None:
    ends = {b: _pos(p) for b, p in reader.positions.items()}
    starts = {b: _pos(p) for b, p in reader.committed.items()}
    moved = sorted(b for b in ends if ends[b] != starts[b])
    if not moved:
        return
    _log(
        out,
        "pending",
        g=reader.generation,
        starts={b: starts[b] for b in moved},
        ends={b: ends[b] for b in moved},
    )
    try:
        reader.commit()
        _log(out, "commit", ok=moved, fenced=[])
    except at.ConsumerFencedError as exc:
        _log(out, "commit", ok=list(exc.committed), fenced=list(exc.fenced))


def writer(config: dict[str, Any]) -> None:
    rng = random.Random(config.get("seed", 1))
    table = at.open_table(config["uri"], storage_options=config["storage_options"])
    deadline = time.monotonic() + config["seconds"]
    seq = 0
    with open(config["log"], "a", encoding="utf-8") as out:
        while time.monotonic() < deadline and not Path(config["stop"]).exists():
            count = rng.randrange(1, config["rows"])
            keys = [rng.randrange(-(2**62), 2**62) for _ in range(count)]
            batch = pa.table({"key": keys, "seq": list(range(seq, seq + count))}, schema=SCHEMA)
            snapshot = table.append(batch)
            assert snapshot is not None
            _log(out, "append", s=snapshot.id, first=seq, count=count)
            seq += count
            time.sleep(rng.uniform(0, config["pause"]))
        _log(out, "end", rows=seq)


def main(argv: list[str]) -> int:
    role, path = argv
    config = json.loads(Path(path).read_text())
    try:
        {"member": member, "writer": writer}[role](config)
    except BaseException:
        with open(config["log"], "a", encoding="utf-8") as out:
            _log(out, "crash", error=traceback.format_exc())
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
