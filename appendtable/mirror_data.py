"""What turning the Iceberg mirror on checks in the data a table already holds.

The column types are checked by ``planning.iceberg_metadata.check_mirrorable``. Two things only the
data files can tell, each refused with InvalidSchemaError naming the column (and a schema
change that would lead there with the mirror on, with SchemaChangeError):

* files written while a column (or a field in it) was ``uint32`` or ``time32`` (it was widened
  since): they hold an unsigned 32-bit integer or Parquet milliseconds, which Iceberg readers
  misread or cannot read (metadata only: the schema each file was written with);
* timestamps in seconds or milliseconds, at any depth, beyond Iceberg's microseconds in 64
  bits (``datafiles.mirror_values``): these columns of the live files are read and checked,
  so turning the mirror on over a large table reads them once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from appendtable._state import TableState
from appendtable.datafiles.mirror_values import check_mirrorable_rows, has_coarse_timestamp
from appendtable.errors import InvalidSchemaError, SchemaMismatchError
from appendtable.metadata.models import Snapshot, TableSchema
from appendtable.metadata.types import FieldSpec
from appendtable.scan import Scan

__all__ = ["check_data_mirrorable"]

#: Stored forms Iceberg readers cannot read as the column's Iceberg type.
_UNREADABLE = {"uint32": "uint32", "time32": "time32"}


def check_data_mirrorable(
    state: TableState, snapshot: Snapshot, schema: TableSchema, option: str, *, turning_on: bool
) -> None:
    """InvalidSchemaError naming the column if the live files of ``snapshot`` hold values
    the mirror of ``schema`` cannot publish readably (see the module doc). The stored types
    are checked on every schema change of a mirrored table (a widening under the mirror);
    the timestamps only when ``turning_on`` (writes to a mirrored table refuse them)."""
    _check_stored_types(state, snapshot, schema, option)
    if turning_on:
        _check_timestamps(state, snapshot, option)


def _ids(fields: Sequence[FieldSpec]) -> Iterator[int]:
    for field in fields:
        if field.id is not None:
            yield field.id
        yield from _ids(field.type.fields)


def _unreadable(fields: Sequence[FieldSpec], wanted: frozenset[int]) -> str | None:
    """The kind of the first field of ``fields`` (at any depth) the mirror still names
    (``wanted`` ids) stored in a form Iceberg readers cannot read, or None."""
    for field in fields:
        if field.id in wanted and field.type.kind in _UNREADABLE:
            return field.type.kind
        found = _unreadable(field.type.fields, wanted)
        if found is not None:
            return found
    return None


def _check_stored_types(
    state: TableState, snapshot: Snapshot, schema: TableSchema, option: str
) -> None:
    schema_ids = {entry.file.schema_id for entry in state.manifests.live_files(snapshot)}
    for schema_id in sorted(schema_ids - {schema.id}):
        file_fields = {f.id: f for f in state.schemas.get(schema_id).fields}
        for column in schema.fields:
            stored = file_fields.get(column.id)
            if stored is None:
                continue
            kind = _unreadable([stored], frozenset(_ids([column])))
            if kind is not None:
                raise InvalidSchemaError(
                    f"column '{column.name}': data files written while it held {kind} store "
                    f"it as {kind}, which Iceberg readers misread or cannot read; '{option}' "
                    "cannot be turned on until they are rewritten (overwrite the table with its "
                    "rows)",
                    column=column.name,
                )


def _check_timestamps(state: TableState, snapshot: Snapshot, option: str) -> None:
    view = state.view_at(snapshot)
    names = [f.name for f in view.arrow_schema if has_coarse_timestamp(f.type)]
    if not names:
        return
    for batch in Scan(state, snapshot, columns=names).to_batches():
        try:
            check_mirrorable_rows(pa.Table.from_batches([batch]))
        except SchemaMismatchError as exc:
            raise InvalidSchemaError(
                f"'{option}' cannot be turned on: {exc}", column=exc.column
            ) from exc
