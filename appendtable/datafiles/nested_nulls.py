"""Nulls hidden under null structs, for non-nullable fields.

A struct column may be nullable while a field inside it is not (Spark's
``struct<a: bigint NOT NULL>``). For a null struct, Arrow leaves the field's slot undefined,
and engines fill it differently: pyarrow puts a value there, Spark's Arrow batches and
Parquet readers a null. Parquet stores nothing for it either way, but pyarrow's Parquet writer
refuses any null in a non-nullable field, hidden or not. ``fill_hidden_nulls`` puts a
placeholder into exactly those hidden slots (never visible: the struct is null there), and
raises SchemaMismatchError, naming the field, for a null in a non-nullable field of a struct
that is not null (a real violation). Tables without such fields pass through untouched.

``fill_hidden_nulls_for`` does the same for an input column before it is cast to the table's
type, judging nullability by the table's fields: Polars (like Spark) leaves a null in the
field of a null struct, which Arrow's cast to a non-nullable field refuses.
"""

from __future__ import annotations

import decimal
import functools
import re

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.errors import SchemaMismatchError

__all__ = ["fill_hidden_nulls", "fill_hidden_nulls_for", "has_required_nested_fields"]


@functools.lru_cache(maxsize=256)
def has_required_nested_fields(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` holds a struct with a non-nullable field, or with a fixed-size list of
    non-nullable elements (at any depth)."""
    if pa.types.is_struct(dtype):
        return any(
            not f.nullable or _strict_fixed_list(f.type) or has_required_nested_fields(f.type)
            for f in dtype
        )
    if _is_list(dtype):
        return _strict_fixed_list(dtype.value_type) or has_required_nested_fields(dtype.value_type)
    if pa.types.is_map(dtype):
        return has_required_nested_fields(dtype.item_type) or _strict_fixed_list(dtype.item_type)
    return False


def fill_hidden_nulls(data: pa.Table) -> pa.Table:
    """``data`` with the hidden nulls of non-nullable struct fields filled (see the module)."""
    for index, field in enumerate(data.schema):
        if has_required_nested_fields(field.type):
            column = data.column(index)
            fixed = pa.chunked_array(
                [_fill(chunk, field.name) for chunk in column.chunks], type=column.type
            )
            data = data.set_column(index, field, fixed)
    return data


def fill_hidden_nulls_for(
    column: pa.ChunkedArray, target: pa.DataType, name: str
) -> pa.ChunkedArray:
    """An input ``column`` (of its own type, without dictionaries or views) with the hidden
    nulls of the fields that are not nullable in the table's type ``target`` filled, matching
    struct fields by name (see the module); where the shapes differ, left for the cast."""
    if not has_required_nested_fields(target):
        return column
    chunks = [_fill(chunk, name, target=target) for chunk in column.chunks]
    return pa.chunked_array(chunks, type=column.type)


def _fill(
    array: pa.Array, path: str, under_null: bool = False, target: pa.DataType | None = None
) -> pa.Array:
    """``under_null``: a struct above this one (with no list between) is null in some rows.
    ``target``: the type whose nullability counts (default: the array's own)."""
    dtype = array.type
    wanted = dtype if target is None else target
    if pa.types.is_struct(dtype):
        if not pa.types.is_struct(wanted):
            return array  # shapes differ: left for the cast to refuse
        parent_valid = array.is_valid() if array.null_count else None
        nulls_above = under_null or parent_valid is not None
        children = []
        for index, own in enumerate(dtype):
            child = array.field(index)  # adjusted for the array's offset
            position = wanted.get_field_index(own.name)
            field = wanted.field(position) if position >= 0 else own
            child_path = f"{path}.{own.name}"
            if has_required_nested_fields(field.type):
                child = _fill(child, child_path, nulls_above, target=field.type)
            if (
                pa.types.is_fixed_size_list(field.type)
                and (not field.nullable or _strict_fixed_list(field.type))
                and (nulls_above or child.null_count)
            ):
                # pyarrow writes it, but cannot read it back ("Expected all lists to be of
                # size=N", or, beside a field read with a cast, "nulls in input cannot be
                # viewed as non-nullable"): refused rather than writing a file no reader opens
                raise SchemaMismatchError(
                    f"field '{child_path}' is a fixed-size list (of non-nullable elements, or "
                    "not nullable itself) in a struct, and it or the struct is null in some "
                    "rows, which Parquet files cannot hold readably (pyarrow fails to read them "
                    "back); make the field and its elements nullable",
                    column=_top(path),
                )
            if not field.nullable and child.null_count:
                exposed = (
                    child.is_null()
                    if parent_valid is None
                    else pc.and_(child.is_null(), parent_valid)
                )
                if pc.any(exposed).as_py():
                    raise SchemaMismatchError(
                        f"field '{child_path}' is not nullable but the input holds nulls in it",
                        column=_top(path),
                    )
                child = pc.fill_null(child, _placeholder(own.type))
            children.append(child)
        mask = None if parent_valid is None else pc.invert(parent_valid)
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)
    if pa.types.is_fixed_size_list(dtype):
        if not pa.types.is_fixed_size_list(wanted):
            return array
        size = dtype.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        values = _fill(values, f"{path}[]", target=wanted.value_type)
        mask = pc.is_null(array) if array.null_count else None
        return pa.FixedSizeListArray.from_arrays(values, type=dtype, mask=mask)
    if _is_list(dtype):
        if not _is_list(wanted) or pa.types.is_fixed_size_list(wanted):
            return array
        offsets = array.offsets  # of this slice, into the whole values array
        first = offsets[0].as_py()
        values = array.values.slice(first, offsets[-1].as_py() - first)
        if _strict_fixed_list(wanted.value_type) and values.null_count:
            raise SchemaMismatchError(
                f"'{path}[]' holds null fixed-size lists of non-nullable elements, which "
                "Parquet files cannot hold readably (pyarrow fails to read them back); make "
                "the elements nullable",
                column=_top(path),
            )
        values = _fill(values, f"{path}[]", target=wanted.value_type)
        mask = pc.is_null(array) if array.null_count else None
        builder = pa.LargeListArray if pa.types.is_large_list(dtype) else pa.ListArray
        rebased = pc.subtract(offsets, pa.scalar(first, offsets.type))
        return builder.from_arrays(rebased, values, type=dtype, mask=mask)
    if pa.types.is_map(dtype):
        if not pa.types.is_map(wanted):
            return array
        if _strict_fixed_list(wanted.item_type) and array.items.null_count:
            raise SchemaMismatchError(
                f"'{path}' holds null fixed-size lists of non-nullable elements as values, "
                "which Parquet files cannot hold readably (pyarrow fails to read them back); "
                "make the elements nullable",
                column=_top(path),
            )
        offsets = array.offsets
        first = offsets[0].as_py()
        length = offsets[-1].as_py() - first
        items = _fill(array.items.slice(first, length), f"{path}.value", target=wanted.item_type)
        rebased = pc.subtract(offsets, pa.scalar(first, offsets.type))
        mask = pc.is_null(array) if array.null_count else None
        return pa.MapArray.from_arrays(
            rebased, array.keys.slice(first, length), items, type=dtype, mask=mask
        )
    return array


def _top(path: str) -> str:
    """The top-level column of a path such as ``c.f1``, ``c[].x`` or ``c.value``."""
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def _placeholder(dtype: pa.DataType) -> pa.Scalar:
    """Some valid value of ``dtype`` (what it is does not matter: it is never visible)."""
    if pa.types.is_struct(dtype):
        return pa.scalar({f.name: _placeholder(f.type).as_py() for f in dtype}, type=dtype)
    if pa.types.is_fixed_size_list(dtype):
        item = _placeholder(dtype.value_type).as_py()
        return pa.scalar([item] * dtype.list_size, type=dtype)
    if _is_list(dtype) or pa.types.is_map(dtype):
        return pa.scalar([], type=dtype)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return pa.scalar("", type=dtype)
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return pa.scalar(b"", type=dtype)
    if pa.types.is_fixed_size_binary(dtype):
        return pa.scalar(b"\0" * dtype.byte_width, type=dtype)
    if pa.types.is_boolean(dtype):
        return pa.scalar(False, type=dtype)
    if pa.types.is_date32(dtype) or pa.types.is_time32(dtype):
        return pa.scalar(0, pa.int32()).cast(dtype)
    if pa.types.is_decimal(dtype):
        return pa.scalar(decimal.Decimal(0), type=dtype)
    if pa.types.is_temporal(dtype):  # date64, time64, timestamps, durations
        return pa.scalar(0, pa.int64()).cast(dtype)
    return pa.scalar(0, pa.int8()).cast(dtype)  # numbers


def _strict_fixed_list(dtype: pa.DataType) -> bool:
    return pa.types.is_fixed_size_list(dtype) and not dtype.value_field.nullable


def _is_list(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
    )
