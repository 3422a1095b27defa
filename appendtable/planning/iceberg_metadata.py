"""The Iceberg v2 view of a table (pure): schemas with the table's field ids, an identity
partition spec, a name mapping for files without Parquet field ids, the binary encoding of
bounds and partition values, and the records of Iceberg manifests, manifest lists and table
metadata. ``commit.iceberg_mirror`` writes them.

Type mapping (anything else is refused when the mirror is turned on, naming the column):
bool -> boolean; int8/int16/int32/uint8/uint16 -> int; int64 -> long; float32 -> float;
float64 -> double; string/large_string -> string; binary/large_binary -> binary;
fixed_size_binary(n) -> fixed[n]; date32/date64 -> date; timestamp (s, ms, us) -> timestamp,
or timestamptz with a time zone; time64[us] -> time; decimal(p, s) -> decimal(p, s);
list/large_list/fixed_size_list -> list; struct -> struct; map -> map.
Refused: float16, uint64, duration, nanosecond timestamps and times (Iceberg v3 types), uint32
(data files hold it as an unsigned 32-bit Parquet integer, which Iceberg readers read as a
signed int: values from 2^31 on come out negative and filters miss them) and time32 (data files
hold seconds or milliseconds as Parquet TIME(MILLIS), which Iceberg readers cannot read: an
Iceberg time is microseconds). A table mirrored before these two were refused keeps its mirror
publishing (uint32 as long, time32 as time) until the mirror is turned off or the column
changed: its next schema change is refused until then.

Timestamps in seconds or milliseconds reach beyond Iceberg's microseconds in 64 bits: with the
mirror on, writes refuse such values (``datafiles``), turning the mirror on refuses a table
whose live files hold them, and a bound beyond that range is left out (bounds are optional),
so publishing never fails on a value.
"""

from __future__ import annotations

import decimal
import json
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from appendtable.errors import InvalidSchemaError
from appendtable.metadata.models import DataFileMeta, PartitionValues, Snapshot, TableSchema
from appendtable.metadata.types import FieldSpec, TypeSpec
from appendtable.metadata.values import unscaled

__all__ = [
    "DELETE_FILE_PATH_ID",
    "MANIFEST_LIST_SCHEMA",
    "MICROS_RANGE",
    "PARTITION_FIELD_BASE",
    "beyond_micros",
    "check_mirrorable",
    "data_file_record",
    "deletion_vector_record",
    "iceberg_schema",
    "manifest_schema",
    "NameOwners",
    "name_mapping",
    "name_owners",
    "partition_spec",
    "partition_summary",
    "puffin_file",
    "refs",
    "reused_names",
    "snapshot_entry",
]

PARTITION_FIELD_BASE = 1000
_INT = {"int8", "int16", "int32", "uint8", "uint16"}
#: uint32 only for tables mirrored before it was refused (their mirror keeps publishing).
_LONG = {"int64", "uint32"}
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
#: Iceberg's timestamps: microseconds in 64 bits.
MICROS_RANGE = (-(2**63), 2**63 - 1)
_REFUSED = {
    "float16": "float16 has no Iceberg type",
    "uint64": "uint64 does not fit Iceberg's long",
    "uint32": (
        "data files hold uint32 as an unsigned 32-bit Parquet integer, which Iceberg readers "
        "read as a signed int; use int64"
    ),
    "time32": (
        "data files hold time32 as Parquet milliseconds, which Iceberg readers cannot read "
        "(an Iceberg time is microseconds); use time64[us]"
    ),
    "duration": "durations have no Iceberg type",
}


# ---- types ------------------------------------------------------------------------------------


def _unsupported(spec: TypeSpec) -> str | None:
    if spec.kind in _REFUSED:
        return _REFUSED[spec.kind]
    if spec.kind in ("timestamp", "time32", "time64") and spec.unit == "ns":
        return "nanosecond precision needs Iceberg v3"
    for child in spec.fields:
        reason = _unsupported(child.type)
        if reason is not None:
            return reason
    return None


