"""Under Spark Connect, foreachBatch cannot see the query id: the sink refuses to guess, works
with a commit user, and with the query's checkpoint tells a new query from a replay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pytest.importorskip("pyspark.sql.connect")

APP = Path(__file__).with_name("connect_app.py")


def test_foreach_batch_sink_needs_a_commit_user_under_connect(tmp_path: Path) -> None:
    source = str(tmp_path / "src")
    at.create_table(source, pa.schema([("v", pa.int64())])).append(pa.table({"v": [1, 2, 3]}))
    without, with_user = str(tmp_path / "without"), str(tmp_path / "with")
    rotated = str(tmp_path / "rotated")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(APP), source, without, with_user, rotated],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "commit_user" in report["without"] and "Spark Connect" in report["without"]
    with pytest.raises(at.TableNotFoundError):
        at.open_table(without)  # nothing was written
    assert report["with"] == "ok"
    table = at.open_table(with_user)
    assert sorted(table.scan().to_arrow().column("v").to_pylist()) == [1, 2, 3]
    assert {s.commit_user for s in table.snapshots() if s.kind == at.CommitKind.APPEND} == {"job-7"}
    # with the checkpoint, a new query reusing the commit user is refused before writing
    first, second = report["rotated"]
    assert first == "ok" and "CommitUserReusedError" in second, second[-2000:]
    assert sorted(at.open_table(rotated).scan().to_arrow().column("v").to_pylist()) == [1, 2, 3]
