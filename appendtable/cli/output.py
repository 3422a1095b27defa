"""Output of the command line: aligned text tables, CSV, JSON lines, and progress lines.

Every writer takes record batches as they come, so a scan or a stream is printed while it is
read. The text table sizes its columns on the first rows it sees and truncates wide cells.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import time
import unicodedata
from collections.abc import Iterable, Sequence
from typing import IO, Literal, Protocol, assert_never, get_args

import pyarrow as pa

__all__ = [
    "plural",
    "FORMATS",
    "OutputFormat",
    "Progress",
    "RowWriter",
    "cell_text",
    "format_bytes",
    "make_writer",
    "progress_bar",
    "print_pairs",
    "write_rows",
]

OutputFormat = Literal["table", "csv", "jsonl"]
FORMATS: tuple[OutputFormat, ...] = get_args(OutputFormat)
MAX_CELL_WIDTH = 40
#: The text table measures its columns on this many rows, then streams the rest.
MEASURE_ROWS = 500


def format_bytes(size: float) -> str:
    if abs(size) < 1024:
        return f"{int(size)} B"
    size /= 1024
    for unit in ("KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _iso(moment: dt.datetime, sep: str) -> str:
    """ISO 8601 with as many fractional digits as needed, UTC as Z."""
    if moment.microsecond == 0:
        spec = "seconds"
    elif moment.microsecond % 1000 == 0:
        spec = "milliseconds"
    else:
        spec = "microseconds"
    return moment.isoformat(sep=sep, timespec=spec).replace("+00:00", "Z")


def _jsonable(value: object) -> object:
    """A JSON-ready value: ISO dates and times, decimals as strings (exact), binary as 0x-hex,
    map entries as [key, value] pairs."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime):
        return _iso(value, "T")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def cell_text(value: object, *, null: str = "null") -> str:
    """One value as text: ISO dates (UTC as Z), exact decimals, 0x-hex binary, nested values
    as JSON."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return _iso(value, " ")
    if isinstance(value, dict | list | tuple):
        return json.dumps(_jsonable(value), ensure_ascii=False)
    jsonable = _jsonable(value)
    return jsonable if isinstance(jsonable, str) else str(jsonable)


class RowWriter(Protocol):
    def write(self, batch: pa.RecordBatch | pa.Table) -> None: ...

    def close(self) -> None: ...


def plural(count: int, word: str) -> str:
    """``1 row``, ``400,052 rows``: counts everywhere in one form."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: wide (CJK, emoji) characters two, combining marks and
    zero-width characters none."""
    if text.isascii():
        return len(text)
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _is_numeric(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)
    )


class TextTable:
    """An aligned text table: numbers right-aligned, cells cut at ``max_width`` with '…'."""

    def __init__(
        self,
        out: IO[str],
        schema: pa.Schema,
        *,
        max_width: int = MAX_CELL_WIDTH,
        footer: bool = True,
    ) -> None:
        self._out = out
        self._names = list(schema.names)
        self._right = [_is_numeric(field.type) for field in schema]
        self._max = max(4, max_width)
        self._footer = footer
        self._pending: list[list[str]] = []
        self._widths: list[int] | None = None
        self.rows = 0

    def _cut(self, text: str, width: int) -> str:
        text = text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", " ")
        if display_width(text) <= width:
            return text
        kept, used = [], 0
        for char in text:
            wide = display_width(char)
            if used + wide > width - 1:
                break
            kept.append(char)
            used += wide
        return "".join(kept) + "…"

    def _line(self, cells: Sequence[str]) -> str:
        assert self._widths is not None
        parts = []
        for cell, width, right in zip(cells, self._widths, self._right, strict=True):
            cut = self._cut(cell, width)
            padding = " " * (width - display_width(cut))
            parts.append(padding + cut if right else cut + padding)
        return "  ".join(parts).rstrip()

    def _start(self) -> None:
        widths = [display_width(name) for name in self._names]
        for row in self._pending:
            widths = [max(w, display_width(c)) for w, c in zip(widths, row, strict=True)]
        self._widths = [min(w, self._max) for w in widths]
        right = self._right
        self._right = [False] * len(self._names)
        self._out.write(self._line(self._names) + "\n")
        self._right = right
        self._out.write("  ".join("-" * w for w in self._widths) + "\n")
        for row in self._pending:
            self._out.write(self._line(row) + "\n")
        self._pending = []

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        for row in batch.to_pylist():
            cells = [cell_text(row[name]) for name in self._names]
            self.rows += 1
            if self._widths is None:
                self._pending.append(cells)
                if len(self._pending) >= MEASURE_ROWS:
                    self._start()
            else:
                self._out.write(self._line(cells) + "\n")

    def close(self) -> None:
        if self._widths is None:
            self._start()
        if self._footer:
            self._out.write(f"({self.rows:,} row{'' if self.rows == 1 else 's'})\n")


class CsvRows:
    """RFC 4180 CSV with a header; nulls are empty fields."""

    def __init__(self, out: IO[str], schema: pa.Schema, *, header: bool = True) -> None:
        self._writer = csv.writer(out, lineterminator="\n")
        self._names = list(schema.names)
        if header:
            self._writer.writerow(self._names)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        for row in batch.to_pylist():
            self._writer.writerow(cell_text(row[name], null="") for name in self._names)

    def close(self) -> None:
        pass


class JsonLines:
    """One JSON object per row."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        for row in batch.to_pylist():
            self._out.write(json.dumps(_jsonable(row), ensure_ascii=False) + "\n")

    def close(self) -> None:
        pass


