"""The filter operators, defined once: for each, its text, what it compares with, its row test,
its rule on a file's statistics and its Arrow compute expression (``filter_operator``). The
planner, the readers, a scan's description, the command line and the Spark adapter all take
an operator's behaviour from here; a ``match`` over the operators ends in ``assert_never``, so
that mypy names every place a new operator must be handled.

Semantics are SQL's, with IEEE floats: a null satisfies only ``is null``; NaN equals nothing
and orders with nothing, so of the operators comparing values it satisfies only ``!=`` and
``not in``; ``in`` is the OR of ``=`` and ``not in`` its negation.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, assert_never

import pyarrow.compute as pc

__all__ = [
    "FilterOp",
    "FilterOperator",
    "FilterOperands",
    "filter_operator",
    "operator_spellings",
]


class FilterOp(enum.StrEnum):
    """A filter operator, valued by its text form."""

    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"
    NOT_IN = "not in"
    IS_NULL = "is null"
    IS_NOT_NULL = "is not null"

    @classmethod
    def parse(cls, text: object) -> FilterOp | None:
        """The operator ``text`` spells, in any case and with spaces around it (``==`` is
        ``=``); None if it spells none."""
        return _SPELLINGS.get(str(text).lower().strip())


class FilterOperands(enum.Enum):
    """What an operator compares a column with."""

    NONE = "nothing"  #: ``is null``, ``is not null``
    ONE = "one value"  #: ``=``, ``<``, ...
    LIST = "a list of values"  #: ``in``, ``not in``


#: A row test: does a non-null value satisfy the operator with this operand? Both are sort
#: keys; the operand is one value, a sequence of values or None (``FilterOperands``).
RowTest = Callable[[Any, Any], Any]
#: A statistics rule: may a file hold a row satisfying the operator with this operand, given
#: what its statistics say of the column: its least and greatest non-null values as sort keys
#: (None when unknown or not to be trusted; NaN is in no statistics), its null count (None when
#: unknown) and its row count? Arguments: (low, high, nulls, rows, operand, floating: the
#: column is a float, which may hold NaN beyond its bounds).
StatsRule = Callable[[Any, Any, int | None, int, Any, bool], bool]
#: The Arrow compute expression on a field and the operand: a scalar, an array or None.
ArrowRule = Callable[[pc.Expression, Any], pc.Expression]


@dataclass(frozen=True)
class FilterOperator:
    """What one filter operator does, wherever it is evaluated.

    ``test`` of a comparison (``FilterOperands.ONE``) is the Python operator itself, which Arrow
    expressions and Spark columns overload as well."""

    op: FilterOp
    #: other spellings of it, besides ``op``'s value
    aliases: tuple[str, ...]
    operands: FilterOperands
    #: whether a null satisfies it
    matches_null: bool
    #: whether a NaN satisfies it
    matches_nan: bool
    #: whether every row satisfying it holds one of its operands (bucket and index pruning)
    pins_values: bool
    test: RowTest
    may_match: StatsRule
    arrow: ArrowRule


def _compared(rule: Callable[[Any, Any, Any, bool], bool]) -> StatsRule:
    """A statistics rule of an operator comparing values: none holds in a file of nulls only;
    without bounds any may hold. ``rule`` takes (low, high, operand, floating)."""

    def may_match(
        low: Any, high: Any, nulls: int | None, rows: int, operand: Any, floating: bool
    ) -> bool:
        if nulls is not None and nulls >= rows:
            return False
        if low is None or high is None:
            return True
        return rule(low, high, operand, floating)

    return may_match


def _has_nulls(low: Any, high: Any, nulls: int | None, rows: int, *_: Any) -> bool:
    return nulls is None or nulls > 0


def _has_values(low: Any, high: Any, nulls: int | None, rows: int, *_: Any) -> bool:
    return nulls is None or nulls < rows


def _nothing_in(field: pc.Expression, values: Any) -> pc.Expression:
    return field.isin(values) if len(values) else pc.scalar(False)


def _all_but(field: pc.Expression, values: Any) -> pc.Expression:
    # SQL semantics: a null is neither in nor not in a list
    return ~field.isin(values) & field.is_valid() if len(values) else field.is_valid()


def _rule(op: FilterOp) -> FilterOperator:
    """The table. NaN is in no statistics and differs from every value: a file whose
    statistics hold only the operand may still hold NaN rows matching ``!=`` and ``not in``."""
    match op:
        case FilterOp.EQ:
            return FilterOperator(
                op,
                aliases=("==",),
                operands=FilterOperands.ONE,
                matches_null=False,
                matches_nan=False,
                pins_values=True,
                test=operator.eq,
                may_match=_compared(lambda lo, hi, value, _: bool(lo <= value <= hi)),
                arrow=operator.eq,
            )
        case FilterOp.NE:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.ONE,
                matches_null=False,
                matches_nan=True,
                pins_values=False,
                test=operator.ne,
                may_match=_compared(lambda lo, hi, value, nan: nan or not bool(lo == hi == value)),
                arrow=operator.ne,
            )
        case FilterOp.LT:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.ONE,
                matches_null=False,
                matches_nan=False,
                pins_values=False,
                test=operator.lt,
                may_match=_compared(lambda lo, hi, value, _: bool(lo < value)),
                arrow=operator.lt,
            )
        case FilterOp.LE:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.ONE,
                matches_null=False,
                matches_nan=False,
                pins_values=False,
                test=operator.le,
                may_match=_compared(lambda lo, hi, value, _: bool(lo <= value)),
                arrow=operator.le,
            )
        case FilterOp.GT:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.ONE,
                matches_null=False,
                matches_nan=False,
                pins_values=False,
                test=operator.gt,
                may_match=_compared(lambda lo, hi, value, _: bool(hi > value)),
                arrow=operator.gt,
            )
        case FilterOp.GE:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.ONE,
                matches_null=False,
                matches_nan=False,
                pins_values=False,
                test=operator.ge,
                may_match=_compared(lambda lo, hi, value, _: bool(hi >= value)),
                arrow=operator.ge,
            )
        case FilterOp.IN:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.LIST,
                matches_null=False,
                matches_nan=False,
                pins_values=True,
                # compared with ==, never by identity (as Python's ``in`` does): NaN equals nothing
                test=lambda value, values: any(value == v for v in values),
                may_match=_compared(lambda lo, hi, values, _: any(lo <= v <= hi for v in values)),
                arrow=_nothing_in,
            )
        case FilterOp.NOT_IN:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.LIST,
                matches_null=False,
                matches_nan=True,
                pins_values=False,
                test=lambda value, values: not any(value == v for v in values),
                may_match=_compared(
                    lambda lo, hi, values, nan: nan or not bool(lo == hi and lo in values)
                ),
                arrow=_all_but,
            )
        case FilterOp.IS_NULL:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.NONE,
                matches_null=True,
                matches_nan=False,
                pins_values=False,
                test=lambda value, _: False,
                may_match=_has_nulls,
                arrow=lambda field, _: field.is_null(),
            )
        case FilterOp.IS_NOT_NULL:
            return FilterOperator(
                op,
                aliases=(),
                operands=FilterOperands.NONE,
                matches_null=False,
                matches_nan=True,
                pins_values=False,
                test=lambda value, _: True,
                may_match=_has_values,
                arrow=lambda field, _: field.is_valid(),
            )
        case _:
            assert_never(op)


_OPERATORS: dict[FilterOp, FilterOperator] = {op: _rule(op) for op in FilterOp}
_SPELLINGS: Mapping[str, FilterOp] = MappingProxyType(
    {text: op for op, rule in _OPERATORS.items() for text in (op.value, *rule.aliases)}
)


def filter_operator(op: FilterOp) -> FilterOperator:
    """What ``op`` does (see ``FilterOperator``)."""
    return _OPERATORS[op]


def operator_spellings() -> Mapping[str, FilterOp]:
    """Every spelling of every operator, in lower case, and the operator it spells (what
    ``FilterOp.parse`` takes)."""
    return _SPELLINGS
