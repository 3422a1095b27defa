"""Reading the command line's input files: Parquet, CSV and JSON lines, chosen by extension.

CSV and JSON values are parsed straight into the table's column types (``2024-05-01`` into a
date column, ``12.50`` into a decimal), so no intermediate inference can pick a wrong type.
In CSV only an empty field is null, unless the caller lists other null markers: ``nan`` in a
float column is NaN and ``NA`` in a text column is text; a quoted empty field (``""``) is an
empty string. A number beyond the range of a float32 (or float16) column is refused rather
than read as infinity. A timestamp of a column with a time zone needs an offset, in JSON as in
CSV. Maps in JSON lines are objects or arrays of ``[key, value]`` pairs (``json_maps``).
Errors name the file, the column and the line of the file (``csv_lines``: a quoted CSV field
may span lines), and become :class:`InputError`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import io
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import IO, Any, Literal, assert_never, get_args

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from appendtable.cli.csv_lines import ragged_line, record_line
from appendtable.cli.input_errors import InputError, UsageError
from appendtable.cli.json_maps import entries_type, from_entries, has_map, rewrite_maps

__all__ = [
    "INPUT_FORMATS",
    "InputFormat",
    "NULL_VALUES",
    "STDIN",
    "InputFile",
    "format_of",
    "open_input",
    "read_schema",
]

InputFormat = Literal["parquet", "csv", "jsonl"]
INPUT_FORMATS: tuple[InputFormat, ...] = get_args(InputFormat)
_EXTENSIONS: dict[str, InputFormat] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".parq": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
_BATCH_ROWS = 65_536
#: The file name that stands for standard input.
STDIN = "-"
#: A quoted CSV value may hold line breaks, wherever it falls in the file (without this, only
#: in pyarrow's first block of it).
_CSV_PARSE = pacsv.ParseOptions(newlines_in_values=True)
#: The CSV texts read as null by default: only the empty field.
NULL_VALUES = ("",)


def format_of(path: str, explicit: InputFormat | None) -> InputFormat:
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
    """Column types CSV is parsed into: the table's (nested ones cannot be), but narrow floats
    as text, converted by ``_narrow_floats`` (pyarrow parses 1e300 into a float32 as inf)."""
    return {
        f.name: pa.string() if _is_narrow_float(f.type) else f.type
        for f in schema
        if not pa.types.is_nested(f.type)
    }


def _csv_options(schema: pa.Schema, null_values: tuple[str, ...]) -> pacsv.ConvertOptions:
    """Only ``null_values`` are null, in every column (text ones too); a quoted empty field is
    an empty string; pyarrow's own markers (``NA``, ``nan``, ``n/a``, ...) are values."""
    return pacsv.ConvertOptions(
        column_types=_csv_types(schema),
        null_values=list(null_values),
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )


def _is_narrow_float(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_float16(dtype) or pa.types.is_float32(dtype))


def _narrow_float(
    column: pa.Array | pa.ChunkedArray,
    dtype: pa.DataType,
    name: str,
    line_of: Callable[[int], int],
) -> pa.Array | pa.ChunkedArray:
    """Text or float64 values as a float32 / float16 column: the nearest value of the type
    (parsed straight from the text where there is text), NaN and infinities as written, and
    InputError naming the column and the line of a value that does not parse or is finite but
    beyond the type's range. ``line_of``: the line of a row."""
    try:
        wide = column.cast(pa.float64())
    except pa.ArrowInvalid:
        row = _first_failing_row(_whole(column), pa.float64())
        raise InputError(
            f"column '{name}', line {line_of(row)}: {column[row].as_py()!r} is not a valid number"
        ) from None
    narrow = column.cast(dtype) if not pa.types.is_float16(dtype) else wide.cast(dtype)
    beyond = pc.fill_null(pc.and_(pc.is_inf(narrow), pc.is_finite(wide)), False)
    if pc.any(beyond).as_py():
        row = pc.index(beyond, True).as_py()
        raise InputError(
            f"column '{name}', line {line_of(row)}: {column[row].as_py()!r} is beyond the "
            f"range of float{dtype.bit_width} (it would become infinite)"
        )
    return narrow


