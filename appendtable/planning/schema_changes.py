"""Schema evolution as data: field ids, schema changes, and the pure function applying them.

Every field (nested children included) has a stable id. Data files keep the id of the schema
they were written with, and are read by field id (``datafiles.projection``), so a rename or a
drop never rewrites data. Format version 1 schemas stored no ids; they get *implicit* ids,
assigned in pre-order from 1 (a column, then its children, then the next column). Version 1
tables only ever had schema 0, so the implicit ids of their files are well defined, and the
first schema change writes them down.

A change is a struct (``AddColumn``, ``RenameColumn``, ...). ``apply_changes`` turns a base
schema and a sequence of changes into the next schema, or raises ``SchemaChangeError`` naming
the column and the reason: nothing is applied unless every change is allowed. It does no I/O;
the commit protocol checks its one precondition on the table state (``requires_empty``: no
rows, for a new required column) when the change is published.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from appendtable.errors import InvalidOptionError, SchemaChangeError
from appendtable.metadata import options as opt
from appendtable.metadata.models import FORMAT_VERSION, TableSchema
from appendtable.metadata.types import NESTED_KINDS, FieldSpec, TypeSpec, case_twin, replaced

__all__ = [
    "AddColumn",
    "AppliedChange",
    "DropColumn",
    "MoveColumn",
    "RenameColumn",
    "SchemaChange",
    "SetOptions",
    "UnsetOptions",
    "UpdateColumn",
    "apply_changes",
    "assign_ids",
    "describe_type",
    "fields_by_id",
    "is_widening",
    "merge_changes",
    "missing_required",
    "same_fields",
    "stats_positions",
    "with_field_ids",
]

_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_FLOATS = ("float16", "float32", "float64")
_WIDER_SIBLING = {"string": "large_string", "binary": "large_binary"}
_COLLECTIONS = frozenset({"list", "large_list", "fixed_size_list", "map"})


# ---- field ids ------------------------------------------------------------------------------


def assign_ids(fields: Sequence[FieldSpec], next_id: int) -> tuple[tuple[FieldSpec, ...], int]:
    """``fields`` with an id on every field that has none (pre-order from ``next_id``), and the
    next free id. Fields that have ids keep them."""
    result = []
    for field in fields:
        field_id = field.id
        if field_id is None:
            field_id, next_id = next_id, next_id + 1
        children, next_id = assign_ids(field.type.fields, next_id)
        result.append(replaced(field, id=field_id, type=replaced(field.type, fields=children)))
    return tuple(result), next_id


def _walk(fields: Sequence[FieldSpec]) -> Iterator[FieldSpec]:
    for field in fields:
        yield field
        yield from _walk(field.type.fields)


def with_field_ids(schema: TableSchema) -> TableSchema:
    """``schema`` with every field's id: a version 1 schema gets its implicit ids. Also sets
    ``highest_field_id`` where it was not recorded."""
    if all(f.id is not None for f in _walk(schema.fields)) and schema.highest_field_id:
        return schema
    fields, next_id = assign_ids(schema.fields, 1)
    highest = max(next_id - 1, schema.highest_field_id, _highest(fields))
    return replaced(schema, fields=fields, highest_field_id=highest)


def _highest(fields: Sequence[FieldSpec]) -> int:
    return max((f.id or 0 for f in _walk(fields)), default=0)


def fields_by_id(fields: Sequence[FieldSpec]) -> dict[int, FieldSpec]:
    """Every field of a schema with ids (at any depth), by id."""
    return {f.id: f for f in _walk(fields) if f.id is not None}


def same_fields(a: Sequence[FieldSpec], b: Sequence[FieldSpec]) -> bool:
    """Whether two schemas' fields are identical (names, types, nullability, ids; docs
    aside), so files of one read as the other without any projection."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if (x.name, x.id, x.nullable) != (y.name, y.id, y.nullable):
            return False
        tx, ty = x.type, y.type
        if (tx.kind, tx.unit, tx.tz, tx.precision, tx.scale, tx.byte_width) != (
            ty.kind,
            ty.unit,
            ty.tz,
            ty.precision,
            ty.scale,
            ty.byte_width,
        ):
            return False
        if not same_fields(tx.fields, ty.fields):
            return False
    return True


