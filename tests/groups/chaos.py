"""Runs a consumer group of member processes against a writer process while members are
SIGKILLed, SIGSTOPped and started at random, then checks the logs they left (see
``tests/groups/processes.py``) against the table:

* **exactly once, in order**: per bucket, the commits that landed (and those whose outcome a
  kill left unknown, only where a landed commit is missing) chain from the group's start
  without gap or overlap, and their rows are the bucket's rows, each once, in write order;
* **one owner**: no two processes held a bucket in the same generation, a process delivered
  only buckets it held, and no process started a poll that delivered a bucket after another
  process had claimed it in a newer generation;
* **removal**: once a killed or stopped member's lease has run out, every poll of another
  member leaves a generation without it, whose buckets the others then hold. The time a
  takeover took is reported, not asserted: on a loaded host it is mostly the time the other
  processes waited for a core (benchmarks/ measures it on a quiet one).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

import appendtable as at
from appendtable.commit.groups import GroupStore
from appendtable.storage import open_storage
from tests.groups.ledger import expected_rows

ROOT = Path(__file__).resolve().parents[2]
Position = tuple[int, bool]


def _pos(value: list[Any]) -> Position:
    return (int(value[0]), bool(value[1]))


def read_log(path: Path) -> list[dict[str, Any]]:
    """The events of a log; only its last line may be torn (its process was killed)."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    events = []
    for index, line in enumerate(lines):
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            assert index == len(lines) - 1, f"{path}: a torn line before the last one"
    return events


@dataclass
class Attempt:
    """One bucket of one commit attempt: the positions and the rows its process delivered."""

    process: str
    bucket: int
    start: Position
    end: Position
    rows: list[int]
    outcome: str | None = None  # "ok", "fenced", or None: unknown (killed meanwhile)


def attempts_of(process: str, events: list[dict[str, Any]]) -> list[Attempt]:
    starts: dict[int, Position] = {}
    ends: dict[int, Position] = {}
    delivered: dict[int, list[int]] = {}
    found: list[Attempt] = []
    open_attempts: list[Attempt] = []
    for event in events:
        kind = event["e"]
        if kind == "unit":
            here = (int(event["s"]), bool(event["f"]))
            for key in event["units"]:
                bucket = int(key)
                committed = _pos(event["committed"][str(bucket)])
                rewound = here < ends.get(bucket, here)
                if starts.get(bucket) != committed or rewound:
                    starts[bucket] = committed
                    delivered[bucket] = []
                ends[bucket] = _pos(event["next"])
                delivered[bucket].extend(event["rows"].get(str(bucket), []))
        elif kind == "pending":
            open_attempts = []
            for key, start in event["starts"].items():
                bucket = int(key)
                begin = _pos(start)
                valid = starts.get(bucket) == begin
                rows = list(delivered.get(bucket, [])) if valid else []
                attempt = Attempt(process, bucket, begin, _pos(event["ends"][key]), rows)
                open_attempts.append(attempt)
                found.append(attempt)
        elif kind == "commit":
            ok, fenced = set(event["ok"]), set(event["fenced"])
            for attempt in open_attempts:
                assert attempt.bucket in ok | fenced, (process, event, attempt)
                attempt.outcome = "ok" if attempt.bucket in ok else "fenced"
                delivered.pop(attempt.bucket, None)
                starts.pop(attempt.bucket, None)
            open_attempts = []
    return found


