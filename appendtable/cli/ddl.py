"""A small DDL for Arrow schemas: ``"id int64 not null, name string, ts timestamp[us, UTC]"``.

Grammar (type names are case-insensitive; a ``:`` after a column name is optional; columns are
separated by commas or new lines)::

    schema  := column ("," | NEWLINE) column ...
    column  := name [":"] type ["not null"]
    name    := identifier | `quoted` | "quoted"   (a doubled quote inside stands for one)
    type    := simple | decimal(p[, s]) | timestamp[unit[, tz]] | time32[unit] | time64[unit]
             | duration[unit] | fixed_size_binary[n] | list<type> | large_list<type>
             | fixed_size_list<type>[n] | struct<column, ...> | map<type, type>

Parameters take ``[...]`` or ``(...)`` alike; ``--`` starts a comment that runs to the end of
the line. The text pyarrow prints for a type or a schema (``str(pa.schema(...))``) parses back
to the same thing, and ``appendtable.format_schema`` writes a schema in this syntax (its bare
names are this module's identifiers). Errors name the offending token and its position.

``alter`` takes one column at a time (:func:`parse_column`), ``name type [not null] [first |
after column]``, and column moves (:func:`parse_move`), ``name first | after column | before
column``; a dotted name (``payload.country``) is a field of a struct column.
"""

from __future__ import annotations

import difflib
import re
import zoneinfo
from dataclasses import dataclass

import pyarrow as pa

from appendtable.cli.input_errors import UsageError

__all__ = [
    "ColumnDefinition",
    "ColumnMove",
    "DdlError",
    "parse_column",
    "parse_move",
    "parse_path",
    "parse_schema",
    "parse_type",
    "quoted_name",
]

_SIMPLE: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "tinyint": pa.int8(),
    "byte": pa.int8(),
    "int16": pa.int16(),
    "smallint": pa.int16(),
    "short": pa.int16(),
    "int32": pa.int32(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "int64": pa.int64(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "halffloat": pa.float16(),
    "float32": pa.float32(),
    "float": pa.float32(),
    "real": pa.float32(),
    "float64": pa.float64(),
    "double": pa.float64(),
    "string": pa.string(),
    "str": pa.string(),
    "utf8": pa.string(),
    "varchar": pa.string(),
    "text": pa.string(),
    "large_string": pa.large_string(),
    "large_utf8": pa.large_string(),
    "binary": pa.binary(),
    "bytes": pa.binary(),
    "large_binary": pa.large_binary(),
    "date": pa.date32(),
    "date32": pa.date32(),
    "date64": pa.date64(),
}
#: Parameterised types and what their (optional) parameters are.
_PARAMETRISED = (
    "timestamp",
    "time",
    "time32",
    "time64",
    "duration",
    "decimal",
    "decimal128",
    "decimal256",
    "numeric",
    "fixed_size_binary",
    "list",
    "array",
    "large_list",
    "fixed_size_list",
    "struct",
    "map",
)
_KNOWN = sorted({*_SIMPLE, *_PARAMETRISED})
_UNITS = ("s", "ms", "us", "ns")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"\d+")
_OFFSET = re.compile(r"[+-]\d{2}:\d{2}")
_CLOSE = {"[": "]", "(": ")", "<": ">"}


class DdlError(UsageError):
    """A schema or type that does not parse; the message names the token and position."""