def stats_positions(
    file_fields: Sequence[FieldSpec], target_fields: Sequence[FieldSpec]
) -> dict[str, int | None]:
    """For each top-level column of the target schema, the position of its statistics in a
    file written with ``file_fields`` (matched by field id), or None if the file predates the
    column (all its values read as null)."""
    positions = {f.id: i for i, f in enumerate(file_fields)}
    return {f.name: positions.get(f.id) for f in target_fields}


def missing_required(
    file_fields: Sequence[FieldSpec], target_fields: Sequence[FieldSpec], prefix: str = ""
) -> str | None:
    """The path of a non-nullable field of the target schema that files written with
    ``file_fields`` do not hold (their rows would read as null there), or None. Fields absent
    under a nullable parent that is itself absent do not count: the parent reads as null."""
    present = {f.id: f for f in file_fields}
    for target in target_fields:
        path = f"{prefix}{target.name}"
        found = present.get(target.id)
        if found is None:
            if not target.nullable:
                return path
            continue
        inner = missing_required(found.type.fields, target.type.fields, f"{path}.")
        if inner is not None:
            return inner
    return None


# ---- changes --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AddColumn:
    """Add ``field`` (ids are assigned) under ``parent`` (a struct; () for a top-level column),
    last, or ``first``, or right ``after`` a sibling."""

    parent: tuple[str, ...]
    field: FieldSpec
    after: str | None = None
    first: bool = False


@dataclass(frozen=True, kw_only=True)
class RenameColumn:
    path: tuple[str, ...]
    new_name: str


@dataclass(frozen=True, kw_only=True)
class DropColumn:
    path: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class UpdateColumn:
    """Widen the type, make a required field optional, or set its doc (None: unchanged)."""

    path: tuple[str, ...]
    type: TypeSpec | None = None
    nullable: bool | None = None
    doc: str | None = None


@dataclass(frozen=True, kw_only=True)
class MoveColumn:
    """Move a field among its siblings: ``first``, or right ``after`` / ``before`` one."""

    path: tuple[str, ...]
    first: bool = False
    after: str | None = None
    before: str | None = None


@dataclass(frozen=True, kw_only=True)
class SetOptions:
    options: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class UnsetOptions:
    keys: tuple[str, ...]


SchemaChange = (
    AddColumn | RenameColumn | DropColumn | UpdateColumn | MoveColumn | SetOptions | (UnsetOptions)
)


@dataclass(frozen=True)
class AppliedChange:
    """The schema after the changes; ``requires_empty``: it adds a required field, which is
    only allowed while the table holds no rows (checked when the change is committed)."""

    schema: TableSchema
    requires_empty: bool
    #: The required field that makes it so (a dotted path), for the message.
    required_column: str | None = None


def apply_changes(
    base: TableSchema,
    changes: Sequence[SchemaChange],
    *,
    new_id: int,
    first_free_field_id: int,
    time_ms: int,
) -> AppliedChange:
    """The schema ``new_id`` that ``changes`` (applied in order) make of ``base``. New fields
    get ids from ``first_free_field_id`` (above every id any schema of the table ever used, so
    ids are never reused). Raises ``SchemaChangeError`` (or ``InvalidOptionError`` for
    options) naming the column and the reason; nothing is applied unless all changes are."""
    state = _Change(with_field_ids(base), max(first_free_field_id, _highest(base.fields) + 1))
    for change in changes:
        state.apply(change)
    schema = state.result(new_id, time_ms)
    return AppliedChange(schema, state.requires_empty, state.required_column)