def check_exactly_once(
    attempts: list[Attempt],
    expected: dict[int, list[int]],
    start: Position,
    final: dict[int, Position],
) -> None:
    """Per bucket: a chain of the landed commits (unknown ones, whose process was killed
    before it could log the outcome, filling gaps only) from ``start`` to ``final``, the
    position the group's progress records hold at the end, whose rows are the bucket's rows in
    write order."""
    for bucket, rows in expected.items():
        mine = [a for a in attempts if a.bucket == bucket and a.outcome != "fenced"]
        known: dict[Position, Attempt] = {}
        for attempt in mine:
            if attempt.outcome == "ok":
                other = known.get(attempt.start)
                assert other is None, f"bucket {bucket}: two commits from {attempt.start}"
                known[attempt.start] = attempt
        unknown: dict[Position, list[Attempt]] = {}
        for attempt in mine:
            if attempt.outcome is None:
                unknown.setdefault(attempt.start, []).append(attempt)
        end = final.get(bucket, start)
        chain = _chain(start, end, known, unknown, len(known))
        history = sorted(
            (a.start, a.end, str(a.outcome), len(a.rows), a.process)
            for a in attempts
            if a.bucket == bucket
        )
        assert chain is not None, (
            f"bucket {bucket}: the commits do not chain from {start} to the group's position "
            f"{end}; attempts (start, end, outcome, rows, process): {history}"
        )
        seqs = [s for attempt in chain for s in attempt.rows]
        assert seqs == rows, (
            f"bucket {bucket}: committed {len(seqs)} rows ({len(set(seqs))} distinct), the "
            f"table has {len(rows)}; attempts (start, end, outcome, rows, process): {history}"
        )


def final_positions(uri: str, storage_options: dict[str, Any], group: str) -> dict[int, Position]:
    """Where each unit of ``group`` continues, from its progress records as stored."""
    store = GroupStore(open_storage(uri, storage_options), group)
    return {u: (p.next_snapshot, p.full) for u, p in store.positions(None).items()}


def _chain(
    start: Position,
    end: Position,
    known: dict[Position, Attempt],
    unknown: dict[Position, list[Attempt]],
    known_count: int,
) -> list[Attempt] | None:
    """A path of attempts from ``start`` to ``end`` through every known one (depth first,
    iteratively: chains are hundreds of commits long)."""
    stack: list[tuple[Position, list[Attempt]]] = [(start, [])]
    while stack:
        here, path = stack.pop()
        if here == end:
            if sum(1 for a in path if a.outcome == "ok") == known_count:
                return path
            continue
        options = [known[here]] if here in known else unknown.get(here, [])
        for attempt in options:
            if attempt.end > here:
                stack.append((attempt.end, [*path, attempt]))
    return None


def check_ownership(logs: dict[str, list[dict[str, Any]]]) -> None:
    owners: dict[tuple[int, int], str] = {}
    gains: list[tuple[float, int, int, str]] = []  # (time, generation, bucket, process)
    for process, events in logs.items():
        held: set[int] = set()
        for event in events:
            if event["e"] == "assign":
                held = set(event["a"])
                for bucket in held:
                    key = (int(event["g"]), bucket)
                    other = owners.setdefault(key, process)
                    assert other == process, (
                        f"bucket {bucket} held by {other} and {process} in generation {key[0]}"
                    )
                    gains.append((float(event["t"]), int(event["g"]), bucket, process))
            elif event["e"] == "unit":
                units = set(event["units"])
                assert units <= held, f"{process} delivered {units - held}, holding {held}"
    by_bucket: dict[int, list[tuple[float, int, str]]] = {}
    for time_, generation, bucket, process in gains:
        by_bucket.setdefault(bucket, []).append((time_, generation, process))
    for process, events in logs.items():
        for event in events:
            if event["e"] != "unit":
                continue
            for bucket in event["units"]:
                for time_, generation, by in by_bucket.get(bucket, []):
                    if by != process and generation > event["g"]:
                        assert time_ >= event["t0"], (
                            f"{process} delivered bucket {bucket} (generation {event['g']}) "
                            f"from a poll started {event['t0'] - time_:.3f} s after {by} had "
                            f"claimed it in generation {generation}"
                        )


@dataclass
class Outage:
    """A member SIGKILLed (or SIGSTOPped) at ``time`` while holding ``buckets`` (as its log
    last said, at ``since``)."""

    process: str
    time: float
    kind: str
    buckets: list[int]
    since: float