def beyond_micros(value: object, spec: TypeSpec) -> bool:
    """Whether a stored timestamp (in the column's unit) lies beyond Iceberg's range."""
    if spec.kind != "timestamp" or not isinstance(value, int):
        return False
    micros = _micros(value, spec.unit)
    return not MICROS_RANGE[0] <= micros <= MICROS_RANGE[1]


def check_mirrorable(fields: Sequence[FieldSpec], option: str) -> None:
    """InvalidSchemaError naming the first column whose type has no Iceberg v2 type, or two
    fields whose full Iceberg names are the same (a column ``page.url`` beside the field
    ``url`` of a struct ``page``: Iceberg readers refuse such a schema)."""
    for field in fields:
        reason = _unsupported(field.type)
        if reason is not None:
            raise InvalidSchemaError(
                f"column '{field.name}' cannot be mirrored as Iceberg ({reason}): turn "
                f"'{option}' off or change the column",
                column=field.name,
            )
    seen: dict[str, str] = {}
    for top, full_name in _full_names(fields):
        other = seen.get(full_name)
        if other is not None:
            raise InvalidSchemaError(
                f"column '{top}' cannot be mirrored as Iceberg: its field '{full_name}' has the "
                f"full name of a field of column '{other}', and Iceberg readers refuse a schema "
                f"with two fields of one name: rename one, or turn '{option}' off",
                column=top,
            )
        seen[full_name] = top


def _full_names(fields: Sequence[FieldSpec]) -> Iterable[tuple[str, str]]:
    """(top-level column, full Iceberg name) of every field at every depth: names joined
    with dots, list elements as ``element``, map entries as ``key`` and ``value``."""

    def walk(spec: FieldSpec, name: str, top: str) -> Iterable[tuple[str, str]]:
        yield top, name
        kind = spec.type.kind
        for index, child in enumerate(spec.type.fields):
            if kind == "struct":
                part = child.name
            elif kind == "map":
                part = ("key", "value")[index]
            else:
                part = "element"
            yield from walk(child, f"{name}.{part}", top)

    for field in fields:
        yield from walk(field, field.name, field.name)


#: Iceberg primitive type names of the kinds that need no parameter.
_SIMPLE = {
    "bool": "boolean",
    **dict.fromkeys(_INT, "int"),
    **dict.fromkeys(_LONG, "long"),
    "float32": "float",
    "float64": "double",
    "string": "string",
    "large_string": "string",
    "binary": "binary",
    "large_binary": "binary",
    "date32": "date",
    "date64": "date",
    "time32": "time",  # only for tables mirrored before it was refused
    "time64": "time",
}


def _primitive(spec: TypeSpec) -> str:
    kind = spec.kind
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return simple
    if kind == "fixed_size_binary":
        return f"fixed[{spec.byte_width}]"
    if kind == "timestamp":
        return "timestamptz" if spec.tz else "timestamp"
    if kind == "decimal":
        return f"decimal({spec.precision}, {spec.scale})"
    raise InvalidSchemaError(f"type {kind} has no Iceberg type")


def _type(spec: TypeSpec) -> Any:
    kind = spec.kind
    if kind == "struct":
        return {"type": "struct", "fields": [_field(child) for child in spec.fields]}
    if kind in ("list", "large_list", "fixed_size_list"):
        element = spec.fields[0]
        return {
            "type": "list",
            "element-id": element.id,
            "element": _type(element.type),
            "element-required": not element.nullable,
        }
    if kind == "map":
        key, value = spec.fields
        return {
            "type": "map",
            "key-id": key.id,
            "key": _type(key.type),
            "value-id": value.id,
            "value": _type(value.type),
            "value-required": not value.nullable,
        }
    return _primitive(spec)


def _field(field: FieldSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": field.id,
        "name": field.name,
        "required": not field.nullable,
        "type": _type(field.type),
    }
    if field.doc:
        out["doc"] = field.doc
    return out


def iceberg_schema(schema: TableSchema) -> dict[str, Any]:
    """The Iceberg schema of a schema version (its id and field ids are the table's)."""
    return {
        "type": "struct",
        "schema-id": schema.id,
        "fields": [_field(field) for field in schema.fields],
    }


