"""Parsing the command line's small languages: ``k=v`` pairs, durations, lists, partition specs
and filters such as ``"amount >= 10.5"``, ``"day in (2024-05-01, 2024-05-02)"``,
``"name is null"``. Values are typed by the column they compare with."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import re
from collections.abc import Sequence
from typing import assert_never

import pyarrow as pa

import appendtable as at
from appendtable.cli.ddl import quoted_name
from appendtable.cli.input_errors import UsageError

__all__ = [
    "parse_buckets",
    "parse_columns",
    "parse_duration",
    "parse_filter",
    "parse_options",
    "parse_partition",
    "parse_storage_options",
    "typed_value",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")
_SECONDS = {
    "": 1.0,
    "ms": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
#: The filter operators' spellings: the core's, and SQL's ``<>`` for ``!=``; longest first so
#: that "<=" is not read as "<".
_OPERATORS = sorted(
    [(spelled, op) for op in at.FilterOp for spelled in (op.value, *at.filter_operator(op).aliases)]
    + [("<>", at.FilterOp.NE)],
    key=lambda item: (-len(item[0]), item[0]),
)
_COLUMN = re.compile(r"[^\s=!<>]+")
#: One part of a dotted column path: no dots, spaces, operators or quotes.
_PATH_PART = re.compile(r"[^\s=!<>.`\"]+")


def parse_duration(text: str, what: str) -> float:
    """Seconds from ``"1h"``, ``"30 s"``, ``"500ms"``, ``"2d"``, ``"1w"`` or a plain number of
    seconds."""
    match = _DURATION.match(text.lower())
    if match is None or match.group(2) not in _SECONDS:
        raise UsageError(
            f"{what}: not a duration: {text!r} (examples: 500ms, 30s, 5m, 1h, 7d, or seconds)"
        )
    return float(match.group(1)) * _SECONDS[match.group(2)]


def parse_options(items: Sequence[str] | None, what: str) -> dict[str, str]:
    """``["k=v", ...]`` as a dict (values stay strings)."""
    options: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    return options


def parse_storage_options(items: Sequence[str] | None) -> dict[str, object]:
    """fsspec options: ``true``/``false`` become booleans, integers ints, ``{...}`` / ``[...]``
    JSON; anything else stays a string."""
    typed: dict[str, object] = {}
    for key, value in parse_options(items, "--storage-option").items():
        lowered = value.lower()
        if lowered in ("true", "false"):
            typed[key] = lowered == "true"
        elif re.fullmatch(r"-?\d+", value):
            typed[key] = int(value)
        elif value[:1] in "{[" and value:
            try:
                typed[key] = json.loads(value)
            except json.JSONDecodeError as exc:
                raise UsageError(f"--storage-option {key}: not valid JSON: {exc}") from None
        else:
            typed[key] = value
    return typed


def parse_columns(text: str, what: str) -> list[str]:
    columns = [c.strip() for c in text.split(",") if c.strip()]
    if not columns:
        raise UsageError(f"{what}: expected a comma-separated list of columns, got {text!r}")
    return columns


def parse_buckets(text: str) -> list[int]:
    try:
        return [int(b) for b in parse_columns(text, "--buckets")]
    except ValueError:
        raise UsageError(
            f"--buckets: expected comma-separated bucket numbers, got {text!r}"
        ) from None


def typed_value(text: str, dtype: pa.DataType, column: str, *, quoted: bool = False) -> object:
    """The Python value of ``text`` for a column of type ``dtype`` (ISO dates and times,
    ``0x``-prefixed hex or plain text for binary; ``quoted`` text is always text)."""
    try:
        if pa.types.is_boolean(dtype):
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0"):
                raise ValueError
            return lowered in ("true", "1")
        if pa.types.is_integer(dtype):
            return int(text)
        if pa.types.is_floating(dtype):
            return float(text)
        if pa.types.is_decimal(dtype):
            number = decimal.Decimal(text)
            if not number.is_finite():
                raise ValueError
            return number
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
            return text
        if (
            pa.types.is_binary(dtype)
            or pa.types.is_large_binary(dtype)
            or pa.types.is_fixed_size_binary(dtype)
        ):
            hexadecimal = text.startswith("0x") and not quoted
            return bytes.fromhex(text[2:]) if hexadecimal else text.encode()
        if pa.types.is_date(dtype) or pa.types.is_timestamp(dtype):
            return _instant(text, dtype, column)
        if pa.types.is_time(dtype):
            return dt.time.fromisoformat(text)
    except (ValueError, decimal.InvalidOperation):
        raise UsageError(f"value {text!r} is not a valid {dtype} (column '{column}')") from None
    raise UsageError(f"column '{column}' has type {dtype}, which cannot be compared with a value")


#: An ISO time's fraction of a second beyond microseconds (Python's parser drops them).
_FINER_THAN_MICROS = re.compile(r"(?<=:\d\d[.,]\d{6})\d+")


def _instant(text: str, dtype: pa.DataType, column: str) -> object:
    """An ISO date or date-time for a date or timestamp column: a ``date`` or ``datetime``,
    or the text itself where it is finer than microseconds (the table reads such text to the
    nanosecond). A date-time compares with a date column as the instant it is; one with a
    zone offset is refused there (a date has no time zone). ValueError if it is not ISO."""
    if pa.types.is_date(dtype):
        with contextlib.suppress(ValueError):
            return dt.date.fromisoformat(text)
    finer = _FINER_THAN_MICROS.search(text) is not None
    moment = dt.datetime.fromisoformat(_FINER_THAN_MICROS.sub("", text))
    if moment.tzinfo is not None and pa.types.is_date(dtype):
        raise UsageError(
            f"value {text!r} has a time zone, which a date has not (column '{column}')"
        )
    return text if finer else moment


def _column_type(schema: pa.Schema, column: str, what: str) -> pa.DataType:
    if column not in schema.names:
        raise UsageError(f"{what}: unknown column '{column}' (columns: {', '.join(schema.names)})")
    return schema.field(column).type


def parse_partition(
    text: str, schema: pa.Schema, partition_keys: Sequence[str]
) -> dict[str, object]:
    """``"day=2024-05-01,region=eu"`` as a static partition spec with values typed and quoted
    as in filters (``region='a, b'`` is the text ``a, b``; ``null`` unquoted is null)."""
    spec: dict[str, object] = {}
    for item in _split_outside_quotes(text, "--partition"):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--partition expects KEY=VALUE[,KEY=VALUE], got {text!r}")
        if key not in partition_keys:
            keys = ", ".join(partition_keys) or "none"
            raise UsageError(
                f"--partition: '{key}' is not a partition key (partition keys: {keys})"
            )
        dtype = _column_type(schema, key, "--partition")
        plain, quoted = _unquote(value, "--partition")
        null = not quoted and plain.lower() == "null"
        spec[key] = None if null else typed_value(plain, dtype, key, quoted=quoted)
    return spec


def _unquote(text: str, what: str) -> tuple[str, bool]:
    """(text without surrounding quotes, whether it was quoted). A doubled quote inside a
    quoted value stands for one."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        quote = text[0]
        return text[1:-1].replace(quote * 2, quote), True
    if text[:1] in ("'", '"'):
        raise UsageError(f"{what}: unterminated quoted value {text!r}")
    return text, False


