"""Peers side by side: the same workloads on the same data for appendtable, pypaimon,
delta-rs and plain pyarrow, each system in a subprocess, the peers in virtualenvs of their own
(under ``.bench/venvs``, created on first use) because they pin other pyarrow/pandas versions."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.data import make_table
from benchmarks.harness import TIMES, Result
from benchmarks.workspace import Workspace

__all__ = ["PEERS", "SYSTEMS", "bench_peers", "window_medians"]

GROUP = "peers"
REPO = Path(__file__).resolve().parent.parent
VENVS = REPO / ".bench" / "venvs"
#: Each peer's pinned requirements (its own virtualenv); appendtable and plain run in ours.
PEERS: Mapping[str, tuple[str, ...]] = {
    "pypaimon": ("pypaimon==2.1.0",),
    "deltalake": ("deltalake==1.6.6", "pyarrow>=16"),
}
SYSTEMS = ("appendtable", "pypaimon", "deltalake", "plain")
INSTALL_TIMEOUT_S = 900
RUN_TIMEOUT_S = 1200
POINT_KEYS = 10
WINDOW = 50  # commits per point of the commit-latency curve


@dataclass
class Runner:
    """How to run one system, or why it cannot run."""

    system: str
    python: str | None
    status: str  # one line for the README
    install_seconds: float = 0.0
    output: dict[str, Any] = field(default_factory=dict)


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _venv(name: str, requirements: Sequence[str]) -> Runner:
    """The peer's virtualenv, created and installed on first use (a marker names what was
    installed, so changed pins reinstall)."""
    home = VENVS / name
    python = home / "bin" / "python"
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:12]
    marker = home / f".installed-{digest}"
    pins = " ".join(requirements)
    if marker.exists():
        return Runner(name, str(python), f"installed ({pins}, cached in {home.relative_to(REPO)})")
    start = time.perf_counter()
    shutil.rmtree(home, ignore_errors=True)
    for step in _install_steps(home, python, requirements):
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Runner(name, None, f"could not install {pins}: {exc}")
        if done.returncode != 0:
            tool = f"{Path(step[0]).name} {step[1]}"  # no machine paths in the report
            return Runner(name, None, f"installing {pins} failed ({tool}): {_tail(done.stderr)}")
    marker.touch()
    seconds = time.perf_counter() - start
    return Runner(name, str(python), f"installed {pins} into {home.relative_to(REPO)}", seconds)


def _install_steps(home: Path, python: Path, requirements: Sequence[str]) -> list[list[str]]:
    """The commands that create the peer's virtualenv at ``home`` on this interpreter and
    install ``requirements``: with uv where ours has it (``make`` installs it; a fresh
    install of both peers takes seconds instead of most of a minute), else venv and pip."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is not None:
        return [
            [uv, "venv", "--quiet", "--python", sys.executable, str(home)],
            # .pyc files written as pip writes them (imports compile nothing)
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--compile-bytecode",
                "--python",
                str(python),
                *requirements,
            ],
        ]
    return [
        [sys.executable, "-m", "venv", str(home)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *requirements,
        ],
    ]


def _shown(python: Path) -> str:
    """A path as the report may print it: relative to the repository, never the machine's
    absolute path."""
    try:
        return str(python.relative_to(REPO))
    except ValueError:
        return python.name


def _runners() -> list[Runner]:
    ours = f"this virtualenv ({_shown(Path(sys.executable))})"
    return [
        Runner("appendtable", sys.executable, ours),
        *(_venv(name, requirements) for name, requirements in PEERS.items()),
        Runner("plain", sys.executable, ours),
    ]