def partition_spec(schema: TableSchema) -> dict[str, Any]:
    """Spec 0: identity on each partition column, partition field ids from 1000."""
    by_name = {f.name: f for f in schema.fields}
    return {
        "spec-id": 0,
        "fields": [
            {
                "name": key,
                "transform": "identity",
                "source-id": by_name[key].id,
                "field-id": PARTITION_FIELD_BASE + index,
            }
            for index, key in enumerate(schema.partition_keys)
        ],
    }


#: The names Parquet writers give list elements and map entries (Arrow's, and the standard).
_COLLECTION_NAMES: dict[tuple[str | None, int], tuple[str, ...]] = {
    ("list", 0): ("element", "item"),
    ("large_list", 0): ("element", "item"),
    ("fixed_size_list", 0): ("element", "item"),
    ("map", 0): ("key",),
    ("map", 1): ("value",),
}


#: (parent field id, or None at the top; a name) -> the field id a reader matching files
#: without Parquet field ids by name takes that name for.
NameOwners = dict[tuple[int | None, str], int]


def name_mapping(schemas: Iterable[TableSchema]) -> list[dict[str, Any]]:
    """``schema.name-mapping.default``: every name each field id has had (files written
    without Parquet field ids are read by these names). A name two ids have held maps to the
    one that held it first (``name_owners``): the table's own files carry field ids, and a
    file adopted without them is refused when one of its names is held by another id."""
    names: dict[int, list[str]] = {}
    children: dict[int, list[int]] = {}
    top: list[int] = []

    def visit(field: FieldSpec, parent: int | None, alias: str, owner: int) -> None:
        assert field.id is not None
        known = names.setdefault(field.id, [])
        siblings = top if parent is None else children.setdefault(parent, [])
        if field.id not in siblings:
            siblings.append(field.id)
        if owner == field.id and alias not in known:
            known.append(alias)

    name_owners(schemas, visit)

    def entry(field_id: int) -> dict[str, Any]:
        out: dict[str, Any] = {"field-id": field_id, "names": names[field_id]}
        if children.get(field_id):
            out["fields"] = [entry(child) for child in children[field_id]]
        return out

    return [entry(field_id) for field_id in top]


def name_owners(
    schemas: Iterable[TableSchema],
    visit: Callable[[FieldSpec, int | None, str, int], None] | None = None,
) -> NameOwners:
    """Which field id each (parent, name) stands for when read by name, over ``schemas``
    (oldest first): the first id to hold it. ``visit(field, parent, alias, owner)`` is called
    for each name of each field as it is met (list elements and map entries answer to the
    names Parquet writers give them too)."""
    claimed: NameOwners = {}

    def walk(fields: Sequence[FieldSpec], parent: int | None, parent_kind: str | None) -> None:
        for index, field in enumerate(fields):
            assert field.id is not None
            for alias in (field.name, *_COLLECTION_NAMES.get((parent_kind, index), ())):
                owner = claimed.setdefault((parent, alias), field.id)
                if visit is not None:
                    visit(field, parent, alias, owner)
            walk(field.type.fields, field.id, field.type.kind)

    for schema in schemas:
        walk(schema.fields, None, None)
    return claimed


def reused_names(owners: NameOwners, fields: Sequence[FieldSpec], prefix: str = "") -> list[str]:
    """The dotted paths of ``fields`` (and their struct fields) whose name stands for another
    field id in ``owners``: a file without Parquet field ids would be read as that field."""
    found: list[str] = []

    def walk(fields: Sequence[FieldSpec], parent: int | None, prefix: str) -> None:
        for field in fields:
            path = f"{prefix}{field.name}"
            if owners.get((parent, field.name), field.id) != field.id:
                found.append(path)
            if field.type.kind == "struct":
                walk(field.type.fields, field.id, f"{path}.")

    walk(fields, None, prefix)
    return found


# ---- values ---------------------------------------------------------------------------------


