"""Catalog tables: ``CREATE TABLE t USING appendtable LOCATION '<uri>'``.

Spark calls a Python source's ``schema()`` once, at ``CREATE TABLE``, with the location and the
table properties in its options, and stores the schema it returns in the catalog (in-memory or
a Hive metastore) with its field metadata. Later statements on the table (``SELECT``,
``INSERT``) hand the source that stored schema and **no options**. So the location, and the
adapter settings given at creation (``partitionOverwriteMode``), travel in the metadata of the
schema's first field, under the key ``appendtable``. Storage options are not stored (the catalog
is no place for credentials): give them per query (``WITH ('storage.key' = ...)``) or through
the environment.

A catalog table's columns are fixed in the catalog when it is created. Its statements check
them against the table's columns: after a schema change made elsewhere they fail, naming the
columns and the statements that redefine the table (``DROP TABLE`` never deletes the data).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql.types import DataType, StructField, StructType

import appendtable as at
from appendtable_spark import options as registry
from appendtable_spark.options import Use

__all__ = ["CatalogEntry", "adapter_options", "catalog_entry", "check_columns", "with_entry"]

_KEY = "appendtable"


@dataclass(frozen=True)
class CatalogEntry:
    """What a catalog table's schema carries: the table's location, and adapter options given
    at ``CREATE TABLE`` (strings, by option name)."""

    location: str
    options: dict[str, str] = field(default_factory=dict)


def with_entry(schema: StructType, entry: CatalogEntry) -> StructType:
    """``schema`` carrying ``entry`` in its first field's metadata."""
    if not schema.fields:
        raise at.InvalidSchemaError("a table without columns cannot be a catalog table")
    first, *rest = schema.fields
    payload = json.dumps({"location": entry.location, "options": entry.options}, sort_keys=True)
    marked = StructField(
        first.name, first.dataType, first.nullable, {**(first.metadata or {}), _KEY: payload}
    )
    return StructType([marked, *rest])


def catalog_entry(schema: StructType) -> CatalogEntry | None:
    """The entry a catalog table's schema carries (None: not a catalog table's schema)."""
    if not schema.fields:
        return None
    text = (schema.fields[0].metadata or {}).get(_KEY)
    if not isinstance(text, str):
        return None
    try:
        payload = json.loads(text)
        return CatalogEntry(str(payload["location"]), dict(payload.get("options") or {}))
    except (ValueError, KeyError, TypeError) as exc:
        raise at.InvalidOptionError(
            f"the catalog's schema of this table carries damaged appendtable metadata ({exc}): "
            "DROP TABLE it (the data stays) and CREATE TABLE it again"
        ) from exc


def _shape(dtype: DataType) -> str:
    """A type without metadata or nullability (what reading rows by name depends on)."""
    return dtype.simpleString()


def check_columns(
    catalog: StructType,
    table: StructType,
    *,
    uri: str,
    what: str,
    travel_to: int | None = None,
) -> None:
    """Refuse when the catalog's columns are not the table's (names in order, types): the
    table changed after the catalog table was defined, or the snapshot ``travel_to`` a
    statement's time travel names has other columns. ``what`` names what was compared (the
    current schema, a snapshot's)."""
    if [(f.name, _shape(f.dataType)) for f in catalog.fields] == [
        (f.name, _shape(f.dataType)) for f in table.fields
    ]:
        return
    if travel_to is not None:
        raise at.SchemaMismatchError(
            f"the catalog table's columns ({_columns(catalog)}) are not those of snapshot "
            f"{travel_to} of the table at {uri} ({_columns(table)}): Spark fixes a catalog "
            "table's columns, so its statements time-travel only to snapshots with those "
            "columns. Read that snapshot with spark.read.format('appendtable')"
            f".option('scan.snapshot-id', '{travel_to}').load('{uri}') or "
            f"appendtable_spark.read_table(spark, '{uri}', snapshot_id={travel_to})"
        )
    raise at.SchemaMismatchError(
        f"the catalog table's columns ({_columns(catalog)}) are not those of {what} of the "
        f"table at {uri} ({_columns(table)}): its schema changed after the catalog table was "
        f"created. Define it again: DROP TABLE <name>; CREATE TABLE <name> USING appendtable "
        f"LOCATION '{uri}' (DROP TABLE never deletes an appendtable table's data)"
    )


def _columns(schema: StructType) -> str:
    return ", ".join(f"{f.name} {_shape(f.dataType)}" for f in schema.fields)


def adapter_options(
    entry: CatalogEntry | None, given: Mapping[str, str], use: Use
) -> dict[str, str]:
    """The options of a statement on a catalog table: those stored at creation that apply to
    ``use``, overridden by the statement's own (``WITH (...)``)."""
    stored = {
        name.lower(): value
        for name, value in (entry.options if entry is not None else {}).items()
        if (option := registry.lookup(name.lower())) is not None and option.uses & use
    }
    return {**stored, **{k.lower(): v for k, v in given.items()}}
