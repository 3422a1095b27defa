"""Concurrent writers in separate processes, with the tables' default retry budget.

* GCS and Azure: two processes commit 80 times each (200 with APPENDTABLE_LONG_TESTS) to
  one table (every append races the other process for the next snapshot id through the
  store's create-only upload), while a third process reads the latest snapshot over and
  over. Nothing lost, nothing duplicated, ids contiguous, no torn read (every read sees
  exactly the rows of the snapshot it read). (S3 has the same race, 200 times each, 500
  long, in tests/s3/test_s3_race.py; the emulators take 0.2-0.3 s a commit, so the default
  keeps the suite's time in bounds.)
* Local disk and S3: eight processes append as fast as they can for a while. The retry budget
  is a time (``commit.timeout``, 5 minutes), not a count, so no append fails from contention
  alone, however often a writer loses the race.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.long_runs import scaled

pytestmark = pytest.mark.slow

SCHEMA = pa.schema([("writer", pa.int32()), ("n", pa.int32())])
EMULATOR_COMMITS = scaled(200, 50)


def _append(
    uri: str,
    storage_options: dict[str, Any],
    writer: int,
    commits: int | None,
    seconds: float,
    start: Any,
    queue: Any,
) -> None:
    """Append one-row batches: ``commits`` of them, or as many as fit in ``seconds``."""
    table = at.open_table(uri, storage_options=storage_options)
    acknowledged: list[int] = []
    failures: list[str] = []
    start.wait()
    began = time.monotonic()
    n = 0
    while (commits is not None and n < commits) or (
        commits is None and time.monotonic() - began < seconds
    ):
        try:
            snapshot = table.append(pa.table({"writer": [writer], "n": [n]}, schema=SCHEMA))
            assert snapshot is not None
            acknowledged.append(snapshot.id)
        except Exception as exc:
            failures.append(repr(exc))
        n += 1
    queue.put((writer, acknowledged, failures, time.monotonic() - began))


def _read_until(
    uri: str, storage_options: dict[str, Any], start: Any, stop: Any, queue: Any
) -> None:
    """Read the latest snapshot again and again: each read must hold exactly its rows."""
    table = at.open_table(uri, storage_options=storage_options)
    reads, torn = 0, []
    start.wait()
    while not stop.is_set():
        snapshot = table.latest_snapshot()
        if snapshot is None:
            continue
        rows = table.scan(snapshot_id=snapshot.id).to_arrow()
        pairs = set(
            zip(rows.column("writer").to_pylist(), rows.column("n").to_pylist(), strict=True)
        )
        if rows.num_rows != snapshot.total_record_count or len(pairs) != rows.num_rows:
            torn.append((snapshot.id, rows.num_rows, snapshot.total_record_count))
        reads += 1
    queue.put(("reader", reads, torn))


def _run(
    uri: str,
    storage_options: dict[str, Any],
    writers: int,
    *,
    commits: int | None = None,
    seconds: float = 0.0,
    reader: bool = False,
) -> tuple[list[tuple[int, list[int], list[str], float]], tuple[str, int, list[Any]] | None]:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(writers + (1 if reader else 0))
    stop = context.Event()
    queue = context.Queue()
    processes = [
        context.Process(
            target=_append, args=(uri, storage_options, w, commits, seconds, start, queue)
        )
        for w in range(writers)
    ]
    if reader:
        processes.append(
            context.Process(target=_read_until, args=(uri, storage_options, start, stop, queue))
        )
    for process in processes:
        process.start()
    try:
        results = [queue.get(timeout=900) for _ in range(writers)]
        stop.set()
        read = queue.get(timeout=120) if reader else None
    finally:
        stop.set()
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    return sorted(results), read


def _check_log(uri: str, storage_options: dict[str, Any], results: list[Any]) -> None:
    """Every acknowledged append is exactly one APPEND snapshot, ids contiguous, rows all
    there once."""
    acknowledged = [i for _w, ids, _f, _s in results for i in ids]
    assert len(set(acknowledged)) == len(acknowledged)  # no id acknowledged twice
    table = at.open_table(uri, storage_options=storage_options)
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == list(range(1, len(acknowledged) + 1))
    assert sorted(acknowledged) == [s.id for s in snapshots]
    assert all(s.kind == at.CommitKind.APPEND and s.delta_record_count == 1 for s in snapshots)
    rows = table.scan().to_arrow()
    pairs = sorted(
        zip(rows.column("writer").to_pylist(), rows.column("n").to_pylist(), strict=True)
    )
    expected = sorted((w, n) for w, ids, _f, _s in results for n in range(len(ids)))
    assert pairs == expected


@pytest.mark.parametrize(
    "store",
    [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)],
)
def test_two_processes_commit_many_times_each_while_a_third_reads(
    request: pytest.FixtureRequest, store: str
) -> None:
    emulator = request.getfixturevalue("fake_gcs" if store == "gcs" else "azurite")
    uri, options = emulator.fresh_uri(), emulator.storage_options
    at.create_table(uri, SCHEMA, options={"write-only": True}, storage_options=options)
    results, read = _run(uri, options, 2, commits=EMULATOR_COMMITS, reader=True)
    for writer, ids, failures, seconds in results:
        print(f"\n{store} writer {writer}: {len(ids)} commits in {seconds:.1f} s, {failures[:3]}")
    assert all(not failures and len(ids) == EMULATOR_COMMITS for _w, ids, failures, _s in results)
    assert read is not None and read[1] > 0 and read[2] == [], read
    _check_log(uri, options, results)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    if request.param == "local":
        return str(tmp_path / "t"), {}
    server = request.getfixturevalue("seaweedfs")
    return server.uri(f"contention/{time.time_ns()}"), server.storage_options


def test_eight_writers_appending_flat_out_never_fail_from_contention(
    location: tuple[str, dict[str, Any]],
) -> None:
    uri, options = location
    at.create_table(uri, SCHEMA, options={"write-only": True}, storage_options=options)
    results, _ = _run(uri, options, 8, seconds=10.0)
    total = sum(len(ids) for _w, ids, _f, _s in results)
    each = [len(ids) for _w, ids, _f, _s in results]
    print(f"\n8 writers: {total} appends in 10 s, per writer {each}")
    assert all(failures == [] for _w, _ids, failures, _s in results), results
    assert all(ids for _w, ids, _f, _s in results)  # every writer got through, none starved
    _check_log(uri, options, results)
