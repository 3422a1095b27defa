"""Where a table may be created: never inside another table, never around one.

A table owns its directory: orphan removal deletes the files there that follow the table's
layout and nothing references, and a table nested in another (or holding another) would have
its files taken for the other's. ``create_table`` therefore refuses such a location."""

from __future__ import annotations

import posixpath
import re

from appendtable.errors import TableExistsError
from appendtable.metadata import layout
from appendtable.storage import Storage

__all__ = ["check_not_nested"]

_SCHEMA_FILE = re.compile(r"(^|/)schema/schema-\d+$")


def check_not_nested(storage: Storage) -> None:
    """Raise TableExistsError if a table exists in a directory above ``storage``'s root or
    below it."""
    fs, root = storage.fsspec()
    for ancestor in _ancestors(root):
        if _holds_table(fs, ancestor):
            raise TableExistsError(
                f"cannot create a table at {storage.root}: it is inside the table at "
                f"{ancestor}, whose maintenance would treat its files as its own"
            )
    for info in storage.walk(""):
        found = _SCHEMA_FILE.search(info.path)
        if found is not None and found.start() > 0:
            inner = info.path[: found.start()]
            raise TableExistsError(
                f"cannot create a table at {storage.root}: it holds the table at "
                f"{storage.uri(inner)}, whose files it would treat as its own"
            )


def _ancestors(root: str) -> list[str]:
    """The directories above ``root`` (a local path or a bucket/key prefix), nearest first."""
    found: list[str] = []
    current = root.rstrip("/")
    while True:
        parent = posixpath.dirname(current)
        if not parent or parent == current:
            return found
        found.append(parent)
        current = parent


def _holds_table(fs: object, directory: str) -> bool:
    """Whether ``directory`` holds a table (a ``schema/schema-<n>`` file); False when it
    cannot be listed."""
    schema_dir = f"{directory.rstrip('/')}/{layout.SCHEMA_DIR}"
    try:
        fs.invalidate_cache(schema_dir)  # type: ignore[attr-defined]
        names = fs.ls(schema_dir, detail=False)  # type: ignore[attr-defined]
    except (OSError, ValueError):
        return False
    return any(layout.id_from_name(str(n), layout.SCHEMA_PREFIX) is not None for n in names)
