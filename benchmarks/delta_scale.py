"""The million-file shapes in delta-rs (``deltalake``, installed in this virtualenv): the same
files, partitions, statistics and number of commits as ``benchmarks.fabricate`` builds, as a
Delta transaction log.

Building: ``DeltaTable.create`` writes version 0 (protocol and schema); versions 1..S are
written as the commit files delta-rs itself writes (one JSON line per action: the commit's
``add`` actions with their statistics, and its ``commitInfo``), then ``create_checkpoint``
writes a checkpoint of the last version, so loading the table replays the checkpoint and no
JSON commit (the state delta-rs's default checkpoint interval of 100 commits keeps a log in
at most every 100 commits). Committing S transactions through ``create_write_transaction``
instead takes far longer (it is timed per commit below) and gives the same files.

``python -m benchmarks.delta_scale CASE URI`` runs one operation in a fresh process with its
peak memory (see ``benchmarks.scale_probe``): ``plan`` (``DeltaTable(uri).file_uris()``) and
``vacuum`` (``vacuum(retention_hours=0, dry_run=True)``: lists the table's directory and
compares it with the live files and tombstones).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from deltalake import DeltaTable

from benchmarks.fabricate import SCHEMA, Shape, day_of, file_messages
from benchmarks.scale_probe import run_probe

__all__ = ["CASES", "build_delta", "delta_path", "main", "touch_delta_files"]

_COLUMNS = ("key", "value", "text")


def delta_path(partition: int, name: str) -> str:
    return f"day={day_of(partition).isoformat()}/{name}"


def _stats(row_count: int, mins: tuple[Any, ...], maxs: tuple[Any, ...], nulls: Any) -> str:
    # the data columns follow the partition column ("day") in the statistics tuples
    return json.dumps(
        {
            "numRecords": row_count,
            "minValues": dict(zip(_COLUMNS, mins[1:], strict=True)),
            "maxValues": dict(zip(_COLUMNS, maxs[1:], strict=True)),
            "nullCount": dict(zip(_COLUMNS, nulls[1:], strict=True)),
        }
    )


def build_delta(uri: str, shape: Shape) -> float:
    """A Delta table at ``uri`` holding ``shape``'s files (log only); the seconds it took."""
    start = time.perf_counter()
    DeltaTable.create(uri, SCHEMA, partition_by=["day"])
    log = os.path.join(uri, "_delta_log")
    now_ms = int(time.time() * 1000)
    for version, (partition, files) in enumerate(file_messages(shape, now_ms), start=1):
        day = day_of(partition).isoformat()
        lines = [
            json.dumps(
                {
                    "add": {
                        "path": delta_path(partition, f.path.rsplit("/", 1)[1]),
                        "partitionValues": {"day": day},
                        "size": f.file_size,
                        "modificationTime": now_ms,
                        "dataChange": True,
                        "stats": _stats(f.row_count, f.min_values, f.max_values, f.null_counts),
                    }
                }
            )
            for f in files
        ]
        lines.append(
            json.dumps(
                {
                    "commitInfo": {
                        "timestamp": now_ms,
                        "operation": "WRITE",
                        "operationParameters": {"mode": "Append"},
                        "clientVersion": "appendtable-benchmark",
                    }
                }
            )
        )
        with open(os.path.join(log, f"{version:020d}.json"), "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    DeltaTable(uri).create_checkpoint()
    return time.perf_counter() - start


def touch_delta_files(uri: str, shape: Shape) -> float:
    """Create every data file of ``shape`` in the Delta layout as an empty file."""
    start = time.perf_counter()
    made: set[str] = set()
    for partition, files in file_messages(shape, 0):
        directory = os.path.join(uri, f"day={day_of(partition).isoformat()}")
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)
        for f in files:
            name = f.path.rsplit("/", 1)[1]
            os.close(os.open(os.path.join(directory, name), os.O_CREAT | os.O_WRONLY, 0o644))
    return time.perf_counter() - start


def _plan(uri: str) -> int:
    return len(DeltaTable(uri).file_uris())


def _vacuum(uri: str) -> int:
    table = DeltaTable(uri)
    return len(table.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False))


CASES: Mapping[str, Callable[[str], int]] = {"plan": _plan, "vacuum": _vacuum}


def main(argv: list[str]) -> int:
    case, uri = argv
    print(json.dumps(run_probe(f"delta-{case}", lambda: CASES[case](uri))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