class _Parser:
    """Recursive descent over the text with a cursor (time zones need raw text)."""

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.pos = 0
        self.what = what

    # ---- lexing -----------------------------------------------------------------------------

    def skip(self, *, newlines: bool = True) -> None:
        """Skip white space and ``--`` comments (a comment stops before its new line)."""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "-" and self.text.startswith("--", self.pos):
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
                continue
            if char == "\n" and not newlines:
                return
            if not char.isspace():
                return
            self.pos += 1

    def token_at(self, pos: int) -> str:
        """The token starting at ``pos``, for error messages."""
        if pos >= len(self.text):
            return "end of input"
        match = _IDENTIFIER.match(self.text, pos) or _NUMBER.match(self.text, pos)
        if match:
            return f"'{match.group(0)}'"
        return "new line" if self.text[pos] == "\n" else f"'{self.text[pos]}'"

    def fail(self, message: str, pos: int | None = None) -> DdlError:
        at = self.pos if pos is None else pos
        return DdlError(f"{self.what}: {message}, found {self.token_at(at)} at position {at + 1}")

    def peek(self, chars: str, *, newlines: bool = True) -> str | None:
        self.skip(newlines=newlines)
        if self.pos < len(self.text) and self.text[self.pos] in chars:
            return self.text[self.pos]
        return None

    def accept(self, chars: str, *, newlines: bool = True) -> str | None:
        found = self.peek(chars, newlines=newlines)
        if found is not None:
            self.pos += 1
        return found

    def expect(self, char: str) -> None:
        if self.accept(char) is None:
            raise self.fail(f"expected '{char}'")

    def word(self) -> str | None:
        self.skip()
        match = _IDENTIFIER.match(self.text, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        return match.group(0)

    def keyword(self, *words: str) -> bool:
        """Consume ``words`` (case-insensitive) if they come next."""
        start = self.pos
        for expected in words:
            found = self.word()
            if found is None or found.lower() != expected:
                self.pos = start
                return False
        return True

    def number(self, what: str) -> int:
        self.skip()
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail(f"expected {what}")
        self.pos = match.end()
        return int(match.group(0))

    def _quoted_name(self, quote: str) -> str:
        found = quoted_name(self.text, self.pos)
        if found is None:
            raise self.fail(f"unterminated quoted name (missing {quote})")
        name, self.pos = found
        return name

    def quoted_next(self) -> bool:
        """Whether a quoted name comes next."""
        return self.peek('`"') is not None

    def name(self) -> str:
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] in '`"':
            return self._quoted_name(self.text[self.pos])
        match = _IDENTIFIER.match(self.text, self.pos)
        if match is None:
            raise self.fail("expected a column name")
        self.pos = match.end()
        return match.group(0)

    # ---- grammar ----------------------------------------------------------------------------

    def schema(self) -> pa.Schema:
        fields: list[pa.Field] = []
        while True:
            self.skip()
            if self.pos >= len(self.text):
                break
            fields.append(self.field())
            if self.accept(",\n", newlines=False) is None:
                self.skip()
                if self.pos < len(self.text):
                    raise self.fail("expected ',' between columns")
        if not fields:
            raise DdlError(f"{self.what}: no columns given")
        names = [f.name for f in fields]
        for name in names:
            if names.count(name) > 1:
                raise DdlError(f"{self.what}: column '{name}' is defined twice")
        return pa.schema(fields)

    def field(self) -> pa.Field:
        name = self.name()
        self.accept(":")
        dtype = self.type()
        nullable = not self.keyword("not", "null")
        return pa.field(name, dtype, nullable=nullable)

    def type(self) -> pa.DataType:
        self.skip()
        start = self.pos
        word = self.word()
        if word is None:
            raise self.fail("expected a type")
        kind = word.lower()
        if kind in _SIMPLE:
            if kind in ("date32", "date64"):
                self._optional_unit({"date32": "day", "date64": "ms"}[kind])
            return _SIMPLE[kind]
        if kind not in _PARAMETRISED:
            close = difflib.get_close_matches(kind, _KNOWN, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise DdlError(
                f"{self.what}: unknown type '{word}' at position {start + 1}{hint}; known types: "
                + ", ".join(_KNOWN)
            )
        return self._parametrised(kind, start)

    def _open(self) -> str | None:
        char = self.accept("[(", newlines=True)
        return None if char is None else _CLOSE[char]

    def _optional_unit(self, unit: str) -> None:
        """``date32[day]`` / ``date64[ms]``, as pyarrow prints them."""
        close = self._open()
        if close is not None:
            if not self.keyword(unit):
                raise self.fail(f"expected '{unit}'")
            self.expect(close)

    def _unit(self, allowed: tuple[str, ...]) -> str:
        found = self.word()
        if found is None or found.lower() not in allowed:
            self.pos -= len(found or "")
            raise self.fail(f"expected a time unit ({', '.join(allowed)})")
        return found.lower()

    def _parametrised(self, kind: str, start: int) -> pa.DataType:
        if kind in ("timestamp", "time", "time32", "time64", "duration"):
            return self._temporal(kind)
        if kind in ("decimal", "decimal128", "decimal256", "numeric"):
            close = self._open()
            if close is None:
                raise self.fail(f"'{kind}' needs a precision, as in {kind}(10, 2)")
            precision = self.number("a precision")
            scale = self.number("a scale") if self.accept(",") else 0
            self.expect(close)
            try:
                if kind == "decimal256":
                    return pa.decimal256(precision, scale)
                return pa.decimal128(precision, scale)
            except ValueError as exc:
                raise DdlError(f"{self.what}: {kind}({precision}, {scale}): {exc}") from None
        if kind == "fixed_size_binary":
            close = self._open()
            if close is None:
                raise self.fail("'fixed_size_binary' needs a width, as in fixed_size_binary[16]")
            width = self.number("a byte width")
            self.expect(close)
            return pa.binary(width)
        if kind == "struct":
            return self._struct()
        if kind == "map":
            self.expect("<")
            key = self.type()
            self.expect(",")
            item = self._child("value")
            keys_sorted = self.accept(",") is not None and self.keyword("keys_sorted")
            self.expect(">")
            return pa.map_(key, item, keys_sorted=keys_sorted)
        # list, array, large_list, fixed_size_list
        self.expect("<")
        item = self._child("item")
        size: int | None = None
        if kind == "fixed_size_list" and self.accept(","):
            size = self.number("a list size")
        self.expect(">")
        if kind == "fixed_size_list":
            if size is None:
                close = self._open()
                if close is None:
                    raise self.fail(
                        "'fixed_size_list' needs a size, as in fixed_size_list<int32>[3]"
                    )
                size = self.number("a list size")
                self.expect(close)
            return pa.list_(item, size)
        return pa.large_list(item) if kind == "large_list" else pa.list_(item)

    def _temporal(self, kind: str) -> pa.DataType:
        defaults = {"timestamp": "us", "time": "us", "time32": "ms", "time64": "us"}
        allowed = {"time32": ("s", "ms"), "time64": ("us", "ns"), "time": ("s", "ms", "us", "ns")}
        close = self._open()
        if close is None:
            if kind == "duration":
                return pa.duration("us")
            unit = defaults[kind]
        else:
            unit = self._unit(allowed.get(kind, _UNITS))
        tz: str | None = None
        if close is not None and kind == "timestamp" and self.accept(","):
            tz = self._time_zone(close)
        if close is not None:
            self.expect(close)
        if kind == "timestamp":
            return pa.timestamp(unit, tz=tz)
        if kind == "duration":
            return pa.duration(unit)
        return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)

    def _time_zone(self, close: str) -> str:
        self.skip()
        end = self.text.find(close, self.pos)
        if end < 0:
            raise self.fail(f"expected '{close}' after the time zone")
        raw = self.text[self.pos : end].strip()
        if raw.lower().startswith("tz="):
            raw = raw[3:].strip()
        if not raw:
            raise self.fail("expected a time zone (UTC, Europe/Paris, +01:00)")
        if not _known_time_zone(raw):
            raise DdlError(f"{self.what}: unknown time zone '{raw}' at position {self.pos + 1}")
        self.pos = end
        return raw

    def _child(self, default_name: str) -> pa.Field:
        """A list item or map value: ``type`` or ``name: type``, optionally ``not null``."""
        self.skip()
        start = self.pos
        name = default_name
        match = _BARE_NAME.match(self.text, self.pos)
        if match is not None:
            after = match.end()
            while after < len(self.text) and self.text[after] in " \t":
                after += 1
            if after < len(self.text) and self.text[after] == ":":
                name = match.group(0)
                self.pos = after + 1
        if self.pos == start and self.peek('`"') is not None:
            name = self.name()
            self.expect(":")
        dtype = self.type()
        nullable = not self.keyword("not", "null")
        return pa.field(name, dtype, nullable=nullable)

    def _struct(self) -> pa.DataType:
        self.expect("<")
        fields: list[pa.Field] = []
        if self.accept(">") is not None:
            return pa.struct(fields)
        while True:
            fields.append(self.field())
            if self.accept(">") is not None:
                return pa.struct(fields)
            if self.accept(",") is None:
                raise self.fail("expected ',' or '>' in struct<...>")