def _whole(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _json_type(dtype: pa.DataType) -> pa.DataType:
    """What pyarrow's JSON reader reads for a column of ``dtype``: dates, times and instants
    (timestamps with a time zone) as text (converted after: an instant needs an offset, as in
    CSV; pyarrow's JSON reader took one without as UTC), durations as integers, maps as their
    entries (``json_maps``), nested types likewise."""
    if pa.types.is_date(dtype) or pa.types.is_time(dtype):
        return pa.string()
    if pa.types.is_timestamp(dtype) and dtype.tz is not None:
        return pa.string()
    if pa.types.is_map(dtype):
        return entries_type(dtype, _json_type)
    if pa.types.is_duration(dtype):
        return pa.int64()
    if _is_narrow_float(dtype):
        return pa.float64()  # converted with a range check
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


def _from_json(column: pa.ChunkedArray, dtype: pa.DataType, name: str) -> pa.ChunkedArray:
    """A JSON column (read as text or integers) in the table's type; InputError naming the
    column and the line of the first value that does not convert."""
    if has_map(dtype):
        whole = column.combine_chunks()

        def convert(part: pa.Array) -> pa.Array:
            return from_entries(part, dtype, _leaf_from_json)

        try:
            return pa.chunked_array([convert(whole)], dtype)
        except (InputError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
            row = _first_failing(whole, convert)
        raise InputError(
            f"column '{name}', line {row + 1}: {_shown(whole[row].as_py())} is not a valid {dtype}"
        )
    if pa.types.is_time(dtype):  # pyarrow cannot cast text to times
        values = column.to_pylist()
        for line, value in enumerate(values, start=1):
            try:
                values[line - 1] = None if value is None else dt.time.fromisoformat(value)
            except ValueError:
                raise InputError(
                    f"column '{name}', line {line}: {value!r} is not a time of day"
                ) from None
        return pa.chunked_array([pa.array(values, dtype)], dtype)
    if _is_narrow_float(dtype):
        narrow = _narrow_float(column, dtype, name, lambda row: row + 1)
        assert isinstance(narrow, pa.ChunkedArray)
        return narrow
    try:
        return column.cast(dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        row = _first_failing_row(column.combine_chunks(), dtype)
        value = column[row].as_py()
        hint = ""
        if "zone offset" in str(exc):
            hint = " (a timestamp of a column with a time zone needs an offset: Z or +02:00)"
        raise InputError(
            f"column '{name}', line {row + 1}: {value!r} is not a valid {dtype}{hint}"
        ) from None


def _leaf_from_json(array: pa.Array, dtype: pa.DataType) -> pa.Array:
    return _from_json(pa.chunked_array([array], array.type), dtype, "").combine_chunks()


def _shown(value: object) -> str:
    """A value in an error message (a map as its pairs), cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _first_failing_row(column: pa.Array, dtype: pa.DataType) -> int:
    """The first row of ``column`` that does not cast to ``dtype``."""
    return _first_failing(column, lambda part: part.cast(dtype))


def _first_failing(column: pa.Array, convert: Callable[[pa.Array], object]) -> int:
    """The first row of ``column`` that ``convert`` refuses (a binary search over slices:
    vectorised conversions, never a Python step per row)."""
    low, high = 0, len(column)  # the failure lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            convert(column.slice(low, middle - low))
        except (InputError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
            high = middle
        else:
            low = middle
    return low


_CSV_COLUMN = re.compile(r"In CSV column #(\d+): (.*)", re.DOTALL)
_CSV_RAGGED = re.compile(r"Expected (\d+) columns, got \d+")
_JSON_COLUMN = re.compile(r"Column\(/([^)]*)\) (.*) in row (\d+)")


def _named_csv_problem(
    path: str,
    exc: pa.ArrowInvalid,
    schema: pa.Schema,
    null_values: tuple[str, ...],
    shown: str,
) -> InputError | None:
    """pyarrow's CSV conversion errors by column number, as column name and line (``path``:
    the file to read again, ``shown``: its name in the message)."""
    match = _CSV_COLUMN.search(str(exc))
    try:
        with pacsv.open_csv(path, parse_options=_CSV_PARSE) as reader:
            header = reader.schema.names  # the file's order, which the number counts in
    except (OSError, pa.ArrowException):
        return None
    if match is None or int(match.group(1)) >= len(header):
        return None
    name = header[int(match.group(1))]
    line = None
    if name in schema.names:
        record = _csv_record(path, name, schema.field(name).type, null_values)
        if record is not None:
            line = record_line(path, record, int(match.group(1)))
    where = f", line {line}" if line is not None else ""
    detail = " ".join(match.group(2).split())
    return InputError(f"{shown}: column '{name}'{where}: {detail}")


def _csv_record(
    path: str, name: str, dtype: pa.DataType, null_values: tuple[str, ...]
) -> int | None:
    """The record (0 = the first after the header) of the first value of column ``name`` that
    does not convert to ``dtype``, found by reading that column as text and casting slices."""
    try:
        text = pacsv.read_csv(
            path,
            parse_options=_CSV_PARSE,
            convert_options=pacsv.ConvertOptions(
                include_columns=[name],
                column_types={name: pa.string()},
                null_values=list(null_values),
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        ).column(name)
    except (OSError, pa.ArrowException, ValueError):
        return None
    return _first_failing_row(text.combine_chunks(), dtype)


class _CopiedInput(io.RawIOBase):
    """Standard input, copied into a temporary file as it is read, so that an error message
    can read again what was read (to name the line of a bad value); the copy is removed when
    the input is closed."""

    def __init__(self, source: IO[bytes]) -> None:
        super().__init__()
        self._source = source
        self._copy = tempfile.NamedTemporaryFile(prefix="appendtable-stdin-")  # noqa: SIM115

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:  # any writable buffer (typeshed's private type)
        data = self._source.read(len(memoryview(buffer)))
        memoryview(buffer)[: len(data)] = data
        self._copy.write(data)
        return len(data)

    def read_so_far(self) -> str:
        """The copy's path, cut after its last complete line (the reader may have stopped
        inside a record)."""
        self._copy.flush()
        with open(self._copy.name, "rb+") as copy:
            data = copy.read()
            copy.truncate(data.rfind(b"\n") + 1)
        return self._copy.name

    def close(self) -> None:
        self._copy.close()
        super().close()


@dataclass
class InputFile:
    """An open input: ``batches()`` yields (batch, input bytes consumed so far)."""

    path: str
    fmt: InputFormat
    size: int
    schema: pa.Schema
    null_values: tuple[str, ...] = NULL_VALUES
    _copy: _CopiedInput | None = dataclass_field(default=None, init=False, repr=False)

    def batches(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        with contextlib.ExitStack() as stack:
            copy: _CopiedInput | None = None
            if self.path == STDIN:
                handle: IO[bytes] = sys.stdin.buffer
                if self.fmt == "parquet":  # Parquet is read from its end: not from a pipe
                    handle = io.BytesIO(handle.read())
                else:
                    copy = stack.enter_context(_CopiedInput(handle))
                    handle = io.BufferedReader(copy)
            else:
                try:
                    handle = stack.enter_context(open(self.path, "rb"))
                except OSError as exc:
                    raise _problem(self.path, exc) from exc
            self._copy = copy
            reader = {"parquet": self._parquet, "csv": self._csv, "jsonl": self._jsonl}[self.fmt]
            batches = reader(handle)
            while True:
                try:
                    item = next(batches)
                except StopIteration:
                    return
                except InputError as exc:
                    raise InputError(f"{self.path}: {exc}") from exc
                except (OSError, pa.ArrowException) as exc:
                    raise self._named(exc) from exc
                yield item

    def _named(self, exc: OSError | pa.ArrowException) -> InputError:
        """The error, naming the column and the line where pyarrow gives their numbers (for
        standard input, from the copy of what was read of it)."""
        reread = self._rereadable()
        if self.fmt == "csv" and isinstance(exc, pa.ArrowInvalid) and reread is not None:
            ragged = _CSV_RAGGED.search(str(exc))
            line = ragged_line(reread, int(ragged.group(1))) if ragged is not None else None
            if line is not None:
                return InputError(f"{self.path}: line {line}: {' '.join(str(exc).split())}")
            named = _named_csv_problem(reread, exc, self.schema, self.null_values, self.path)
            if named is not None:
                return named
        if self.fmt == "jsonl":
            match = _JSON_COLUMN.search(str(exc))
            if match is not None:
                name, problem, row = match.group(1), match.group(2), int(match.group(3))
                name = name.replace("/", ".")  # a struct field's path
                top = name.split(".", 1)[0]
                if top in self.schema.names and has_map(self.schema.field(top).type):
                    name = top  # the path runs through a map's entries (json_maps)
                return InputError(f"{self.path}: column '{name}', line {row + 1}: {problem}")
            if reread is not None:
                located = _json_problem(reread, self.schema)
                if located is not None:
                    return InputError(f"{self.path}: {located}")
        return _problem(self.path, exc)

    def _parquet(self, handle: IO[bytes]) -> Iterator[tuple[pa.RecordBatch, int]]:
        file = pq.ParquetFile(handle)
        total = max(1, file.metadata.num_rows)
        done = 0
        for batch in file.iter_batches(batch_size=_BATCH_ROWS):
            done += batch.num_rows
            yield batch, self.size * done // total

    def _csv(self, handle: IO[bytes]) -> Iterator[tuple[pa.RecordBatch, int]]:
        present = pacsv.open_csv(
            handle,
            parse_options=_CSV_PARSE,
            convert_options=_csv_options(self.schema, self.null_values),
        )
        narrow = [f for f in self.schema if _is_narrow_float(f.type)]
        header = present.schema.names
        extra = [name for name in header if name not in self.schema.names]
        if extra:
            raise InputError(f"column '{extra[0]}', line 1 (the header): {self._not_a_column()}")
        done = 0  # records before the batch
        for batch in present:
            for field in narrow:
                index = batch.schema.get_field_index(field.name)
                if index >= 0:
                    converted = _narrow_float(
                        batch.column(index),
                        field.type,
                        field.name,
                        functools.partial(self._line, done, header.index(field.name)),
                    )
                    batch = batch.set_column(index, field.name, converted)
            done += batch.num_rows
            yield batch, min(self.size, handle.tell()) if handle.seekable() else 0

    def _line(self, before: int, field: int, row: int) -> int:
        """The line of a CSV field: that of record ``before + row``, whose fields may span
        lines (from standard input, the copy of what was read so far)."""
        record = before + row
        reread = self._rereadable()
        found = record_line(reread, record, field) if reread is not None else None
        return found if found is not None else record + 2

    def _rereadable(self) -> str | None:
        """The file to read again for an error message: the input, or the copy of what was
        read of standard input (None: Parquet from standard input, held in memory)."""
        if self._copy is not None:
            return self._copy.read_so_far()
        return None if self.path == STDIN else self.path

    def _not_a_column(self) -> str:
        return f"not a column of the table (table columns: {', '.join(self.schema.names)})"

    def _jsonl(self, handle: IO[bytes]) -> Iterator[tuple[pa.RecordBatch, int]]:
        table = _read_jsonl(handle, self.schema)
        extra = [name for name in table.schema.names if name not in self.schema.names]
        reread = self._rereadable() if extra else None
        located = _json_unknown_key(reread, self.schema) if reread is not None else None
        if located is not None:
            line, key = located
            raise InputError(f"column '{key}', line {line}: {self._not_a_column()}")
        total = max(1, table.num_rows)
        done = 0
        for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
            done += batch.num_rows
            yield batch, self.size * done // total


def _read_jsonl(source: IO[bytes], schema: pa.Schema, unknown: str = "infer") -> pa.Table:
    """JSON lines as a table of ``schema``'s types (keys it lacks read too, so that the
    writer refuses them by name; ``unknown="ignore"`` leaves them out)."""
    parse_schema = pa.schema([f.with_type(_json_type(f.type)) for f in schema])
    options = pajson.ParseOptions(explicit_schema=parse_schema, unexpected_field_behavior=unknown)
    if any(has_map(f.type) for f in schema):
        source = io.BytesIO(rewrite_maps(source.read(), schema))
    table = pajson.read_json(source, parse_options=options)
    for column in schema:
        if not parse_schema.field(column.name).type.equals(column.type):
            index = table.schema.get_field_index(column.name)
            converted = _from_json(table.column(index), column.type, column.name)
            table = table.set_column(index, column.name, converted)
    return table


def _json_problem(path: str, schema: pa.Schema) -> str | None:
    """Where a JSON-lines file fails to read: the first failing line (by bisection over its
    lines: only on the error path) and, when one column alone fails there, its name."""
    lines = _lines_of(path)
    if lines is None:
        return None

    def fails(chunk: list[bytes], fields: pa.Schema = schema, unknown: str = "infer") -> str | None:
        try:
            _read_jsonl(io.BytesIO(b"".join(chunk)), fields, unknown)
        except (InputError, pa.ArrowException) as exc:
            return " ".join(str(exc).split())
        return None

    low = _first_failing_line(lines, lambda chunk: fails(chunk) is not None)
    if low is None:
        return None
    line = [lines[low]]
    problem = re.sub(r" in row \d+$", "", fails(line) or "")
    for field in schema:
        alone = fails(line, pa.schema([field]))
        others = pa.schema([f for f in schema if f != field])
        if alone is not None and fails(line, others, "ignore") is None:
            detail = alone.split(": ", 1)[-1] if alone.startswith("column '") else alone
            return f"column '{field.name}', line {low + 1}: {detail}"
    return f"line {low + 1}: {problem}"


def _json_unknown_key(path: str, schema: pa.Schema) -> tuple[int, str] | None:
    """The first line (1 = the first) of a JSON-lines file holding a key that ``schema``
    lacks, and that key (only on the error path)."""
    lines = _lines_of(path)
    if lines is None:
        return None

    def unexpected(chunk: list[bytes]) -> bool:
        try:
            _read_jsonl(io.BytesIO(b"".join(chunk)), schema, "error")
        except (InputError, pa.ArrowException):
            return True
        return False

    low = _first_failing_line(lines, unexpected)
    if low is None:
        return None
    try:
        keys = _read_jsonl(io.BytesIO(lines[low]), schema).schema.names
    except (InputError, pa.ArrowException):
        return None
    extra = [key for key in keys if key not in schema.names]
    return (low + 1, extra[0]) if extra else None


def _lines_of(path: str) -> list[bytes] | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().splitlines(keepends=True)
    except OSError:
        return None


def _first_failing_line(lines: list[bytes], fails: Callable[[list[bytes]], bool]) -> int | None:
    """The index of the first line at which ``fails`` holds for the lines up to it (by
    bisection: ``fails`` holds for every longer prefix once it holds); None if never."""
    low, high = 0, len(lines)  # the first failing line lies in [low, high)
    if not fails(lines):
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if fails(lines[:middle]):
            high = middle
        else:
            low = middle
    return low


def open_input(
    path: str,
    fmt: InputFormat | None,
    schema: pa.Schema,
    null_values: tuple[str, ...] = NULL_VALUES,
) -> InputFile:
    """An input file to append to a table of ``schema`` (``-``: standard input, which needs
    an explicit format); ``null_values``: the CSV texts read as null. Raises InputError if it
    is missing."""
    if path == STDIN:
        if fmt is None:
            raise UsageError("reading standard input ('-') needs --format (parquet, csv, jsonl)")
        return InputFile(path, fmt, 0, schema, null_values)
    chosen = format_of(path, fmt)
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise _problem(path, exc) from exc
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory")
    return InputFile(path, chosen, size, schema, null_values)


def read_schema(path: str, fmt: InputFormat | None = None) -> pa.Schema:
    """The schema of a Parquet file (from its footer), or inferred from a CSV / JSON file."""
    chosen = format_of(path, fmt)
    try:
        match chosen:
            case "parquet":
                schema = pq.read_schema(path)
            case "csv":
                inference = pacsv.ConvertOptions(
                    null_values=list(NULL_VALUES),
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=False,
                )
                with pacsv.open_csv(
                    path, parse_options=_CSV_PARSE, convert_options=inference
                ) as reader:
                    schema = reader.schema
            case "jsonl":
                schema = _json_schema(path)
            case _:
                assert_never(chosen)
    except (OSError, pa.ArrowException) as exc:
        raise _problem(path, exc) from exc
    return schema.remove_metadata()


#: What pyarrow's CSV reader infers from text columns, in its order (JSON leaves them text).
_TEXT_INFERENCE = (pa.date32(), pa.time32("s"), pa.timestamp("s"), pa.timestamp("ns"))


def _json_schema(path: str) -> pa.Schema:
    """JSON lines' schema, inferred as for CSV: pyarrow's JSON reader turns every ISO date into
    a timestamp, so such columns are read again as text and typed by CSV's rules."""
    inferred = pajson.read_json(path).schema
    texts = {f.name: pa.string() for f in inferred if pa.types.is_timestamp(f.type)}
    if not texts:
        return _inferred_like_csv(pajson.read_json(path))
    explicit = pa.schema([f.with_type(texts.get(f.name, f.type)) for f in inferred])
    options = pajson.ParseOptions(explicit_schema=explicit)
    return _inferred_like_csv(pajson.read_json(path, parse_options=options))


def _inferred_like_csv(table: pa.Table) -> pa.Schema:
    """The schema of JSON lines, with text columns typed as CSV inference types them: a
    column whose every value is a date becomes ``date32`` (and so on for times and
    timestamps), so ``--schema-from`` agrees for both formats."""
    fields = []
    for field in table.schema:
        dtype = field.type
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
            column = table.column(field.name)
            for candidate in _TEXT_INFERENCE:
                try:
                    column.cast(candidate)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue
                dtype = candidate
                break
        fields.append(field.with_type(dtype))
    return pa.schema(fields)
