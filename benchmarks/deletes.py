"""Deleting 1 % of the rows (a predicate on a non-partition column, ``value < 0.01``, so the
rows are spread over every file) of a table of ``big_rows`` rows in ~80 files (ten appends,
the sizes' ``delete_appends``, ``bucket`` = 8): with deletion vectors and with copy-on-write,
side by side with delta-rs ``DeltaTable.delete`` and pyiceberg ``Table.delete`` on the same
rows, and with plain pyarrow reading the predicate's column and evaluating it (the least work
any delete must do). Then a full scan and a point query on the bucket key of the table with
vectors, against the same table without deletes.

Every delete runs on a fresh copy of its table (copied before the timer starts)."""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

import appendtable as at
from benchmarks.harness import Case, Result, Timing, measure, sync_then
from benchmarks.rows import count_row, limit_row, skipped_row, speed_row
from benchmarks.servers import serving
from benchmarks.workspace import Workspace, remove
from tests.s3.seaweedfs import SeaweedFSUnavailable, start_seaweedfs

try:  # optional peers (the dev extra installs them)
    import deltalake
except ImportError:  # pragma: no cover
    deltalake = None
try:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import LessThan
except ImportError:  # pragma: no cover
    SqlCatalog = None

__all__ = ["bench_deletes"]

GROUP = "deletes"
BUCKETS = 8
CUT = 0.01  # value < CUT: 1 % of the rows
DV_LIMIT_MS = 1500.0
MODE_NAMES = {"dv": "deletion vectors", "cow": "copy-on-write"}
SCAN_RATIO = 1 / 1.1  # a scan with vectors at most 1.1x the time without


