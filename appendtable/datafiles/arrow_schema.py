"""Arrow types <-> stored ``TypeSpec``s, and conforming input data to a table schema.

``conform`` is the gate every write passes through. It matches columns **by name**, never by
position, and casts only within a type family (integers to wider integers or floats, string to
large string, timestamp units, ...), with overflow and truncation checks (``casting``: a value
is stored exactly, or as the nearest value of a narrower float, or refused). It never parses strings
into numbers or dates (pyarrow's cast would), never drops or invents columns, and checks that
non-nullable columns hold no nulls (non-nullable fields of structs too, where the struct is
not null). Any violation raises :class:`SchemaMismatchError` naming the column.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa

from appendtable.datafiles.casting import cast_column, needs_check
from appendtable.datafiles.nested_nulls import fill_hidden_nulls
from appendtable.errors import InvalidSchemaError, SchemaMismatchError
from appendtable.metadata.types import FieldSpec, TypeSpec, case_twin

__all__ = [
    "PARQUET_FIELD_ID",
    "parquet_write_schema",
    "arrow_schema",
    "arrow_type",
    "check_compatible",
    "conform",
    "empty_table",
    "field_specs",
    "to_table",
    "type_spec",
]

_SIMPLE: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "date32": pa.date32(),
    "date64": pa.date64(),
}
_SIMPLE_BY_TYPE = {dtype: kind for kind, dtype in _SIMPLE.items()}


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows in ``schema`` (``Schema.empty_table`` imports pandas, a third of a
    second of CPU, on its first call in a process)."""
    return pa.Table.from_batches([], schema=schema)


def type_spec(dtype: pa.DataType, *, column: str = "", top: str | None = None) -> TypeSpec:
    """The stored form of an Arrow type. Raises InvalidSchemaError for unsupported types,
    naming ``column`` (the field's path) in the message and ``top`` (its top-level column,
    default ``column``) as the error's column."""
    top = column if top is None else top
    kind = _SIMPLE_BY_TYPE.get(dtype)
    if kind is not None and kind != "null":
        return TypeSpec(kind=kind)
    if pa.types.is_string_view(dtype):
        return TypeSpec(kind="string")
    if pa.types.is_binary_view(dtype):
        return TypeSpec(kind="binary")
    if pa.types.is_timestamp(dtype):
        return TypeSpec(kind="timestamp", unit=dtype.unit, tz=dtype.tz)
    if pa.types.is_time32(dtype):
        return TypeSpec(kind="time32", unit=dtype.unit)
    if pa.types.is_time64(dtype):
        return TypeSpec(kind="time64", unit=dtype.unit)
    if pa.types.is_duration(dtype):
        return TypeSpec(kind="duration", unit=dtype.unit)
    if pa.types.is_decimal(dtype):
        if dtype.precision > 38:
            raise InvalidSchemaError(
                f"column '{column}': decimal precision {dtype.precision} is above 38, which "
                "engines such as Spark cannot read",
                column=top,
            )
        if not 0 <= dtype.scale <= dtype.precision:
            raise InvalidSchemaError(
                f"column '{column}': decimal({dtype.precision}, {dtype.scale}) has a scale "
                f"{'below 0' if dtype.scale < 0 else 'above its precision'}, which Parquet "
                "cannot store: the scale must be between 0 and the precision",
                column=top,
            )
        return TypeSpec(kind="decimal", precision=dtype.precision, scale=dtype.scale)
    if pa.types.is_fixed_size_binary(dtype):
        return TypeSpec(kind="fixed_size_binary", byte_width=dtype.byte_width)
    if pa.types.is_dictionary(dtype):
        return type_spec(dtype.value_type, column=column, top=top)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_list_view(dtype):
        kind = "large_list" if pa.types.is_large_list(dtype) else "list"
        return TypeSpec(kind=kind, fields=(_field_spec(dtype.value_field, column, top),))
    if pa.types.is_fixed_size_list(dtype):
        return TypeSpec(
            kind="fixed_size_list",
            byte_width=dtype.list_size,
            fields=(_field_spec(dtype.value_field, column, top),),
        )
    if pa.types.is_map(dtype):
        return TypeSpec(
            kind="map",
            fields=(
                _field_spec(dtype.key_field, column, top),
                _field_spec(dtype.item_field, column, top),
            ),
        )
    if pa.types.is_struct(dtype):
        return TypeSpec(
            kind="struct",
            fields=tuple(_field_spec(dtype.field(i), column, top) for i in range(dtype.num_fields)),
        )
    raise InvalidSchemaError(f"column '{column}': unsupported type {dtype}", column=top)