def is_widening(old: TypeSpec, new: TypeSpec) -> bool:
    """Whether every value of ``old`` is a value of ``new`` with the same meaning: integers to
    wider integers (unsigned to a wider signed too), floats to wider floats, decimals to more
    digits of the same scale, string / binary to their large forms."""
    if old.kind in _SIGNED and new.kind in _SIGNED:
        return _SIGNED.index(new.kind) > _SIGNED.index(old.kind)
    if old.kind in _UNSIGNED and new.kind in _UNSIGNED:
        return _UNSIGNED.index(new.kind) > _UNSIGNED.index(old.kind)
    if old.kind in _UNSIGNED and new.kind in _SIGNED:
        return _SIGNED.index(new.kind) > _UNSIGNED.index(old.kind)
    if old.kind in _FLOATS and new.kind in _FLOATS:
        return _FLOATS.index(new.kind) > _FLOATS.index(old.kind)
    if old.kind == "decimal" and new.kind == "decimal":
        return (new.scale or 0) == (old.scale or 0) and (new.precision or 0) > (old.precision or 0)
    return _WIDER_SIBLING.get(old.kind) == new.kind


def describe_type(spec: TypeSpec) -> str:
    """A type as people write it: ``int64``, ``decimal(10, 2)``, ``timestamp[us, UTC]``."""
    if spec.kind == "decimal":
        return f"decimal({spec.precision}, {spec.scale})"
    if spec.kind in ("timestamp", "time32", "time64", "duration"):
        inner = ", ".join(x for x in (spec.unit, spec.tz) if x)
        return f"{spec.kind}[{inner}]"
    if spec.kind in ("list", "large_list", "fixed_size_list"):
        return f"{spec.kind}<{describe_type(spec.fields[0].type)}>"
    if spec.kind == "map":
        return f"map<{describe_type(spec.fields[0].type)}, {describe_type(spec.fields[1].type)}>"
    if spec.kind == "struct":
        inner = ", ".join(f"{f.name}: {describe_type(f.type)}" for f in spec.fields)
        return f"struct<{inner}>"
    if spec.kind == "fixed_size_binary":
        return f"fixed_size_binary({spec.byte_width})"
    return spec.kind


def merge_changes(
    table_fields: Sequence[FieldSpec], data_fields: Sequence[FieldSpec]
) -> list[SchemaChange]:
    """The changes that let data with ``data_fields`` be written (``schema_mode="merge"``):
    columns (and struct fields) only in the data are added, as nullable fields, in the data's
    order. Types are never changed: data of a wider type is cast on write, and values that
    do not fit are refused (a pandas int64 column must not silently widen an int32 column
    for good; widening is an explicit ``update_column``)."""
    changes: list[SchemaChange] = []
    _merge_into((), table_fields, data_fields, changes)
    return changes


def _merge_into(
    parent: tuple[str, ...],
    table_fields: Sequence[FieldSpec],
    data_fields: Sequence[FieldSpec],
    changes: list[SchemaChange],
) -> None:
    existing = {f.name: f for f in table_fields}
    previous: str | None = table_fields[-1].name if table_fields else None
    for field in data_fields:
        current = existing.get(field.name)
        if current is None:
            added = _without_ids(replaced(field, nullable=True))
            changes.append(AddColumn(parent=parent, field=added, after=previous))
            previous = field.name
            continue
        path = (*parent, field.name)
        if current.type.kind == "struct" and field.type.kind == "struct":
            _merge_into(path, current.type.fields, field.type.fields, changes)


def _without_ids(field: FieldSpec) -> FieldSpec:
    children = tuple(_without_ids(child) for child in field.type.fields)
    return replaced(field, id=None, type=replaced(field.type, fields=children))


# ---- applying -------------------------------------------------------------------------------


def _dotted(path: Sequence[str]) -> str:
    return ".".join(path)


