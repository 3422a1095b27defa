"""Deleting rows with a Spark condition: ``delete(spark, uri, "kind = 'k2' OR id >= 280")``.

Spark's ``DELETE FROM`` is not available to Python data sources (Spark offers row-level
operations only to JVM connectors), so this helper does it. Spark analyses the condition over
the table's rows (resolving columns, types and implicit casts as ``df.where(condition)``
would); the analysed expression is translated into the core's filter (a disjunction of
conjunctions of ``(column, op, value)``) only where the translation is exact: column
references (struct fields by path) compared with literals or constant expressions (evaluated
by Spark, such as the cast it puts on a literal) by ``=``, ``!=``, ``<``, ``<=``, ``>``,
``>=``, ``IN``, ``IS [NOT] NULL``, joined by ``AND``, ``OR`` and ``NOT`` (and ``NOT isnan(c)``
beside such terms, which the core's comparisons already imply: the check below confirms it).
A cast Spark put on a column is allowed only where it changes no value (to the column's own
type, or an integral type widened). Anything else (functions of columns, other casts of a
column, column-to-column comparisons, ``<=>``) is refused with ``InvalidFilterError`` naming
the part, never approximated.

The translation is then checked on the data: Spark counts, over the snapshot the delete plans
on, the rows its condition selects (|C|) and those it selects that the core's filter also
selects, with the core's semantics (|C ∩ F|), and the core's dry run counts |F|. The delete
runs only when the three are equal (then C = F, as multisets of rows); otherwise (for instance
NaN, which Spark orders above every number and the core matches only with ``!=``) it is refused,
naming both counts. The delete itself is the core's ``Table.delete``: one atomic DELETE
snapshot, by deletion vectors or copy-on-write as the table's options say, recorded with its
filter so streams drop the rows too.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import appendtable as at
from appendtable_spark.native import filter_condition
from appendtable_spark.source import FORMAT

__all__ = ["MAX_CLAUSES", "delete", "translate_condition"]

#: A condition whose disjunctive form has more clauses than this is refused (NOT over ORs of
#: ANDs multiplies them).
MAX_CLAUSES = 256

Term = tuple[object, str, object]
Clauses = list[list[Term]]

_COMPARISONS = {
    "EqualTo": "=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
}
_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATED = {
    "=": "!=",
    "!=": "=",
    "<": ">=",
    ">=": "<",
    "<=": ">",
    ">": "<=",
    "in": "not in",
    "not in": "in",
    "is null": "is not null",
    "is not null": "is null",
}
_EPOCH = datetime.date(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def delete(
    spark: SparkSession,
    uri: str,
    condition: str | Column,
    *,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> int:
    """Delete the rows of the table at ``uri`` for which ``condition`` (a Spark SQL boolean
    expression, or a Column) is true, exactly the rows ``df.where(condition)`` selects, as one
    atomic DELETE snapshot (see the module doc); returns how many rows it deleted, or with
    ``dry_run`` would delete (then nothing is written). A condition with no exact appendtable
    filter form is refused with ``InvalidFilterError``."""
    if not isinstance(condition, str | Column):
        raise at.InvalidArgumentError(
            f"condition: a Spark SQL boolean expression (str) or a Column, not "
            f"{type(condition).__name__}"
        )
    if not isinstance(dry_run, bool):
        raise at.InvalidArgumentError(f"dry_run: True or False, not {dry_run!r}")
    table = at.open_table(uri, storage_options=storage_options)
    wanted = F.expr(condition) if isinstance(condition, str) else condition
    while True:
        snapshot = table.latest_snapshot()
        if snapshot is None:
            return 0
        df = _snapshot_frame(spark, uri, snapshot.id, storage_options)
        terms = translate_condition(df.where(wanted))
        checked = table.delete(terms, dry_run=True)
        if table.latest_snapshot() != snapshot:
            continue  # a commit landed meanwhile: check on the new latest snapshot
        schema = table.scan(snapshot_id=snapshot.id).output_schema
        _check_exact(df, wanted, terms, schema, checked.rows, condition)
        if dry_run:
            return checked.rows
        return table.delete(terms).rows


def _snapshot_frame(
    spark: SparkSession, uri: str, snapshot_id: int, storage_options: Mapping[str, Any] | None
) -> DataFrame:
    reader = spark.read.format(FORMAT).option("scan.snapshot-id", str(snapshot_id))
    for key, value in (storage_options or {}).items():
        reader = reader.option(
            f"storage.{key}", value if isinstance(value, str) else json.dumps(value)
        )
    return reader.load(uri)


def _check_exact(
    df: DataFrame,
    wanted: Column,
    terms: Clauses,
    schema: pa.Schema,
    core_rows: int,
    condition: str | Column,
) -> None:
    """Refuse unless Spark's condition and the core's filter select the same rows."""
    spark_side = F.coalesce(wanted, F.lit(False))
    both = spark_side & F.coalesce(filter_condition(terms, schema), F.lit(False))
    counts = df.select(
        F.count_if(spark_side).alias("spark"), F.count_if(both).alias("both")
    ).first()
    assert counts is not None  # an aggregate has one row
    selected, common = int(counts["spark"]), int(counts["both"])
    if selected == common == core_rows:
        return
    raise at.InvalidFilterError(
        f"the condition {_text(condition)} selects {selected} rows in Spark but its "
        f"appendtable filter {terms!r} selects {core_rows} ({common} of them both): their "
        "semantics differ on this data (for floats, Spark orders NaN above every number and "
        "NaN = NaN; appendtable's filters match NaN only with != and not in). Nothing was "
        "deleted; exclude NaN explicitly (e.g. AND NOT isnan(x)) or compare differently"
    )


def _text(condition: str | Column) -> str:
    return repr(condition) if isinstance(condition, str) else str(condition)


# ---- translating Spark's analysed condition ----------------------------------------------------


def translate_condition(filtered: DataFrame) -> Clauses:
    """The core filter (DNF) of the condition of ``filtered`` (a DataFrame ``df.where(c)``),
    from Spark's analysed plan; InvalidFilterError for a condition with no exact form."""
    jdf = getattr(filtered, "_jdf", None)
    if jdf is None:
        raise at.InvalidFilterError(
            "appendtable_spark.delete needs a classic Spark session (it reads Spark's analysed "
            "condition); under Spark Connect use appendtable's Table.delete with a filter"
        )
    plan = jdf.queryExecution().analyzed()
    if _kind(plan) != "Filter":
        raise at.InvalidFilterError(
            f"the condition did not analyse to a filter of the table ({_kind(plan)})"
        )
    clauses = _dnf(plan.condition(), negated=False)
    if not clauses or not all(clauses):
        raise at.InvalidFilterError(
            f"the condition {plan.condition().sql()} has no exact appendtable filter form (a "
            "part of it holds only NOT isnan(...)): compare a column with a literal there"
        )
    return clauses