def _field_spec(field: pa.Field, column: str, top: str | None = None) -> FieldSpec:
    path = f"{column}.{field.name}" if column else field.name
    return FieldSpec(
        name=field.name,
        type=type_spec(field.type, column=path, top=path if top is None else top),
        nullable=field.nullable,
    )


def field_specs(schema: pa.Schema) -> tuple[FieldSpec, ...]:
    """The stored fields of an Arrow schema (dictionary and view types are stored as their
    plain value types). Raises InvalidSchemaError for unsupported or duplicate columns."""
    names = [field.name for field in schema]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidSchemaError(
            f"duplicate column name(s): {', '.join(duplicates)}", column=duplicates[0]
        )
    if not names:
        raise InvalidSchemaError("a table needs at least one column")
    specs = tuple(_field_spec(field, "") for field in schema)
    _check_case_twins(specs, "", None)
    return specs


def _check_case_twins(fields: Sequence[FieldSpec], parent: str, top: str | None) -> None:
    """InvalidSchemaError naming both fields if two names at one level differ only by case;
    its ``column`` is the later one's top-level column (``top``, below the top level)."""
    names = [field.name for field in fields]
    for index, name in enumerate(names):
        twin = case_twin(name, names[:index])
        if twin is not None:
            first, second = (f"{parent}{n}" for n in (twin, name))
            raise InvalidSchemaError(
                f"columns '{first}' and '{second}' differ only by case: Spark SQL, DuckDB and "
                "most engines cannot tell them apart; rename one",
                column=name if top is None else top,
            )
    for field in fields:
        if field.type.fields:
            below = field.name if top is None else top
            _check_case_twins(field.type.fields, f"{parent}{field.name}.", below)


def arrow_type(spec: TypeSpec) -> pa.DataType:
    """The Arrow type of a stored type."""
    simple = _SIMPLE.get(spec.kind)
    if simple is not None:
        return simple
    kind = spec.kind
    if kind == "timestamp":
        return pa.timestamp(spec.unit or "us", tz=spec.tz)
    if kind == "time32":
        return pa.time32(spec.unit or "ms")
    if kind == "time64":
        return pa.time64(spec.unit or "us")
    if kind == "duration":
        return pa.duration(spec.unit or "us")
    if kind == "decimal":
        precision = spec.precision or 38
        return pa.decimal128(precision, spec.scale or 0)
    if kind == "fixed_size_binary":
        return pa.binary(spec.byte_width or 1)
    if kind == "list":
        return pa.list_(_arrow_field(spec.fields[0]))
    if kind == "large_list":
        return pa.large_list(_arrow_field(spec.fields[0]))
    if kind == "fixed_size_list":
        return pa.list_(_arrow_field(spec.fields[0]), spec.byte_width or 1)
    if kind == "map":
        key, item = spec.fields
        return pa.map_(_arrow_field(key), _arrow_field(item))
    if kind == "struct":
        return pa.struct([_arrow_field(child) for child in spec.fields])
    raise InvalidSchemaError(f"unknown stored type kind {kind!r}")


def _arrow_field(spec: FieldSpec) -> pa.Field:
    return pa.field(spec.name, arrow_type(spec.type), nullable=spec.nullable)


def arrow_schema(fields: Sequence[FieldSpec]) -> pa.Schema:
    return pa.schema([_arrow_field(field) for field in fields])


#: The Arrow field metadata key Parquet writers turn into a column's field id.
PARQUET_FIELD_ID = b"PARQUET:field_id"


def parquet_write_schema(fields: Sequence[FieldSpec]) -> pa.Schema:
    """``arrow_schema(fields)`` with every field's id as Parquet field id metadata, at every
    depth: what data files are written with, so readers that match columns by field id (an
    Iceberg reader of the mirror) need no name mapping for them."""
    return pa.schema([_id_field(field) for field in fields])


def _id_field(spec: FieldSpec) -> pa.Field:
    kind = spec.type.kind
    children = [_id_field(child) for child in spec.type.fields]
    if kind == "list":
        dtype = pa.list_(children[0])
    elif kind == "large_list":
        dtype = pa.large_list(children[0])
    elif kind == "fixed_size_list":
        dtype = pa.list_(children[0], spec.type.byte_width or 1)
    elif kind == "map":
        dtype = pa.map_(children[0], children[1])
    elif kind == "struct":
        dtype = pa.struct(children)
    else:
        dtype = arrow_type(spec.type)
    metadata = {PARQUET_FIELD_ID: str(spec.id).encode()} if spec.id is not None else None
    return pa.field(spec.name, dtype, nullable=spec.nullable, metadata=metadata)