def _unscaled(value: object, scale: int) -> int:
    """A stored decimal (canonical text) as its unscaled integer, exactly."""
    return unscaled(decimal.Decimal(str(value)), scale)


def _decimal_bytes(unscaled: int, size: int | None = None) -> bytes:
    length = size or max(1, (unscaled.bit_length() + 8) // 8)
    return unscaled.to_bytes(length, "big", signed=True)


def _decimal_size(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) - 1 < 10**precision - 1:
        size += 1
    return size


def _micros(value: int, unit: str | None) -> int:
    return value * _MICROS[unit or "us"]


def encode_bound(value: object, spec: TypeSpec) -> bytes | None:
    """A statistic (as manifests store it) in Iceberg's single-value binary encoding, or None
    when it has none."""
    if value is None:
        return None
    kind = spec.kind
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind in _INT or kind in ("date32",):
        return struct.pack("<i", int(value))  # type: ignore[call-overload]
    if kind in _LONG:
        return struct.pack("<q", int(value))  # type: ignore[call-overload]
    if kind == "float32":
        return struct.pack("<f", float(value))  # type: ignore[arg-type]
    if kind == "float64":
        return struct.pack("<d", float(value))  # type: ignore[arg-type]
    if kind in ("string", "large_string"):
        return str(value).encode()
    if kind in ("binary", "large_binary"):
        return bytes(value) if isinstance(value, bytes) else None
    if kind in ("timestamp", "time32", "time64") and isinstance(value, int):
        if beyond_micros(value, spec):
            return None  # no bound (optional) rather than one Iceberg cannot hold
        return struct.pack("<q", _micros(value, spec.unit))
    if kind == "decimal":
        try:
            return _decimal_bytes(_unscaled(value, spec.scale or 0))
        except (ValueError, decimal.InvalidOperation):
            return None  # a statistic an old writer truncated: no bound
    return None


#: The Avro encoding of partition values, by Iceberg type (the spec's Avro mapping).
_AVRO = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "string": "string",
    "date": {"type": "int", "logicalType": "date"},
    "time": {"type": "long", "logicalType": "time-micros"},
}


def _avro_type(spec: TypeSpec, field_id: int) -> Any:
    kind = spec.kind
    avro = _AVRO.get(_SIMPLE.get(kind, ""))
    if avro is not None:
        return avro
    if kind == "timestamp":
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": bool(spec.tz)}
    if kind == "decimal":
        precision = spec.precision or 38
        return {
            "type": "fixed",
            "name": f"decimal_{field_id}",
            "size": _decimal_size(precision),
            "logicalType": "decimal",
            "precision": precision,
            "scale": spec.scale or 0,
        }
    raise InvalidSchemaError(f"partition type {kind} has no Iceberg partition encoding")


def _partition_value(value: object, spec: TypeSpec) -> object:
    if value is None:
        return None
    kind = spec.kind
    if kind == "date64" and isinstance(value, int):
        return value  # stored as days
    if kind in ("timestamp", "time32", "time64") and isinstance(value, int):
        if beyond_micros(value, spec):  # writes and turning the mirror on refuse these
            raise InvalidSchemaError(
                f"partition value {value} of a timestamp[{spec.unit}] column is beyond "
                "Iceberg's range (microseconds in 64 bits)"
            )
        return _micros(value, spec.unit)
    if kind == "decimal":
        return _decimal_bytes(
            _unscaled(value, spec.scale or 0), _decimal_size(spec.precision or 38)
        )
    return value


# ---- manifests ------------------------------------------------------------------------------


def _map_of(key_id: int, value_id: int, value: str, field_id: int, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "field-id": field_id,
        "default": None,
        "type": [
            "null",
            {
                "type": "array",
                "logicalType": "map",
                "items": {
                    "type": "record",
                    "name": f"k{key_id}_v{value_id}",
                    "fields": [
                        {"name": "key", "type": "int", "field-id": key_id},
                        {"name": "value", "type": value, "field-id": value_id},
                    ],
                },
            },
        ],
    }


def _optional(name: str, avro: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro], "default": None, "field-id": field_id}


