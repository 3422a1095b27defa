"""Runs of a restart test's streaming query: ``run`` in a driver process of its own
(``restart_app.py``), which the test can have SIGKILLed at an exact point of a micro-batch, and
``run_here`` in the test session, for the runs that kill nothing (a fresh driver costs about
15 s of CPU; a restart from the checkpoint is a new query on it either way)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import appendtable as at
from tests.spark import restart_query

APP = Path(__file__).with_name("restart_app.py")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Pipeline:
    """A source table, a sink table and a checkpoint, and how the query is run."""

    source: str
    sink: str
    checkpoint: str
    sink_kind: str = "foreach"
    commit_user: str | None = None
    reuse: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def config(self, options: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "source": self.source,
            "sink": self.sink,
            "checkpoint": self.checkpoint,
            "sink_kind": self.sink_kind,
            "commit_user": self.commit_user,
            "reuse": self.reuse,
            "options": self.options if options is None else options,
        }


@dataclass(frozen=True)
class Outcome:
    """How a run ended: ``killed``, ``ok`` or ``failed`` (with the query's error)."""

    status: str
    error: str = ""

    def failed_with(self, error: type[at.AppendTableError]) -> bool:
        return self.status == "failed" and error.__name__ in self.error

    def __repr__(self) -> str:
        """The status and the lines of the error that name exceptions (Spark's message is
        long; the Python exception is deep inside it)."""
        named = [line.strip() for line in self.error.splitlines() if "Error" in line]
        return f"Outcome({self.status}: {' | '.join(named[-6:]) or self.error[:500]})"


def run(
    pipeline: Pipeline,
    *,
    options: dict[str, str] | None = None,
    kill: tuple[str, int] | None = None,
    timeout: float = 600,
) -> Outcome:
    """One run of the pipeline's query (trigger AvailableNow) in a fresh driver."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
        "APPENDTABLE_KILL": f"{kill[0]}:{kill[1]}" if kill else "",
        "APPENDTABLE_CHECKPOINT": pipeline.checkpoint,
    }
    process = subprocess.Popen(
        [sys.executable, str(APP), json.dumps(pipeline.config(options))],
        env=env,
        start_new_session=True,  # its own session: a kill takes exactly this driver
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    if process.returncode == -signal.SIGKILL:
        return Outcome("killed")
    lines = [line for line in stdout.decode().splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise AssertionError(
            f"the app exited with {process.returncode}:\n{stderr.decode(errors='replace')[-4000:]}"
        )
    result = json.loads(lines[-1])
    return Outcome(result["status"], result.get("error", ""))


def run_here(spark: Any, pipeline: Pipeline, *, options: dict[str, str] | None = None) -> Outcome:
    """One run of the pipeline's query (trigger AvailableNow) in ``spark``, the test session
    (with the ``appendtable`` format registered)."""
    query = restart_query.start(spark, pipeline.config(options), format_name="appendtable")
    result = restart_query.outcome(query)
    return Outcome(result["status"], result.get("error", ""))


def logged(pipeline: Pipeline, kind: str) -> set[int]:
    """The batch ids in the checkpoint's ``offsets`` or ``commits`` log."""
    path = Path(pipeline.checkpoint) / kind
    if not path.is_dir():
        return set()
    return {int(name) for name in os.listdir(path) if name.isdigit()}


def sink_batches(uri: str) -> list[list[int]]:
    """The sink's micro-batches in commit order: the seqs of each APPEND snapshot."""
    try:
        table = at.open_table(uri)
    except at.TableNotFoundError:
        return []
    batches: list[list[int]] = []
    reader = table.stream(mode="from-snapshot", snapshot_id=1)
    while (unit := reader.poll()) is not None:
        batches.append(
            [seq for batch in reader.read(unit) for seq in batch.column("seq").to_pylist()]
        )
    return batches


def sink_rows(uri: str) -> list[int]:
    """The sink's rows (seqs), each bucket in write order, by scanning its latest snapshot."""
    try:
        table = at.open_table(uri)
    except at.TableNotFoundError:
        return []
    scan = table.scan()
    return [
        seq
        for split in scan.plan()
        for batch in table.read(split, columns=["seq"])
        for seq in batch.column("seq").to_pylist()
    ]
