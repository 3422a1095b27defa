"""What data-file integrity costs: every page carries a CRC-32 (written and verified on every
read) and every footer a checksum recorded in the manifest (checked on every read).

Measured on plain pyarrow in the same run, so the rows isolate the checksums themselves: a
write with page checksums against one without, and a read that verifies them against one that
does not. The footer checksum is one CRC-32 over a few kilobytes per file; the append and
full-read rows of the main table (which compare the whole of appendtable with plain Parquet)
include it, and ``small files`` below measures it where it weighs most: many tiny files."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

import appendtable as at
from benchmarks.harness import Case, Result, measure, sync_then
from benchmarks.rows import speed_row
from benchmarks.workspace import Workspace, remove

__all__ = ["bench_integrity"]


def _write(data: pa.Table, path: str, *, checksums: bool) -> str:
    pq.write_table(data, path, compression="zstd", write_page_checksum=checksums)
    return path


def bench_integrity(ws: Workspace) -> list[Result]:
    data = ws.big_table
    rows = data.num_rows
    writes = measure(
        [
            Case(
                name,
                run=lambda path, on=on: _write(data, path, checksums=on),
                setup=sync_then(lambda: ws.fresh_path("integrity") + ".parquet"),
                teardown=remove,
            )
            for name, on in (("checksums", True), ("plain", False))
        ],
        reps=ws.config.big_reps,
    )
    with_crc = _write(data, ws.fresh_path("crc") + ".parquet", checksums=True)
    reads = measure(
        [
            Case(
                "checksums", run=lambda _: pq.read_table(with_crc, page_checksum_verification=True)
            ),
            Case("plain", run=lambda _: pq.read_table(with_crc)),
        ],
        reps=ws.config.big_reps,
    )
    remove(with_crc)
    small_files = ws.config.integrity_files
    uri = ws.fresh_path("integrity-small")
    table = at.create_table(uri, data.schema, options={"write-only": True})
    for index in range(small_files):
        table.append(data.slice(index, 1))
    plain_dir = ws.fresh_path("integrity-plain")
    os.makedirs(plain_dir)
    paths = []
    for index in range(small_files):
        paths.append(_write(data.slice(index, 1), f"{plain_dir}/{index}.parquet", checksums=False))
    small = measure(
        [
            Case("appendtable", run=lambda _: at.open_table(uri).scan().to_arrow()),
            Case("plain", run=lambda _: pq.ParquetDataset(paths).read()),
        ],
        reps=ws.config.big_reps,
    )
    remove(uri)
    remove(plain_dir)
    return [
        speed_row(
            "integrity",
            f"write {rows / 1e6:g} M rows with page CRCs vs without (plain pyarrow)",
            writes["checksums"],
            writes["plain"],
            unit="s",
            target_ratio=None,
        ),
        speed_row(
            "integrity",
            f"read {rows / 1e6:g} M rows verifying page CRCs vs not (plain pyarrow)",
            reads["checksums"],
            reads["plain"],
            unit="s",
            target_ratio=None,
        ),
        speed_row(
            "integrity",
            f"read {small_files} one-row files: appendtable (footer + page checks) vs plain",
            small["appendtable"],
            small["plain"],
            unit="ms",
            target_ratio=None,
        ),
    ]
