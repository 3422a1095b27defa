"""Restarting streaming pipelines as operators do, with the driver SIGKILLed at exact points
(each run that kills is a driver process of its own, see restart_app.py; the restarts run
in the test session): a replayed first micro-batch,
a restart after the start snapshot expired, a new checkpoint reusing a commit user, a failed
micro-batch. Every row arrives exactly once, or the query fails with a named error before
anything is skipped."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import appendtable as at
from tests.helpers.long_runs import choose
from tests.spark.restart_model import SourceModel, check_delivery, check_order
from tests.spark.restart_runs import Pipeline, logged, run, run_here, sink_batches, sink_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]
appendtable_spark = pytest.importorskip("appendtable_spark")


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


def _pipeline(tmp_path: Path, **kwargs: object) -> Pipeline:
    return Pipeline(
        str(tmp_path / "source"),
        str(tmp_path / "sink"),
        str(tmp_path / "checkpoint"),
        **kwargs,  # type: ignore[arg-type]
    )


def _source(tmp_path: Path, snapshots: int, rows: int = 100) -> SourceModel:
    model = SourceModel(str(tmp_path / "source"), buckets=2)
    rng = random.Random(7)
    for _ in range(snapshots):
        model.append(rng, rows)
    return model


#: Where each kill point leaves micro-batch 0: in the offset log, the commit log, the sink.
KILLS = {
    "plan": (set(), set(), False),
    "offsets": ({0}, set(), False),
    "read": ({0}, set(), False),
    "sink-before": ({0}, set(), False),
    "sink-after": ({0}, set(), True),
    "committed": ({0}, {0}, True),
}


#: Kill points and sink kinds run by default: batch 0 in the offset log only, in the sink but
#: not committed, committed (the others with APPENDTABLE_LONG_TESTS).
_PHASES = [(phase, ("foreach", "format")[index % 2]) for index, phase in enumerate(KILLS)]


@pytest.mark.parametrize(
    ("phase", "sink_kind"),
    choose(
        _PHASES,
        [p for p in _PHASES if p[0] in ("offsets", "sink-after", "committed")],
    ),
)
def test_a_replayed_first_micro_batch_reads_the_same_rows(
    spark_at: Any, tmp_path: Path, sink_kind: str, phase: str
) -> None:
    # the reported case: default start (latest-full), 5 snapshots, the driver killed at each
    # point of micro-batch 0, 3 more snapshots, restart from the checkpoint
    model = _source(tmp_path, 5)
    pipeline = _pipeline(tmp_path, sink_kind=sink_kind)
    assert run(pipeline, kill=(phase, 0)).status == "killed"
    offsets, commits, in_sink = KILLS[phase]
    assert (logged(pipeline, "offsets"), logged(pipeline, "commits")) == (offsets, commits)
    assert sorted(sink_rows(pipeline.sink)) == (list(range(500)) if in_sink else [])
    rng = random.Random(8)
    for _ in range(3):
        model.append(rng, 100)
    assert run_here(spark_at, pipeline).status == "ok"
    check_delivery(model, sink_rows(pipeline.sink), list(range(800)))


@pytest.mark.parametrize("mode", ["from-snapshot", "from-timestamp"])
def test_a_restart_continues_after_its_start_snapshot_expired(
    spark_at: Any, tmp_path: Path, mode: str
) -> None:
    model = _source(tmp_path, 9, rows=20)
    start = (
        {"scan.snapshot-id": "1"}
        if mode == "from-snapshot"
        else {"scan.timestamp-millis": str(model.times[1])}
    )
    pipeline = _pipeline(tmp_path, options={"scan.mode": mode, **start})
    assert run_here(spark_at, pipeline).status == "ok"
    model.expire(2)  # snapshots 1-7 expire; the checkpoint is at snapshot 10
    assert model.earliest() == 8
    rng = random.Random(9)
    for _ in range(3):
        model.append(rng, 20)
    assert (
        run_here(spark_at, pipeline).status == "ok"
    )  # the same start options: the checkpoint rules
    check_delivery(model, sink_rows(pipeline.sink), list(range(240)))
    # the checkpoint's own position (snapshot 13) expires: the restart fails naming it
    model.append(rng, 20)
    model.append(rng, 20)
    model.expire(1)
    outcome = run_here(spark_at, pipeline)
    assert outcome.failed_with(at.SnapshotExpiredError), outcome
    assert "snapshot 13" in outcome.error and "consumer-id" in outcome.error
    check_delivery(model, sink_rows(pipeline.sink), list(range(240)))


@pytest.mark.parametrize("sink_kind", choose(["foreach", "format"], ["format"]))
def test_a_new_checkpoint_reusing_the_commit_user_is_refused_before_writing(
    spark_at: Any, tmp_path: Path, sink_kind: str
) -> None:
    model = _source(tmp_path, 3, rows=30)
    options = {"scan.mode": "from-snapshot", "scan.snapshot-id": "1", "maxFilesPerTrigger": "1"}
    first = _pipeline(tmp_path, sink_kind=sink_kind, commit_user="pipeline-a", options=options)
    assert run_here(spark_at, first).status == "ok"
    assert len(sink_batches(first.sink)) == 6  # 3 snapshots x 2 buckets, one file a batch
    snapshots = len(at.open_table(first.sink).snapshots())
    rotated = Pipeline(first.source, first.sink, str(tmp_path / "checkpoint-b"), sink_kind)
    rotated.commit_user, rotated.options = "pipeline-a", {**options, "maxFilesPerTrigger": "2"}
    outcome = run_here(spark_at, rotated)
    assert outcome.failed_with(at.CommitUserReusedError), outcome
    assert "pipeline-a" in outcome.error and "own commit user" in outcome.error
    assert len(at.open_table(first.sink).snapshots()) == snapshots  # nothing was written
    check_delivery(model, sink_rows(first.sink), list(range(90)))
    # taking the commit user over, starting where the first query ended
    rng = random.Random(10)
    model.append(rng, 30)
    model.append(rng, 30)
    taking_over = Pipeline(first.source, first.sink, str(tmp_path / "checkpoint-c"), sink_kind)
    taking_over.commit_user, taking_over.reuse = "pipeline-a", "continue"
    taking_over.options = {"scan.mode": "from-snapshot", "scan.snapshot-id": "4"}
    assert run_here(spark_at, taking_over).status == "ok"
    check_delivery(model, sink_rows(first.sink), list(range(150)))
    # the first checkpoint, restarted, is now the other query: refused too
    outcome = run_here(spark_at, first)
    assert outcome.failed_with(at.CommitUserReusedError), outcome
    check_delivery(model, sink_rows(first.sink), list(range(150)))


@pytest.mark.parametrize("sink_kind", choose(["foreach", "format"], ["foreach"]))
def test_a_failed_micro_batch_leaves_nothing_in_the_sink(
    spark_at: Any, tmp_path: Path, sink_kind: str
) -> None:
    model = _source(tmp_path, 4, rows=25)
    pipeline = _pipeline(
        tmp_path,
        sink_kind=sink_kind,
        options={"scan.mode": "from-snapshot", "scan.snapshot-id": "1", "maxFilesPerTrigger": "2"},
    )
    outcome = run(pipeline, kill=("fail", 1))
    assert outcome.status == "failed" and "injected failure" in outcome.error
    staging = Path(pipeline.sink) / "_staging"
    assert not staging.exists() or list(staging.iterdir()) == [], list(staging.rglob("*"))
    delivered = sink_rows(pipeline.sink)
    check_order(model, delivered)
    assert sorted(delivered) == list(range(25))  # batch 0 only (one snapshot, two files)
    assert run_here(spark_at, pipeline).status == "ok"
    check_delivery(model, sink_rows(pipeline.sink), list(range(100)))
