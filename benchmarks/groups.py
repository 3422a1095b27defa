"""Consumer-group benchmarks (issue 26): what a group costs per poll when nothing is new, how
long the survivors take to hold a dead member's buckets, and how fast a group drains a
64-bucket table, all on local disk.

* **idle poll**: the median ``poll()`` of a caught-up member of a group of 4 on a 64-bucket
  table, against a plain ``StreamReader.poll()`` at the same position (the baseline). The
  difference is the group's overhead (one existence check of the next generation, and the
  lease renewal every third of the lease).
* **rebalance after a death**: 4 members polling every ``POLL_S`` with a lease of
  ``LEASE_S``; one stops polling (as a killed process does) at a random moment; the time until
  the other three hold all its buckets, over ``group_deaths`` deaths (6; one in the smoke
  profile). The design's bound is lease +
  2 poll intervals. The members run in one process, polled one after the other, as they would
  be by a scheduler of 4 processes on one core.
* **drain**: 4 members reading a 64-bucket table of appended snapshots, one process, rows per
  second delivered and committed (what bounds a group keeping up with a writer: reading and
  decoding the Parquet files, one core).
* **keep-up**: a writer process appending as fast as it can for ``KEEP_UP_S`` seconds while 4
  member processes (``keep_up_members`` of the sizes) read and commit: the writer's rate, the
  group's delivery rate, and how long the group takes to catch up once the writer stops (all
  processes share the machine's cores).
"""

from __future__ import annotations

import multiprocessing
import random
import statistics
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path

import numpy as np
import pyarrow as pa

import appendtable as at
from benchmarks.harness import Result
from benchmarks.rows import limit_row
from benchmarks.workspace import Workspace

__all__ = ["bench_groups"]

GROUP = "groups"
BUCKETS = 64
MEMBERS = 4
LEASE_S = 1.0
POLL_S = 0.05
KEEP_UP_S = 10.0
KEEP_UP_BATCH = 200_000
JOIN_TIMEOUT_S = 120.0
SCHEMA = pa.schema([("key", pa.int64()), ("seq", pa.int64()), ("value", pa.float64())])


def _rows(start: int, count: int, rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "key": rng.integers(-(2**62), 2**62, count),
            "seq": np.arange(start, start + count),
            "value": rng.random(count),
        },
        schema=SCHEMA,
    )


def _table(ws: Workspace, stem: str) -> at.Table:
    return at.create_table(
        ws.fresh_path(stem),
        SCHEMA,
        options={
            "bucket": BUCKETS,
            "bucket-key": "key",
            "consumer.group.lease-time": f"{int(LEASE_S * 1000)} ms",
            "write-only": True,
        },
    )


def _drain(member: at.GroupReader) -> int:
    rows = 0
    while (unit := member.poll()) is not None:
        rows += sum(batch.num_rows for batch in member.read(unit))
    member.commit()
    return rows


def _idle_poll(ws: Workspace) -> list[Result]:
    table = _table(ws, "group-idle")
    rng = np.random.default_rng(1)
    for i in range(ws.config.group_appends):
        table.append(_rows(i * 1000, 1000, rng))
    members = [table.stream(group="g", member=f"m{i}") for i in range(MEMBERS)]
    for member in members:
        _drain(member)
    for member in members:
        _drain(member)  # the others' joins moved buckets: read and commit those too
    plain = table.stream(mode="latest")
    member = members[0]

    polls = ws.config.group_idle_polls

    def median_poll(poll: object) -> float:
        assert callable(poll)
        samples = []
        for _ in range(polls):
            start = time.perf_counter()
            assert poll() is None
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    median_poll(member.poll)  # warm up
    group_s, plain_s = [], []
    for _ in range(3):
        group_s.append(median_poll(member.poll))
        plain_s.append(median_poll(plain.poll))
    for m in members:
        m.close()
    ours, baseline = statistics.median(group_s) * 1000, statistics.median(plain_s) * 1000
    return [
        limit_row(
            GROUP,
            f"idle poll() of a consumer-group member ({MEMBERS} members, {BUCKETS} buckets, "
            "local disk; baseline: a plain stream's poll)",
            ours,
            limit_ms=1.0,
            baseline_ms=baseline,
            details={"overhead_ms": ours - baseline, "polls": polls},
        )
    ]