@dataclass(frozen=True)
class Takeover:
    """How long after an outage another process held one of the buckets the member held (a
    figure for the report: under load it includes how long the other processes waited for
    a core, and a bucket handed to a member that failed in turn waits for that one's lease)."""

    process: str
    kind: str
    bucket: int
    seconds: float
    by: str


def takeover_times(outages: list[Outage], logs: dict[str, list[dict[str, Any]]]) -> list[Takeover]:
    """For each outage and bucket the member held, the first time another process held it (a
    bucket that moved away before the outage is not counted)."""
    found = []
    for outage in outages:
        for bucket in outage.buckets:
            first_held: tuple[float, str] | None = None
            for process, events in logs.items():
                if process == outage.process:
                    continue
                gains = (
                    float(e["t"])
                    for e in events
                    if e["e"] == "assign" and bucket in e["a"] and e["t"] > outage.since
                )
                gained = next(gains, None)
                if gained is not None and (first_held is None or gained < first_held[0]):
                    first_held = (gained, process)
            if first_held is not None and first_held[0] >= outage.time:
                seconds = first_held[0] - outage.time
                found.append(Takeover(outage.process, outage.kind, bucket, seconds, first_held[1]))
    return found


#: Polls of a member: each logs when it started (``t0``), returned (``t``) and its generation.
_POLLS = ("assign", "unit", "idle")
#: Clock rounding between a lease's renewal time (milliseconds) and the signal's time.
_CLOCK_MARGIN_S = 0.01
_DONE = {"kill": "killed", "stop": "stopped"}


def _first_running(process: str, since: float, timeline: list[tuple[float, str, str]]) -> float:
    """The first time from ``since`` on that ``process`` was running (started or woken, and
    neither stopped, killed nor exited since); infinity if never."""
    running = False
    for when, who, what in sorted(timeline):
        if who != process:
            continue
        if when <= since:
            running = what in ("start", "cont")
        elif running:
            return since
        elif what in ("start", "cont"):
            return when
    return since if running else float("inf")


def check_removals(
    outages: list[Outage],
    logs: dict[str, list[dict[str, Any]]],
    members: dict[str, str],
    timeline: list[tuple[float, str, str]],
    lease_s: float,
) -> int:
    """The design's takeover rule, which no load can excuse: a member killed or stopped at
    ``T`` renewed its lease last before ``T``, so every poll of another member that starts
    after ``T + lease`` must see the lease run out and leave a generation without it (which
    gives its buckets to the others). Checked for every such poll that returned before any
    process of the member's name ran again (which renews its lease); returns how many polls
    were checked. ``members``: the member name of each process; ``timeline``: (time,
    process, ``start``/``cont``/``stop``/``kill``) of every start, signal and exit."""
    checked = 0
    for outage in outages:
        name = members[outage.process]
        # the member's lease may be renewed again from the moment any process of its name
        # runs: this one woken, a new one started, or an old one (replaced while stopped)
        # woken before it finds out
        until = min(
            _first_running(process, outage.time, timeline)
            for process, member in members.items()
            if member == name
        )
        expired = outage.time + lease_s + _CLOCK_MARGIN_S
        for process, events in logs.items():
            if process == outage.process:
                continue
            seen: tuple[int, dict[str, Any]] | None = None  # the generation of its last assign
            for event in events:
                if event["e"] == "assign":
                    seen = (int(event["g"]), event["members"])
                if event["e"] not in _POLLS or event["t0"] < expired or event["t"] > until:
                    continue
                if seen is None or seen[0] != int(event["g"]):
                    continue  # a unit whose reading followed a rebalance: its poll is the next
                checked += 1
                assert name not in seen[1], (
                    f"{process}'s poll {event['t0'] - outage.time:.3f} to "
                    f"{event['t'] - outage.time:.3f} s after {outage.process} (member {name!r}) "
                    f"was {_DONE[outage.kind]}, with a lease of {lease_s} s, left the member "
                    f"in generation {seen[0]}: {seen[1]}"
                )
    return checked