def manifest_schema(
    schema: TableSchema, partition_types: Sequence[TypeSpec], *, deletes: bool = False
) -> dict[str, Any]:
    """The Avro schema of a manifest's entries (Iceberg v2 ``manifest_entry``; with
    ``deletes``, v3's, whose delete files reference a data file and a blob of a Puffin file)."""
    partition_fields = [
        {
            "name": key,
            "type": ["null", _avro_type(spec, PARTITION_FIELD_BASE + index)],
            "default": None,
            "field-id": PARTITION_FIELD_BASE + index,
        }
        for index, (key, spec) in enumerate(
            zip(schema.partition_keys, partition_types, strict=True)
        )
    ]
    data_file = {
        "type": "record",
        "name": "r2",
        "fields": [
            {"name": "content", "type": "int", "field-id": 134},
            {"name": "file_path", "type": "string", "field-id": 100},
            {"name": "file_format", "type": "string", "field-id": 101},
            {
                "name": "partition",
                "type": {"type": "record", "name": "r102", "fields": partition_fields},
                "field-id": 102,
            },
            {"name": "record_count", "type": "long", "field-id": 103},
            {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
            _map_of(117, 118, "long", 108, "column_sizes"),
            _map_of(119, 120, "long", 109, "value_counts"),
            _map_of(121, 122, "long", 110, "null_value_counts"),
            _map_of(138, 139, "long", 137, "nan_value_counts"),
            _map_of(126, 127, "bytes", 125, "lower_bounds"),
            _map_of(129, 130, "bytes", 128, "upper_bounds"),
            _optional("key_metadata", "bytes", 131),
            _optional("split_offsets", {"type": "array", "items": "long", "element-id": 133}, 132),
            _optional("equality_ids", {"type": "array", "items": "int", "element-id": 136}, 135),
            _optional("sort_order_id", "int", 140),
            *(
                [
                    _optional("referenced_data_file", "string", 143),
                    _optional("content_offset", "long", 144),
                    _optional("content_size_in_bytes", "long", 145),
                ]
                if deletes
                else []
            ),
        ],
    }
    return {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            _optional("snapshot_id", "long", 1),
            _optional("sequence_number", "long", 3),
            _optional("file_sequence_number", "long", 4),
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }


def _pairs(values: Mapping[int, Any]) -> list[dict[str, Any]] | None:
    return [{"key": k, "value": v} for k, v in sorted(values.items())] or None


def data_file_record(
    *,
    status: int,
    snapshot_id: int,
    uri: str,
    file: DataFileMeta,
    partition: PartitionValues,
    schema: TableSchema,
    partition_types: Sequence[TypeSpec],
    stats_positions: Mapping[str, int | None],
) -> dict[str, Any]:
    """A manifest entry for one data file. ``schema`` is the Iceberg schema the bounds are
    encoded for; ``stats_positions`` maps its top-level columns to the positions of their
    statistics in the file's metadata (None: the file predates the column, all null)."""
    value_counts: dict[int, int] = {}
    null_counts: dict[int, int] = {}
    lower: dict[int, bytes] = {}
    upper: dict[int, bytes] = {}
    for field in schema.fields:
        if field.id is None or field.type.fields or field.name not in stats_positions:
            continue
        position = stats_positions[field.name]
        value_counts[field.id] = file.row_count
        if position is None:
            null_counts[field.id] = file.row_count
            continue
        if position < len(file.null_counts) and file.null_counts[position] is not None:
            null_counts[field.id] = int(file.null_counts[position])  # type: ignore[arg-type]
        low = file.min_values[position] if position < len(file.min_values) else None
        high = file.max_values[position] if position < len(file.max_values) else None
        if field.type.kind in ("float32", "float64"):
            low, high = _float_bounds(low, high)
        encoded_low, encoded_high = encode_bound(low, field.type), encode_bound(high, field.type)
        if encoded_low is not None and encoded_high is not None:
            lower[field.id], upper[field.id] = encoded_low, encoded_high
    return {
        "status": status,
        "snapshot_id": snapshot_id,
        "sequence_number": 0,
        "file_sequence_number": 0,
        "data_file": {
            "content": 0,
            "file_path": uri,
            "file_format": "PARQUET",
            "partition": _partition_record(schema, partition, partition_types),
            "record_count": file.row_count,
            "file_size_in_bytes": file.file_size,
            "column_sizes": None,
            "value_counts": _pairs(value_counts),
            "null_value_counts": _pairs(null_counts),
            "nan_value_counts": None,
            "lower_bounds": _pairs(lower),
            "upper_bounds": _pairs(upper),
            "key_metadata": None,
            "split_offsets": None,
            "equality_ids": None,
            "sort_order_id": None,
        },
    }


def _partition_record(
    schema: TableSchema, partition: PartitionValues, partition_types: Sequence[TypeSpec]
) -> dict[str, Any]:
    """A manifest entry's ``partition`` struct: each partition key's value, Iceberg-encoded."""
    return {
        key: _partition_value(value, spec)
        for key, value, spec in zip(schema.partition_keys, partition, partition_types, strict=True)
    }


#: The field id of a position delete's ``file_path`` (Iceberg's reserved id): bounds on it
#: name the one data file a delete file applies to.
DELETE_FILE_PATH_ID = 2147483546


def deletion_vector_record(
    *,
    snapshot_id: int,
    puffin_uri: str,
    puffin_size: int,
    blob_offset: int,
    blob_length: int,
    data_uri: str,
    cardinality: int,
    partition: PartitionValues,
    schema: TableSchema,
    partition_types: Sequence[TypeSpec],
) -> dict[str, Any]:
    """A v3 manifest entry for the deletion vector of the data file ``data_uri``: a
    ``deletion-vector-v1`` blob of ``blob_length`` bytes at ``blob_offset`` of a Puffin file."""
    path_bound = [{"key": DELETE_FILE_PATH_ID, "value": data_uri.encode()}]
    return {
        "status": 1,
        "snapshot_id": snapshot_id,
        "sequence_number": 0,
        "file_sequence_number": 0,
        "data_file": {
            "content": 1,
            "file_path": puffin_uri,
            "file_format": "PUFFIN",
            "partition": _partition_record(schema, partition, partition_types),
            "record_count": cardinality,
            "file_size_in_bytes": puffin_size,
            "column_sizes": None,
            "value_counts": None,
            "null_value_counts": None,
            "nan_value_counts": None,
            "lower_bounds": path_bound,
            "upper_bounds": path_bound,
            "key_metadata": None,
            "split_offsets": None,
            "equality_ids": None,
            "sort_order_id": None,
            "referenced_data_file": data_uri,
            "content_offset": blob_offset,
            "content_size_in_bytes": blob_length,
        },
    }


_PUFFIN_MAGIC = b"PFA1"


def puffin_file(blob: bytes, *, data_uri: str, cardinality: int) -> tuple[bytes, int]:
    """A Puffin file holding one ``deletion-vector-v1`` blob of the data file ``data_uri``
    (its ``referenced-data-file``, as Iceberg readers match it), and the blob's offset."""
    footer = {
        "blobs": [
            {
                "type": "deletion-vector-v1",
                "fields": [],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": len(_PUFFIN_MAGIC),
                "length": len(blob),
                "properties": {
                    "referenced-data-file": data_uri,
                    "cardinality": str(cardinality),
                },
            }
        ],
        "properties": {"created-by": "appendtable"},
    }
    payload = json.dumps(footer, sort_keys=True).encode()
    body = (
        _PUFFIN_MAGIC
        + blob
        + _PUFFIN_MAGIC
        + payload
        + struct.pack("<I", len(payload))
        + b"\0\0\0\0"
        + _PUFFIN_MAGIC
    )
    return body, len(_PUFFIN_MAGIC)


def _float_bounds(low: object, high: object) -> tuple[object, object]:
    """Iceberg orders -0.0 before 0.0; the table's statistics treat them as equal, so a bound
    of zero is widened to cover both."""
    if low == 0:
        low = -0.0
    if high == 0:
        high = 0.0
    return low, high


MANIFEST_LIST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "manifest_file",
    "fields": [
        {"name": "manifest_path", "type": "string", "field-id": 500},
        {"name": "manifest_length", "type": "long", "field-id": 501},
        {"name": "partition_spec_id", "type": "int", "field-id": 502},
        {"name": "content", "type": "int", "field-id": 517},
        {"name": "sequence_number", "type": "long", "field-id": 515},
        {"name": "min_sequence_number", "type": "long", "field-id": 516},
        {"name": "added_snapshot_id", "type": "long", "field-id": 503},
        {"name": "added_files_count", "type": "int", "field-id": 504},
        {"name": "existing_files_count", "type": "int", "field-id": 505},
        {"name": "deleted_files_count", "type": "int", "field-id": 506},
        {"name": "added_rows_count", "type": "long", "field-id": 512},
        {"name": "existing_rows_count", "type": "long", "field-id": 513},
        {"name": "deleted_rows_count", "type": "long", "field-id": 514},
        _optional(
            "partitions",
            {
                "type": "array",
                "element-id": 508,
                "items": {
                    "type": "record",
                    "name": "r508",
                    "fields": [
                        {"name": "contains_null", "type": "boolean", "field-id": 509},
                        _optional("contains_nan", "boolean", 518),
                        _optional("lower_bound", "bytes", 510),
                        _optional("upper_bound", "bytes", 511),
                    ],
                },
            },
            507,
        ),
        _optional("key_metadata", "bytes", 519),
    ],
}


