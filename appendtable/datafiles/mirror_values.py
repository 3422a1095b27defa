"""Values the Iceberg mirror cannot represent, refused when it is on.

Iceberg timestamps are microseconds in 64 bits; a ``timestamp[s]`` or ``timestamp[ms]`` column
reaches far beyond (year ±292,277 is the edge). Such a value would make the data file
unreadable to Iceberg readers, so with the mirror on a write holding one is refused with
SchemaMismatchError naming the column (and the field's path), before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from appendtable.datafiles.casting import map_entries
from appendtable.errors import SchemaMismatchError
from appendtable.planning.iceberg_metadata import MICROS_RANGE

__all__ = ["check_mirrorable_rows", "has_coarse_timestamp"]

_MICROS = {"s": 1_000_000, "ms": 1_000}


def check_mirrorable_rows(table: pa.Table) -> None:
    """SchemaMismatchError naming the column if a timestamp in seconds or milliseconds, at
    any depth, lies beyond Iceberg's microsecond range."""
    for field, column in zip(table.schema, table.columns, strict=True):
        if not has_coarse_timestamp(field.type):
            continue
        for chunk in column.chunks:
            for path, values in _coarse_leaves(chunk, field.name):
                per = _MICROS[values.type.unit]
                ticks = values.view(pa.int64())
                low, high = -(-MICROS_RANGE[0] // per), MICROS_RANGE[1] // per
                beyond = pc.fill_null(pc.or_(pc.less(ticks, low), pc.greater(ticks, high)), False)
                if pc.any(beyond).as_py():
                    example = ticks.filter(beyond)[0].as_py()
                    raise SchemaMismatchError(
                        f"column '{path}': the value {example} ({values.type.unit} from the epoch) "
                        "is beyond Iceberg's timestamps (microseconds in 64 bits), which the "
                        "table's Iceberg mirror ('metadata.iceberg.storage') must hold",
                        column=field.name,
                    )


def has_coarse_timestamp(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` holds a timestamp in seconds or milliseconds at any depth."""
    if pa.types.is_timestamp(dtype):
        return dtype.unit in _MICROS
    return any(has_coarse_timestamp(dtype.field(i).type) for i in range(dtype.num_fields))


def _coarse_leaves(array: pa.Array, path: str) -> Iterator[tuple[str, pa.Array]]:
    """(path, values) of every timestamp[s] / timestamp[ms] leaf below ``array`` (values under
    a null parent read as null)."""
    dtype = array.type
    if not has_coarse_timestamp(dtype):
        return
    if pa.types.is_timestamp(dtype):
        yield path, array
    elif pa.types.is_struct(dtype):
        for index, child in enumerate(array.flatten()):
            yield from _coarse_leaves(child, f"{path}.{dtype.field(index).name}")
    elif pa.types.is_map(dtype):
        entries = map_entries(array)
        yield from _coarse_leaves(entries.field(0), f"{path}.key")
        yield from _coarse_leaves(entries.field(1), f"{path}.value")
    else:  # the list types
        yield from _coarse_leaves(array.flatten(), f"{path}[]")
