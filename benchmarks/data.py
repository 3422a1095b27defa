"""Synthetic, seeded test data built with numpy (no Python loop per row, no downloads)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["KEY_CARDINALITY", "NUMERIC_SCHEMA", "SCHEMA", "make_numeric", "make_table", "one_row"]

KEY_CARDINALITY = 100_000
SCHEMA = pa.schema([("key", pa.int64()), ("value", pa.float64()), ("text", pa.string())])
#: Narrow all-numeric rows (an integer key, a price and a count).
NUMERIC_SCHEMA = pa.schema([("key", pa.int64()), ("price", pa.float64()), ("sales", pa.int64())])
_MIN_CHARS, _MAX_CHARS = 8, 12  # about 10 characters per string


def _strings(rng: np.random.Generator, rows: int) -> pa.StringArray:
    """Random lowercase strings of 8..12 characters, assembled from raw Arrow buffers."""
    lengths = rng.integers(_MIN_CHARS, _MAX_CHARS + 1, size=rows, dtype=np.int32)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    chars = rng.integers(ord("a"), ord("z") + 1, size=int(offsets[-1]), dtype=np.uint8)
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(chars))


def make_table(rows: int, seed: int = 42) -> pa.Table:
    """``rows`` rows: an int64 key with ~100k distinct values, a random float64 and a ~10
    character string."""
    rng = np.random.default_rng(seed)
    return pa.table(
        [
            pa.array(rng.integers(0, KEY_CARDINALITY, size=rows, dtype=np.int64)),
            pa.array(rng.random(rows)),
            _strings(rng, rows),
        ],
        schema=SCHEMA,
    )


def make_numeric(rows: int, seed: int = 43) -> pa.Table:
    """``rows`` all-numeric rows: a ``key`` (product id) with ~100k distinct values, a random
    price and a sales count."""
    rng = np.random.default_rng(seed)
    return pa.table(
        [
            pa.array(rng.integers(0, KEY_CARDINALITY, size=rows, dtype=np.int64)),
            pa.array(rng.random(rows) * 100),
            pa.array(rng.integers(0, 1000, size=rows, dtype=np.int64)),
        ],
        schema=NUMERIC_SCHEMA,
    )


def one_row(index: int) -> pa.Table:
    """A one-row table (for commit latency)."""
    return pa.table(
        {"key": [index % KEY_CARDINALITY], "value": [float(index)], "text": [f"row{index:07d}"]},
        schema=SCHEMA,
    )