def _split_list(text: str, what: str) -> list[str]:
    """``"(a, 'b,c', 3)"`` -> ``["a", "'b,c'", "3"]``."""
    text = text.strip()
    if not (text.startswith("(") and text.endswith(")")):
        raise UsageError(f"{what}: 'in' needs a list in parentheses, as in: in (1, 2, 3)")
    items = _split_outside_quotes(text[1:-1], what)
    if any(not item.strip() for item in items):
        raise UsageError(f"{what}: empty value in list {text!r}")
    return items


def _split_outside_quotes(text: str, what: str) -> list[str]:
    """``"a, 'b,c', 3"`` -> ``["a", " 'b,c'", " 3"]``: split at commas outside quotes."""
    items: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for char in text:
        if quote is not None:
            current.append(char)
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == ",":
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if quote is not None:
        raise UsageError(f"{what}: unterminated quoted value in {text!r}")
    items.append("".join(current))
    return items


#: The most OR clauses several --filter options may multiply out to.
_MAX_CLAUSES = 1024


def parse_filters(texts: Sequence[str] | None, schema: pa.Schema) -> list[list[object]] | None:
    """``--filter`` options as appendtable's filter form (a list of OR'ed clauses of AND'ed
    terms). Within one option, ``and`` binds tighter than ``or`` (``a = 1 or b = 2 and c = 3``
    is ``a = 1`` or both of the others); several options must all hold."""
    if not texts:
        return None
    result: list[list[object]] = [[]]
    for text in texts:
        if not text.strip():
            raise UsageError('--filter is empty: give a condition such as "id = 5"')
        alternatives = [
            [parse_filter(term, schema) for term in _split_top(clause, "and", text)]
            for clause in _split_top(text, "or", text)
        ]
        result = [done + more for done in result for more in alternatives]
        if len(result) > _MAX_CLAUSES:
            raise UsageError(
                f"--filter: the options multiply out to more than {_MAX_CLAUSES} alternatives"
            )
    return result


