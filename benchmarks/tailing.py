"""Tailing a table as a queue: how soon a consumer sees what a writer appends.

A writer process appends one small batch (10 rows) every ``INTERVAL_S`` (10 ms) with default
options (fsync on, automatic compaction in the background), recording when each ``append()``
returned; a reader process tails the table from its latest snapshot with ``poll_interval``
``READER_POLL_S`` (1 ms) and records when each row arrived. The latency of a batch runs from
its ``append()`` returning until the reader holds its rows (``time.monotonic`` is one clock for
every process on Linux); a batch seen before its ``append()`` returned (the commit is visible
before the call finishes its after-commit work) counts as 0. Both processes share the
machine's cores with nothing else of the benchmark's.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.synchronize import Event

import numpy as np
import pyarrow as pa

import appendtable as at
from benchmarks.harness import Result
from benchmarks.rows import limit_row
from benchmarks.workspace import Workspace

__all__ = ["bench_tailing"]

GROUP = "tailing"
INTERVAL_S = 0.010
READER_POLL_S = 0.001
ROWS_PER_APPEND = 10
#: Issue targets: p50 and p99 of the append-to-visible latency.
P50_LIMIT_MS = 5.0
P99_LIMIT_MS = 20.0
SCHEMA = pa.schema([("batch", pa.int64()), ("row", pa.int64()), ("payload", pa.string())])


def _batch(index: int) -> pa.Table:
    return pa.table(
        {
            "batch": np.full(ROWS_PER_APPEND, index, dtype=np.int64),
            "row": np.arange(ROWS_PER_APPEND, dtype=np.int64),
            "payload": [f"event {index}-{r}" for r in range(ROWS_PER_APPEND)],
        },
        schema=SCHEMA,
    )


def _write(uri: str, count: int, go: Event, out: str) -> None:
    table = at.open_table(uri)
    returned = np.zeros(count)
    go.wait()
    due = time.monotonic()
    for index in range(count):
        table.append(_batch(index))
        returned[index] = time.monotonic()
        due += INTERVAL_S
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    table.close()
    np.save(out, returned)


def _read(uri: str, count: int, ready: Event, out: str) -> None:
    table = at.open_table(uri)
    seen = np.full(count, np.nan)
    rows = 0
    with table.stream(mode="latest", poll_interval=READER_POLL_S) as reader:
        ready.set()
        for batch in reader:
            now = time.monotonic()
            indexes = batch.column("batch").to_numpy()
            seen[indexes] = np.where(np.isnan(seen[indexes]), now, seen[indexes])
            rows += batch.num_rows
            if rows >= count * ROWS_PER_APPEND:
                break
    np.save(out, seen)


def bench_tailing(ws: Workspace) -> list[Result]:
    count = max(20, int(ws.config.tailing_seconds / INTERVAL_S))
    uri = ws.fresh_path("tailing")
    at.create_table(uri, SCHEMA).close()
    context = multiprocessing.get_context("spawn")
    ready, go = context.Event(), context.Event()
    seen_path, returned_path = ws.fresh_path("seen") + ".npy", ws.fresh_path("returned") + ".npy"
    reader = context.Process(target=_read, args=(uri, count, ready, seen_path))
    writer = context.Process(target=_write, args=(uri, count, go, returned_path))
    reader.start()
    writer.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the tailing reader did not start")
        go.set()
        writer.join(count * INTERVAL_S * 20 + 60)
        reader.join(60)
        if writer.exitcode != 0 or reader.exitcode != 0:
            raise RuntimeError(
                f"tailing processes failed: writer {writer.exitcode}, reader {reader.exitcode}"
            )
    finally:
        for process in (reader, writer):
            if process.is_alive():
                process.kill()
                process.join()
    seen, returned = np.load(seen_path), np.load(returned_path)
    if np.isnan(seen).any():
        raise RuntimeError(f"the reader missed {int(np.isnan(seen).sum())} of {count} appends")
    latency_ms = np.maximum(seen - returned, 0.0) * 1000
    steady = latency_ms[len(latency_ms) // 10 :]  # the first appends warm both processes up
    details = {
        "appends": count,
        "interval_ms": INTERVAL_S * 1000,
        "reader_poll_ms": READER_POLL_S * 1000,
        "seen_before_return": int((seen < returned).sum()),
        "max_ms": float(steady.max()),
    }
    label = (
        f"append-to-visible latency, a writer appending {ROWS_PER_APPEND} rows every "
        f"{INTERVAL_S * 1000:g} ms (default options), a reader polling every "
        f"{READER_POLL_S * 1000:g} ms, local disk"
    )
    return [
        limit_row(
            GROUP,
            f"{label}: p50",
            float(np.percentile(steady, 50)),
            limit_ms=P50_LIMIT_MS,
            details=details,
        ),
        limit_row(GROUP, f"{label}: p99", float(np.percentile(steady, 99)), limit_ms=P99_LIMIT_MS),
    ]