def make_writer(
    fmt: OutputFormat, out: IO[str], schema: pa.Schema, *, header: bool = True, footer: bool = True
) -> RowWriter:
    match fmt:
        case "csv":
            return CsvRows(out, schema, header=header)
        case "jsonl":
            return JsonLines(out)
        case "table":
            return TextTable(out, schema, footer=footer)
        case _:
            assert_never(fmt)


def write_rows(
    fmt: OutputFormat,
    out: IO[str],
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch | pa.Table],
    *,
    limit: int | None = None,
) -> int:
    """Print batches (at most ``limit`` rows); returns the number of rows printed. Stops
    reading as soon as the limit is reached."""
    writer = make_writer(fmt, out, schema)
    printed = 0
    for batch in batches:
        if limit is not None and printed + batch.num_rows > limit:
            batch = batch.slice(0, limit - printed)
        writer.write(batch)
        printed += batch.num_rows
        if limit is not None and printed >= limit:
            break
    writer.close()
    return printed


def print_pairs(out: IO[str], pairs: Iterable[tuple[str, object]]) -> None:
    """``label  value`` lines with aligned values."""
    listed = [(label, cell_text(value, null="-")) for label, value in pairs]
    width = max((len(label) for label, _ in listed), default=0)
    for label, value in listed:
        out.write(f"{label.ljust(width)}  {value}\n")


def progress_bar(fraction: float, width: int = 24) -> str:
    fraction = min(1.0, max(0.0, fraction))
    filled = round(fraction * width)
    return "[" + "#" * filled + "-" * (width - filled) + f"] {fraction * 100:3.0f}%"


class Progress:
    """Progress on stderr. On a terminal: one line redrawn with ``\\r`` (at most every
    ``interval`` seconds); elsewhere (logs, pipes) only the final line of each item."""

    def __init__(self, out: IO[str], *, enabled: bool = True, interval: float = 0.1) -> None:
        self._out = out
        self._enabled = enabled
        self._tty = enabled and out.isatty()
        self._interval = interval
        self._last = 0.0
        self._width = 0

    def update(self, text: str) -> None:
        if not self._tty:
            return
        now = time.monotonic()
        if now - self._last < self._interval:
            return
        self._last = now
        self._draw(text)

    def _draw(self, text: str) -> None:
        self._out.write("\r" + text.ljust(self._width))
        self._width = len(text)
        self._out.flush()

    def done(self, text: str) -> None:
        if not self._enabled:
            return
        if self._tty:
            self._draw(text)
            self._out.write("\n")
            self._width = 0
        else:
            self._out.write(text + "\n")
        self._out.flush()
        self._last = 0.0