def _known_time_zone(name: str) -> bool:
    if name in ("UTC", "Z") or _OFFSET.fullmatch(name):
        return True
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def parse_schema(text: str, *, what: str = "schema") -> pa.Schema:
    """Parse ``"id int64 not null, name string, ..."``. Raises DdlError naming the bad token."""
    return _Parser(text, what).schema()


@dataclass(frozen=True)
class ColumnDefinition:
    """One column to add: ``name type [not null] [first | after column]``.

    ``path`` is the name as ``UpdateSchema`` takes it: the text of an unquoted name (a dotted
    one names a struct field), or a one-name tuple for a quoted name (taken whole)."""

    path: str | tuple[str, ...]
    type: pa.DataType
    nullable: bool = True
    first: bool = False
    after: str | None = None

    @property
    def name(self) -> str:
        return self.path if isinstance(self.path, str) else ".".join(self.path)


@dataclass(frozen=True)
class ColumnMove:
    """``name first``, ``name after other`` or ``name before other``."""

    path: str | tuple[str, ...]
    first: bool = False
    after: str | None = None
    before: str | None = None

    @property
    def name(self) -> str:
        return self.path if isinstance(self.path, str) else ".".join(self.path)


def _path(parser: _Parser) -> str | tuple[str, ...]:
    """A column path: ``name``, ``payload.country``, ``payload.`odd name```. Without quotes
    the text itself (``UpdateSchema`` splits it at dots, unless a top-level column has that
    name); with quotes a tuple of names, each quoted one taken whole."""
    parts: list[tuple[str, bool]] = []
    parser.skip()
    text = parser.text
    while True:
        if parser.quoted_next():
            parts.append((parser.name(), True))
            if text.startswith(".", parser.pos):
                parser.pos += 1
                continue
            break
        match = _IDENTIFIER.match(text, parser.pos)
        if match is None:
            raise parser.fail("expected a column name")
        parser.pos = match.end()
        word = match.group(0)
        if word.endswith(".") and text[parser.pos : parser.pos + 1] in ("`", '"'):
            parts.append((word[:-1], False))
            continue
        parts.append((word, False))
        break
    if len(parts) == 1 and not parts[0][1]:
        return parts[0][0]
    names: list[str] = []
    for name, quoted in parts:
        names.extend([name] if quoted else name.split("."))
    return tuple(names)