class _Change:
    """The schema being changed, one change at a time (the rules live here)."""

    def __init__(self, base: TableSchema, next_id: int) -> None:
        self.base = base
        self.fields = base.fields
        self.options = dict(base.options)
        self.next_id = next_id
        self.requires_empty = False
        self.required_column: str | None = None
        self.partition_keys = base.partition_keys

    # -- navigation

    def _resolve(self, path: Sequence[str]) -> list[int]:
        """Indices from the top level down to the field at ``path``; list elements and map
        entries are reached by their own names or as ``element`` / ``key`` / ``value``."""
        if not path:
            raise SchemaChangeError("a column path must not be empty")
        indices: list[int] = []
        fields = self.fields
        for depth, name in enumerate(path):
            index = _find(fields, name, parent_kind=None if depth == 0 else self._kind(indices))
            if index is None:
                where = _dotted(path[:depth]) or "the table"
                raise SchemaChangeError(
                    f"column '{_dotted(path)}' does not exist ({where} has "
                    f"{', '.join(f.name for f in fields) or 'no fields'})",
                    column=_dotted(path),
                )
            indices.append(index)
            fields = fields[index].type.fields
        return indices

    def _kind(self, indices: Sequence[int]) -> str:
        return self._field(indices).type.kind

    def _field(self, indices: Sequence[int]) -> FieldSpec:
        fields = self.fields
        field: FieldSpec | None = None
        for index in indices:
            field = fields[index]
            fields = field.type.fields
        assert field is not None
        return field

    def _siblings(self, indices: Sequence[int]) -> tuple[FieldSpec, ...]:
        return self._field(indices[:-1]).type.fields if len(indices) > 1 else self.fields

    def _replace_siblings(
        self,
        parent: Sequence[int],
        update: Callable[[tuple[FieldSpec, ...]], tuple[FieldSpec, ...]],
    ) -> None:
        self.fields = _rebuilt(self.fields, list(parent), update)

    # -- checks

    def _layout_column(self, indices: Sequence[int]) -> str | None:
        """What makes a top-level column part of the layout, if anything."""
        if len(indices) != 1:
            return None
        name = self.fields[indices[0]].name
        if name in self.partition_keys:
            return "a partition column"
        if name in opt.Options(self.options).bucket_key:
            return "a bucket-key column (the bucket hash would change)"
        return None

    def _in_collection(self, indices: Sequence[int]) -> bool:
        return len(indices) > 1 and self._kind(indices[:-1]) in _COLLECTIONS

    # -- the changes

    def apply(self, change: SchemaChange) -> None:
        match change:
            case AddColumn():
                self._add(change)
            case RenameColumn():
                self._rename(change)
            case DropColumn():
                self._drop(change)
            case UpdateColumn():
                self._update(change)
            case MoveColumn():
                self._move(change)
            case SetOptions():
                self._set_options(change.options)
            case UnsetOptions():
                self._unset_options(change.keys)
            case _:
                assert_never(change)

    def _check_not_a_path(self, name: str, full: str) -> None:
        """A top-level name must not read as the dotted path of a struct field."""
        head = name.split(".", 1)[0]
        if "." in name and any(f.name == head and f.type.kind == "struct" for f in self.fields):
            raise SchemaChangeError(
                f"column '{full}': the name '{name}' would hide the path of a field of struct "
                f"'{head}'",
                column=full,
            )

    def _add(self, change: AddColumn) -> None:
        field = change.field
        full = _dotted((*change.parent, field.name))
        _check_name(field.name, full)
        if not change.parent:
            self._check_not_a_path(field.name, full)
        if change.parent:
            parent = self._resolve(change.parent)
            if self._kind(parent) != "struct":
                raise SchemaChangeError(
                    f"cannot add '{full}': '{_dotted(change.parent)}' is a "
                    f"{self._kind(parent)}, not a struct",
                    column=full,
                )
            siblings = self._field(parent).type.fields
        else:
            parent, siblings = [], self.fields
        if any(f.name == field.name for f in siblings):
            raise SchemaChangeError(f"cannot add column '{full}': it already exists", column=full)
        _check_no_case_twin(field.name, siblings, change.parent, full)
        if field.type.kind == "struct" and not field.type.fields:
            raise SchemaChangeError(f"cannot add '{full}': a struct needs fields", column=full)
        if not field.nullable:  # rows written so far would read as null in it
            self.requires_empty = True
            self.required_column = self.required_column or full
        (added,), self.next_id = assign_ids([_without_ids(field)], self.next_id)
        position = len(siblings)
        if change.first:
            position = 0
        elif change.after is not None:
            position = _sibling_index(siblings, change.after, full) + 1

        def insert(fields: tuple[FieldSpec, ...]) -> tuple[FieldSpec, ...]:
            return (*fields[:position], added, *fields[position:])

        self._replace_siblings(parent, insert)

    def _rename(self, change: RenameColumn) -> None:
        full = _dotted(change.path)
        indices = self._resolve(change.path)
        _check_name(change.new_name, full)
        if len(indices) == 1:
            self._check_not_a_path(change.new_name, full)
        if self._in_collection(indices):
            raise SchemaChangeError(
                f"cannot rename '{full}': list elements and map entries have no name of their own",
                column=full,
            )
        field = self._field(indices)
        if len(indices) == 1 and field.name in self.partition_keys:
            raise SchemaChangeError(
                f"cannot rename '{full}': it is a partition column (the layout names it)",
                column=full,
            )
        if field.name == change.new_name:
            return
        others = [f for f in self._siblings(indices) if f.name != field.name]
        if any(f.name == change.new_name for f in others):
            raise SchemaChangeError(
                f"cannot rename '{full}' to '{change.new_name}': that name is taken", column=full
            )
        _check_no_case_twin(change.new_name, others, change.path[:-1], full)
        if len(indices) == 1:
            self._rename_in_options(field.name, change.new_name)
        renamed = replaced(field, name=change.new_name)
        self._replace_siblings(indices[:-1], _put(indices[-1], renamed))

    def _rename_in_options(self, old: str, new: str) -> None:
        """Options that name columns follow a rename (``bucket-key``, ``watermark.column``,
        ``file-index.bloom-filter.columns``)."""
        keys = opt.Options(self.options).bucket_key
        if old in keys:
            self.options[opt.BUCKET_KEY.key] = ",".join(new if k == old else k for k in keys)
        if self.options.get(opt.WATERMARK_COLUMN.key) == old:
            self.options[opt.WATERMARK_COLUMN.key] = new
        indexed = opt.Options(self.options).get(opt.FILE_INDEX_BLOOM_COLUMNS)
        if old in indexed:
            self.options[opt.FILE_INDEX_BLOOM_COLUMNS.key] = ",".join(
                new if c == old else c for c in indexed
            )

    def _drop(self, change: DropColumn) -> None:
        full = _dotted(change.path)
        indices = self._resolve(change.path)
        if self._in_collection(indices):
            raise SchemaChangeError(
                f"cannot drop '{full}': a list element or map entry is part of its collection",
                column=full,
            )
        layout = self._layout_column(indices)
        if layout is not None:
            raise SchemaChangeError(f"cannot drop '{full}': it is {layout}", column=full)
        if len(indices) == 1 and self.options.get(opt.WATERMARK_COLUMN.key) == full:
            raise SchemaChangeError(
                f"cannot drop '{full}': it is the 'watermark.column' (unset that option first)",
                column=full,
            )
        siblings = self._siblings(indices)
        if len(indices) > 1 and len(siblings) == 1:
            raise SchemaChangeError(
                f"cannot drop '{full}': it is the only field of its struct (drop the struct)",
                column=full,
            )
        if len(indices) == 1:
            remaining = [
                f.name
                for i, f in enumerate(self.fields)
                if i != indices[0] and f.name not in self.partition_keys
            ]
            if not remaining:
                raise SchemaChangeError(
                    f"cannot drop '{full}': it is the last data column", column=full
                )
            indexed = opt.Options(self.options).get(opt.FILE_INDEX_BLOOM_COLUMNS)
            if full in indexed:  # its filters go with it
                kept = [c for c in indexed if c != full]
                if kept:
                    self.options[opt.FILE_INDEX_BLOOM_COLUMNS.key] = ",".join(kept)
                else:
                    self.options.pop(opt.FILE_INDEX_BLOOM_COLUMNS.key, None)
        position = indices[-1]
        self._replace_siblings(
            indices[:-1], lambda fields: fields[:position] + fields[position + 1 :]
        )

    def _update(self, change: UpdateColumn) -> None:
        full = _dotted(change.path)
        indices = self._resolve(change.path)
        field = self._field(indices)
        updated = field
        if change.type is not None and not _same_type(change.type, field.type):
            layout = self._layout_column(indices)
            if layout is not None:
                raise SchemaChangeError(
                    f"cannot change the type of '{full}': it is {layout}", column=full
                )
            if field.type.kind in NESTED_KINDS or change.type.kind in NESTED_KINDS:
                raise SchemaChangeError(
                    f"cannot change the type of '{full}' to {describe_type(change.type)}: change "
                    "the fields of a nested column one by one (by their dotted path)",
                    column=full,
                )
            if not is_widening(field.type, change.type):
                raise SchemaChangeError(
                    f"cannot change '{full}' from {describe_type(field.type)} to "
                    f"{describe_type(change.type)}: only widening is allowed (int8 -> int16 -> "
                    "int32 -> int64, unsigned likewise, float32 -> float64, decimal(p, s) -> "
                    "decimal(p' > p, s), string -> large_string, binary -> large_binary)",
                    column=full,
                )
            updated = replaced(updated, type=change.type)
        if change.nullable is not None and change.nullable != field.nullable:
            if not change.nullable:
                raise SchemaChangeError(
                    f"cannot make '{full}' required: rows written so far may hold nulls "
                    "(only required -> optional is allowed)",
                    column=full,
                )
            updated = replaced(updated, nullable=True)
        if change.doc is not None:
            updated = replaced(updated, doc=change.doc or None)
        self._replace_siblings(indices[:-1], _put(indices[-1], updated))

    def _move(self, change: MoveColumn) -> None:
        full = _dotted(change.path)
        indices = self._resolve(change.path)
        if sum((change.first, change.after is not None, change.before is not None)) != 1:
            raise SchemaChangeError(
                f"moving '{full}' needs exactly one of first, after or before", column=full
            )
        if self._in_collection(indices):
            raise SchemaChangeError(
                f"cannot move '{full}': list elements and map entries have a fixed place",
                column=full,
            )
        field = self._field(indices)
        reference = change.after if change.after is not None else change.before
        if reference == field.name:
            raise SchemaChangeError(f"cannot move '{full}' relative to itself", column=full)
        position = indices[-1]

        def move(fields: tuple[FieldSpec, ...]) -> tuple[FieldSpec, ...]:
            rest = fields[:position] + fields[position + 1 :]
            if change.first:
                at = 0
            else:
                assert reference is not None
                at = _sibling_index(rest, reference, full) + (1 if change.after is not None else 0)
            return (*rest[:at], field, *rest[at:])

        self._replace_siblings(indices[:-1], move)

    def _set_options(self, options: Mapping[str, str]) -> None:
        for key, value in opt.parse_options(options).items():
            if key in opt.IMMUTABLE_OPTIONS and self.options.get(key) != value:
                raise InvalidOptionError(_immutable(key))
            self.options[key] = value

    def _unset_options(self, keys: Sequence[str]) -> None:
        for key in keys:
            if key not in opt.OPTIONS:
                opt.parse_options({key: ""})  # raises, naming the key with a suggestion
            if key in opt.IMMUTABLE_OPTIONS and key in self.options:
                raise InvalidOptionError(_immutable(key))
            self.options.pop(key, None)

    def result(self, new_id: int, time_ms: int) -> TableSchema:
        names = [f.name for f in self.fields]
        opt.validate_table_options(
            opt.Options(self.options), columns=names, partition_keys=self.partition_keys
        )
        return TableSchema(
            format_version=FORMAT_VERSION,
            id=new_id,
            fields=self.fields,
            partition_keys=self.partition_keys,
            options=self.options,
            time_ms=time_ms,
            highest_field_id=max(self.next_id - 1, self.base.highest_field_id),
        )


