"""Stored values (statistics, partition bounds) as text, a column at a time.

Stored values are typed by their column (docs/format.md, "Stored values"); as text they read
the way the CLI prints values: integers and floats in their shortest form, booleans
``true``/``false``, dates ``YYYY-MM-DD``, times ``HH:MM:SS.fff``, timestamps
``YYYY-MM-DD HH:MM:SS[.fff]`` (instants, columns with a time zone, in UTC with a ``Z``),
decimals exact in plain notation, strings as they are, binaries as ``0x``-hex. A date or
timestamp outside the years 1 to 9999 is given as its stored integer (days, or units since the
epoch). Types without statistics (nested types, durations, float16) give nulls.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.arrow_schema import arrow_type
from appendtable.metadata.types import INTEGER_KINDS, TypeSpec

__all__ = ["value_texts"]

#: 0001-01-01 and 9999-12-31 as days and seconds since the epoch.
_FIRST_DAY, _LAST_DAY = -719_162, 2_932_896
_FIRST_SECOND, _LAST_SECOND = -62_135_596_800, 253_402_300_799
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_INT64 = (-(2**63), 2**63 - 1)


def value_texts(values: Sequence[object], spec: TypeSpec) -> pa.Array:
    """The stored ``values`` of a column of type ``spec`` as a string array (nulls stay
    null)."""
    kind = spec.kind
    if kind in ("string", "large_string", "decimal"):  # decimals are stored as exact text
        return pa.array(values, pa.string())
    if kind in ("binary", "large_binary", "fixed_size_binary"):
        return pa.array(
            [v if not isinstance(v, bytes) else "0x" + v.hex() for v in values],
            pa.string(),
        )
    if kind in INTEGER_KINDS or kind in ("bool", "float32", "float64"):
        return pa.array(values, arrow_type(spec)).cast(pa.string())
    if kind in ("date32", "date64"):
        return _temporal(values, pa.date32(), _FIRST_DAY, _LAST_DAY)
    if kind == "timestamp":
        unit = spec.unit or "us"
        per = _PER_SECOND[unit]
        low = max(_FIRST_SECOND * per, _INT64[0])
        high = min(_LAST_SECOND * per + per - 1, _INT64[1])
        return _temporal(values, pa.timestamp(unit, tz="UTC" if spec.tz else None), low, high)
    if kind in ("time32", "time64"):
        return pa.array(values, arrow_type(spec)).cast(pa.string())
    return pa.nulls(len(values), pa.string())


def _temporal(values: Sequence[object], dtype: pa.DataType, low: int, high: int) -> pa.Array:
    """Integers as ``dtype`` rendered as text where in range, else as the integer itself."""
    stored = pa.array(values, pa.int64())
    in_range = pc.and_(pc.greater_equal(stored, low), pc.less_equal(stored, high))
    clipped = pc.if_else(in_range, stored, 0)
    if pa.types.is_date32(dtype):  # days: int32 is what a date32 holds
        clipped = clipped.cast(pa.int32())
    typed = clipped.cast(dtype).cast(pa.string())
    return pc.if_else(in_range, typed, stored.cast(pa.string()))