def _rebalance(ws: Workspace) -> list[Result]:
    table = _table(ws, "group-rebalance")
    table.append(_rows(0, 1000, np.random.default_rng(2)))
    rng = random.Random(3)
    takeovers: list[float] = []
    members = {f"m{i}": table.stream(group="g", member=f"m{i}") for i in range(MEMBERS)}
    deaths = ws.config.group_deaths
    for death in range(deaths):
        for member in members.values():
            _drain(member)
        # run normally for a while, then one member stops polling at a random moment
        until = time.monotonic() + rng.uniform(0.5, 1.0) * LEASE_S
        while time.monotonic() < until:
            for member in members.values():
                member.poll()
            time.sleep(POLL_S)
        victim = rng.choice(sorted(members))
        lost = members.pop(victim).assignment
        died = time.monotonic()
        while True:
            for member in members.values():
                member.poll()
            held: set[int] = set()
            for member in members.values():
                held |= member.assignment
            if lost <= held:
                takeovers.append(time.monotonic() - died)
                break
            time.sleep(POLL_S)
        name = f"r{death}"  # a new member restores the group's size
        members[name] = table.stream(group="g", member=name)
    for member in members.values():
        member.close()
    bound_ms = (LEASE_S + 2 * POLL_S) * 1000
    return [
        limit_row(
            GROUP,
            f"rebalance after a member dies: until the survivors hold its buckets (median of "
            f"{deaths}; lease {LEASE_S:g} s, poll {POLL_S * 1000:g} ms, {BUCKETS} buckets, "
            f"{MEMBERS} members)",
            statistics.median(takeovers) * 1000,
            limit_ms=bound_ms,
            details={"takeovers_ms": [round(t * 1000, 1) for t in takeovers]},
        ),
        limit_row(
            GROUP,
            "rebalance after a member dies: the slowest of those",
            max(takeovers) * 1000,
            limit_ms=bound_ms,
        ),
    ]


