"""A parsed ``Filter`` as a pyarrow compute expression, for exact row filtering, and the
weaker expression a Parquet scanner may be given for its row-group pruning.

Parquet statistics leave NaN out, so a row group of ``[1.0, NaN, 1.0]`` has min = max = 1.0;
Arrow's scanner then takes ``x = 1.0`` as a fact about every row of the group, folds any
expression of ``x`` with it (``x != 1.0`` and even ``is_nan(x)`` become false) and skips the
group, losing the NaN row that ``!=`` and ``not in`` match. ``pushdown_expression`` leaves
those predicates on float columns out (only their "not null" part stays), and readers apply
the exact expression to what the scanner returns (``needs_exact_pass``).
"""

from __future__ import annotations

import decimal
import functools
import math
import operator

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.arrow_schema import arrow_type
from appendtable.metadata.models import StatValue
from appendtable.metadata.types import TypeSpec
from appendtable.planning.filters import Filter, Predicate

__all__ = ["needs_exact_pass", "pushdown_expression", "to_expression"]


def to_expression(row_filter: Filter | None) -> pc.Expression | None:
    """The exact row filter."""
    if row_filter is None:
        return None
    clauses = [
        functools.reduce(operator.and_, (_predicate(p) for p in clause))
        for clause in row_filter.clauses
    ]
    return functools.reduce(operator.or_, clauses)


def needs_exact_pass(row_filter: Filter | None) -> bool:
    """Whether ``row_filter`` holds a predicate that row-group pruning may decide wrongly
    (``!=`` / ``not in`` on a float: see the module), so that a scanner is given
    ``pushdown_expression`` and the exact filter is applied after it."""
    return row_filter is not None and any(
        _nan_unsafe(p) for clause in row_filter.clauses for p in clause
    )


def pushdown_expression(row_filter: Filter | None) -> pc.Expression | None:
    """A filter for a Parquet scanner: every row of the exact filter passes it, and
    row-group pruning with it is sound (see the module)."""
    if row_filter is None:
        return None
    clauses = [
        functools.reduce(
            operator.and_,
            (_not_null(p) if _nan_unsafe(p) else _predicate(p) for p in clause),
        )
        for clause in row_filter.clauses
    ]
    return functools.reduce(operator.or_, clauses)


def _floating(predicate: Predicate) -> bool:
    return predicate.type.kind in ("float16", "float32", "float64")


def _nan_unsafe(predicate: Predicate) -> bool:
    return _floating(predicate) and predicate.op in ("!=", "not in")


def _not_null(predicate: Predicate) -> pc.Expression:
    return pc.field(predicate.column, *predicate.path).is_valid()


def _scalar(value: StatValue, type_spec: TypeSpec) -> pa.Scalar:
    dtype = arrow_type(type_spec)
    if type_spec.kind == "decimal" and isinstance(value, str):
        return pa.scalar(decimal.Decimal(value), type=dtype)
    if type_spec.kind == "date64" and isinstance(value, int):
        return pa.scalar(value * 86_400_000, type=dtype)
    if type_spec.kind in ("float16", "float32", "float64"):
        return pa.scalar(float(value), type=pa.float64())  # type: ignore[arg-type]
    if type_spec.kind == "fixed_size_binary":  # a literal of another length too
        return pa.scalar(value, type=pa.binary())
    return pa.scalar(value, type=dtype)  # integers: within the column's range (parse_filter)


def _float_set(scalars: list[pa.Scalar]) -> list[pa.Scalar]:
    """``in`` is the OR of ``=``, but ``isin`` matches floats bit for bit: NaN would match
    NaN (which ``=`` never does) and -0.0 would miss 0.0 (which ``=`` matches, and which
    Parquet statistics record as -0.0 in the minimum). Drop NaN and hold both zeros."""
    kept = [s for s in scalars if not math.isnan(s.as_py())]
    if any(s.as_py() == 0 for s in kept):
        kept = [s for s in kept if s.as_py() != 0] + [pa.scalar(0.0), pa.scalar(-0.0)]
    return kept


def _predicate(predicate: Predicate) -> pc.Expression:
    field = pc.field(predicate.column, *predicate.path)  # a struct field: null under a null struct
    op = predicate.op
    if op == "is null":
        return field.is_null()
    if op == "is not null":
        return field.is_valid()
    scalars = [_scalar(v, predicate.type) for v in predicate.values]
    if predicate.type.kind == "fixed_size_binary":  # compared as bytes, whatever the length
        field = field.cast(pa.binary())
    if op in ("=", "=="):
        return field == scalars[0]
    floating = _floating(predicate)
    if op == "!=":
        return field != scalars[0]
    if op == "<":
        return field < scalars[0]
    if op == "<=":
        return field <= scalars[0]
    if op == ">":
        return field > scalars[0]
    if op == ">=":
        return field >= scalars[0]
    member = field
    if floating:
        scalars = _float_set(scalars)
        # compared in float64, as = compares: isin would round 1e300 to a float32 infinity
        member = field.cast(pa.float64())
    if not scalars:  # nothing is in an empty list; every non-null value is not in it
        return pc.scalar(False) if op == "in" else field.is_valid()
    values = pa.array([s.as_py() for s in scalars], type=scalars[0].type)
    membership = member.isin(values)
    # SQL semantics, as in pruning: a null is neither in nor not in a list.
    return membership if op == "in" else ~membership & field.is_valid()
