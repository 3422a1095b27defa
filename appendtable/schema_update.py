"""Changing a table in place: schema changes, option changes, and the rules a table's schema
must always satisfy (shared with ``create_table``).

A change is data (``planning.schema_changes``'s change structs), applied by one pure function to the
current schema. Committing it writes the new schema version (put-if-absent: one winner per
schema id) and then an ALTER snapshot naming it, whose precondition is that the schema it was
planned on is still current. Losing a race on either step re-plans the same changes on the new
schema, which either applies (the changes did not collide) or raises ``SchemaChangeError``
saying why not. All changes of one ``UpdateSchema`` land together, or none does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

import pyarrow as pa

from appendtable import argument_checks
from appendtable._state import TableState
from appendtable.commit.changes import CommitRequest, SchemaBaseMovedError, SchemaUpdate
from appendtable.datafiles.arrow_schema import arrow_type, field_specs
from appendtable.errors import InvalidArgumentError, InvalidSchemaError, SchemaChangeError
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitKind, Snapshot, TableSchema
from appendtable.metadata.types import NESTED_KINDS, FieldSpec, replaced
from appendtable.mirror_data import check_data_mirrorable
from appendtable.planning.file_index import check_index_columns
from appendtable.planning.iceberg_metadata import check_mirrorable
from appendtable.planning.schema_changes import (
    AddColumn,
    DropColumn,
    MoveColumn,
    RenameColumn,
    SchemaChange,
    SetOptions,
    UnsetOptions,
    UpdateColumn,
    apply_changes,
    same_fields,
)

__all__ = ["UpdateSchema", "check_table_schema", "commit_schema_change", "column_path"]

_PARTITION_KIND_REJECTED = {
    "float16": "floating-point",
    "float32": "floating-point",
    "float64": "floating-point",
    "binary": "binary",
    "large_binary": "binary",
    "fixed_size_binary": "binary",
    "duration": "duration",
}
_WATERMARK_KINDS = frozenset({"timestamp", "date32", "date64", "int8", "int16", "int32", "int64"})
#: Re-plans after lost races before giving up (each loss means another change landed).
_MAX_ATTEMPTS = 100


def _check_names(fields: Sequence[FieldSpec], parent: str) -> None:
    """No column or nested field name holds a NUL byte (names become Parquet field names,
    partition directory names and CLI output, which all end at a NUL)."""
    for field in fields:
        if "\x00" in field.name:
            raise InvalidSchemaError(
                f"column name {parent + field.name!r} holds a NUL byte, which no column name may",
                column=(parent + field.name).split(".", 1)[0] if parent else field.name,
            )
        if field.type.fields:
            _check_names(field.type.fields, f"{parent}{field.name}.")


def check_table_schema(
    fields: Sequence[FieldSpec], partition_keys: Sequence[str], options: opt.Options
) -> None:
    """The rules every schema version obeys: usable partition keys, watermark column and
    indexed columns. InvalidSchemaError (InvalidOptionError for an index) naming the column."""
    _check_names(fields, "")
    kinds = {f.name: f.type.kind for f in fields}
    for key in partition_keys:
        kind = kinds[key]
        if kind in NESTED_KINDS or kind in _PARTITION_KIND_REJECTED:
            raise InvalidSchemaError(
                f"partition column '{key}' has a {_PARTITION_KIND_REJECTED.get(kind, kind)} "
                "type, which cannot be a partition key",
                column=key,
            )
    if options.get(opt.ICEBERG_STORAGE) != "disabled":
        check_mirrorable(fields, opt.ICEBERG_STORAGE.key)
    indexed = options.get(opt.FILE_INDEX_BLOOM_COLUMNS)
    if indexed:
        check_index_columns(indexed, {f.name: arrow_type(f.type) for f in fields})
    watermark_column = options.get(opt.WATERMARK_COLUMN)
    if watermark_column and kinds.get(watermark_column) not in _WATERMARK_KINDS:
        raise InvalidSchemaError(
            f"watermark column '{watermark_column}' has type {kinds.get(watermark_column)}; use "
            "a timestamp, a date, or an integer holding epoch milliseconds",
            column=watermark_column,
        )


def _mirrored(schema: TableSchema) -> bool:
    return opt.Options(schema.options).get(opt.ICEBERG_STORAGE) != "disabled"


def _field_of(path: tuple[str, ...], type: pa.DataType, *, nullable: bool = True) -> FieldSpec:
    """The stored field of a column or struct field of ``type`` a schema change names;
    SchemaChangeError naming its path for a type a table cannot hold."""
    try:
        return field_specs(pa.schema([pa.field(path[-1], type, nullable=nullable)]))[0]
    except InvalidSchemaError as exc:
        raise SchemaChangeError(str(exc), column=".".join(path)) from exc


def column_path(column: str | Sequence[str], schema: TableSchema) -> tuple[str, ...]:
    """A column given as a name, a dotted path (``payload.country``) or a tuple of names. A
    top-level name containing dots is taken whole."""
    if isinstance(column, str):
        if not column:
            raise InvalidArgumentError("a column name must not be empty")
        if column in schema.field_names() or "." not in column:
            return (column,)
        return tuple(column.split("."))
    path = tuple(column)
    if not path or not all(isinstance(part, str) and part for part in path):
        raise InvalidArgumentError(f"a column path must be non-empty names, got {column!r}")
    return path


def _unchanged(base: TableSchema, new: TableSchema) -> bool:
    return (
        base.format_version == new.format_version
        and same_fields(base.fields, new.fields)
        and all(a.doc == b.doc for a, b in zip(base.fields, new.fields, strict=True))
        and dict(base.options) == dict(new.options)
    )


def commit_schema_change(
    state: TableState,
    changes: Sequence[SchemaChange] | Callable[[TableSchema], Sequence[SchemaChange]],
    commit_user: str,
) -> Snapshot | None:
    """Apply ``changes`` to the current schema and commit the result as an ALTER snapshot
    (see the module doc). Returns it, or None when the changes change nothing. An empty
    ``changes`` on a format-version-1 table upgrades it to the current format version.
    ``changes`` may be a function of the current schema, called again after a lost race (a
    merge computes what to add against the schema it lands on)."""
    for _ in range(_MAX_ATTEMPTS):
        latest = state.snapshots.latest()
        base = state.schemas.current(latest)
        planned = changes(base) if callable(changes) else changes
        if callable(changes) and not planned:
            state.refresh(latest)
            return None
        new_id, first_free = state.schemas.next_ids()
        applied = apply_changes(
            base,
            planned,
            new_id=new_id,
            first_free_field_id=first_free,
            time_ms=int(time.time() * 1000),
        )
        schema = applied.schema
        if _unchanged(base, schema):
            state.refresh(latest)
            return None
        try:
            check_table_schema(schema.fields, schema.partition_keys, opt.Options(schema.options))
            if latest is not None and _mirrored(schema):
                check_data_mirrorable(
                    state,
                    latest,
                    schema,
                    opt.ICEBERG_STORAGE.key,
                    turning_on=not _mirrored(base),
                )
        except SchemaChangeError:
            raise
        except InvalidSchemaError as exc:  # a change that leaves the table invalid
            raise SchemaChangeError(str(exc), column=exc.column) from exc
        if applied.requires_empty and latest is not None and latest.total_record_count:
            # Checked again at commit (rows may land meanwhile); here to write nothing.
            raise SchemaChangeError(
                f"cannot add required column '{applied.required_column}': the table holds "
                f"{_rows(latest.total_record_count)}, which would have no value for it (add it "
                "as nullable)",
                column=applied.required_column,
            )
        if not state.schemas.publish(schema):
            continue  # another change took the id: re-plan on what it leads to
        try:
            snapshot = state.committer().commit(
                CommitRequest(
                    kind=CommitKind.ALTER,
                    commit_user=commit_user,
                    messages=(),
                    schema_change=SchemaUpdate(base.id, schema.id, applied.requires_empty),
                )
            )
        except SchemaBaseMovedError:
            continue
        assert snapshot is not None
        state.refresh(snapshot)
        return snapshot
    raise SchemaChangeError(
        f"the schema kept changing under this change ({_MAX_ATTEMPTS} attempts): retry later"
    )


def _rows(count: int) -> str:
    return "1 row" if count == 1 else f"{count:,} rows"


class UpdateSchema:
    """Changes to a table's schema, committed together as one new schema version.

    Use as a context manager (``with table.update_schema() as update: ...``): leaving the block
    without an error commits; an error inside it commits nothing. Or call ``commit()``.
    Changes apply in the order given; column paths name nested struct fields with dots
    (``payload.country``)."""

    def __init__(
        self,
        state: TableState,
        commit_user: str,
        *,
        on_commit: Callable[[Snapshot], None] | None = None,
    ) -> None:
        """``on_commit``: called with the ALTER snapshot once it landed (and must not raise)."""
        self._state = state
        self._commit_user = commit_user
        self._on_commit = on_commit
        self._changes: list[SchemaChange] = []
        self._committed = False
        #: The ALTER snapshot ``commit()`` made (None before, or when nothing changed).
        self.snapshot: Snapshot | None = None

    @property
    def changes(self) -> list[SchemaChange]:
        """The changes collected so far."""
        return list(self._changes)

    def _path(self, column: str | Sequence[str]) -> tuple[str, ...]:
        return column_path(column, self._state.schema)

    def add_column(
        self,
        name: str | Sequence[str],
        type: pa.DataType,
        *,
        nullable: bool = True,
        after: str | None = None,
        first: bool = False,
        doc: str | None = None,
    ) -> UpdateSchema:
        """Add a column (or, with a dotted path, a field of a struct column), last by default.
        Old rows read it as null. A non-nullable column can only be added to an empty table."""
        path = self._path(name)
        if not isinstance(type, pa.DataType):
            raise InvalidArgumentError(
                f"the type of '{'.'.join(path)}' must be a pyarrow.DataType, got "
                f"{type.__class__.__name__}"
            )
        if after is not None and first:
            raise InvalidArgumentError("give after= or first=, not both")
        field = _field_of(path, type, nullable=bool(nullable))
        if doc is not None:
            field = replaced(field, doc=doc)
        self._changes.append(AddColumn(parent=path[:-1], field=field, after=after, first=first))
        return self

    def rename_column(self, name: str | Sequence[str], new_name: str) -> UpdateSchema:
        """Rename a column or a struct field; its data is kept (files are read by field id)."""
        if not isinstance(new_name, str) or not new_name:
            raise InvalidArgumentError(f"new_name must be a non-empty string, got {new_name!r}")
        self._changes.append(RenameColumn(path=self._path(name), new_name=new_name))
        return self

    def drop_column(self, name: str | Sequence[str]) -> UpdateSchema:
        """Drop a column or a struct field (its data stays in old files, unread)."""
        self._changes.append(DropColumn(path=self._path(name)))
        return self

    def update_column(
        self,
        name: str | Sequence[str],
        *,
        type: pa.DataType | None = None,
        nullable: bool | None = None,
        doc: str | None = None,
    ) -> UpdateSchema:
        """Widen a column's type (``int32`` to ``int64``, ``float32`` to ``float64``, more
        decimal digits, ``string`` to ``large_string``...), make it nullable, or set its doc."""
        path = self._path(name)
        spec = None
        if type is not None:
            if not isinstance(type, pa.DataType):
                raise InvalidArgumentError(
                    f"the type of '{'.'.join(path)}' must be a pyarrow.DataType, got "
                    f"{type.__class__.__name__}"
                )
            spec = _field_of(path, type).type
        if nullable is not None and not isinstance(nullable, bool):
            raise InvalidArgumentError(f"nullable must be True or False, got {nullable!r}")
        if nullable is False:
            raise SchemaChangeError(
                f"column '{'.'.join(path)}' cannot become required: rows already written may "
                "hold nulls (only required -> optional is allowed)",
                column=".".join(path),
            )
        self._changes.append(UpdateColumn(path=path, type=spec, nullable=nullable, doc=doc))
        return self

    def move_first(self, name: str | Sequence[str]) -> UpdateSchema:
        """Move a column (or struct field) before its siblings."""
        self._changes.append(MoveColumn(path=self._path(name), first=True))
        return self

    def move_after(self, name: str | Sequence[str], other: str) -> UpdateSchema:
        """Move a column (or struct field) right after sibling ``other``."""
        self._changes.append(MoveColumn(path=self._path(name), after=other))
        return self

    def move_before(self, name: str | Sequence[str], other: str) -> UpdateSchema:
        """Move a column (or struct field) right before sibling ``other``."""
        self._changes.append(MoveColumn(path=self._path(name), before=other))
        return self

    def set_options(self, options: Mapping[str, object]) -> UpdateSchema:
        """Set table options (validated as at creation; layout options are refused)."""
        self._changes.append(SetOptions(options=opt.parse_options(options)))
        return self

    def unset_options(self, keys: Sequence[str] | str) -> UpdateSchema:
        """Return options to their defaults."""
        names = argument_checks.names(keys, "keys") or []
        self._changes.append(UnsetOptions(keys=tuple(names)))
        return self

    def commit(self) -> Snapshot | None:
        """Commit every change as one new schema version (an ALTER snapshot, returned; None
        if nothing changed). SchemaChangeError / InvalidOptionError if a change is refused:
        then nothing is committed."""
        if self._committed:
            raise InvalidArgumentError("this schema update was already committed")
        self._committed = True
        self.snapshot = commit_schema_change(self._state, self._changes, self._commit_user)
        if self.snapshot is not None and self._on_commit is not None:
            self._on_commit(self.snapshot)
        return self.snapshot

    def __enter__(self) -> UpdateSchema:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None and not self._committed:
            self.commit()

    def __repr__(self) -> str:
        return f"UpdateSchema({len(self._changes)} change(s), committed={self._committed})"
