"""The Spark adapter on a real standalone cluster (a master and a worker JVM, executors running
this virtualenv's Python), with executor JVMs SIGKILLed in the middle of a write and of a
micro-batch: each write lands whole and once, or not at all, and the table always reads.

The rows are Spark's ordinary NOT NULL columns written into a table of nullable columns (the
combination that once made a landed commit's files disappear), with automatic compaction on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import appendtable as at
from tests.helpers.clock import past_every_file_ms

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pytest.importorskip("pyspark")

from tests.spark.cluster import SparkCluster, start_cluster  # noqa: E402

APP = Path(__file__).with_name("cluster_app.py")
ROWS = 120_000
TABLE = pa.schema([("id", pa.int64()), ("s", pa.string())])  # nullable, as Python users declare


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    started = start_cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield started
    finally:
        started.stop()


def _start(
    cluster: SparkCluster, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    root = Path(__file__).resolve().parents[2]
    environment = {**cluster.env(), "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    return subprocess.Popen(
        [sys.executable, str(APP), cluster.master_url, *args],
        env={**environment, **(env or {})},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(process: subprocess.Popen[bytes], cluster: SparkCluster) -> tuple[int, str]:
    try:
        _, stderr = process.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"the application hung\n{cluster.logs()}") from None
    text = stderr.decode(errors="replace")
    assert process.returncode in (0, 3), text[-4000:]
    return process.returncode, text


def _kill_executors_when(
    markers: Path, count: int, cluster: SparkCluster, process: subprocess.Popen[bytes]
) -> list[int]:
    """Once ``count`` tasks have started (their marker files), SIGKILL the executor JVMs."""
    deadline = time.monotonic() + 240
    while len(list(markers.iterdir())) < count:
        assert process.poll() is None, "the application ended before the kill"
        assert time.monotonic() < deadline, "no task started"
        time.sleep(0.1)
    killed = cluster.kill_executors()
    assert killed, "no executor to kill"
    return killed


def _assert_table_whole(table: at.Table, root: Path) -> None:
    """Every file of every retained snapshot exists, and nothing unreferenced is left in the
    table's layout once orphans are removed."""
    referenced: set[str] = set()
    for snapshot in table.snapshots():
        for path in table.files(snapshot.id).column("path").to_pylist():
            assert (root / path).exists(), f"snapshot {snapshot.id} lost {path}"
            referenced.add(path)
    table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    on_disk = {str(p.relative_to(root)) for p in root.rglob("*.parquet")}
    assert on_disk == referenced


@pytest.mark.parametrize("mode", ["format", "native"])
def test_a_write_with_killed_executors_lands_whole_and_once_or_not_at_all(
    cluster: SparkCluster, tmp_path: Path, mode: str
) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), TABLE, options={"compaction.min.file-num": 2})
    table.append(pa.table({"id": [-1, -2], "s": ["a", "b"]}, schema=TABLE))
    markers = tmp_path / "markers"
    markers.mkdir()
    process = _start(cluster, mode, str(root), str(markers))
    _kill_executors_when(markers, 1, cluster, process)
    code, stderr = _finish(process, cluster)
    table = at.open_table(str(root))
    ids = table.scan().to_arrow().column("id").to_pylist()
    if code == 0:  # Spark retried the lost tasks on a new executor: the write landed once
        assert sorted(ids) == [-2, -1, *range(ROWS)]
    else:  # the job failed: nothing of it is visible
        assert sorted(ids) == [-2, -1], stderr[-2000:]
    _assert_table_whole(table, root)
    table.compact(full=True)
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == sorted(ids)


def test_foreach_batch_sink_with_killed_executors_writes_every_row_once(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    files, per_file = 5, 4000
    for index in range(files):
        ids = pa.array(range(index * per_file, (index + 1) * per_file), pa.int64())
        pq.write_table(
            pa.table({"id": ids, "s": pa.nulls(per_file, pa.string())}),
            source / f"f{index}.parquet",
        )
    root = tmp_path / "sink"
    at.create_table(str(root), TABLE, options={"compaction.min.file-num": 2})
    markers = tmp_path / "markers"
    markers.mkdir()
    args = ["foreach", str(root), str(markers), str(source), str(tmp_path / "checkpoint")]
    process = _start(cluster, *args)
    _kill_executors_when(markers, 2, cluster, process)  # in the second micro-batch or later
    code, _ = _finish(process, cluster)
    restarts = 0
    while code != 0:  # a query that failed restarts from its checkpoint, as in production
        restarts += 1
        assert restarts <= 2
        code, _ = _finish(_start(cluster, *args), cluster)
    table = at.open_table(str(root))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(files * per_file))
    _assert_table_whole(table, root)


def test_executors_without_the_package_fail_clearly_and_change_nothing(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    """Executors whose Python cannot import appendtable (a node without the package)."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('appendtable', 'appendtable_spark'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    root = tmp_path / "t"
    at.create_table(str(root), TABLE).append(pa.table({"id": [1], "s": ["a"]}, schema=TABLE))
    markers = tmp_path / "markers"
    markers.mkdir()
    process = _start(
        cluster,
        "format",
        str(root),
        str(markers),
        env={"APPENDTABLE_TEST_EXECUTOR_PYTHONPATH": str(hide)},
    )
    code, stderr = _finish(process, cluster)
    assert code == 3 and "No module named 'appendtable" in stderr, stderr[-3000:]
    table = at.open_table(str(root))
    assert table.scan().count() == 1 and len(table.snapshots()) == 1
    _assert_table_whole(table, root)
