"""How a system table is declared: its name, what one row is, and its typed columns.

A declaration is data only (no table is needed to know a system table's Arrow schema), so an
engine can describe a system table before reading it, and the documentation is generated from
the same declarations (``docs/gen_system_tables.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from appendtable.errors import InvalidArgumentError

__all__ = [
    "INT32",
    "INT64",
    "STRING",
    "STRING_LIST",
    "STRING_MAP",
    "UTC_MS",
    "Column",
    "SystemTableInfo",
]

#: Instants (commit times, file creation times, watermarks): epoch milliseconds, UTC.
UTC_MS = pa.timestamp("ms", tz="UTC")
INT32 = pa.int32()
INT64 = pa.int64()
STRING = pa.string()
STRING_LIST = pa.list_(pa.string())
STRING_MAP = pa.map_(pa.string(), pa.string())


@dataclass(frozen=True)
class Column:
    """One column of a system table. ``nullable=False`` columns never hold a null."""

    name: str
    type: pa.DataType
    doc: str
    nullable: bool = False

    @property
    def field(self) -> pa.Field:
        """The Arrow field, with ``doc`` as field metadata (key ``doc``)."""
        return pa.field(self.name, self.type, self.nullable, metadata={"doc": self.doc})


@dataclass(frozen=True)
class SystemTableInfo:
    """A system table: ``name`` (as in ``Table.system_table(name)``), ``doc`` (what one row
    is), its ``columns`` in order, and whether it can be read as of an older snapshot or tag
    (``time_travel``; the others always describe the table as it is now)."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    time_travel: bool

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema every read of this system table has (also when it has no rows)."""
        return pa.schema([column.field for column in self.columns])

    def assemble(self, values: Mapping[str, pa.Array | Sequence[object]]) -> pa.Table:
        """The table of these column values, in declared order and types (Python sequences are
        converted to the declared type; arrays must already have it). Raises
        InvalidArgumentError when ``values`` does not match the declaration."""
        if set(values) != {column.name for column in self.columns}:
            raise InvalidArgumentError(
                f"values: system table {self.name}: built columns {sorted(values)} differ from the "
                f"declared {[c.name for c in self.columns]}"
            )
        arrays = [_as_array(values[column.name], column.type) for column in self.columns]
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _as_array(values: pa.Array | pa.ChunkedArray | Sequence[object], dtype: pa.DataType) -> object:
    if isinstance(values, pa.Array | pa.ChunkedArray):
        if values.type != dtype:
            raise InvalidArgumentError(
                f"values: built column of type {values.type}, declared {dtype}"
            )
        return values
    return pa.array(values, type=dtype)
