"""The restart property over real streaming queries: random start modes and read limits, the
driver SIGKILLed at random phases of random micro-batches (batch 0 included, and every step
between ``offsets/N`` and ``commits/N``), restarts with and without the original options,
appends, compactions and expirations between runs, and a new checkpoint with the same commit
user. The sink holds exactly the source's rows, once each, every bucket in write order; the
only failure is the named refusal of the reused commit user, which writes nothing.

Each run that may be killed is a driver process of its own (restart_app.py); the others run
in the test session. ``APPENDTABLE_RESTART_CASES`` sets
how many random pipelines run (default 1, a minute or two; 4 with ``APPENDTABLE_LONG_TESTS``);
``APPENDTABLE_RESTART_SEED`` the first seed (default: random, so every run tries a new
pipeline; a failure names its seed)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

import appendtable as at
from tests.helpers.long_runs import scaled
from tests.spark.restart_model import (
    SCHEMA,
    SourceModel,
    Start,
    check_delivery,
    check_order,
    limit_options,
)
from tests.spark.restart_runs import Pipeline, logged, run, run_here, sink_batches, sink_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]
appendtable_spark = pytest.importorskip("appendtable_spark")

CASES = int(os.environ.get("APPENDTABLE_RESTART_CASES", scaled(4, 1)))
SEED = int(os.environ.get("APPENDTABLE_RESTART_SEED", random.SystemRandom().randrange(2**31)))
PHASES = ("plan", "offsets", "read", "sink-before", "sink-after", "committed")


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


@pytest.mark.parametrize("case", range(CASES))
def test_pipelines_deliver_every_row_once_through_kills_restarts_and_rotations(
    spark_at: Any, tmp_path: Path, case: int
) -> None:
    seed = SEED + case
    try:
        _scenario(spark_at, tmp_path, random.Random(seed))
    except AssertionError as exc:
        raise AssertionError(f"seed {seed} (APPENDTABLE_RESTART_SEED={seed}): {exc}") from exc


def _scenario(spark: Any, tmp_path: Path, rng: random.Random) -> None:
    model = SourceModel(str(tmp_path / "source"), buckets=rng.choice((2, 3)))
    for _ in range(rng.randint(0, 3)):
        model.append(rng, rng.randint(5, 40))
    if rng.random() < 0.3:
        model.compact(full=True)
    sink = str(tmp_path / "sink")
    at.create_table(
        sink, SCHEMA, options={"bucket": model.buckets, "bucket-key": "key", "write-only": True}
    )
    consumer = {"consumer-id": "pipeline"} if rng.random() < 0.5 else {}
    original = {**model.start_options(rng), **limit_options(rng), **consumer}
    pipeline = Pipeline(
        model.uri,
        sink,
        str(tmp_path / "checkpoint"),
        sink_kind=rng.choice(("foreach", "format")),
        commit_user="pipeline" if rng.random() < 0.7 else None,
        options=original,
    )
    start: Start | None = None
    first_resolution: Start | None = None
    resolved = model.resolve(original)
    for number in range(rng.randint(2, 3)):
        options = original if number == 0 or rng.random() < 0.5 else _restart_options(model, rng)
        options = {**options, **consumer}
        if 0 not in logged(pipeline, "offsets"):  # this run resolves the start
            resolved = model.resolve(options)
            if consumer:  # registered at the first resolution, which later ones start from
                first_resolution = first_resolution or resolved
                resolved = first_resolution
        kill = (rng.choice(PHASES), rng.randint(0, 2)) if rng.random() < 0.85 else None
        outcome = (
            run(pipeline, options=options, kill=kill)
            if kill
            else run_here(spark, pipeline, options=options)
        )
        assert outcome.status in ("killed", "ok"), (kill, options, outcome)
        if start is None and 0 in logged(pipeline, "offsets"):
            start = resolved
        delivered = sink_rows(sink)
        assert len(set(delivered)) == len(delivered), f"duplicates after run {number}"
        check_order(model, delivered)
        if start is not None:
            assert set(delivered) <= set(model.expected(start))
            _expire(model, rng, pipeline, start, protected=bool(consumer))
        for _ in range(rng.randint(0, 3)):
            if rng.random() < 0.75:
                model.append(rng, rng.randint(5, 40))
            else:
                model.compact(full=rng.random() < 0.5)
    if 0 not in logged(pipeline, "offsets"):
        resolved = first_resolution or model.resolve(original)
    outcome = run_here(spark, pipeline, options=original)  # the last run: original options
    assert outcome.status == "ok", outcome
    start = start or resolved
    check_delivery(model, sink_rows(sink), model.expected(start))
    _rotate(spark, model, rng, pipeline, tmp_path, model.expected(start))


def _restart_options(model: SourceModel, rng: random.Random) -> dict[str, str]:
    """Other start options, other limits, or none at all."""
    options = model.start_options(rng) if rng.random() < 0.6 else {}
    return {**options, **limit_options(rng)}


def _expire(
    model: SourceModel, rng: random.Random, pipeline: Pipeline, start: Start, *, protected: bool
) -> None:
    """Expire snapshots: any, when a consumer protects what the query needs; else only those
    before the last snapshot of the second-to-last delivered batch (a restart may replay the
    last one, never an earlier one), or before the start."""
    if rng.random() < 0.5:
        return
    if protected:
        model.expire(rng.randint(1, 3))
        return
    batches = [batch for batch in sink_batches(pipeline.sink) if batch]
    if len(batches) >= 2:
        model.expire_below(max(model.snapshot_of(seq) for seq in batches[-2]))
    elif not start.full:
        model.expire_below(start.first)


def _rotate(
    spark: Any,
    model: SourceModel,
    rng: random.Random,
    pipeline: Pipeline,
    tmp_path: Path,
    expected: list[int],
) -> None:
    """A new checkpoint with the same commit user: refused at its first batch, writing
    nothing; or, allowed to take over and started where the old one ended, exactly once."""
    user = pipeline.commit_user
    if user is None or at.open_table(pipeline.sink).last_commit(user) is None:
        return
    snapshots = len(at.open_table(pipeline.sink).snapshots())
    rotated = Pipeline(
        pipeline.source,
        pipeline.sink,
        str(tmp_path / "checkpoint-2"),
        sink_kind=pipeline.sink_kind,
        commit_user=user,
        options={"scan.mode": rng.choice(("latest-full", "latest"))},  # starts that cannot expire
    )
    outcome = run_here(spark, rotated)
    assert outcome.failed_with(at.CommitUserReusedError), outcome
    assert len(at.open_table(pipeline.sink).snapshots()) == snapshots
    check_delivery(model, sink_rows(pipeline.sink), expected)
    if rng.random() < 0.5:
        return
    first_new = model.latest() + 1
    for _ in range(rng.randint(1, 2)):
        model.append(rng, rng.randint(5, 40))
    rotated.checkpoint = str(tmp_path / "checkpoint-3")
    rotated.reuse = "continue"
    rotated.options = {"scan.mode": "from-snapshot", "scan.snapshot-id": str(first_new)}
    assert run_here(spark, rotated).status == "ok"
    taken_over = [seq for sid, seqs in model.added.items() if sid >= first_new for seq in seqs]
    check_delivery(model, sink_rows(pipeline.sink), sorted(expected + taken_over))
