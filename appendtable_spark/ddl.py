"""Spark SQL column definitions (``'day DATE, id BIGINT NOT NULL, tags ARRAY<STRING>'``) as a
Spark schema, parsed without a JVM (``CREATE TABLE`` runs the source's ``schema()`` in a Python
worker, where Spark's own parser is not reachable).

The grammar is Spark's ``StructType.fromDDL``: ``name [:] type [NOT NULL] [COMMENT 'text']``
separated by commas; names plain or in backquotes (a doubled backquote escapes one); types
``BOOLEAN``, ``TINYINT``/``BYTE``, ``SMALLINT``/``SHORT``, ``INT``/``INTEGER``,
``BIGINT``/``LONG``, ``FLOAT``/``REAL``, ``DOUBLE``, ``DECIMAL``/``DEC``/``NUMERIC`` with
optional ``(precision[, scale])``, ``STRING``, ``CHAR(n)``/``VARCHAR(n)`` (as strings),
``BINARY``, ``DATE``, ``TIMESTAMP``/``TIMESTAMP_LTZ``, ``TIMESTAMP_NTZ``, ``ARRAY<type>``,
``MAP<key, value>`` and ``STRUCT<name [:] type [NOT NULL] [COMMENT 'text'], ...>``, in any case.
Anything else raises ``InvalidSchemaError`` naming the position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

import appendtable as at

__all__ = ["parse_columns"]

_TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<string>'(?:[^'\\]|\\.)*')"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>\d+)|(?P<symbol>[<>(),:]))"
)
_SIMPLE: dict[str, DataType] = {
    "BOOLEAN": BooleanType(),
    "TINYINT": ByteType(),
    "BYTE": ByteType(),
    "SMALLINT": ShortType(),
    "SHORT": ShortType(),
    "INT": IntegerType(),
    "INTEGER": IntegerType(),
    "BIGINT": LongType(),
    "LONG": LongType(),
    "FLOAT": FloatType(),
    "REAL": FloatType(),
    "DOUBLE": DoubleType(),
    "STRING": StringType(),
    "BINARY": BinaryType(),
    "DATE": DateType(),
    "TIMESTAMP": TimestampType(),
    "TIMESTAMP_LTZ": TimestampType(),
    "TIMESTAMP_NTZ": TimestampNTZType(),
}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            raise at.InvalidSchemaError(
                f"cannot parse column definitions at character {position}: {text[position:]!r}"
            )
        tokens.append(_Token(match.lastgroup, match.group(match.lastgroup), match.start(0)))
        position = match.end(0)
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = _tokens(text)
        self._index = 0

    def _peek(self) -> _Token | None:
        return self._tokens[self._index] if self._index < len(self._tokens) else None

    def _fail(self, expected: str) -> at.InvalidSchemaError:
        token = self._peek()
        where = f"'{token.text}' at character {token.at}" if token else "the end"
        return at.InvalidSchemaError(
            f"cannot parse column definitions {self._text!r}: expected {expected}, found {where}"
        )

    def _take(self, kind: str, text: str | None = None) -> _Token:
        token = self._peek()
        if token is None or token.kind != kind or (text and token.text.upper() != text):
            raise self._fail(text or kind)
        self._index += 1
        return token

    def _accept(self, kind: str, text: str | None = None) -> bool:
        token = self._peek()
        if token is None or token.kind != kind or (text and token.text.upper() != text):
            return False
        self._index += 1
        return True

    def fields(self, closing: str | None) -> list[StructField]:
        fields = [self._field()]
        while self._accept("symbol", ","):
            fields.append(self._field())
        if closing is None and self._peek() is not None:
            raise self._fail("',' or the end")
        return fields

    def _name(self) -> str:
        token = self._peek()
        if token is not None and token.kind == "quoted":
            self._index += 1
            return token.text[1:-1].replace("``", "`")
        return self._take("word").text

    def _field(self) -> StructField:
        name = self._name()
        self._accept("symbol", ":")
        dtype = self._type()
        nullable = True
        if self._accept("word", "NOT"):
            self._take("word", "NULL")
            nullable = False
        if self._accept("word", "COMMENT"):
            self._take("string")
        return StructField(name, dtype, nullable)

    def _numbers(self) -> list[int]:
        numbers: list[int] = []
        if self._accept("symbol", "("):
            numbers.append(int(self._take("number").text))
            while self._accept("symbol", ","):
                numbers.append(int(self._take("number").text))
            self._take("symbol", ")")
        return numbers

    def _type(self) -> DataType:
        word = self._take("word").text.upper()
        if word in _SIMPLE:
            return _SIMPLE[word]
        if word in ("CHAR", "VARCHAR"):
            if len(self._numbers()) != 1:
                raise self._fail(f"{word}(length)")
            return StringType()
        if word in ("DECIMAL", "DEC", "NUMERIC"):
            numbers = self._numbers()
            if len(numbers) > 2 or (numbers and not 1 <= numbers[0] <= 38):
                raise self._fail("DECIMAL(precision 1-38, scale)")
            precision, scale = (numbers + [10, 0][len(numbers) :])[:2]
            if scale > precision:
                raise self._fail(f"a scale of at most {precision}")
            return DecimalType(precision, scale)
        if word == "ARRAY":
            self._take("symbol", "<")
            element = self._type()
            self._take("symbol", ">")
            return ArrayType(element, True)
        if word == "MAP":
            self._take("symbol", "<")
            key = self._type()
            self._take("symbol", ",")
            value = self._type()
            self._take("symbol", ">")
            return MapType(key, value, True)
        if word == "STRUCT":
            self._take("symbol", "<")
            if self._accept("symbol", ">"):
                return StructType([])
            fields = self.fields(">")
            self._take("symbol", ">")
            return StructType(fields)
        self._index -= 1
        raise self._fail("a Spark SQL type")


def parse_columns(text: str) -> StructType:
    """The Spark schema of column definitions in Spark SQL DDL."""
    return StructType(_Parser(text).fields(None))
