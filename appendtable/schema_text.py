"""Schemas and types as DDL text: ``id int64 not null, `full name` string``, the syntax the
command line reads (``appendtable create --schema``) and prints (``appendtable schema``).

Names that are not bare identifiers (letters, digits and ``_``, not starting with a digit;
``not`` and ``null`` excepted) are quoted with backticks, or double quotes when they hold a
backtick, or backticks doubled when they hold both; nested fields keep their names and
nullability, so the text names every column and field exactly. Types are pyarrow's own
spelling, with parameters (``decimal(10, 2)``, ``timestamp[us, UTC]``).
"""

from __future__ import annotations

import re

import pyarrow as pa

__all__ = ["format_field", "format_schema", "format_type"]

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _quote(name: str) -> str:
    if _BARE_NAME.fullmatch(name) and name.lower() not in ("not", "null"):
        return name
    if "`" not in name:
        return f"`{name}`"
    if '"' not in name:
        return f'"{name}"'
    return "`" + name.replace("`", "``") + "`"  # both kinds: a doubled backtick stands for one


def _child_text(field: pa.Field, default_name: str) -> str:
    text = format_type(field.type) + ("" if field.nullable else " not null")
    return text if field.name == default_name else f"{_quote(field.name)}: {text}"


def format_type(dtype: pa.DataType) -> str:
    """The DDL of one type (pyarrow's own spelling, with names quoted where needed)."""
    if pa.types.is_struct(dtype):
        inner = ", ".join(format_field(dtype.field(i)) for i in range(dtype.num_fields))
        return f"struct<{inner}>"
    if pa.types.is_map(dtype):
        flag = ", keys_sorted" if dtype.keys_sorted else ""
        return f"map<{format_type(dtype.key_type)}, {_child_text(dtype.item_field, 'value')}{flag}>"
    if pa.types.is_fixed_size_list(dtype):
        return f"fixed_size_list<{_child_text(dtype.value_field, 'item')}>[{dtype.list_size}]"
    if pa.types.is_large_list(dtype):
        return f"large_list<{_child_text(dtype.value_field, 'item')}>"
    if pa.types.is_list(dtype):
        return f"list<{_child_text(dtype.value_field, 'item')}>"
    if pa.types.is_decimal(dtype):
        name = "decimal256" if dtype.bit_width == 256 else "decimal"
        return f"{name}({dtype.precision}, {dtype.scale})"
    if pa.types.is_dictionary(dtype):
        return format_type(dtype.value_type)
    if pa.types.is_string_view(dtype):
        return "string"
    if pa.types.is_binary_view(dtype):
        return "binary"
    return str(dtype)


def format_field(field: pa.Field) -> str:
    """One column: ``name type [not null]``."""
    nullable = "" if field.nullable else " not null"
    return f"{_quote(field.name)} {format_type(field.type)}{nullable}"


def format_schema(schema: pa.Schema, *, separator: str = ", ") -> str:
    """A schema's columns, one after the other (``separator`` between them)."""
    return separator.join(format_field(field) for field in schema)