# ---- conforming input ---------------------------------------------------------------------------

_FAMILIES = (
    ("int", pa.types.is_integer),
    ("float", pa.types.is_floating),
    ("decimal", pa.types.is_decimal),
    (
        "string",
        lambda t: (
            pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
        ),
    ),
    (
        "binary",
        lambda t: (
            pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_binary_view(t)
            or pa.types.is_fixed_size_binary(t)
        ),
    ),
    ("bool", pa.types.is_boolean),
    ("date", pa.types.is_date),
    ("timestamp", pa.types.is_timestamp),
    ("time", pa.types.is_time),
    ("duration", pa.types.is_duration),
    (
        "list",
        lambda t: (
            pa.types.is_list(t)
            or pa.types.is_large_list(t)
            or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t)
        ),
    ),
    ("map", pa.types.is_map),
    ("struct", pa.types.is_struct),
)
#: Cross-family casts that never change meaning (checked for overflow by a safe cast); decimals
#: to floats are allowed at the top level (see ``_castable``).
_ALLOWED_CROSS = frozenset({("int", "float"), ("int", "decimal")})


def _family(dtype: pa.DataType) -> str:
    for name, predicate in _FAMILIES:
        if predicate(dtype):
            return name
    return str(dtype)


def _castable(source: pa.DataType, target: pa.DataType, *, top: bool = True) -> bool:
    """Whether ``source`` values may be cast to ``target`` (the values are checked by the
    cast). Decimals become floats only in top-level columns, where ``_conform_column`` rounds
    them correctly (Arrow's own decimal-to-float cast is off by an ulp for many values)."""
    if source == target or pa.types.is_null(source):
        return True
    if pa.types.is_dictionary(source):
        return _castable(source.value_type, target, top=top)
    source_family, target_family = _family(source), _family(target)
    if (source_family, target_family) == ("decimal", "float"):
        return top
    if source_family != target_family:
        return (source_family, target_family) in _ALLOWED_CROSS
    if source_family == "timestamp":
        # An instant (with time zone) and a wall-clock time (without) are different things.
        return (source.tz is None) == (target.tz is None)
    if source_family == "struct":
        target_names = {
            target.field(i).name: target.field(i).type for i in range(target.num_fields)
        }
        source_fields = [source.field(i) for i in range(source.num_fields)]
        return len(source_fields) == len(target_names) and all(
            f.name in target_names and _castable(f.type, target_names[f.name], top=False)
            for f in source_fields
        )
    if source_family == "list":
        return _castable(source.value_type, target.value_type, top=False)
    if source_family == "map":
        return _castable(source.key_type, target.key_type, top=False) and _castable(
            source.item_type, target.item_type, top=False
        )
    return True


def _not_in_schema(name: str, schema: pa.Schema) -> SchemaMismatchError:
    twin = case_twin(name, schema.names)
    hint = (
        f"; the table has '{twin}' (names are matched exactly)"
        if twin is not None
        else f" (table columns: {', '.join(schema.names)})"
    )
    return SchemaMismatchError(
        f"input column '{name}' is not in the table schema{hint}", column=name
    )


def check_compatible(source: pa.Schema, schema: pa.Schema) -> None:
    """Raise SchemaMismatchError unless data of ``source`` can be written to ``schema``: the
    same column names (any order) and types that cast safely. Nullability is checked on the
    data itself when it is written, since engines mark most columns nullable."""
    names = source.names
    extra = [name for name in names if name not in schema.names]
    if extra:
        raise _not_in_schema(extra[0], schema)
    for field in schema:
        if field.name not in names:
            raise SchemaMismatchError(
                f"input is missing column '{field.name}' of the table schema", column=field.name
            )
        source_type = source.field(field.name).type
        if not _castable(source_type, field.type):
            raise SchemaMismatchError(
                f"column '{field.name}' has type {source_type}, which cannot be safely cast to "
                f"the table's type {field.type}",
                column=field.name,
            )


