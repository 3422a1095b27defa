"""The stored column types of a table schema (independent of pyarrow).

A type is a :class:`TypeSpec`: a ``kind`` plus the parameters that kind needs. Nested kinds carry
their children as :class:`FieldSpec` entries. The mapping to and from Arrow lives in
``appendtable.datafiles.arrow_schema``; this module must stay importable without pyarrow.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

__all__ = [
    "case_twin",
    "replaced",
    "FIXED_KINDS",
    "INTEGER_KINDS",
    "NESTED_KINDS",
    "STATS_KINDS",
    "FieldSpec",
    "TypeSpec",
]

INTEGER_KINDS = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)
FIXED_KINDS = INTEGER_KINDS | {"bool", "float16", "float32", "float64", "date32", "date64"}
NESTED_KINDS = frozenset({"list", "large_list", "fixed_size_list", "struct", "map"})
#: Kinds whose min/max are recorded in manifests and usable for pruning.
STATS_KINDS = (INTEGER_KINDS | {"bool", "float32", "float64", "date32", "timestamp"}) | {
    "string",
    "large_string",
    "binary",
    "large_binary",
    "decimal",
    "time32",
    "time64",
}


class TypeSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A column type.

    ``kind`` is one of: bool, int8..int64, uint8..uint64, float16, float32, float64, string,
    large_string, binary, large_binary, fixed_size_binary (``byte_width``), date32, date64,
    timestamp (``unit`` in s/ms/us/ns, optional ``tz``), time32 / time64 (``unit``),
    duration (``unit``), decimal (``precision``, ``scale``), list / large_list (one child),
    fixed_size_list (one child, ``byte_width`` = list size), struct (children), map (two
    children: key, value).
    """

    kind: str
    unit: str | None = None
    tz: str | None = None
    precision: int | None = None
    scale: int | None = None
    byte_width: int | None = None
    fields: tuple[FieldSpec, ...] = ()


class FieldSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A named column (or nested child) with its type and nullability.

    ``id`` is the field's stable identity (format version 2): data files are read by id, so a
    rename or a drop never rewrites data. Ids are unique across the whole schema (nested
    children included) and never reused. Fields of format version 1 schemas carry no id; they
    are given implicit ids when read (``planning.schema_changes.with_field_ids``)."""

    name: str
    type: TypeSpec
    nullable: bool = True
    id: int | None = None
    doc: str | None = None


_Struct = TypeVar("_Struct", bound=msgspec.Struct)


def replaced(struct: _Struct, **changes: Any) -> _Struct:
    """A copy of a metadata struct with some fields changed (structs are immutable)."""
    return msgspec.structs.replace(struct, **changes)


def case_twin(name: str, others: Iterable[str]) -> str | None:
    """The first of ``others`` that differs from ``name`` only by case (Unicode case
    folding: ``Straße`` and ``STRASSE`` too), or None. Engines such as Spark SQL and DuckDB
    resolve names ignoring case, so a table never holds two such names at one level."""
    folded = name.casefold()
    return next((o for o in others if o != name and o.casefold() == folded), None)