def partition_summary(
    partitions: Sequence[PartitionValues], partition_types: Sequence[TypeSpec]
) -> list[dict[str, Any]]:
    """Per partition field: whether a null occurs, and the lowest and highest value."""
    summary = []
    for index, spec in enumerate(partition_types):
        values = [p[index] for p in partitions]
        present = [v for v in values if v is not None]
        low = high = None
        if present:
            try:
                low, high = min(present), max(present)
            except TypeError:
                low = high = None
        if spec.kind == "decimal" and present:
            ordered = sorted(present, key=lambda v: decimal.Decimal(str(v)))
            low, high = ordered[0], ordered[-1]
        summary.append(
            {
                "contains_null": len(present) < len(values),
                "contains_nan": False,
                "lower_bound": encode_bound(low, _bound_spec(spec)),
                "upper_bound": encode_bound(high, _bound_spec(spec)),
            }
        )
    return summary


def _bound_spec(spec: TypeSpec) -> TypeSpec:
    if spec.kind == "date64":
        return TypeSpec(kind="date32")
    return spec


def refs(latest_id: int, tags: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """The table metadata's ``refs``: branch ``main`` on the latest snapshot, and each tag
    (name to snapshot id; none named ``main``) as a ref of type ``tag``."""
    found: dict[str, dict[str, Any]] = {"main": {"snapshot-id": latest_id, "type": "branch"}}
    for name, snapshot_id in sorted(tags.items()):
        found[name] = {"snapshot-id": snapshot_id, "type": "tag"}
    return found


_OPERATIONS = {
    "APPEND": "append",
    "COMPACT": "replace",
    "OVERWRITE": "overwrite",
    "ALTER": "replace",
    "DELETE": "delete",
}


def snapshot_entry(snapshot: Snapshot, manifest_list: str, parent_retained: bool) -> dict[str, Any]:
    """A snapshot of the Iceberg table metadata: the table's snapshot, same id."""
    entry: dict[str, Any] = {
        "snapshot-id": snapshot.id,
        "sequence-number": snapshot.id,
        "timestamp-ms": snapshot.time_ms,
        "manifest-list": manifest_list,
        "summary": {
            "operation": _OPERATIONS.get(snapshot.kind.value, "overwrite"),
            "total-records": str(snapshot.total_record_count),
            "total-data-files": str(snapshot.total_file_count),
            "appendtable.kind": snapshot.kind.value,
        },
        "schema-id": snapshot.schema_id,
    }
    if snapshot.parent_id is not None and parent_retained:
        entry["parent-snapshot-id"] = snapshot.parent_id
    return entry
