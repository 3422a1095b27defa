"""Casting an input column to its table type, value for value, without silent changes.

Arrow's safe cast refuses most lossy casts (integer overflow, truncated timestamps, decimal
rescaling with data loss), but not all, and it cannot take every input form. This module adds:

* :func:`plain`: dictionary arrays decoded (of every value type: Polars' Categorical and Enum
  are dictionaries of ``string_view``) and view arrays as their plain types, at any depth, so
  Arrow's cast accepts them wherever their values fit;
* :func:`cast_column`: decimals become floats through their exact text (Arrow parses text to
  the nearest float; its decimal-to-float cast is off by one unit in the last place for many
  values), then :func:`check_cast` refuses what Arrow's cast (or the Parquet writer) changes
  silently: a finite value that became infinite (float64 beyond float32's range), an integer
  beyond 2^11 into float16 (Arrow checks 2^24 for float32 and 2^53 for float64, not this), a
  decimal whose rescaling overflowed (``decimal(1, 0)`` 7 into ``decimal(38, 38)`` came out as
  garbage) or that holds more digits than its type's precision (pyarrow's CSV and JSON readers
  make such arrays: ``1000`` read as ``decimal(5, 2)``), a ``date64`` that is not a whole
  number of days or is beyond ±2^31 days (Parquet stores dates as 32-bit days), and seconds
  timestamps beyond the range of milliseconds, the unit Parquet stores them in.

A finite float that merely rounds to the nearest value of a narrower float is kept, as every
engine's cast does. Every refusal is a SchemaMismatchError naming the column (and the path of
the nested field).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.nested_nulls import fill_hidden_nulls_for
from appendtable.errors import SchemaMismatchError

__all__ = ["cast_column", "check_cast", "map_entries", "needs_check", "needs_plain", "plain"]

#: Seconds Parquet can store: pyarrow writes ``timestamp[s]`` as milliseconds.
_SECONDS_LIMIT = (2**63 - 1) // 1000
#: The largest integer magnitude a float16 holds with every integer below it (as Arrow checks
#: 2^24 for float32 and 2^53 for float64).
_FLOAT16_INTEGERS = 2**11
_MS_PER_DAY = 86_400_000
#: The milliseconds of the first and last day Parquet's 32-bit dates hold.
_DATE64_RANGE = (-(2**31) * _MS_PER_DAY, (2**31 - 1) * _MS_PER_DAY)


def needs_plain(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` holds a dictionary or view type at any depth."""
    if (
        pa.types.is_dictionary(dtype)
        or pa.types.is_string_view(dtype)
        or pa.types.is_binary_view(dtype)
        or pa.types.is_list_view(dtype)
        or pa.types.is_large_list_view(dtype)
    ):
        return True
    return any(needs_plain(dtype.field(i).type) for i in range(dtype.num_fields))