def _split_top(text: str, keyword: str, whole: str) -> list[str]:
    """``text`` split at the word ``keyword`` (any case) outside quotes and parentheses."""
    parts: list[str] = []
    start, depth, quote = 0, 0, ""
    index = 0
    lowered = text.lower()
    while index < len(text):
        char = text[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif (
            depth == 0
            and char.isspace()
            and lowered.startswith(keyword, index + 1)
            and text[index + 1 + len(keyword) : index + 2 + len(keyword)] in ("", " ", "\t")
        ):
            parts.append(text[start:index])
            index += 1 + len(keyword)
            start = index
            continue
        index += 1
    parts.append(text[start:])
    if any(not part.strip() for part in parts):
        raise UsageError(f"--filter {whole!r}: '{keyword}' needs a condition on each side")
    return parts


def _filter_column(
    stripped: str, schema: pa.Schema, what: str
) -> tuple[str | tuple[str, ...], str, pa.DataType, str]:
    """The column a ``--filter`` term starts with: (the column in the filter form: a name, or
    a path of struct fields; its display name; its type; the rest of the term). A column is
    a top-level name, bare or quoted with backticks or double quotes; or a dotted path of
    struct fields (``payload.x``), each part bare or quoted (``payload.`x.y```; a doubled
    quote inside stands for one). A bare name
    that is a top-level column is that column, dots and all (as in the Python API)."""
    bare = _COLUMN.match(stripped)
    if bare is not None and bare.group(0) in schema.names:
        name = bare.group(0)
        return name, name, schema.field(name).type, stripped[bare.end() :]
    parts: list[str] = []
    quoted = False
    index = 0
    while True:
        if stripped[index : index + 1] in ("`", '"'):
            found = quoted_name(stripped, index)
            if found is None:
                raise UsageError(f"{what}: unterminated quoted column name")
            name, index = found
            parts.append(name)
            quoted = True
        else:
            match = _PATH_PART.match(stripped, index)
            if match is None:
                raise UsageError(f"{what}: expected 'column operator value'")
            parts.append(match.group(0))
            index = match.end()
        if stripped[index : index + 1] != ".":
            break
        index += 1
    rest = stripped[index:]
    if len(parts) == 1 or (not quoted and ".".join(parts) in schema.names):
        name = parts[0] if len(parts) == 1 else ".".join(parts)
        return name, name, _column_type(schema, name, "--filter"), rest
    dtype = _column_type(schema, parts[0], "--filter")
    for depth, part in enumerate(parts[1:], start=1):
        above = ".".join(parts[:depth])
        if not pa.types.is_struct(dtype):
            raise UsageError(
                f"{what}: '{above}' is not a struct (type {dtype}): filters reach into struct "
                "fields only"
            )
        position = dtype.get_field_index(part)
        if position < 0:
            fields = ", ".join(dtype.field(i).name for i in range(dtype.num_fields))
            raise UsageError(
                f"{what}: unknown field '{part}' of struct '{above}' (its fields: {fields})"
            )
        dtype = dtype.field(position).type
    return tuple(parts), ".".join(parts), dtype, rest


def parse_filter(text: str, schema: pa.Schema) -> tuple[object, ...]:
    """``"col op value"`` as a filter term ``(column, op, value)`` of appendtable's filter
    form (the column a name, or a path of struct fields: see ``_filter_column``). Ops: = ==
    != <> < <= > >= in, not in, is null, is not null."""
    what = f"--filter {text!r}"
    column, shown, dtype, rest = _filter_column(text.strip(), schema, what)
    rest = rest.strip()
    lowered = rest.lower()
    for spelled, op in _OPERATORS:
        if not lowered.startswith(spelled):
            continue
        after = rest[len(spelled) :]
        if spelled[-1].isalpha() and after[:1].isalnum():
            continue  # "inx" is not "in"
        operands = at.filter_operator(op).operands
        match operands:
            case at.FilterOperands.NONE:
                if after.strip():
                    raise UsageError(f"{what}: unexpected {after.strip()!r} after '{spelled}'")
                return (column, op.value)
            case at.FilterOperands.LIST:
                values = [_scalar(item, dtype, shown, what) for item in _split_list(after, what)]
                return (column, op.value, values)
            case at.FilterOperands.ONE:
                if not after.strip():
                    raise UsageError(f"{what}: '{spelled}' needs a value")
                return (column, op.value, _scalar(after, dtype, shown, what))
            case _:
                assert_never(operands)
    if not rest:
        raise UsageError(
            f"{what}: no operator after column '{shown}' (use {', '.join(at.FilterOp)})"
        )
    found = rest.split()[0]
    raise UsageError(f"{what}: unknown operator {found!r} (use {', '.join(at.FilterOp)})")


def _scalar(text: str, dtype: pa.DataType, column: str, what: str) -> object:
    value, quoted = _unquote(text, what)
    if not quoted and value.lower() == "null":
        raise UsageError(f"{what}: compare with null using 'is null' or 'is not null'")
    return typed_value(value, dtype, column, quoted=quoted)
