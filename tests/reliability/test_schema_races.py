"""Concurrent schema changes, in separate processes: serialised through the same atomic publish
as snapshots. No two changes land on one schema id, none is lost, field ids stay unique, a
change that no longer applies fails clearly, and appends made meanwhile all land."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.planning.schema_changes import fields_by_id
from tests.helpers.processes import run_in_processes

pytestmark = pytest.mark.slow


def _add_columns(uri: str, worker: int, count: int, results: Any) -> None:
    table = at.open_table(uri)
    landed = 0
    for i in range(count):
        with table.update_schema() as update:
            update.add_column(f"w{worker}_{i}", pa.int64())
        landed += 1
    results.put(landed)


def _append_or_add(uri: str, role: str, count: int, results: Any) -> None:
    if role == "append":
        table = at.open_table(uri)
        for i in range(count):
            table.append(pa.table({"k": pa.array([10_000 + i], pa.int64())}), schema_mode="merge")
        results.put((role, count))
    else:
        _add_columns(uri, 9, count, results)


def test_racing_schema_changes_and_appends_all_land_once(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, pa.schema([("k", pa.int64())]), options={"write-only": True})
    workers, changes, appends = 3, 15, 40
    results = run_in_processes(
        _add_columns, [(uri, w, changes) for w in range(workers)], timeout=600
    )
    assert results == [changes] * workers
    table = at.open_table(uri)
    expected = {f"w{w}_{i}" for w in range(workers) for i in range(changes)}
    assert set(table.schema.names) == {"k"} | expected
    alters = [s for s in table.snapshots() if s.kind == at.CommitKind.ALTER]
    assert len(alters) == workers * changes
    assert len({s.schema_id for s in alters}) == len(alters)  # one schema id per change
    ids = list(fields_by_id(table._state.schema.fields))
    assert len(ids) == len(set(ids)) == 1 + workers * changes
    # Merge-mode appends racing more schema changes: every row lands, in whatever schema is
    # current when it commits, and no change is lost.
    both = run_in_processes(
        _append_or_add, [(uri, "append", appends), (uri, "add", changes)], timeout=600
    )
    assert sorted(both, key=str) == sorted([("append", appends), changes], key=str)
    table = at.open_table(uri)
    assert {f"w9_{i}" for i in range(changes)} <= set(table.schema.names)
    keys = table.scan(columns=["k"]).to_arrow().column("k").to_pylist()
    assert sorted(keys) == list(range(10_000, 10_000 + appends))


def _mixed(uri: str, worker: int, results: Any) -> None:
    table = at.open_table(uri)
    landed = 0
    for i in range(12):
        if worker == 0:
            with table.update_schema() as update:
                update.add_column(f"c{i}", pa.string())
        else:
            # merge: the columns added meanwhile are written as nulls (strict would refuse)
            table.append(
                pa.table({"k": pa.array([worker * 1000 + i], pa.int64())}), schema_mode="merge"
            )
        landed += 1
    results.put((worker, landed))


def test_appends_prepared_under_an_older_schema_land_during_changes(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    at.create_table(uri, pa.schema([("k", pa.int64())]), options={"write-only": True})
    results = sorted(run_in_processes(_mixed, [(uri, w) for w in range(3)], timeout=600))
    assert results == [(0, 12), (1, 12), (2, 12)]
    table = at.open_table(uri)
    rows = table.scan().to_arrow()
    assert sorted(rows.column("k").to_pylist()) == sorted(
        w * 1000 + i for w in (1, 2) for i in range(12)
    )
    assert rows.column_names == ["k", *(f"c{i}" for i in range(12))]


def _rename(uri: str, new_name: str, barrier: Any, results: Any) -> None:
    table = at.open_table(uri)
    update = table.update_schema().rename_column("a", new_name)
    barrier.wait()
    try:
        update.commit()
        results.put(("landed", new_name))
    except at.SchemaChangeError as exc:
        results.put(("refused", str(exc)))


def test_two_renames_of_one_column_one_wins_the_other_fails_clearly(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    context = multiprocessing.get_context("spawn")
    for attempt in range(3):
        path = f"{uri}{attempt}"
        at.create_table(path, pa.schema([("a", pa.int64()), ("b", pa.int64())]))
        barrier = context.Barrier(2)
        outcomes = run_in_processes(
            _rename, [(path, "x", barrier), (path, "y", barrier)], timeout=300
        )
        kinds = sorted(kind for kind, _ in outcomes)
        assert kinds == ["landed", "refused"], outcomes
        winner = next(name for kind, name in outcomes if kind == "landed")
        loser_message = next(text for kind, text in outcomes if kind == "refused")
        assert "'a' does not exist" in loser_message
        assert at.open_table(path).schema.names == [winner, "b"]
