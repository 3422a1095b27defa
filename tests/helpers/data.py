"""Generators of test data and models of expected table contents."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

EVENTS = pa.schema(
    [
        ("day", pa.date32()),
        ("key", pa.int64()),
        ("seq", pa.int64()),
        ("value", pa.float64()),
        ("name", pa.string()),
    ]
)


def events(start: int, rows: int, *, keys: int = 13, days: int = 3, seed: int = 0) -> pa.Table:
    """Rows whose ``seq`` is a global write counter (start, start + 1, ...)."""
    rng = np.random.default_rng(seed + start)
    seq = np.arange(start, start + rows, dtype=np.int64)
    day = [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, days, rows)]
    return pa.table(
        {
            "day": pa.array(day, pa.date32()),
            "key": pa.array(rng.integers(0, keys, rows), pa.int64()),
            "seq": pa.array(seq),
            "value": pa.array(rng.random(rows)),
            "name": pa.array([f"n{int(s) % 97}" for s in seq]),
        },
        schema=EVENTS,
    )


def sorted_rows(table: pa.Table, by: str = "seq") -> list[dict[str, object]]:
    return table.sort_by(by).to_pylist()
