"""Map columns in JSON lines, which pyarrow's JSON reader cannot read.

A map is written either as a JSON object (``{"k": 1}``; its keys are text, read as numbers or
booleans where the map's keys are) or as the CLI's own output form, an array of
``[key, value]`` pairs (``[["k", 1]]``, any key type). Lines that hold a column with a map
(at any depth) are parsed with the json module, numbers kept exactly as written, and their
maps rewritten as arrays of ``{"key": k, "value": v}`` objects, which pyarrow reads as lists
of structs (``entries_type``); ``from_entries`` turns those into maps. Lines that name no such
column are passed on untouched, so a file without the map column costs a substring test per
line. A line holding a map costs a json parse in Python: JSON has no Arrow reader for maps.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.cli.input_errors import InputError

__all__ = ["entries_type", "from_entries", "has_map", "rewrite_maps"]


def has_map(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is or holds a map."""
    if pa.types.is_map(dtype):
        return True
    return any(has_map(dtype.field(i).type) for i in range(dtype.num_fields))


def entries_type(dtype: pa.MapType, inner: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """What the rewritten map is read as: a list of ``{key, value}`` structs, whose fields
    are read as ``inner`` says."""
    key = pa.field("key", inner(dtype.key_type))
    value = pa.field("value", inner(dtype.item_type), nullable=dtype.item_field.nullable)
    return pa.list_(pa.struct([key, value]))


def from_entries(
    array: pa.Array, dtype: pa.DataType, leaf: Callable[[pa.Array, pa.DataType], pa.Array]
) -> pa.Array:
    """``array`` (read as ``entries_type`` says, at any depth) as ``dtype``: entries become
    maps; what holds no map is converted by ``leaf``. Raises pyarrow's or ``leaf``'s error
    when a value does not fit (a null key, for one)."""
    if not has_map(dtype):
        return leaf(array, dtype)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_map(dtype):
        offsets, entries = _spanned(array)
        keys, items = entries.flatten()
        keys = from_entries(keys, dtype.key_type, leaf)
        items = from_entries(items, dtype.item_type, leaf)
        return pa.MapArray.from_arrays(offsets, keys, items, type=dtype, mask=mask)
    if pa.types.is_struct(dtype):
        children = [
            from_entries(child, dtype.field(i).type, leaf)
            for i, child in enumerate(array.flatten())
        ]
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    offsets, values = _spanned(array)
    values = from_entries(values, dtype.value_type, leaf)
    if pa.types.is_large_list(dtype):
        return pa.LargeListArray.from_arrays(offsets, values, type=dtype, mask=mask)
    return pa.ListArray.from_arrays(offsets, values, type=dtype, mask=mask)


def _spanned(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """A list array's offsets from 0 and the values they span (of a slice: only its own, so a
    value outside it is never converted)."""
    offsets = array.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    rebased = pc.subtract(offsets, pa.scalar(first, offsets.type))
    return rebased, array.values.slice(first, last - first)


def rewrite_maps(data: bytes, schema: pa.Schema) -> bytes:
    """JSON lines with the maps of ``schema``'s columns rewritten as entries (see the module
    doc); InputError naming the column and the line of a map in neither form. Lines that do
    not parse are left as they are, for pyarrow to report."""
    columns = {f.name: f.type for f in schema if has_map(f.type)}
    tokens = {
        json.dumps(name, ensure_ascii=ascii).encode() for name in columns for ascii in (True, False)
    }
    lines = data.split(b"\n")
    for index, line in enumerate(lines):
        if not any(token in line for token in tokens):
            continue
        try:
            record = json.loads(line, parse_float=decimal.Decimal)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        for name, dtype in columns.items():
            if name in record:
                record[name] = _entries(record[name], dtype, f"column '{name}', line {index + 1}")
        lines[index] = _dump(record).encode()
    return b"\n".join(lines)


def _entries(value: Any, dtype: pa.DataType, where: str) -> Any:
    if value is None or not has_map(dtype):
        return value
    if pa.types.is_map(dtype):
        return [
            {"key": key, "value": _entries(item, dtype.item_type, where)}
            for key, item in _pairs(value, dtype.key_type, where)
        ]
    if pa.types.is_struct(dtype) and isinstance(value, dict):
        types = {dtype.field(i).name: dtype.field(i).type for i in range(dtype.num_fields)}
        return {
            name: _entries(item, types[name], where) if name in types else item
            for name, item in value.items()
        }
    if isinstance(value, list) and not pa.types.is_struct(dtype):
        return [_entries(item, dtype.value_type, where) for item in value]
    return value  # not of the type's shape: pyarrow refuses it


def _pairs(value: Any, key_type: pa.DataType, where: str) -> list[tuple[Any, Any]]:
    if isinstance(value, dict):
        return [(_object_key(key, key_type), item) for key, item in value.items()]
    if isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        return [(key, item) for key, item in value]
    raise InputError(
        f"{where}: a map is a JSON object or an array of [key, value] pairs, not "
        f"{_dump(value)[:80]}"
    )


def _object_key(key: str, key_type: pa.DataType) -> Any:
    """A JSON object's key (always text) as JSON would write a key of ``key_type``."""
    if not (
        pa.types.is_integer(key_type)
        or pa.types.is_floating(key_type)
        or pa.types.is_decimal(key_type)
        or pa.types.is_boolean(key_type)
    ):
        return key
    try:
        parsed = json.loads(key, parse_float=decimal.Decimal)
    except ValueError:
        return key
    return parsed if isinstance(parsed, (int, decimal.Decimal)) else key


def _dump(value: Any) -> str:
    """JSON text of a parsed value, numbers exactly as they were written."""
    if isinstance(value, dict):
        members = (f"{json.dumps(key)}:{_dump(item)}" for key, item in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(item) for item in value) + "]"
    if isinstance(value, decimal.Decimal):
        return str(value)
    return json.dumps(value)
