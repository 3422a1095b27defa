"""Consumer groups across processes: members SIGKILLed, SIGSTOPped and started at random while
a writer appends, on local disk and on object stores (S3, GCS, Azure emulators). See
``tests/groups/chaos.py`` for what is checked.

Each run lasts ``APPENDTABLE_GROUP_SECONDS`` seconds of chaos (default 12) plus the time the
group needs to catch up; ``APPENDTABLE_GROUP_SEED`` replays a run (the seed is in every failure
message). Takeover times are reported, not asserted: the rule behind them (a member whose lease
ran out is gone after the next poll of any other) is, and benchmarks/ measures the times on a
quiet host."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pyarrow as pa
import pytest

from appendtable.commit.groups import GroupStore
from appendtable.storage import LocalStorage
from tests.cloud.conftest import CloudStore, cloud  # noqa: F401 - the fixture
from tests.groups.chaos import (
    Chaos,
    _member_config,
    _spawn,
    attempts_of,
    check_exactly_once,
    create_table,
    final_positions,
    read_log,
    run,
)
from tests.groups.ledger import expected_rows

SECONDS = float(os.environ.get("APPENDTABLE_GROUP_SECONDS", "12"))


def _seed() -> int:
    return int(os.environ.get("APPENDTABLE_GROUP_SEED", random.randrange(1 << 30)))


def _run(chaos: Chaos) -> dict[str, object]:
    try:
        report = run(chaos)
    except AssertionError as exc:
        raise AssertionError(f"seed {chaos.seed}: {exc}") from exc
    print(f"seed {chaos.seed}: {report}")
    assert report["kills"] and report["processes"] >= 4
    # the removal rule was exercised, not vacuously true
    assert report["polls_checked_for_removal"], f"seed {chaos.seed}: no poll after an outage"
    return report


@pytest.mark.slow
def test_kill_stop_and_rejoin_on_local_disk(tmp_path: Path) -> None:
    chaos = Chaos(
        uri=str(tmp_path / "table"),
        storage_options={},
        workdir=tmp_path,
        seconds=SECONDS,
        lease_s=1.0,
        poll_s=0.05,
        seed=_seed(),
    )
    report = _run(chaos)
    assert report["stops"]


@pytest.mark.slow
def test_kill_stop_and_rejoin_sharing_the_files_of_an_unbucketed_table(tmp_path: Path) -> None:
    chaos = Chaos(
        uri=str(tmp_path / "table"),
        storage_options={},
        workdir=tmp_path,
        seconds=SECONDS * 2 / 3,
        lease_s=1.0,
        poll_s=0.05,
        buckets=-1,
        file_slots=6,
        seed=_seed(),
        max_members=5,
    )
    _run(chaos)


@pytest.mark.slow
def test_kill_stop_and_rejoin_on_object_stores(cloud: CloudStore, tmp_path: Path) -> None:  # noqa: F811
    chaos = Chaos(
        uri=cloud.uri,
        storage_options=cloud.storage_options,
        workdir=tmp_path,
        seconds=SECONDS,
        lease_s=2.0,
        poll_s=0.2,
        buckets=6,
        seed=_seed(),
        min_members=2,
        max_members=4,
    )
    _run(chaos)


def _wait_for(path: Path, event: str, timeout: float = 60, **match: object) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        for entry in read_log(path):
            if entry["e"] == event and all(entry.get(k) == v for k, v in match.items()):
                return entry
        assert time.monotonic() < deadline, f"no {event} {match} in {path.name}"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_stopped_member_that_lost_its_lease_cannot_commit(tmp_path: Path) -> None:
    chaos = Chaos(
        uri=str(tmp_path / "table"),
        storage_options={},
        workdir=tmp_path,
        seconds=0,
        lease_s=1.0,
        poll_s=0.05,
        buckets=4,
    )
    table = create_table(chaos)
    table.stream(group="g", member="setup").close()
    schema = pa.schema([("key", pa.int64()), ("seq", pa.int64())])
    table.append(pa.table({"key": list(range(100)), "seq": list(range(100))}, schema=schema))
    go = tmp_path / "go"
    hung = _spawn(chaos, "member", "a", _member_config(chaos, "a", "a", hold_before_commit=str(go)))
    other = None
    try:
        _wait_for(tmp_path / "a.log", "ready")
        delivered = [e for e in read_log(tmp_path / "a.log") if e["e"] == "unit"]
        held = sorted(delivered[-1]["units"])
        assert held == [0, 1, 2, 3]
        hung.send_signal(signal.SIGSTOP)
        lease = GroupStore(LocalStorage(chaos.uri), "g").lease("a")
        assert lease is not None
        other = _spawn(chaos, "member", "b", _member_config(chaos, "b", "b"))
        # b joins at once (taking half the buckets), and takes the rest once a is removed:
        # only after a's lease, as a last renewed it before it was stopped, ran out
        taken = _wait_for(tmp_path / "b.log", "assign", a=[0, 1, 2, 3], members={"b": held})
        assert float(taken["t"]) * 1000 > lease.renewed_ms + lease.lease_ms
        table.append(
            pa.table({"key": list(range(50)), "seq": list(range(100, 150))}, schema=schema)
        )
        deadline = time.monotonic() + 60
        while sum(table.consumer_lag(group="g")["rows_behind"].to_pylist()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        hung.send_signal(signal.SIGCONT)
        go.touch()
        outcome = _wait_for(tmp_path / "a.log", "commit")
        assert outcome["ok"] == [] and sorted(outcome["fenced"]) == held  # its stale progress
        (tmp_path / "stop-members").touch()
        assert hung.wait(timeout=60) == 0 and other.wait(timeout=60) == 0
    finally:
        for proc in (hung, other):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
    data = table.scan().to_arrow()
    logs = {name: read_log(tmp_path / f"{name}.log") for name in ("a", "b")}
    attempts = [a for name, events in logs.items() for a in attempts_of(name, events)]
    check_exactly_once(
        attempts,
        expected_rows(data["key"].to_numpy(), data["seq"].to_numpy(), 4),
        (1, True),
        final_positions(chaos.uri, {}, "g"),
    )
    assert {a.process for a in attempts if a.outcome == "ok"} == {"b"}
    assert all(lag == 0 for lag in table.consumer_lag(group="g")["rows_behind"].to_pylist())