def parse_path(text: str, *, what: str = "column") -> str | tuple[str, ...]:
    """A column path on its own (see ``_path``)."""
    parser = _Parser(text, what)
    path = _path(parser)
    _end(parser, "the end of the column name")
    return path


def _end(parser: _Parser, expected: str) -> None:
    parser.skip()
    if parser.pos < len(parser.text):
        raise parser.fail(f"expected {expected}")


def parse_column(text: str, *, what: str = "column") -> ColumnDefinition:
    """Parse ``"country string not null after action"``: a column to add."""
    parser = _Parser(text, what)
    path = _path(parser)
    parser.accept(":")
    dtype = parser.type()
    nullable = not parser.keyword("not", "null")
    if parser.keyword("first"):
        _end(parser, "the end after 'first'")
        return ColumnDefinition(path, dtype, nullable, first=True)
    if parser.keyword("after"):
        after = parser.name()
        _end(parser, "the end after 'after COLUMN'")
        return ColumnDefinition(path, dtype, nullable, after=after)
    _end(parser, "'not null', 'first', 'after COLUMN' or the end")
    return ColumnDefinition(path, dtype, nullable)


def parse_move(text: str, *, what: str = "move") -> ColumnMove:
    """Parse ``"country first"``, ``"country after action"`` or ``"country before action"``."""
    parser = _Parser(text, what)
    path = _path(parser)
    if parser.keyword("first"):
        _end(parser, "the end after 'first'")
        return ColumnMove(path, first=True)
    for word in ("after", "before"):
        if parser.keyword(word):
            other = parser.name()
            _end(parser, f"the end after '{word} COLUMN'")
            if word == "after":
                return ColumnMove(path, after=other)
            return ColumnMove(path, before=other)
    parser.skip()
    raise parser.fail("expected 'first', 'after COLUMN' or 'before COLUMN'")


def parse_type(text: str, *, what: str = "type") -> pa.DataType:
    """Parse one type, such as ``"list<decimal(10, 2)>"``."""
    parser = _Parser(text, what)
    dtype = parser.type()
    parser.skip()
    if parser.pos < len(text):
        raise parser.fail("expected the end of the type")
    return dtype


def quoted_name(text: str, start: int) -> tuple[str, int] | None:
    """The name quoted (with a backtick or a double quote) at ``text[start]``, and the index
    after its closing quote; a doubled quote inside stands for one. None if unterminated."""
    quote, parts, begin = text[start], [], start + 1
    while True:
        end = text.find(quote, begin)
        if end < 0:
            return None
        parts.append(text[begin:end])
        if text[end + 1 : end + 2] != quote:
            return quote.join(parts), end + 1
        begin = end + 2