def conform(data: pa.Table, schema: pa.Schema, *, missing_as_null: bool = False) -> pa.Table:
    """``data`` with the table's column order and types, or SchemaMismatchError naming the
    column that does not fit. Nothing is written before this check passes. ``missing_as_null``:
    nullable columns the data lacks are filled with nulls (a merge-mode write)."""
    present = data.column_names
    duplicates = sorted({name for name in present if present.count(name) > 1})
    if duplicates:
        raise SchemaMismatchError(
            f"input has duplicate column(s): {', '.join(duplicates)}", column=duplicates[0]
        )
    expected = set(schema.names)
    extra = [name for name in present if name not in expected]
    if extra:
        raise _not_in_schema(extra[0], schema)
    missing = [
        field.name
        for field in schema
        if field.name not in present and not (missing_as_null and field.nullable)
    ]
    if missing:
        raise SchemaMismatchError(
            f"input is missing column '{missing[0]}' of the table schema", column=missing[0]
        )
    columns = []
    for field in schema:
        if field.name not in present:
            columns.append(pa.chunked_array([pa.nulls(data.num_rows, field.type)]))
            continue
        column = data.column(field.name)
        if missing_as_null:
            column = _with_missing_struct_fields(column, field.type)
        columns.append(_conform_column(column, field))
    return fill_hidden_nulls(pa.Table.from_arrays(columns, schema=schema))


def _with_missing_struct_fields(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """Struct values with the nullable fields of ``target`` they lack added as nulls, at any
    depth of structs (a merge-mode write); anything else unchanged."""
    if not (pa.types.is_struct(column.type) and pa.types.is_struct(target)):
        return column
    if all(
        column.type.get_field_index(target.field(i).name) >= 0 for i in range(target.num_fields)
    ) and all(not pa.types.is_struct(target.field(i).type) for i in range(target.num_fields)):
        return column
    chunks = [_fill_struct(chunk, target) for chunk in column.chunks]
    return pa.chunked_array(chunks, type=chunks[0].type) if chunks else column


def _fill_struct(array: pa.StructArray, target: pa.DataType) -> pa.Array:
    present = {array.type.field(i).name: i for i in range(array.type.num_fields)}
    children: list[pa.Array] = []
    fields: list[pa.Field] = []
    for i in range(target.num_fields):
        wanted = target.field(i)
        index = present.get(wanted.name)
        if index is None:
            if not wanted.nullable:
                continue  # left for the cast to refuse, naming the column
            children.append(pa.nulls(len(array), wanted.type))
            fields.append(wanted)
            continue
        child = array.field(index)
        if pa.types.is_struct(child.type) and pa.types.is_struct(wanted.type):
            child = _fill_struct(child, wanted.type)
        children.append(child)
        fields.append(array.type.field(index).with_type(child.type))
    for name, index in present.items():  # extra fields stay, for the cast to refuse
        if target.get_field_index(name) < 0:
            children.append(array.field(index))
            fields.append(array.type.field(index))
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _conform_column(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    source = column.type
    if source != field.type and not _castable(source, field.type):
        raise SchemaMismatchError(
            f"column '{field.name}' has type {source}, which cannot be safely cast to the "
            f"table's type {field.type}",
            column=field.name,
        )
    if source != field.type or needs_check(field.type):
        try:
            column = cast_column(column, field)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(
                f"column '{field.name}': values do not fit the table's type {field.type}: {exc}",
                column=field.name,
            ) from exc
    if not field.nullable and column.null_count:
        raise SchemaMismatchError(
            f"column '{field.name}' is not nullable but the input holds {column.null_count} "
            "null value(s)",
            column=field.name,
        )
    return column


def to_table(data: object, schema: pa.Schema) -> pa.Table:
    """Accept a pyarrow Table, RecordBatch, RecordBatchReader, any object that exports Arrow
    data through the PyCapsule interface (``__arrow_c_stream__`` or ``__arrow_c_array__``:
    Polars, DuckDB relations, nanoarrow, ...), a pandas DataFrame, or an iterable of
    RecordBatches."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if hasattr(data, "__arrow_c_stream__"):  # before iterables: a Polars frame is one too
        return pa.RecordBatchReader.from_stream(data).read_all()
    if hasattr(data, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(data)])
    module = type(data).__module__
    if module.startswith("pandas"):
        return _from_pandas(data)
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        batches = list(data)
        if not all(isinstance(batch, pa.RecordBatch) for batch in batches):
            raise SchemaMismatchError("an iterable input must yield pyarrow RecordBatches only")
        if not batches:
            return empty_table(schema)
        # Batches may differ in (compatible) schemas: conform each one on its own.
        return pa.concat_tables([conform(pa.Table.from_batches([b]), schema) for b in batches])
    raise SchemaMismatchError(
        f"cannot write {type(data).__name__}: pass a pyarrow Table, RecordBatch, an object "
        "with __arrow_c_stream__ (Polars, DuckDB, ...), a pandas DataFrame or an iterable of "
        "RecordBatches"
    )


def _from_pandas(frame: object) -> pa.Table:
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(f"cannot convert the pandas DataFrame: {exc}") from exc