def plain(array: pa.Array) -> pa.Array:
    """``array`` with dictionaries decoded and views as their plain large types, at any depth
    (values, nulls and offsets unchanged)."""
    dtype = array.type
    if not needs_plain(dtype):
        return array
    if pa.types.is_dictionary(dtype):
        return plain(pc.take(plain(array.dictionary), array.indices))
    if pa.types.is_string_view(dtype):
        return array.cast(pa.large_string())
    if pa.types.is_binary_view(dtype):
        return array.cast(pa.large_binary())
    mask = array.is_null() if array.null_count else None
    if pa.types.is_list_view(dtype) or pa.types.is_large_list_view(dtype):
        lengths = pc.fill_null(pc.list_value_length(array), 0)
        offsets = pa.concat_arrays(
            [pa.array([0], pa.int64()), pc.cumulative_sum(lengths.cast(pa.int64()))]
        )
        values = plain(array.flatten())
        if pa.types.is_list_view(dtype):
            return pa.ListArray.from_arrays(offsets.cast(pa.int32()), values, mask=mask)
        return pa.LargeListArray.from_arrays(offsets, values, mask=mask)
    if pa.types.is_struct(dtype):
        children = [plain(array.field(i)) for i in range(dtype.num_fields)]
        fields = [dtype.field(i).with_type(child.type) for i, child in enumerate(children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if pa.types.is_fixed_size_list(dtype):
        size = dtype.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        return pa.FixedSizeListArray.from_arrays(plain(values), size, mask=mask)
    offsets, window = _rebased(array)
    if pa.types.is_map(dtype):
        keys, items = (plain(child.slice(*window)) for child in (array.keys, array.items))
        return pa.MapArray.from_arrays(offsets, keys, items, mask=mask)
    values = plain(array.values.slice(*window))
    if pa.types.is_large_list(dtype):
        return pa.LargeListArray.from_arrays(offsets, values, mask=mask)
    return pa.ListArray.from_arrays(offsets, values, mask=mask)


def _rebased(array: pa.Array) -> tuple[pa.Array, tuple[int, int]]:
    """A list or map array's offsets starting at 0, and the (start, length) of its values in
    the whole child arrays (a slice's offsets index into them)."""
    offsets = array.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, pa.scalar(first, offsets.type)), (first, last - first)


def map_entries(array: pa.MapArray) -> pa.StructArray:
    """The key-value entries of the maps that are not null, in order (of a slice too: its
    offsets are rebased onto the entries it spans)."""
    offsets, window = _rebased(array)
    keys, items = (child.slice(*window) for child in (array.keys, array.items))
    entries = pa.StructArray.from_arrays([keys, items], names=["key", "value"])
    mask = array.is_null() if array.null_count else None
    return pa.ListArray.from_arrays(offsets, entries, mask=mask).flatten()


def cast_column(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    """``column`` cast to ``field.type`` (safe), refusing silent changes (see the module).
    Raises SchemaMismatchError naming the column; ArrowInvalid from the cast itself is left to
    the caller."""
    target = field.type
    chunks = [plain(chunk) for chunk in column.chunks]
    source_type = chunks[0].type if chunks else column.type
    source = fill_hidden_nulls_for(pa.chunked_array(chunks, type=source_type), target, field.name)
    if pa.types.is_decimal(source_type) and pa.types.is_floating(target):
        cast = pc.cast(pc.cast(source, pa.string()), target, safe=True)
    elif pa.types.is_integer(source_type) and pa.types.is_decimal(target) and target.scale >= 0:
        # Arrow refuses an integer type whose widest value would not fit, whatever the values
        # (int64 into decimal(10, 2) needs precision 21): go through a decimal wide enough for
        # every value, whose narrowing to the target is checked value by value below.
        cast = pc.cast(pc.cast(source, _decimal_for_integers(source_type, target.scale)), target)
    elif source_type == target:
        cast = source
    else:
        cast = pc.cast(source, target, safe=True)
    check_cast(source, cast, field)
    return cast


def _decimal_for_integers(integer: pa.DataType, scale: int) -> pa.DataType:
    """A decimal type of ``scale`` that holds every value of ``integer`` exactly."""
    precision = len(str(2**integer.bit_width)) + scale
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(min(precision, 76), scale)


def check_cast(source: pa.ChunkedArray, cast: pa.ChunkedArray, field: pa.Field) -> None:
    """SchemaMismatchError naming the column if ``cast`` (``source`` in the table's type)
    changed a value silently, or holds seconds beyond what Parquet can store."""
    if not _has_leaf(field.type, _checked):
        return
    before = _whole(source)
    after = _whole(cast)
    for path, old, new in _leaves(before, after, field.name):
        _check_leaf(path, old, new, field.name)


def _checked(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_floating(dtype)
        or pa.types.is_decimal(dtype)
        or pa.types.is_date64(dtype)
        or (pa.types.is_timestamp(dtype) and dtype.unit == "s")
    )


def needs_check(dtype: pa.DataType) -> bool:
    """Whether values of ``dtype`` are checked even when the input has the table's type:
    decimals (their precision), ``date64`` (whole days) and ``timestamp[s]`` (the range of
    milliseconds), at any depth."""
    return _has_leaf(
        dtype,
        lambda t: bool(
            pa.types.is_decimal(t)
            or pa.types.is_date64(t)
            or (pa.types.is_timestamp(t) and t.unit == "s")
        ),
    )


def _check_leaf(path: str, old: pa.Array, new: pa.Array, column: str) -> None:
    new_type = new.type
    if pa.types.is_float16(new_type) and pa.types.is_integer(old.type):
        wide = old.cast(pa.int64()) if not pa.types.is_uint64(old.type) else old
        beyond = pc.fill_null(
            pc.or_(
                pc.greater(wide, _FLOAT16_INTEGERS),
                pc.less(wide, -_FLOAT16_INTEGERS)
                if pa.types.is_signed_integer(wide.type)
                else pa.scalar(False),
            ),
            False,
        )
        _refuse_any(
            beyond,
            old,
            column,
            lambda count, example: (
                f"column '{path}': {count} integer(s) such as {example} are beyond ±2^11, "
                "where the table's type float16 would round them"
            ),
        )
    if pa.types.is_floating(new_type):
        changed = pc.is_inf(new)
        if pa.types.is_floating(old.type):
            changed = pc.and_(changed, pc.invert(pc.is_inf(old)))
        _refuse_any(
            pc.fill_null(changed, False),
            old,
            column,
            lambda count, example: (
                f"column '{path}': {count} value(s) such as {example!r} are beyond the range "
                f"of the table's type float{new_type.bit_width} and would become infinite"
            ),
        )
    elif pa.types.is_decimal(new_type):
        changed = _beyond_precision(new)
        if pa.types.is_decimal(old.type) and old.type != new_type:
            # compared in a type holding both exactly (a widening cast checks nothing)
            common = pa.decimal256(76, max(old.type.scale, new_type.scale))
            try:
                equal = pc.equal(old.cast(common), new.cast(common))
                changed = pc.or_(changed, pc.invert(pc.fill_null(equal, True)))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                changed = new.is_valid()  # cannot tell which: every value is suspect
        _refuse_any(
            changed,
            old,
            column,
            lambda count, example: (
                f"column '{path}': {count} value(s) such as {example!r} do not fit the "
                f"table's type decimal({new_type.precision}, {new_type.scale})"
            ),
        )
    elif pa.types.is_date64(new_type):
        millis = new.view(pa.int64())
        low, high = _DATE64_RANGE
        whole_days = pc.multiply(pc.divide(millis, _MS_PER_DAY), _MS_PER_DAY)  # toward zero
        odd = pc.or_(
            pc.not_equal(millis, whole_days),
            pc.or_(pc.less(millis, low), pc.greater(millis, high)),
        )
        _refuse_any(
            pc.fill_null(odd, False),
            millis,
            column,
            lambda count, example: (
                f"column '{path}': {count} date64 value(s) such as {example} milliseconds are "
                "not a whole number of days within ±2^31 days, which is all a date column "
                "stores (Parquet stores dates as 32-bit days)"
            ),
        )
    elif pa.types.is_timestamp(new_type) and new_type.unit == "s":
        seconds = new.view(pa.int64())
        beyond = pc.fill_null(
            pc.or_(pc.greater(seconds, _SECONDS_LIMIT), pc.less(seconds, -_SECONDS_LIMIT)), False
        )
        _refuse_any(
            beyond,
            seconds,
            column,
            lambda count, example: (
                f"column '{path}': {count} value(s) such as {example} seconds from the epoch "
                "are beyond what Parquet stores (it stores seconds as milliseconds in 64 bits)"
            ),
        )


def _beyond_precision(values: pa.Array) -> pa.Array:
    """Which decimals hold more digits than their type's precision (an array that does not
    validate: a reader parsed ``1000`` into ``decimal(5, 2)``), false for nulls."""
    dtype = values.type
    if len(values) == 0 or dtype.precision >= 76:
        return pa.array([False] * len(values), pa.bool_())
    wide = pa.decimal256(76, dtype.scale)
    limit = pa.scalar(decimal.Decimal(10) ** (dtype.precision - dtype.scale), wide)
    magnitude = pc.abs(values.cast(wide))  # widening: no check, no overflow
    return pc.fill_null(pc.greater_equal(magnitude, limit), False)


def _refuse_any(
    changed: pa.Array, values: pa.Array, column: str, message: Callable[[int, object], str]
) -> None:
    count = pc.sum(changed).as_py() or 0
    if count:
        example = values.filter(changed)[0].as_py()
        raise SchemaMismatchError(message(count, example), column=column)


def _whole(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks == 0:
        return pa.array([], column.type)
    return pa.concat_arrays(column.chunks)


def _has_leaf(dtype: pa.DataType, wanted: Callable[[pa.DataType], bool]) -> bool:
    if wanted(dtype):
        return True
    return any(_has_leaf(dtype.field(i).type, wanted) for i in range(dtype.num_fields))


def _leaves(old: pa.Array, new: pa.Array, path: str) -> Iterator[tuple[str, pa.Array, pa.Array]]:
    """(path, source values, cast values) of every checked leaf of ``new``, aligned value for
    value with the source's, leaving out values under a null parent."""
    if pa.types.is_null(old.type):
        return  # no values
    new_type = new.type
    if _checked(new_type):
        yield path, old, new
    elif pa.types.is_struct(new_type):
        old_children, new_children = old.flatten(), new.flatten()
        for i in range(new_type.num_fields):
            name = new_type.field(i).name
            index = old.type.get_field_index(name)
            yield from _leaves(old_children[index], new_children[i], f"{path}.{name}")
    elif pa.types.is_map(new_type):
        old_entries, new_entries = map_entries(old), map_entries(new)
        yield from _leaves(old_entries.field(0), new_entries.field(0), f"{path}.key")
        yield from _leaves(old_entries.field(1), new_entries.field(1), f"{path}.value")
    elif _has_leaf(new_type, _checked):  # the list types
        yield from _leaves(old.flatten(), new.flatten(), f"{path}.element")
