"""Peak memory of the writer: one large append and one append into many
partitions and buckets, each in a fresh subprocess, next to plain pyarrow on the same data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.harness import Result
from benchmarks.rows import count_row
from benchmarks.rss_probe import PARTITIONED_BUFFER_MB
from benchmarks.workspace import Workspace, remove

__all__ = ["bench_memory"]

GROUP = "memory"
REPO = Path(__file__).resolve().parent.parent
#: The target: the write's own peak RSS at most the write buffer plus 25 %.
BUFFER_SLACK = 1.25


def _probe(ws: Workspace, case: str, source: str) -> dict[str, Any]:
    workdir = ws.fresh_path(f"rss-{case}")
    os.makedirs(workdir)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.rss_probe", case, source, workdir],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=900,
        )
    finally:
        remove(workdir)
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    measured["writer_mb"] = measured["peak_rss_mb"] - measured["loaded_rss_mb"]
    return measured


def _partitioned_file(ws: Workspace) -> str:
    data = ws.big_table
    partitions = ws.config.memory_partitions
    part = pc.cast(pc.remainder(data["key"], partitions), pa.int32())
    path = ws.fresh_path("rss-partitioned") + ".parquet"
    pq.write_table(data.append_column("part", part), path)
    return path


def _row(label: str, ours: dict[str, Any], plain: dict[str, Any], plain_label: str) -> Result:
    return count_row(
        GROUP,
        f"{label}: writer's peak RSS above the loaded data (baseline: {plain_label})",
        ours["writer_mb"],
        "MB",
        baseline=plain["writer_mb"],
        details={"appendtable": ours, "baseline": plain},
    )


def _buffer_row(
    label: str, ours: dict[str, Any], plain: dict[str, Any], plain_label: str
) -> Result:
    """The many-writers row, checked against the write buffer (MiB, as options count it)."""
    limit_mb = PARTITIONED_BUFFER_MB * 2**20 * BUFFER_SLACK / 1e6
    return replace(
        _row(label, ours, plain, plain_label),
        target=f"≤ {limit_mb:.0f} MB (write-buffer-size {PARTITIONED_BUFFER_MB} MB + 25 %)",
        passed=ours["writer_mb"] <= limit_mb,
    )


def bench_memory(ws: Workspace) -> list[Result]:
    rows = f"{ws.big_table.num_rows / 1e6:g} M rows"
    source = ws.big_plain_file
    plain = _probe(ws, "plain", source)
    unaware = _probe(ws, "unaware", source)
    bucketed = _probe(ws, "bucketed", source)
    partitioned_source = _partitioned_file(ws)
    plain_partitioned = _probe(ws, "plain-partitioned", partitioned_source)
    partitioned = _probe(ws, "partitioned", partitioned_source)
    remove(partitioned_source)
    one_file = "pq.write_table"
    partitions = ws.config.memory_partitions
    return [
        _row(f"append {rows}, bucket=-1", unaware, plain, one_file),
        _row(f"append {rows}, bucket=8 + key", bucketed, plain, one_file),
        _buffer_row(
            f"append {rows} into {partitions} partitions x 16 buckets, write-buffer-size "
            f"{PARTITIONED_BUFFER_MB} MB, spillable",
            partitioned,
            plain_partitioned,
            f"pq.write_to_dataset, {partitions} partitions",
        ),
    ]
