"""Hive-style partition directory names (pure).

``k1=v1/k2=v2``: each key and value is escaped (control characters, ``"#%'*/:=?\\``, DEL and
``{}[]^`` become ``%XX`` with upper-case hex). A null or empty value becomes the table's default
partition name (``__DEFAULT_PARTITION__``). The directory name is for humans and other tools only:
the typed partition values are stored in the manifests and are the source of truth.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence

from appendtable.errors import SchemaMismatchError
from appendtable.metadata.models import PartitionValues
from appendtable.metadata.types import TypeSpec
from appendtable.metadata.values import to_python

__all__ = [
    "MAX_NAME_BYTES",
    "escape_path_name",
    "key_directory_prefix",
    "outside_overwrite",
    "partition_path",
    "partition_text",
    "render_partition_value",
]

#: The longest directory name (in UTF-8 bytes) most file systems allow.
MAX_NAME_BYTES = 255
_ESCAPED = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{}[]^"))


def escape_path_name(text: str) -> str:
    if not any(ch in _ESCAPED for ch in text):
        return text
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in text)


def render_partition_value(value: object, type_spec: TypeSpec) -> str | None:
    """The text of one stored partition value, None for null/empty (default partition)."""
    if value is None or value == "":
        return None
    if type_spec.kind == "bool":
        return "true" if value else "false"
    python = to_python(value, type_spec)
    if isinstance(python, dt.date):  # dates and datetimes
        return python.isoformat()
    if isinstance(python, decimal.Decimal):  # plain notation, as Hive and Spark: never 1E-7
        return format(python, "f")
    return str(python)


def key_directory_prefix(key: str) -> str:
    """How a partition directory of ``key`` starts: ``<key>=`` (the key escaped)."""
    return f"{escape_path_name(key)}="


def partition_path(
    keys: Sequence[str],
    values: PartitionValues,
    types: Sequence[TypeSpec],
    default_name: str,
) -> str:
    """``k1=v1/k2=v2`` for the given stored partition values ('' when unpartitioned). Raises
    SchemaMismatchError, naming the column, for a value too long for a directory name."""
    return _joined(keys, values, types, default_name, distinct=False)


def partition_text(
    keys: Sequence[str],
    values: PartitionValues,
    types: Sequence[TypeSpec],
    default_name: str,
) -> str:
    """The partition as system tables name it, one text per partition: its directory name
    (``partition_path``), except where directory names conflate partitions. The directory of
    null, of '' and of a value spelled as ``default_name`` is ``default_name``; here only null
    reads so, '' reads ``k=``, and such a value has its first character escaped (``%XX``, which
    no value's text can hold: ``%`` is escaped)."""
    return _joined(keys, values, types, default_name, distinct=True)


def _joined(
    keys: Sequence[str],
    values: PartitionValues,
    types: Sequence[TypeSpec],
    default_name: str,
    *,
    distinct: bool,
) -> str:
    parts = []
    for key, value, type_spec in zip(keys, values, types, strict=True):
        if distinct and value == "":
            parts.append(key_directory_prefix(key))
            continue
        text = render_partition_value(value, type_spec)
        if distinct and text is not None and escape_path_name(text) == default_name:
            parts.append(key_directory_prefix(key) + f"%{ord(text[0]):02X}" + text[1:])
            continue
        if text is not None and "\x00" in text:
            raise SchemaMismatchError(
                f"a value of partition column '{key}' holds a NUL byte ({text[:40]!r}), which "
                "cannot name a directory: remove it from the data, or partition by another column",
                column=key,
            )
        rendered = default_name if text is None else escape_path_name(text)
        part = key_directory_prefix(key) + rendered
        size = len(part.encode("utf-8"))
        if size > MAX_NAME_BYTES:
            raise SchemaMismatchError(
                f"a value of partition column '{key}' is too long to name a directory: "
                f"'{part[:40]}...' takes {size} bytes (escaped), file systems and object stores "
                f"allow {MAX_NAME_BYTES}; partition by a shorter column (or a hash of this one)",
                column=key,
            )
        parts.append(part)
    return "/".join(parts)


def outside_overwrite(named: str, scope: str, column: str | None) -> SchemaMismatchError:
    """The error for rows of partition ``named`` in an overwrite of the partitions ``scope``."""
    return SchemaMismatchError(
        f"rows of partition {named} are outside the partitions being overwritten ({scope}): "
        "an overwrite of given partitions writes only into them",
        column=column,
    )
