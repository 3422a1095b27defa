"""System tables: a table's metadata as Arrow tables (after Apache Paimon's ``table$snapshots``,
``$files`` and so on). ``Table.system_table(name)`` reads one; ``system_table_schema(name)``
gives its schema without a table. Each table is declared once (``columns``), in the module of
its concern: ``log`` (snapshots, schemas, options, tags, consumers), ``files`` (files,
manifests) and ``aggregates`` (partitions, buckets); ``registry`` names them all."""

from appendtable.system.columns import Column, SystemTableInfo
from appendtable.system.registry import (
    SYSTEM_TABLE_NAMES,
    build_system_table,
    read_system_table,
    system_table_info,
    system_table_schema,
)

__all__ = [
    "SYSTEM_TABLE_NAMES",
    "Column",
    "SystemTableInfo",
    "build_system_table",
    "read_system_table",
    "system_table_info",
    "system_table_schema",
]