def _build(
    uri: str,
    data: pa.Table,
    vectors: bool,
    appends: int,
    storage_options: dict[str, Any] | None = None,
) -> at.Table:
    """The benchmark's table at ``uri``: ``data`` in ``appends`` appends, in 8 buckets."""
    table = at.create_table(
        uri,
        data.schema,
        options={
            "bucket": BUCKETS,
            "bucket-key": "key",
            "write-only": True,
            "deletion-vectors.enabled": vectors,
        },
        storage_options=storage_options,
    )
    step = -(-data.num_rows // appends)
    for start in range(0, data.num_rows, step):
        table.append(data.slice(start, step))
    return table


def _copy(source: str, stem: str, ws: Workspace) -> str:
    target = ws.fresh_path(stem)
    shutil.copytree(source, target)
    return target


def _at_delete(uri: str) -> at.DeleteResult:
    return at.open_table(uri).delete([("value", "<", CUT)])


def _plain_filter(uri: str) -> int:
    """What any delete must do at least: read the predicate's column and evaluate it."""
    files = [
        os.path.join(d, f) for d, _, names in os.walk(uri) for f in names if f.endswith(".parquet")
    ]
    column = pads.dataset(files, format="parquet").to_table(columns=["value"])["value"]
    return int(pc.sum(pc.less(column, CUT)).as_py() or 0)


def bench_deletes(ws: Workspace) -> list[Result]:
    data = ws.big_table
    expected = int(pc.sum(pc.less(data["value"], CUT)).as_py() or 0)
    reps = min(ws.config.big_reps, 2)
    dv_source, cow_source = (
        _build(ws.fresh_path("deletes"), data, vectors, ws.config.delete_appends).uri
        for vectors in (True, False)
    )
    files = at.open_table(dv_source).files().num_rows
    touched: dict[str, int] = {}

    def check(name: str, returned: object) -> None:
        if isinstance(returned, at.DeleteResult):
            assert returned.rows == expected, (name, returned.rows, expected)
            touched[name] = returned.files_touched
            touched[name + "-rewritten"] = returned.files_rewritten

    cases = [
        Case(
            "dv",
            run=_at_delete,
            setup=sync_then(lambda: _copy(dv_source, "dv", ws)),
            teardown=remove,
        ),
        Case(
            "cow",
            run=_at_delete,
            setup=sync_then(lambda: _copy(cow_source, "cow", ws)),
            teardown=remove,
        ),
        Case("plain", run=lambda _: _plain_filter(dv_source)),
    ]
    peers = _peer_cases(ws, data)
    timings = measure([*cases, *peers], reps=reps, warmup=0, check=check)
    rows_label = f"{data.num_rows / 1e6:g} M rows, {files} files"
    results = [
        limit_row(
            GROUP,
            f"delete 1 % of {rows_label} (value < {CUT}), deletion vectors",
            timings["dv"].median * 1000,
            limit_ms=DV_LIMIT_MS if ws.config.mode == "full" else None,
            baseline_ms=timings["plain"].median * 1000,
            details={"appendtable": timings["dv"].summary(1000), "files_touched": touched["dv"]},
        ),
        speed_row(
            GROUP,
            f"delete 1 % of {rows_label}, copy-on-write (baseline: deletion vectors)",
            timings["cow"],
            timings["dv"],
            unit="s",
            target_ratio=None,
        ),
        count_row(
            GROUP,
            f"copy-on-write delete of 1 % of {rows_label}: files rewritten (baseline: files)",
            touched["cow-rewritten"],
            "files",
            baseline=files,
        ),
    ]
    for peer, label in (
        ("delta", "delta-rs DeltaTable.delete"),
        ("iceberg", "pyiceberg Table.delete"),
    ):
        if peer not in timings:
            results.append(skipped_row(GROUP, f"{label}: not installed"))
            continue
        for mode in ("dv", "cow"):
            results.append(
                speed_row(
                    GROUP,
                    f"delete 1 % of {rows_label}, {MODE_NAMES[mode]} (baseline: {label})",
                    timings[mode],
                    timings[peer],
                    unit="s",
                    target_ratio=1.0,
                    target_label=peer,
                )
            )
    results.extend(_reads(ws, dv_source, cow_source, reps, rows_label))
    results.extend(_on_s3(ws, timings, expected, rows_label))
    remove(dv_source)
    remove(cow_source)
    return results


def _reads(ws: Workspace, dv_source: str, plain_source: str, reps: int, label: str) -> list[Result]:
    """A full scan and a point query with vectors (1 % deleted) against without (none)."""
    with_vectors = _copy(dv_source, "dv-read", ws)
    _at_delete(with_vectors)
    key = int(ws.big_table["key"][0].as_py())
    scans = measure(
        [
            Case("vectors", run=lambda _: at.open_table(with_vectors).scan().to_arrow()),
            Case("plain", run=lambda _: at.open_table(plain_source).scan().to_arrow()),
        ],
        reps=max(reps, 5),
    )
    points = measure(
        [
            Case(
                "vectors",
                run=lambda _: (
                    at.open_table(with_vectors).scan(filter=[("key", "=", key)]).to_arrow()
                ),
            ),
            Case(
                "plain",
                run=lambda _: (
                    at.open_table(plain_source).scan(filter=[("key", "=", key)]).to_arrow()
                ),
            ),
        ],
        reps=max(reps, 5),
    )
    remove(with_vectors)
    return [
        speed_row(
            GROUP,
            f"full scan of {label}, 1 % deleted by vectors (baseline: no deletes)",
            scans["vectors"],
            scans["plain"],
            unit="s",
            target_ratio=SCAN_RATIO,
            target_label="no deletes",
        ),
        speed_row(
            GROUP,
            f"point query on the bucket key, {label}, 1 % deleted by vectors "
            "(baseline: no deletes)",
            points["vectors"],
            points["plain"],
            unit="ms",
            target_ratio=None,
        ),
    ]


# ---- S3 ------------------------------------------------------------------------------------


def _on_s3(ws: Workspace, local: dict[str, Timing], expected: int, label: str) -> list[Result]:
    """The same deletes on S3 (a SeaweedFS server on this machine, so the figures measure the
    requests' cost, not a region's latency), against the same deletes on local disk. Each
    delete runs on a table built for it (untimed)."""
    try:
        with serving(ws.servers.s3, lambda: start_seaweedfs("bench-deletes")) as server:

            def build(vectors: bool) -> at.Table:
                uri = server.uri(f"deletes-{uuid.uuid4().hex[:8]}")
                appends = ws.config.delete_appends
                return _build(uri, ws.big_table, vectors, appends, server.storage_options)

            def delete(table: at.Table) -> at.DeleteResult:
                result = table.delete([("value", "<", CUT)])
                assert result.rows == expected, (result.rows, expected)
                return result

            timings = measure(
                [
                    Case("dv", run=delete, setup=lambda: build(True)),
                    Case("cow", run=delete, setup=lambda: build(False)),
                ],
                reps=1,
                warmup=0,
            )
    except SeaweedFSUnavailable as exc:  # raised by the server's start
        return [skipped_row(GROUP, f"delete on S3: {str(exc).splitlines()[0]}")]
    return [
        speed_row(
            GROUP,
            f"delete 1 % of {label} on S3 (SeaweedFS), {MODE_NAMES[mode]} (baseline: local disk)",
            timings[mode],
            local[mode],
            unit="s",
            target_ratio=None,
            target_label="local disk",
        )
        for mode in ("dv", "cow")
    ]


# ---- peers ----------------------------------------------------------------------------------


def _peer_cases(ws: Workspace, data: pa.Table) -> list[Case]:
    cases: list[Case] = []
    step = -(-data.num_rows // ws.config.delete_appends)
    if deltalake is not None:
        source = ws.fresh_path("delta")
        for start in range(0, data.num_rows, step):
            deltalake.write_deltalake(source, data.slice(start, step), mode="append")

        def delta_delete(path: str) -> object:
            return deltalake.DeltaTable(path).delete(f"value < {CUT}")

        cases.append(
            Case(
                "delta",
                run=delta_delete,
                setup=sync_then(lambda: _copy(source, "delta", ws)),
                teardown=remove,
            )
        )
    if SqlCatalog is None:
        return cases
    warehouse = ws.fresh_path("iceberg")
    os.makedirs(warehouse)
    catalog = SqlCatalog(
        "bench",
        uri=f"sqlite:///{warehouse}/catalog.db",
        warehouse=f"file://{warehouse}",
    )
    catalog.create_namespace("bench")

    def iceberg_table() -> object:
        table = catalog.create_table(f"bench.t{uuid.uuid4().hex}", schema=data.schema)
        for start in range(0, data.num_rows, step):
            table.append(data.slice(start, step))
        return table

    def iceberg_delete(table: object) -> object:
        return table.delete(delete_filter=LessThan("value", CUT))  # type: ignore[attr-defined]

    cases.append(Case("iceberg", run=iceberg_delete, setup=sync_then(iceberg_table)))
    return cases