@dataclass
class Chaos:
    """The configuration of one run."""

    uri: str
    storage_options: dict[str, Any]
    workdir: Path
    seconds: float
    lease_s: float
    poll_s: float
    #: Buckets of the table; -1: an unbucketed table whose group shares ``file_slots``.
    buckets: int = 8
    file_slots: int = 6
    seed: int = 0
    min_members: int = 3
    max_members: int = 6
    stop_members: bool = True
    outages: list[Outage] = field(default_factory=list)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    members: dict[str, str] = field(default_factory=dict)  # process -> member name
    stopped: dict[str, float] = field(default_factory=dict)
    #: (time, process, start/kill/stop/cont) of every process started and signal sent.
    timeline: list[tuple[float, str, str]] = field(default_factory=list)

    def send(self, process: str, what: str) -> None:
        sig = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "cont": signal.SIGCONT}[what]
        self.processes[process].send_signal(sig)
        self.timeline.append((time.time(), process, what))


def _spawn(chaos: Chaos, role: str, name: str, config: dict[str, Any]) -> subprocess.Popen[bytes]:
    path = chaos.workdir / f"{name}.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.groups.processes", role, str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(chaos.workdir / f"{name}.stderr", "ab"),
    )


def _member_config(chaos: Chaos, process: str, member: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": member,
        "uri": chaos.uri,
        "storage_options": chaos.storage_options,
        "log": str(chaos.workdir / f"{process}.log"),
        "stop": str(chaos.workdir / "stop-members"),
        "poll": chaos.poll_s,
        "buckets": chaos.buckets,
        "think": 0.02,
        **extra,
    }


def create_table(chaos: Chaos) -> at.Table:
    layout: dict[str, object] = {"bucket": chaos.buckets, "bucket-key": "key"}
    if chaos.buckets <= 0:
        # The files as appended stay (compaction would move rows to files of other slots,
        # and the checker maps rows to slots by the files they are in).
        layout = {"consumer.group.file-slots": chaos.file_slots, "write-only": True}
    return at.create_table(
        chaos.uri,
        pa.schema([("key", pa.int64()), ("seq", pa.int64())]),
        options={
            **layout,
            "consumer.group.lease-time": f"{int(chaos.lease_s * 1000)} ms",
            # expire eagerly: the group's positions must keep what it still needs
            "snapshot.time-retained": "1 s",
            "snapshot.num-retained.min": 2,
            "compaction.min.file-num": 3,
        },
        storage_options=chaos.storage_options,
    )


def rows_by_slot(
    table: at.Table, slots: int, storage_options: dict[str, Any]
) -> dict[int, list[int]]:
    """The ``seq`` of each row of an unbucketed table by file slot, in write order: read from
    each data file with pyarrow, slot by the CRC-32 of the file's name (the documented rule,
    computed here rather than by the group code)."""
    found: dict[int, list[int]] = {slot: [] for slot in range(slots)}
    files = table.files()
    for path, uri in zip(files["path"].to_pylist(), files["uri"].to_pylist(), strict=True):
        slot = zlib.crc32(path.rsplit("/", 1)[-1].encode()) % slots
        with fsspec.open(uri, "rb", **storage_options) as handle:
            found[slot].extend(pq.read_table(handle, columns=["seq"])["seq"].to_pylist())
    return {slot: sorted(seqs) for slot, seqs in found.items()}


def _by_slot(
    logs: dict[str, list[dict[str, Any]]], expected: dict[int, list[int]]
) -> dict[str, list[dict[str, Any]]]:
    """The logs with the rows of each unit event (all under ``-1``) split by file slot."""
    slot_of = {seq: slot for slot, seqs in expected.items() for seq in seqs}
    split: dict[str, list[dict[str, Any]]] = {}
    for process, events in logs.items():
        split[process] = []
        for event in events:
            if event["e"] == "unit":
                rows: dict[str, list[int]] = {str(u): [] for u in event["units"]}
                for seq in event["rows"].get("-1", []):
                    rows.setdefault(str(slot_of[seq]), []).append(seq)
                event = {**event, "rows": rows}
            split[process].append(event)
    return split