def _immutable(key: str) -> str:
    return (
        f"option '{key}' defines the table's layout and cannot change after creation "
        "(write a new table to change it)"
    )


def _check_no_case_twin(
    name: str, siblings: Sequence[FieldSpec], parent: Sequence[str], full: str
) -> None:
    """SchemaChangeError naming both fields if ``name`` differs only by case from a sibling's
    (Spark SQL, DuckDB and most engines resolve names ignoring case)."""
    twin = case_twin(name, [f.name for f in siblings])
    if twin is not None:
        theirs, ours = _dotted((*parent, twin)), _dotted((*parent, name))
        raise SchemaChangeError(
            f"column '{ours}' differs only by case from column '{theirs}': Spark SQL, DuckDB and "
            "most engines cannot tell them apart; choose another name",
            column=full,
        )


def _check_name(name: str, full: str) -> None:
    if not isinstance(name, str) or not name:
        raise SchemaChangeError(f"column '{full}': a column name must not be empty", column=full)


def _find(fields: Sequence[FieldSpec], name: str, *, parent_kind: str | None) -> int | None:
    for index, field in enumerate(fields):
        if field.name == name:
            return index
    aliases: dict[str, dict[str, int]] = {
        "list": {"element": 0, "item": 0},
        "large_list": {"element": 0, "item": 0},
        "fixed_size_list": {"element": 0, "item": 0},
        "map": {"key": 0, "value": 1},
    }
    if parent_kind is not None:
        return aliases.get(parent_kind, {}).get(name)
    return None


