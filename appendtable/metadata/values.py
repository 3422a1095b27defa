"""Stored values (statistics, partition values) back to Python values, for people."""

from __future__ import annotations

import datetime as dt
import decimal

from appendtable.errors import InvalidArgumentError
from appendtable.metadata.types import TypeSpec

__all__ = ["to_python", "unscaled"]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def to_python(value: object, type_spec: TypeSpec) -> object:
    """Dates as ``date``, timestamps as ``datetime`` (UTC-aware when the column has a time zone;
    nanoseconds are truncated to microseconds), decimals as ``Decimal``, times as ``time``.
    Values beyond Python's date range (year 1..9999) stay as stored integers."""
    try:
        return _to_python(value, type_spec)
    except (OverflowError, ValueError):
        return value


def _to_python(value: object, type_spec: TypeSpec) -> object:
    if value is None:
        return None
    kind = type_spec.kind
    if kind in ("date32", "date64") and isinstance(value, int):
        return _EPOCH_DATE + dt.timedelta(days=value)
    if kind == "timestamp" and isinstance(value, int):
        micros = value * 1_000_000 // _PER_SECOND[type_spec.unit or "us"]
        moment = _EPOCH + dt.timedelta(microseconds=micros)
        return moment.replace(tzinfo=dt.UTC) if type_spec.tz else moment
    if kind in ("time32", "time64") and isinstance(value, int):
        micros = value * 1_000_000 // _PER_SECOND[type_spec.unit or "us"]
        return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
    if kind == "decimal" and isinstance(value, str):
        return decimal.Decimal(value)
    return value


def unscaled(number: decimal.Decimal, scale: int) -> int:
    """The unscaled integer of ``number`` at ``scale`` (``1.25`` at scale 2 is 125), computed
    from its digits: exact for every precision, where ``Decimal.scaleb`` would round to the
    context's 28 digits. Raises InvalidArgumentError (a ValueError) for NaN, infinities and a
    number with more fractional digits than ``scale``."""
    if not number.is_finite():
        raise InvalidArgumentError(f"number: {number} has no unscaled value")
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite
    coefficient = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    value: int
    if shift >= 0:
        value = coefficient * 10**shift
    else:
        value, remainder = divmod(coefficient, 10**-shift)
        if remainder:
            raise InvalidArgumentError(f"number: {number} has more than {scale} fractional digits")
    return -value if sign else value
