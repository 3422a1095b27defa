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
from typing import assert_never

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.arrow_schema import arrow_type
from appendtable.metadata.models import StatValue
from appendtable.metadata.types import TypeSpec
from appendtable.planning.filters import Filter, Predicate
from appendtable.planning.operators import FilterOperands, filter_operator

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
    """A predicate comparing values that NaN satisfies (``!=``, ``not in``) on a float column:
    statistics leave NaN out (see the module). Null tests are decided by null counts."""
    rule = filter_operator(predicate.op)
    return _floating(predicate) and rule.matches_nan and rule.operands is not FilterOperands.NONE


def _not_null(predicate: Predicate) -> pc.Expression:
    return pc.field(predicate.column, *predicate.path).is_valid()


def _literal_type(type_spec: TypeSpec) -> pa.DataType:
    """The type of a filter literal of a column: a float in float64, as ``=`` compares (a
    float32 cast would round 1e300 to infinity), bytes of any length for fixed-size binary."""
    if type_spec.kind in ("float16", "float32", "float64"):
        return pa.float64()
    if type_spec.kind == "fixed_size_binary":
        return pa.binary()
    return arrow_type(type_spec)


def _scalar(value: StatValue, type_spec: TypeSpec) -> pa.Scalar:
    dtype = _literal_type(type_spec)
    if type_spec.kind == "decimal" and isinstance(value, str):
        return pa.scalar(decimal.Decimal(value), type=dtype)
    if type_spec.kind == "date64" and isinstance(value, int):
        return pa.scalar(value * 86_400_000, type=dtype)
    if type_spec.kind in ("float16", "float32", "float64"):
        return pa.scalar(float(value), type=dtype)  # type: ignore[arg-type]
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
    rule = filter_operator(predicate.op)
    operands = rule.operands
    if operands is not FilterOperands.NONE and predicate.type.kind == "fixed_size_binary":
        field = field.cast(pa.binary())  # compared as bytes, whatever the length
    match operands:
        case FilterOperands.NONE:
            return rule.arrow(field, None)
        case FilterOperands.ONE:
            return rule.arrow(field, _scalar(predicate.values[0], predicate.type))
        case FilterOperands.LIST:
            scalars = [_scalar(v, predicate.type) for v in predicate.values]
            if _floating(predicate):
                scalars = _float_set(scalars)
                # compared in float64, as = compares: isin would round 1e300 to a float32 inf
                field = field.cast(pa.float64())
            values = pa.array(scalars, type=_literal_type(predicate.type))  # exact, any date
            return rule.arrow(field, values)
        case _:
            assert_never(operands)
