"""Killing the driver between the table commit and Spark's checkpoint commit, then restarting
from the checkpoint: no row lost, none duplicated (streaming sink and foreachBatch)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pytest.importorskip("pyspark")

APP = Path(__file__).with_name("crash_app.py")
SCHEMA = pa.schema([("key", pa.int64()), ("seq", pa.int64())])


def _run(args: list[str]) -> int:
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(APP.parent), *sys.path]),
    }
    process = subprocess.Popen(
        [sys.executable, str(APP), *args],
        env=env,
        start_new_session=True,  # its own process group: the app kills exactly itself
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    if process.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(stderr.decode(errors="replace")[-3000:])
    return int(process.returncode)


@pytest.mark.parametrize("mode", ["sink", "foreach"])
def test_driver_killed_after_table_commit_recovers_exactly_once(tmp_path: Path, mode: str) -> None:
    source_uri, sink_uri = str(tmp_path / "source"), str(tmp_path / "sink")
    source = at.create_table(source_uri, SCHEMA, options={"write-only": True})
    for commit in range(3):
        start = commit * 20
        source.append(
            pa.table(
                {"key": [i % 3 for i in range(20)], "seq": list(range(start, start + 20))},
                schema=SCHEMA,
            )
        )
    checkpoint = str(tmp_path / "checkpoint")
    killed = _run([source_uri, sink_uri, checkpoint, mode, "1"])
    assert killed == -signal.SIGKILL
    after_kill = at.open_table(sink_uri)
    assert sorted(after_kill.scan().to_arrow().column("seq").to_pylist()) == list(range(40))
    # Spark's checkpoint does not know batch 1 finished: the restart replays it
    assert _run([source_uri, sink_uri, checkpoint, mode, "-1"]) == 0
    final = at.open_table(sink_uri)
    seqs = sorted(final.scan().to_arrow().column("seq").to_pylist())
    assert seqs == list(range(60))  # nothing lost, nothing twice
    users = {s.commit_user for s in final.snapshots() if s.kind == at.CommitKind.APPEND}
    assert len(users) == 1  # the commit user is stable across the restart (per checkpoint)
