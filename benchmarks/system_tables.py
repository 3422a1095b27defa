"""System tables over a long history (the target: listing 10,000 snapshots takes under a
second): ``system_table("snapshots")`` of the history table (``history_sizes[-1]`` one-row
snapshots, 10,000 in full mode) on a new handle with empty caches (a fresh process) and on a
warm handle, next to the floor of reading every snapshot file's bytes; the per-snapshot tables
(``files``, ``partitions``) of its latest snapshot, which has as many live files; and the
snapshots table of the same log on S3 (SeaweedFS on this machine, snapshot files read by 16
threads). Every snapshot is its own object, so on an object store the listing costs one GET
per snapshot: the emulator, sharing this machine's 2 CPUs, serves about 450 GETs a second
however many threads ask (4.7 ms a GET one at a time, 2.2 ms with 16 threads), which bounds
that row, not the decoding."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

import fsspec
import pyarrow as pa

import appendtable as at
from benchmarks.harness import Case, Result, measure
from benchmarks.rows import limit_row
from benchmarks.servers import serving
from benchmarks.workspace import Workspace
from tests.s3.seaweedfs import SeaweedFSUnavailable, start_seaweedfs

__all__ = ["bench_system_tables"]

LIMIT_MS = 1000.0


def _read_all_snapshot_files(uri: str) -> int:
    """The floor: list snapshot/ and read each snapshot file's bytes (no decoding)."""
    directory = os.path.join(uri, "snapshot")
    total = 0
    for name in os.listdir(directory):
        if name.startswith("snapshot-"):
            with open(os.path.join(directory, name), "rb") as handle:
                total += len(handle.read())
    return total


def _check_count(returned: object, count: int) -> None:
    assert isinstance(returned, pa.Table) and returned.num_rows == count


def _fresh(uri: str, name: str, **storage: object) -> Callable[[object], object]:
    def run(_context: object) -> object:
        return at.open_table(uri, storage_options=storage or None).system_table(name)

    return run


def bench_system_tables(ws: Workspace) -> list[Result]:
    uri = ws.history_table()
    warm = at.open_table(uri)
    latest = warm.latest_snapshot()
    assert latest is not None
    count = latest.id

    def check(case: str, returned: object) -> None:
        if case == "floor":
            return
        assert isinstance(returned, pa.Table), case
        if case.startswith("snapshots"):
            assert returned.num_rows == count, (case, returned.num_rows)

    timings = measure(
        [
            Case("snapshots-cold", setup=at.clear_metadata_caches, run=_fresh(uri, "snapshots")),
            Case("snapshots-warm", run=lambda _: warm.system_table("snapshots")),
            Case("floor", run=lambda _: _read_all_snapshot_files(uri)),
            Case("files-cold", setup=at.clear_metadata_caches, run=_fresh(uri, "files")),
            Case("partitions-cold", setup=at.clear_metadata_caches, run=_fresh(uri, "partitions")),
        ],
        reps=max(3, ws.config.plan_reps // 3),
        warmup=1,
        check=check,
    )
    floor_ms = timings["floor"].median * 1000
    label = f"{count:,} snapshots"
    rows = [
        limit_row(
            "system-tables",
            f"system_table('snapshots') of {label}, new handle, empty caches "
            "(baseline: reading the snapshot files' bytes)",
            timings["snapshots-cold"].median * 1000,
            limit_ms=LIMIT_MS,
            baseline_ms=floor_ms,
            details={"cold_ms": timings["snapshots-cold"].summary(1000), "snapshots": count},
        ),
        limit_row(
            "system-tables",
            f"system_table('snapshots') of {label}, warm handle",
            timings["snapshots-warm"].median * 1000,
            limit_ms=LIMIT_MS,
            details={"warm_ms": timings["snapshots-warm"].summary(1000)},
        ),
        limit_row(
            "system-tables",
            f"system_table('files') of a snapshot with {latest.total_file_count:,} live files "
            "(statistics included), new handle",
            timings["files-cold"].median * 1000,
            limit_ms=None,
            details={"files_ms": timings["files-cold"].summary(1000)},
        ),
        limit_row(
            "system-tables",
            f"system_table('partitions') of a snapshot with {latest.total_file_count:,} live "
            "files, new handle",
            timings["partitions-cold"].median * 1000,
            limit_ms=None,
            details={"partitions_ms": timings["partitions-cold"].summary(1000)},
        ),
    ]
    rows.extend(_on_s3(ws, uri, count))
    return rows


def _on_s3(ws: Workspace, local_uri: str, count: int) -> list[Result]:
    """The same snapshot log (and schema) uploaded to SeaweedFS, listed from a new handle."""
    try:
        with serving(ws.servers.s3, lambda: start_seaweedfs("bench-system")) as server:
            remote = server.uri(f"history-{uuid.uuid4().hex[:8]}")
            filesystem, root = fsspec.core.url_to_fs(remote, **server.storage_options)
            for directory in ("schema", "snapshot"):
                filesystem.put(
                    os.path.join(local_uri, directory), f"{root}/{directory}", recursive=True
                )
            timings = measure(
                [
                    Case(
                        "s3",
                        setup=at.clear_metadata_caches,
                        run=_fresh(remote, "snapshots", **server.storage_options),
                    )
                ],
                reps=3,
                warmup=1,
                check=lambda _case, returned: _check_count(returned, count),
            )
    except SeaweedFSUnavailable as exc:  # raised by the server's start
        print(f"  S3: unavailable ({str(exc).splitlines()[0]})", flush=True)
        return []
    return [
        limit_row(
            "system-tables",
            f"system_table('snapshots') of {count:,} snapshots on S3 (SeaweedFS), new handle",
            timings["s3"].median * 1000,
            limit_ms=None,
            details={"s3_ms": timings["s3"].summary(1000)},
        )
    ]