def _kind(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _children(node: Any) -> list[Any]:
    seq = node.children()
    return [seq.apply(i) for i in range(seq.size())]


def _refused(node: Any, why: str) -> at.InvalidFilterError:
    return at.InvalidFilterError(
        f"the condition's part {node.sql()} has no exact appendtable filter form ({why}); "
        "appendtable_spark.delete takes columns (or struct fields) compared with literals by "
        "=, !=, <, <=, >, >=, IN, IS [NOT] NULL, joined by AND, OR and NOT"
    )


def _dnf(node: Any, *, negated: bool) -> Clauses:
    """The clauses (OR of ANDs) of ``node`` (of NOT ``node`` when ``negated``): De Morgan's
    laws hold in Spark's three-valued logic, and a filter selects only rows where it is true."""
    kind = _kind(node)
    if kind == "Not":
        return _dnf(_children(node)[0], negated=not negated)
    if kind in ("And", "Or"):
        left, right = (_dnf(child, negated=negated) for child in _children(node))
        if (kind == "And") != negated:
            product = [a + b for a in left for b in right]
            if len(product) > MAX_CLAUSES:
                raise _refused(node, f"more than {MAX_CLAUSES} clauses once expanded")
            return product
        return left + right
    if kind == "IsNaN" and negated:
        # NOT isnan(x): appendtable's comparisons already leave NaN out (the check on the
        # data confirms it for the clause it is in), so it constrains nothing more
        return [[]]
    term = _term(node)
    if negated:
        term = (term[0], _NEGATED[term[1]], term[2])
    return [[term]]


def _term(node: Any) -> Term:
    kind = _kind(node)
    if kind in ("IsNull", "IsNotNull"):
        return (
            _column(_children(node)[0], node),
            "is null" if kind == "IsNull" else "is not null",
            None,
        )
    if kind in _COMPARISONS:
        left, right = _children(node)
        op = _COMPARISONS[kind]
        if _constant(left) and not _constant(right):
            left, right, op = right, left, _FLIPPED[op]
        return (_column(left, node), op, _value(right, node))
    if kind == "In":
        seq = node.list()
        values = [_value(seq.apply(i), node) for i in range(seq.size())]
        return (_column(node.value(), node), "in", values)
    if kind == "InSet":
        raise _refused(node, "a long IN list Spark turned into a set: split it")
    raise _refused(node, f"{kind} is not a comparison of a column with literals")


def _column(node: Any, whole: Any) -> object:
    """A column reference: a top-level name, or a tuple path into structs."""
    parts: list[str] = []
    while _kind(node) == "Cast" and _lossless(node):
        node = _children(node)[0]
    while _kind(node) == "GetStructField":
        parts.append(str(node.extractFieldName()))
        node = _children(node)[0]
    if _kind(node) != "AttributeReference":
        raise _refused(whole, f"{node.sql()} is not a column of the table")
    parts.append(str(node.name()))
    parts.reverse()
    return parts[0] if len(parts) == 1 else tuple(parts)


#: Spark's integral types by width: a cast from one to a type at least as wide keeps every
#: value and the order, so a comparison of the cast column is one of the column itself.
_INTEGRAL_WIDTH = {"byte": 1, "short": 2, "integer": 4, "long": 8}


def _lossless(cast: Any) -> bool:
    """Whether ``cast`` (of a column) changes no value: to the column's own type, or an
    integral column widened (the cast Spark's type coercion puts on a column compared with
    wider literals, e.g. ``isin`` of Python ints)."""
    source = str(_children(cast)[0].dataType().typeName())
    target = str(cast.dataType().typeName())
    if source == target:
        return True
    widths = _INTEGRAL_WIDTH
    return source in widths and target in widths and widths[source] <= widths[target]


def _constant(node: Any) -> bool:
    """A literal, or an expression of literals only (such as the cast Spark puts around a
    literal to compare it with a column of a wider type)."""
    return bool(node.foldable()) and _kind(node) != "AttributeReference"


def _value(node: Any, whole: Any) -> object:
    """The value of a literal (or of a constant expression, evaluated by Spark) in Python,
    by its Spark type."""
    if not _constant(node):
        raise _refused(whole, f"{node.sql()} is not a literal")
    raw = node.value() if _kind(node) == "Literal" else node.eval(None)
    type_name = str(node.dataType().typeName())
    if raw is None:
        raise _refused(whole, "a comparison with NULL is never true: use IS NULL")
    if type_name in ("byte", "short", "integer", "long"):
        return int(raw)
    if type_name in ("float", "double"):
        return float(raw)
    if type_name == "boolean":
        return bool(raw)
    if type_name == "string":
        return str(raw.toString())
    if type_name.startswith("decimal"):
        return decimal.Decimal(str(raw.toJavaBigDecimal().toPlainString()))
    if type_name == "date":
        return _EPOCH + datetime.timedelta(days=int(raw))
    if type_name == "timestamp":
        return _EPOCH_UTC + datetime.timedelta(microseconds=int(raw))
    if type_name == "timestamp_ntz":
        return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=int(raw))
    raise _refused(whole, f"literals of type {type_name} are not supported")