def _last_assignment(path: Path) -> tuple[list[int], float]:
    for event in reversed(read_log(path)):
        if event["e"] == "assign":
            return list(event["a"]), float(event["t"])
    return [], 0.0


def run(chaos: Chaos) -> dict[str, Any]:
    """Run the group, then check it; returns figures for the test's message."""
    rng = random.Random(chaos.seed)
    table = create_table(chaos)
    # The group starts on the empty table: every unit starts at (1, full).
    table.stream(group="g", member="setup").close()
    writer = _spawn(
        chaos,
        "writer",
        "writer",
        {
            "uri": chaos.uri,
            "storage_options": chaos.storage_options,
            "log": str(chaos.workdir / "writer.log"),
            "stop": str(chaos.workdir / "stop-writer"),
            "seconds": chaos.seconds,
            "rows": 60,
            "pause": 0.05,
            "seed": chaos.seed,
        },
    )
    counter = iter(range(10_000))
    names: list[str] = []

    def start(member: str | None = None) -> None:
        process = f"p{next(counter)}"
        member = member or f"m{len(names)}"
        if member not in names:
            names.append(member)
        chaos.processes[process] = _spawn(
            chaos, "member", process, _member_config(chaos, process, member)
        )
        chaos.members[process] = member
        chaos.timeline.append((time.time(), process, "start"))

    def alive() -> list[str]:
        return [p for p, proc in chaos.processes.items() if proc.poll() is None]

    try:
        for _ in range(4):
            start()
        for process in list(chaos.processes):  # chaos begins once the group formed
            _wait_joined(chaos, process, timeout=60)
        deadline = time.monotonic() + chaos.seconds
        forced = [0.0, 0.8] if chaos.stop_members else [0.0]
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.3, 1.0) * chaos.lease_s)
            _resume_due(chaos)
            running = [p for p in alive() if p not in chaos.stopped]
            # at least one kill and one stop per run, then at random
            action = forced.pop(0) if forced else rng.random()
            if action < 0.35 and len(running) > chaos.min_members - 1:
                victim = rng.choice(running)
                buckets, since = _last_assignment(chaos.workdir / f"{victim}.log")
                chaos.send(victim, "kill")
                chaos.outages.append(Outage(victim, time.time(), "kill", buckets, since))
            elif action < 0.7 and len(alive()) < chaos.max_members:
                # a new member, or a restart under the name of a killed or stopped process
                # (which takes the name over at once; a stopped one finds out when it wakes)
                down = [p for p in chaos.processes if p not in running]
                restart = down and rng.random() < 0.5
                start(chaos.members[rng.choice(down)] if restart else None)
            elif chaos.stop_members and len(running) > 1 and action < 0.85:
                victim = rng.choice(running)
                buckets, since = _last_assignment(chaos.workdir / f"{victim}.log")
                chaos.send(victim, "stop")
                wake = time.monotonic() + chaos.lease_s * rng.uniform(1.3, 2.5)
                chaos.stopped[victim] = wake
                chaos.outages.append(Outage(victim, time.time(), "stop", buckets, since))
            while len(alive()) < chaos.min_members:
                start()
        (chaos.workdir / "stop-writer").touch()
        assert writer.wait(timeout=120) == 0, (chaos.workdir / "writer.stderr").read_text()
        for process in list(chaos.stopped):
            chaos.send(process, "cont")
        chaos.stopped.clear()
        _wait_caught_up(table, timeout=180)
        (chaos.workdir / "stop-members").touch()
        for process, proc in chaos.processes.items():
            code = proc.wait(timeout=120)
            assert code in (0, -signal.SIGKILL), (
                f"member {process} exited with {code}: "
                + (chaos.workdir / f"{process}.stderr").read_text()[-3000:]
            )
    finally:
        for proc in [writer, *chaos.processes.values()]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
    return verify(chaos, table)


