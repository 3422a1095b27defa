"""Reading data files of any schema version as one target schema, matched by field id.

A data file records the id of the schema it was written with; the columns of that schema are
the file's columns. Reading it as another schema version of the same table (the current one,
an older one for time travel, a stream's start schema) matches fields by id at every depth:

* a field the file does not have (added later) reads as null;
* a field the target does not have (dropped) is not read;
* a renamed field keeps its values; a widened one is cast (a safe cast: widening never fails;
  reading a later file in an earlier, narrower type fails for a value it does not hold exactly);
* fields take the target's order, names, types and nullability.

Files whose schema is identical to the target's (the common case) are read directly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.arrow_schema import arrow_schema
from appendtable.errors import SchemaMismatchError
from appendtable.metadata.models import TableSchema
from appendtable.metadata.types import FieldSpec
from appendtable.planning.schema_changes import describe_type, same_fields, stats_positions

__all__ = ["FileLayout", "Projection"]


@dataclass(frozen=True)
class FileLayout:
    """How the files of one schema version become rows of the target schema."""

    #: The files' own schema, as their columns read.
    schema: TableSchema
    arrow_schema: pa.Schema
    #: Read as-is: the file schema is the target's.
    native: bool
    #: Target column -> the file column holding it (absent: the file predates it).
    sources: dict[str, FieldSpec]
    #: Target column -> position of its statistics in the file's metadata (None: all null).
    stats_positions: dict[str, int | None]
    #: Every field id of the files' schema, at any depth (a struct field of the target whose
    #: id is not here reads as null).
    field_ids: frozenset[int] = frozenset()


class Projection:
    """Reads files of any schema version of a table as ``target`` (see the module doc).
    ``schema_of`` looks a schema version up by id. Thread-safe; layouts are cached."""

    def __init__(self, target: TableSchema, schema_of: Callable[[int], TableSchema]) -> None:
        self.target = target
        self.arrow_schema = arrow_schema(target.fields)
        self._schema_of = schema_of
        self._layouts: dict[int, FileLayout] = {}
        self._lock = threading.Lock()
        self._targets = {f.name: f for f in target.fields}

    def layout(self, schema_id: int) -> FileLayout:
        """The layout of files written with schema ``schema_id``."""
        found = self._layouts.get(schema_id)
        if found is not None:
            return found
        schema = self.target if schema_id == self.target.id else self._schema_of(schema_id)
        by_id = {f.id: f for f in schema.fields}
        sources = {
            f.name: by_id[f.id] for f in self.target.fields if f.id is not None and f.id in by_id
        }
        layout = FileLayout(
            schema=schema,
            arrow_schema=arrow_schema(schema.fields),
            native=schema.id == self.target.id or same_fields(schema.fields, self.target.fields),
            sources=sources,
            stats_positions=stats_positions(schema.fields, self.target.fields),
            field_ids=_all_ids(schema.fields),
        )
        with self._lock:
            self._layouts[schema_id] = layout
        return layout

    def file_columns(self, layout: FileLayout, columns: Sequence[str]) -> list[str]:
        """The file's columns to read for these target columns (in the file's names)."""
        return [layout.sources[name].name for name in columns if name in layout.sources]

    def convert(
        self, batch: pa.RecordBatch, layout: FileLayout, columns: Sequence[str]
    ) -> pa.RecordBatch:
        """A batch of the file's columns (``file_columns``, read in the file's schema) as the
        target ``columns``."""
        arrays = []
        fields = []
        for name in columns:
            target = self._targets[name]
            target_field = self.arrow_schema.field(name)
            source = layout.sources.get(name)
            if source is None:
                arrays.append(pa.nulls(batch.num_rows, target_field.type))
            else:
                try:
                    arrays.append(
                        _convert(batch.column(source.name), source, target, target_field.type)
                    )
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaMismatchError(
                        f"column '{name}': values written under schema {layout.schema.id} do "
                        f"not fit the type {describe_type(target.type)} of schema "
                        f"{self.target.id} this read uses. If the column was widened since "
                        "the read started: read again, or reopen the stream, to get the wider "
                        "type; if a rollback_to(..., restore_schema=True) made it narrower "
                        "again: widen it again with update_schema().update_column, then "
                        f"reopen. ({exc})",
                        column=name,
                    ) from exc
            fields.append(target_field)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _convert(array: pa.Array, source: FieldSpec, target: FieldSpec, dtype: pa.DataType) -> pa.Array:
    """``array`` (of field ``source``) as field ``target`` of Arrow type ``dtype``."""
    if same_fields([_renamed(source, target.name)], [target]) or array.type == dtype:
        return array if array.type == dtype else array.cast(dtype)
    kind = target.type.kind
    if kind == "struct":
        return _convert_struct(array, source, target, dtype)
    if kind in ("list", "large_list"):
        offsets, child = _rebased(array)
        values = _convert(child, source.type.fields[0], target.type.fields[0], dtype.value_type)
        factory = pa.LargeListArray if kind == "large_list" else pa.ListArray
        return factory.from_arrays(
            offsets, values, type=dtype, mask=_mask(array) if array.null_count else None
        )
    if kind == "fixed_size_list":
        size = dtype.list_size
        flat = array.values.slice(array.offset * size, len(array) * size)
        values = _convert(flat, source.type.fields[0], target.type.fields[0], dtype.value_type)
        return pa.FixedSizeListArray.from_arrays(
            values, type=dtype, mask=_mask(array) if array.null_count else None
        )
    if kind == "map":
        offsets, entries = _rebased(array)
        keys = _convert(
            entries.field(0), source.type.fields[0], target.type.fields[0], dtype.key_type
        )
        items = _convert(
            entries.field(1), source.type.fields[1], target.type.fields[1], dtype.item_type
        )
        return pa.MapArray.from_arrays(
            offsets, keys, items, type=dtype, mask=_mask(array) if array.null_count else None
        )
    cast = pc.cast(array, dtype, safe=True)  # a widened leaf (a safe cast checks integers)
    if (
        pa.types.is_floating(dtype)
        and pa.types.is_floating(array.type)
        and dtype.bit_width < array.type.bit_width
    ):
        _refuse_altered_floats(array, cast)
    return cast


def _refuse_altered_floats(wide: pa.Array, narrow: pa.Array) -> None:
    """ArrowInvalid if a float read in a narrower float type (a stream started before the
    column was widened) changed: Arrow's safe cast rounds and overflows floats silently.
    NaN, infinities and -0.0 hold their values."""
    back = pc.cast(narrow, wide.type)
    same = pc.or_(pc.equal(back, wide), pc.and_(pc.is_nan(back), pc.is_nan(wide)))
    altered = pc.invert(pc.fill_null(same, True))
    count = pc.sum(altered).as_py() or 0
    if count:
        example = wide.filter(altered)[0].as_py()
        raise pa.ArrowInvalid(
            f"{count} value(s) such as {example!r} are not held exactly by "
            f"float{narrow.type.bit_width}"
        )


def _convert_struct(
    array: pa.Array, source: FieldSpec, target: FieldSpec, dtype: pa.DataType
) -> pa.Array:
    by_id = {child.id: (index, child) for index, child in enumerate(source.type.fields)}
    children = []
    for index, child in enumerate(target.type.fields):
        child_type = dtype.field(index).type
        found = by_id.get(child.id)
        if found is None:
            children.append(pa.nulls(len(array), child_type))
        else:
            position, source_child = found
            children.append(_convert(array.field(position), source_child, child, child_type))
    return pa.StructArray.from_arrays(
        children,
        fields=[dtype.field(i) for i in range(dtype.num_fields)],
        mask=_mask(array) if array.null_count else None,
    )


def _all_ids(fields: Sequence[FieldSpec]) -> frozenset[int]:
    found: set[int] = set()
    pending = list(fields)
    while pending:
        field = pending.pop()
        if field.id is not None:
            found.add(field.id)
        pending.extend(field.type.fields)
    return frozenset(found)


def _rebased(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The offsets (starting at 0) and the child values of a list or map array's own rows: a
    sliced array (a later batch of a file) shares its parent's buffers, and Arrow cannot build
    an array from sliced offsets with a validity mask."""
    offsets = array.offsets
    first = offsets[0].as_py() if len(offsets) else 0
    last = offsets[-1].as_py() if len(offsets) else 0
    return pc.subtract(offsets, pa.scalar(first, offsets.type)), array.values.slice(
        first, last - first
    )


def _mask(array: pa.Array) -> pa.Array:
    return array.is_null()


def _renamed(field: FieldSpec, name: str) -> FieldSpec:
    return FieldSpec(name=name, type=field.type, nullable=field.nullable, id=field.id)