def _drain_rate(ws: Workspace) -> list[Result]:
    table = _table(ws, "group-drain")
    rng = np.random.default_rng(4)
    per_append = min(100_000, ws.config.big_rows)
    appends = max(4, ws.config.big_rows // per_append // 2)
    for i in range(appends):
        table.append(_rows(i * per_append, per_append, rng))
    members = [
        table.stream(group="g", member=f"m{i}", mode="from-snapshot", snapshot_id=1)
        for i in range(MEMBERS)
    ]
    for member in members:
        member.heartbeat()  # follow the last join before timing
    start = time.perf_counter()
    rows = sum(_drain(member) for member in members)
    seconds = time.perf_counter() - start
    for member in members:
        member.close()
    assert rows == appends * per_append, (rows, appends * per_append)
    return [
        Result(
            group=GROUP,
            benchmark=(
                f"drain rate of a group of {MEMBERS} members in one process ({BUCKETS} buckets, "
                f"{appends} snapshots of {per_append:,} rows, poll + read + commit)"
            ),
            value=rows / seconds / 1e6,
            unit="Mrows/s",
            baseline=None,
            ratio=None,
            target="—",
            passed=None,
            details={"rows": rows, "seconds": seconds},
        )
    ]


def _keep_up_writer(uri: str, seconds: float, batch: int, go: Path, done: Path) -> None:
    """Once ``go`` exists, append ``batch`` rows at a time for ``seconds``; writes "rows
    seconds" to ``done``."""
    table = at.open_table(uri)
    rng = np.random.default_rng(5)
    rows = 0
    while not go.exists():
        time.sleep(0.01)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        table.append(_rows(rows, batch, rng))
        rows += batch
    done.write_text(f"{rows} {time.perf_counter() - start}")


def _keep_up_member(uri: str, member: str, stop: Path, out: Path) -> None:
    """Join (then create ``out``.joined), poll, read and commit until ``stop`` exists and
    nothing is left; writes the rows read to ``out``."""
    table = at.open_table(uri)
    reader = table.stream(group="keep", member=member, poll_interval=0.01)
    out.with_suffix(".joined").touch()
    rows = 0
    while True:
        unit = reader.poll()
        if unit is None:
            if stop.exists():
                break
            time.sleep(0.01)
            continue
        rows += sum(batch.num_rows for batch in reader.read(unit))
        reader.commit()
    reader.close()
    out.write_text(str(rows))


def _wait_joined(processes: Sequence[BaseProcess], flags: Sequence[Path]) -> None:
    """Until every member process has joined the group. A join rebalances the group at once,
    and a member that read rows of a bucket another member then claims cannot commit them
    (ConsumerFencedError): so the writer starts appending once the group is complete."""
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while not all(flag.exists() for flag in flags):
        exited = [p.name for p in processes if p.exitcode is not None]
        if exited or time.monotonic() > deadline:
            raise RuntimeError(f"the member processes did not all join (exited: {exited})")
        time.sleep(0.01)


def _keep_up(ws: Workspace) -> list[Result]:
    table = _table(ws, "group-keep-up")
    table.stream(group="keep", member="setup").close()  # the group starts at snapshot 1
    work = Path(ws.fresh_path("group-keep-up-files"))
    work.mkdir(parents=True)
    stop, written = work / "stop", work / "written"
    spawn = multiprocessing.get_context("spawn")
    processes = ws.config.keep_up_members
    members = [
        spawn.Process(target=_keep_up_member, args=(table.uri, f"m{i}", stop, work / f"m{i}"))
        for i in range(processes)
    ]
    seconds = {"full": KEEP_UP_S, "quick": KEEP_UP_S / 5}.get(ws.config.mode, 0.3)
    batch = KEEP_UP_BATCH if ws.config.big_rows >= 1_000_000 else 2_000
    go = work / "go"
    writer = spawn.Process(target=_keep_up_writer, args=(table.uri, seconds, batch, go, written))
    for process in [*members, writer]:  # all start up at once; the writer waits for "go"
        process.start()
    try:
        _wait_joined([*members, writer], [work / f"m{i}.joined" for i in range(processes)])
    except RuntimeError:
        for process in [*members, writer]:
            process.kill()
        raise
    go.touch()
    writer.join()
    stopped = time.perf_counter()
    behind_at_stop = sum(table.consumer_lag(group="keep")["rows_behind"].to_pylist())
    while sum(table.consumer_lag(group="keep")["rows_behind"].to_pylist()):
        time.sleep(0.05)
    caught_up = time.perf_counter()
    stop.touch()
    for process in members:
        process.join()
    rows_written, write_s = written.read_text().split()
    delivered = sum(int((work / f"m{i}").read_text()) for i in range(processes))
    assert delivered == int(rows_written), (delivered, rows_written)
    write_rate = int(rows_written) / float(write_s) / 1e6
    # from the writer's first append (its process start-up excluded) until caught up
    group_rate = delivered / (float(write_s) + caught_up - stopped) / 1e6
    details = {
        "rows": delivered,
        "write_seconds": round(float(write_s), 2),
        "rows_behind_when_the_writer_stopped": behind_at_stop,
        "catch_up_seconds": round(caught_up - stopped, 2),
    }
    return [
        Result(
            group=GROUP,
            benchmark=(
                f"keep-up: a writer process appending {batch:,}-row batches as fast as "
                f"it can while {processes} member processes read and commit ({BUCKETS} buckets)"
            ),
            value=write_rate,
            unit="Mrows/s",
            baseline=None,
            ratio=None,
            target="—",
            passed=None,
            details=details,
        ),
        Result(
            group=GROUP,
            benchmark=(
                "keep-up: the group's delivery rate over the same run, until it caught up "
                "(target: keeps up with 1 M rows/s)"
            ),
            value=group_rate,
            unit="Mrows/s",
            baseline=None,
            ratio=None,
            target="≥ 1 Mrows/s",
            passed=group_rate >= 1.0,
            details=details,
        ),
    ]


def bench_groups(ws: Workspace) -> list[Result]:
    return [*_idle_poll(ws), *_rebalance(ws), *_drain_rate(ws), *_keep_up(ws)]
