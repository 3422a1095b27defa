"""Reading the command line's input files: Parquet, CSV and JSON lines, chosen by extension.

CSV and JSON values are parsed straight into the table's column types (``2024-05-01`` into a
date column, ``12.50`` into a decimal), so no intermediate inference can pick a wrong type.
Errors name the file and become :class:`InputError`.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from appendtable.cli.errors import InputError, UsageError

__all__ = ["INPUT_FORMATS", "InputFile", "format_of", "open_input", "read_schema"]

INPUT_FORMATS = ("parquet", "csv", "jsonl")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".parq": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
_BATCH_ROWS = 65_536


def format_of(path: str, explicit: str | None) -> str:
    if explicit is not None:
        return explicit
    extension = os.path.splitext(path)[1].lower()
    if extension not in _EXTENSIONS:
        raise UsageError(
            f"cannot tell the format of {path!r} from its extension (known: "
            f"{', '.join(sorted(_EXTENSIONS))}); give --format"
        )
    return _EXTENSIONS[extension]


def _problem(path: str, exc: BaseException) -> InputError:
    if isinstance(exc, OSError) and exc.strerror:
        return InputError(f"{path}: {exc.strerror}")
    message = " ".join(str(exc).split())
    return InputError(f"{path}: {message}")


def _csv_types(schema: pa.Schema) -> dict[str, pa.DataType]:
    """Column types CSV can be parsed into directly (nested ones cannot)."""
    return {f.name: f.type for f in schema if not pa.types.is_nested(f.type)}


def _json_type(dtype: pa.DataType) -> pa.DataType:
    """What pyarrow's JSON reader reads for a column of ``dtype``: dates and times as text
    (converted after), durations as integers, nested types likewise."""
    if pa.types.is_date(dtype) or pa.types.is_time(dtype):
        return pa.string()
    if pa.types.is_duration(dtype):
        return pa.int64()
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        item = dtype.value_field
        inner = item.with_type(_json_type(item.type))
        return pa.large_list(inner) if pa.types.is_large_list(dtype) else pa.list_(inner)
    if pa.types.is_struct(dtype):
        return pa.struct(
            [
                dtype.field(i).with_type(_json_type(dtype.field(i).type))
                for i in range(dtype.num_fields)
            ]
        )
    return dtype


def _from_json(column: pa.ChunkedArray, dtype: pa.DataType) -> pa.ChunkedArray:
    if pa.types.is_time(dtype):  # pyarrow cannot cast text to times
        try:
            times = [None if v is None else dt.time.fromisoformat(v) for v in column.to_pylist()]
        except ValueError as exc:
            raise pa.ArrowInvalid(f"not a time of day: {exc}") from exc
        return pa.chunked_array([pa.array(times, dtype)], dtype)
    return column.cast(dtype)


@dataclass
class InputFile:
    """An open input: ``batches()`` yields (batch, input bytes consumed so far)."""

    path: str
    fmt: str
    size: int
    schema: pa.Schema

    def batches(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below, also on errors
        except OSError as exc:
            raise _problem(self.path, exc) from exc
        with handle:
            reader = {"parquet": self._parquet, "csv": self._csv, "jsonl": self._jsonl}[self.fmt]
            batches = reader(handle)
            while True:
                try:
                    item = next(batches)
                except StopIteration:
                    return
                except (OSError, pa.ArrowException) as exc:
                    raise _problem(self.path, exc) from exc
                yield item

    def _parquet(self, handle: IO[bytes]) -> Iterator[tuple[pa.RecordBatch, int]]:
        file = pq.ParquetFile(handle)
        total = max(1, file.metadata.num_rows)
        done = 0
        for batch in file.iter_batches(batch_size=_BATCH_ROWS):
            done += batch.num_rows
            yield batch, self.size * done // total

    def _csv(self, handle: IO[bytes]) -> Iterator[tuple[pa.RecordBatch, int]]:
        present = pacsv.open_csv(
            handle, convert_options=pacsv.ConvertOptions(column_types=_csv_types(self.schema))
        )
        for batch in present:
            yield batch, min(self.size, handle.tell())

    def _jsonl(self, handle: IO[bytes]) -> Iterator[tuple[pa.RecordBatch, int]]:
        parse_schema = pa.schema([f.with_type(_json_type(f.type)) for f in self.schema])
        # Unexpected keys are read too, so that the writer rejects them by name.
        options = pajson.ParseOptions(
            explicit_schema=parse_schema, unexpected_field_behavior="infer"
        )
        table = pajson.read_json(handle, parse_options=options)
        for column in self.schema:
            if not parse_schema.field(column.name).type.equals(column.type):
                index = table.schema.get_field_index(column.name)
                table = table.set_column(
                    index, column.name, _from_json(table.column(index), column.type)
                )
        total = max(1, table.num_rows)
        done = 0
        for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
            done += batch.num_rows
            yield batch, self.size * done // total


def open_input(path: str, fmt: str | None, schema: pa.Schema) -> InputFile:
    """An input file to append to a table of ``schema``. Raises InputError if it is missing."""
    chosen = format_of(path, fmt)
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise _problem(path, exc) from exc
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory")
    return InputFile(path, chosen, size, schema)


def read_schema(path: str, fmt: str | None = None) -> pa.Schema:
    """The schema of a Parquet file (from its footer), or inferred from a CSV / JSON file."""
    chosen = format_of(path, fmt)
    try:
        if chosen == "parquet":
            schema = pq.read_schema(path)
        elif chosen == "csv":
            with pacsv.open_csv(path) as reader:
                schema = reader.schema
        else:
            schema = pajson.read_json(path).schema
    except (OSError, pa.ArrowException) as exc:
        raise _problem(path, exc) from exc
    return schema.remove_metadata()