def _sibling_index(siblings: Sequence[FieldSpec], name: str, full: str) -> int:
    for index, field in enumerate(siblings):
        if field.name == name:
            return index
    raise SchemaChangeError(
        f"cannot place '{full}' next to '{name}': no such column at that level "
        f"({', '.join(f.name for f in siblings)})",
        column=full,
    )


def _put(index: int, field: FieldSpec) -> Callable[[tuple[FieldSpec, ...]], tuple[FieldSpec, ...]]:
    return lambda fields: (*fields[:index], field, *fields[index + 1 :])


def _rebuilt(
    fields: tuple[FieldSpec, ...],
    parent: list[int],
    update: Callable[[tuple[FieldSpec, ...]], tuple[FieldSpec, ...]],
) -> tuple[FieldSpec, ...]:
    """``fields`` with the children of the field at ``parent`` (the top level when empty)
    replaced by ``update`` of them."""
    if not parent:
        return update(fields)
    index, rest = parent[0], parent[1:]
    field = fields[index]
    children = _rebuilt(field.type.fields, rest, update)
    changed = replaced(field, type=replaced(field.type, fields=children))
    return (*fields[:index], changed, *fields[index + 1 :])


def _same_type(a: TypeSpec, b: TypeSpec) -> bool:
    return (a.kind, a.unit, a.tz, a.precision, a.scale, a.byte_width) == (
        b.kind,
        b.unit,
        b.tz,
        b.precision,
        b.scale,
        b.byte_width,
    ) and len(a.fields) == len(b.fields)