def _spec(ws: Workspace) -> dict[str, Any]:
    """The data (Parquet files every system reads) and the sizes of the workload."""
    config = ws.config
    bulk = make_table(config.peer_rows, seed=21)
    small = make_table(config.small_commits * config.small_rows, seed=22)
    bulk_path, small_path = ws.fresh_path("peer-bulk") + ".parquet", ws.fresh_path("peer-small")
    pq.write_table(bulk, bulk_path)
    pq.write_table(small, small_path + ".parquet")
    counts = pc.value_counts(bulk.column("key")).flatten()
    found = dict(zip(counts[0].to_pylist(), counts[1].to_pylist(), strict=True))
    keys = bulk.column("key").to_pylist()[:: max(1, bulk.num_rows // POINT_KEYS)][:POINT_KEYS]
    workdir = ws.fresh_path("peer-tables")
    os.makedirs(workdir)
    return {
        "bulk_data": bulk_path,
        "small_data": small_path + ".parquet",
        "workdir": workdir,
        "reps": config.peer_reps,
        "warmup": config.peer_reps > 1,
        "small_commits": config.small_commits,
        "small_rows": config.small_rows,
        "incremental_commits": min(100, config.small_commits // 2),
        "curve_points": list(config.curve_points),
        "point_keys": {str(key): found[key] for key in keys},
    }


def _run(runner: Runner, spec_path: str, out_path: str) -> None:
    """Run the system's workload; on failure, say what failed in its status."""
    assert runner.python is not None
    start = time.perf_counter()
    command = [runner.python, "-m", "benchmarks.peer_workloads.driver", runner.system]
    try:
        done = subprocess.run(
            [*command, spec_path, out_path],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        runner.status += f"; its workload did not finish in {RUN_TIMEOUT_S} s"
        return
    if done.returncode != 0:
        runner.status += f"; its workload failed: {_tail(done.stderr)}"
        return
    with open(out_path, encoding="utf-8") as handle:
        runner.output = json.load(handle)
    runner.output["wall_seconds"] = round(time.perf_counter() - start, 1)
    print(f"    {runner.system}: {runner.output['wall_seconds']} s", flush=True)


# ---- rows ----------------------------------------------------------------------------------------


def _median(samples: Sequence[float] | None, scale: float) -> float | None:
    return None if not samples else statistics.median(samples) * scale


@dataclass(frozen=True)
class _Workload:
    key: str  # in the driver's "seconds"
    label: str
    unit: str  # "s" or "ms"


def _workloads(ws: Workspace, spec: Mapping[str, Any]) -> list[_Workload]:
    rows, commits = f"{ws.config.peer_rows / 1e6:g} M rows", f"{spec['small_commits']:,}"
    return [
        _Workload("bulk_append_unaware", f"bulk append {rows}, bucket=-1 / unbucketed", "s"),
        _Workload("bulk_append_bucketed", f"bulk append {rows}, bucket=8 + bucket-key", "s"),
        _Workload("full_read", f"full read {rows} (fresh handle)", "s"),
        _Workload(
            "point_query", "point query on key (fresh handle; bucketed where possible)", "ms"
        ),
        _Workload("plan_after_commits", f"plan a full scan after {commits} small commits", "ms"),
        _Workload("scan_after_commits", f"read the table after {commits} small commits", "ms"),
        _Workload(
            "incremental",
            f"incremental read of the last {spec['incremental_commits']} commits",
            "ms",
        ),
        _Workload("compact_after_commits", f"compact after {commits} small commits", "ms"),
    ]


def _row(workload: _Workload, runners: Sequence[Runner], details: dict[str, Any]) -> Result:
    scale = 1000.0 if workload.unit == "ms" else 1.0
    values = {
        r.system: _median(r.output.get("seconds", {}).get(workload.key), scale) for r in runners
    }
    notes = {
        r.system: r.output["notes"][workload.key]
        for r in runners
        if workload.key in r.output.get("notes", {})
    }
    ours = values.get("appendtable")
    return Result(
        group=GROUP,
        benchmark=workload.label,
        value=float("nan") if ours is None else ours,
        unit=workload.unit,
        baseline=values.get("plain"),
        ratio=None,
        target="—",
        passed=None,
        details={"systems": values, "notes": notes, **details},
    )


def window_medians(latencies: Sequence[float], window: int) -> list[list[float]]:
    """[commits so far, median latency in ms] over consecutive windows of commits."""
    return [
        [start + window, statistics.median(latencies[start : start + window]) * 1000]
        for start in range(0, len(latencies) - window + 1, window)
    ]


def _commit_rows(runners: Sequence[Runner], spec: Mapping[str, Any]) -> list[Result]:
    """Commit p50 of the first and last 100 small commits, with the curves for the plots."""
    commits, window = spec["small_commits"], min(100, spec["small_commits"] // 2)
    latencies = {
        r.system: r.output["commit_latencies"] for r in runners if r.output.get("commit_latencies")
    }
    curves = {
        "commit_window_p50_ms": {
            s: window_medians(v, min(WINDOW, window)) for s, v in latencies.items()
        },
        "plan_curve_ms": {
            r.system: {int(n): ms * 1000 for n, ms in r.output.get("plan_curve", {}).items()}
            for r in runners
            if r.output.get("plan_curve")
        },
        "files_after_commits": {
            r.system: r.output.get("files_after_commits") for r in runners if r.output
        },
        "files_after_compact": {
            r.system: r.output.get("files_after_compact") for r in runners if r.output
        },
    }
    rows = []
    for label, part in (("first", slice(0, window)), ("last", slice(commits - window, commits))):
        values = {s: statistics.median(v[part]) * 1000 for s, v in latencies.items()}
        rows.append(
            Result(
                group=GROUP,
                benchmark=f"small append (write + commit) p50, {label} {window} of "
                f"{commits:,} commits",
                value=values.get("appendtable", float("nan")),
                unit="ms",
                baseline=None,
                ratio=None,
                target="—",
                passed=None,
                details={"systems": values, "notes": {}, **(curves if label == "last" else {})},
            )
        )
    return rows


#: Issue targets for the queue's own operation: catching up over the last commits.
CATCH_UP_LIMIT_MS = 25.0
CATCH_UP_VS_DELTA = 1.5


def _catch_up_verdict(runners: Sequence[Runner], spec: Mapping[str, Any]) -> Result | None:
    """The catch-up target: appendtable's incremental read of the last commits at most
    ``CATCH_UP_LIMIT_MS`` and ``CATCH_UP_VS_DELTA`` times faster than delta-rs' ``load_cdf``
    of the same commits, in this run (None when either did not run)."""
    seconds = {r.system: r.output.get("seconds", {}).get("incremental") for r in runners}
    ours, delta = _median(seconds.get("appendtable"), 1000), _median(seconds.get("deltalake"), 1000)
    if ours is None or delta is None:
        return None
    return Result(
        group=GROUP,
        benchmark=f"stream catch-up over the last {spec['incremental_commits']} one-batch "
        "commits (baseline: delta-rs load_cdf over the same commits)",
        value=ours,
        unit="ms",
        baseline=delta,
        ratio=delta / ours,
        target=f"≤ {CATCH_UP_LIMIT_MS:g} ms and ≥ {CATCH_UP_VS_DELTA:g}{TIMES} delta-rs",
        passed=ours <= CATCH_UP_LIMIT_MS and delta / ours >= CATCH_UP_VS_DELTA,
        details={"appendtable_ms": ours, "deltalake_ms": delta},
    )


def bench_peers(ws: Workspace) -> list[Result]:
    runners = _runners()
    spec = _spec(ws)
    spec_path = ws.fresh_path("peer-spec") + ".json"
    with open(spec_path, "w", encoding="utf-8") as handle:
        json.dump(spec, handle)
    for runner in runners:
        if runner.python is not None:
            _run(runner, spec_path, ws.fresh_path(f"peer-{runner.system}") + ".json")
    installs = {
        r.system: {
            "status": r.status,
            "version": r.output.get("version"),
            "install_seconds": round(r.install_seconds, 1),
            "workload_seconds": r.output.get("wall_seconds"),
            "ran": bool(r.output),
        }
        for r in runners
    }
    workloads = _workloads(ws, spec)
    rows = [_row(w, runners, {}) for w in workloads[:4]]
    rows += _commit_rows(runners, spec)
    rows += [_row(w, runners, {}) for w in workloads[4:]]
    verdict = _catch_up_verdict(runners, spec)
    rows += [verdict] if verdict is not None else []
    rows[0].details["installs"] = installs
    rows[0].details["spec"] = {k: v for k, v in spec.items() if k != "point_keys"}
    return rows