def _wait_joined(chaos: Chaos, process: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not _last_assignment(chaos.workdir / f"{process}.log")[0]:
        assert chaos.processes[process].poll() is None, f"member {process} exited"
        assert time.monotonic() < deadline, f"member {process} did not join"
        time.sleep(0.05)


def _resume_due(chaos: Chaos) -> None:
    for process, wake in list(chaos.stopped.items()):
        if time.monotonic() >= wake:
            chaos.send(process, "cont")
            del chaos.stopped[process]


def _wait_caught_up(table: at.Table, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        lag = table.consumer_lag(group="g")
        if lag.num_rows and sum(lag["rows_behind"].to_pylist()) == 0:
            return
        assert time.monotonic() < deadline, f"the group did not catch up:\n{lag.to_pylist()}"
        time.sleep(0.2)


def _logs(chaos: Chaos) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for process in chaos.processes:
        yield process, read_log(chaos.workdir / f"{process}.log")


def _exits(logs: dict[str, list[dict[str, Any]]]) -> list[tuple[float, str, str]]:
    """Members that stopped reading of their own accord (replaced by a restart under their
    name, or at the end), as ``kill`` entries of a timeline."""
    return [
        (float(e["t"]), process, "kill")
        for process, events in logs.items()
        for e in events
        if e["e"] in ("replaced", "end", "crash")
    ]


def verify(chaos: Chaos, table: at.Table) -> dict[str, Any]:
    logs = dict(_logs(chaos))
    timeline = [*chaos.timeline, *_exits(logs)]
    takeovers = takeover_times(chaos.outages, logs)
    # for a post-mortem of a failed run
    (chaos.workdir / "run.json").write_text(
        json.dumps(
            {
                "timeline": sorted(timeline),
                "members": chaos.members,
                "outages": [dataclasses.asdict(o) for o in chaos.outages],
                "takeovers": [dataclasses.asdict(t) for t in takeovers],
            },
            indent=1,
        )
    )
    for process, events in logs.items():
        crashes = [e for e in events if e["e"] == "crash"]
        assert not crashes, f"{process} crashed:\n{crashes[0]['error']}"
    written = [e for e in read_log(chaos.workdir / "writer.log") if e["e"] == "append"]
    data = table.scan().to_arrow()
    assert data.num_rows == sum(e["count"] for e in written)
    if chaos.buckets > 0:
        expected = expected_rows(data["key"].to_numpy(), data["seq"].to_numpy(), chaos.buckets)
    else:
        expected = rows_by_slot(table, chaos.file_slots, chaos.storage_options)
        logs = _by_slot(logs, expected)
    attempts = [a for process, events in logs.items() for a in attempts_of(process, events)]
    final = final_positions(chaos.uri, chaos.storage_options, "g")
    check_exactly_once(attempts, expected, (1, True), final)
    check_ownership(logs)
    checked = check_removals(chaos.outages, logs, chaos.members, timeline, chaos.lease_s)
    fenced = sum(1 for a in attempts if a.outcome == "fenced")
    unknown = sum(1 for a in attempts if a.outcome is None)
    return {
        "rows": data.num_rows,
        "snapshots": table.latest_snapshot().id if table.latest_snapshot() else 0,
        "processes": len(chaos.processes),
        "kills": sum(1 for o in chaos.outages if o.kind == "kill"),
        "stops": sum(1 for o in chaos.outages if o.kind == "stop"),
        "commits": sum(1 for a in attempts if a.outcome == "ok"),
        "fenced": fenced,
        "unknown": unknown,
        "polls_checked_for_removal": checked,
        "takeovers": sorted(round(t.seconds, 2) for t in takeovers),
        "earliest": table.earliest_snapshot().id if table.earliest_snapshot() else None,
    }
