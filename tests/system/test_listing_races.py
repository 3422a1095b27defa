"""The snapshots system table while another process commits and expires snapshots: every
listing, from a new handle (nothing cached), is a run of consecutive ids with every row read
whole; a snapshot that expires between the listing of snapshot/ and its read is left out,
never an error."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from tests.helpers.processes import run_in_processes

SCHEMA = pa.schema([("k", pa.int64())])
START = 200
RETAIN = 150
ROUNDS = 150
FOREVER = 2**62


def _commit_and_expire(uri: str, results: Any) -> None:
    table = at.open_table(uri)
    for i in range(ROUNDS):
        table.append(pa.table({"k": [i]}, schema=SCHEMA))
        table.expire_snapshots(retain_min=RETAIN, retain_max=RETAIN, older_than_ms=FOREVER)
    results.put("done")


@pytest.mark.slow
def test_listing_while_another_process_expires(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={"write-only": "true", "commit.fsync": "false"})
    for i in range(START):
        table.append(pa.table({"k": [i]}, schema=SCHEMA))
    failures: list[BaseException] = []

    def run() -> None:
        try:
            assert run_in_processes(_commit_and_expire, [(uri,)], timeout=240) == ["done"]
        except BaseException as exc:  # reported by the test thread below
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    listings = 0
    try:
        while worker.is_alive() or listings < 3:
            snapshots = at.open_table(uri).system_table("snapshots")
            ids = snapshots["snapshot_id"].to_pylist()
            assert ids and ids == list(range(ids[0], ids[0] + len(ids)))
            assert snapshots["total_record_count"].to_pylist() == ids  # one row a snapshot
            listings += 1
    finally:
        worker.join()
    assert failures == []
    final = at.open_table(uri).system_table("snapshots")["snapshot_id"].to_pylist()
    assert final == list(range(START + ROUNDS - RETAIN + 1, START + ROUNDS + 1))
    assert listings >= 3
