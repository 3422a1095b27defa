"""Property test over Spark writes: random schemas (every supported type, nested ones too),
random nullability on the DataFrame's and the table's side, partitions, buckets, 1 to 16
tasks, every write path (``write_table`` native and Python writer, the format writer,
``foreach_batch_sink``); then automatic compaction, ``compact(full=True)``, ``sort_compact``,
expiration and orphan removal. After every step the table must read back exactly the rows
written (a model comparison), in write order per bucket where the table is bucketed, with
every file its snapshots reference still on disk.

By default the cases are a covering subset of seeds 0 .. 149 (``covering_seeds``: every write
path, type, nullability, layout and option that any of the 150 cases draws, in about a quarter
of the cases); ``APPENDTABLE_LONG_TESTS=1`` runs all 150 and ``APPENDTABLE_SPARK_CASES=N``
seeds 0 .. N-1. A failing case prints its description, and ``-k "case_17"`` reruns it alone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.clock import past_every_file_ms
from tests.helpers.long_runs import choose
from tests.spark.write_cases import KINDS, WriteCase, case_features, covering_seeds, make_case

pytestmark = [pytest.mark.spark, pytest.mark.slow]

appendtable_spark = pytest.importorskip("appendtable_spark")

ALL_SEEDS = range(150)
SEEDS = (
    list(range(int(os.environ["APPENDTABLE_SPARK_CASES"])))
    if "APPENDTABLE_SPARK_CASES" in os.environ
    else choose(ALL_SEEDS, covering_seeds(ALL_SEEDS))
)


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


def _write(spark: Any, case: WriteCase, uri: str, index: int) -> list[dict[str, Any]]:
    how, count, tasks = case.writes[index]
    rows = case.rows(index, count)
    df = spark.createDataFrame(rows, schema=case.spark_schema()).repartition(tasks)
    options: dict[str, object] = {}
    if index == 0 and not case.table_first:  # this write creates the table
        options = dict(case.options)
        if case.partition:
            options["partition-by"] = case.partition
    if how in ("native", "python"):
        appendtable_spark.write_table(
            df, uri, options=options, native=None if how == "native" else False
        )
    elif how == "format":
        writer = df.write.format("appendtable").mode("append")
        for key, value in options.items():
            writer = writer.option(key, str(value))
        writer.save(uri)
    else:
        sink = appendtable_spark.foreach_batch_sink(
            uri, commit_user=f"prop-{case.seed}", options=options
        )
        sink(df, index)
        sink(df, index)  # a replayed micro-batch: skipped
    return rows


def _check(table: at.Table, expected: pa.Table, case: WriteCase, step: str, root: Path) -> None:
    got = table.scan().to_arrow()
    assert got.schema.equals(table.schema, check_metadata=False), step
    assert got.sort_by("seq").to_pylist() == expected.to_pylist(), f"rows differ {step}"
    for snapshot in table.snapshots():
        for path in table.files(snapshot.id).column("path").to_pylist():
            assert (root / path).exists(), f"{step}: snapshot {snapshot.id} lost {path}"
    if case.buckets > 0:  # per bucket, every write's rows come after the previous write's
        for split in table.scan().plan():
            writes = [
                seq // 1_000_000 for b in table.read(split) for seq in b.column("seq").to_pylist()
            ]
            assert writes == sorted(writes), f"{step}: bucket {split.bucket} out of order"


def test_the_default_cases_exercise_everything_the_150_cases_do() -> None:
    every = frozenset().union(*(case_features(make_case(seed)) for seed in ALL_SEEDS))
    subset = covering_seeds(ALL_SEEDS)
    assert frozenset().union(*(case_features(make_case(seed)) for seed in subset)) == every
    assert len(subset) < len(ALL_SEEDS) / 2
    for kind in KINDS:  # every type is drawn, in every nullability the cases draw
        assert ("nulls", kind.name, False) in every and ("nulls", kind.name, True) in every


@pytest.mark.parametrize("seed", SEEDS, ids=lambda seed: f"case_{seed}")
def test_spark_writes_read_back_exactly_through_maintenance(
    spark_at: Any, tmp_path: Path, seed: int
) -> None:
    case = make_case(seed)
    root = tmp_path / "t"
    uri = str(root)
    try:
        if case.table_first:
            at.create_table(
                uri,
                case.arrow_schema(),
                partition_by=[case.partition] if case.partition else None,
                options=case.options,
            )
        written: list[dict[str, Any]] = []
        for index in range(len(case.writes)):
            written += _write(spark_at, case, uri, index)
        table = at.open_table(uri)
        expected = pa.Table.from_pylist(written, schema=table.schema).sort_by("seq")
        _check(table, expected, case, "after the writes (and automatic compaction)", root)
        table.compact(full=True)
        _check(table, expected, case, "after compact(full=True)", root)
        sortable = [c.name for c in case.columns if c.kind.sortable]
        if case.buckets <= 0 and sortable:
            table.sort_compact(sortable[:2], strategy="zorder" if len(sortable) > 1 else "order")
            _check(table, expected, case, "after sort_compact", root)
        table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=past_every_file_ms())
        _check(table, expected, case, "after expiration", root)
        removed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
        _check(table, expected, case, f"after removing {len(removed.files)} orphans", root)
        on_disk = {
            str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_staging" not in p.parts
        }
        assert on_disk == set(table.files().column("path").to_pylist())
    except BaseException as exc:
        raise AssertionError(f"{case}: {type(exc).__name__}: {exc}") from exc
