"""Helpers for streaming tests."""

from __future__ import annotations

import time

import pyarrow as pa

import appendtable as at
from tests.helpers.data import EVENTS, events

#: Stream options of a watermark-alignment group whose members stay within 2 s of each other.
ALIGNED = {
    "scan.watermark.alignment.group": "g",
    "scan.watermark.alignment.max-drift": "2 s",
}


def drain(reader: at.StreamReader) -> list[at.StreamUnit]:
    """Every unit available now (non-blocking)."""
    units = []
    while (unit := reader.poll()) is not None:
        units.append(unit)
    return units


def rows_of(reader: at.StreamReader, units: list[at.StreamUnit]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for unit in units:
        for batch in reader.read(unit):
            rows.extend(batch.to_pylist())
    return rows


def seqs(rows: list[dict[str, object]]) -> list[int]:
    return [int(r["seq"]) for r in rows]  # type: ignore[call-overload]


def append_spaced(table: at.Table, batch: pa.Table) -> at.Snapshot:
    """Append, making sure the snapshot's commit time differs from the previous one."""
    time.sleep(0.005)
    snapshot = table.append(batch)
    assert snapshot is not None
    return snapshot


def one_second_apart(uri: str, snapshots: int = 10) -> at.Table:
    """A table of ``snapshots`` one-row appends with watermarks 1000, 2000, ... ms."""
    table = at.create_table(uri, EVENTS)
    for i in range(snapshots):
        table.append(events(i, 1), watermark=1000 * (i + 1))
    return table
