"""Where a table may be created: never inside another table, never around one.

A table owns its directory: orphan removal deletes the files there that follow the table's
layout and nothing references, and a table nested in another (or holding another) would have
its files taken for the other's. ``create_table`` therefore refuses such a location."""

from __future__ import annotations

import re

from appendtable.errors import PathOutsideTableError, StorageError, TableExistsError
from appendtable.metadata import layout
from appendtable.storage import Storage

__all__ = ["check_not_nested", "enclosing_table"]

_SCHEMA_FILE = re.compile(r"(^|/)schema/schema-\d+$")


def enclosing_table(storage: Storage) -> Storage | None:
    """The nearest directory above ``storage``'s root that holds a table, if any (only where
    the backend can say what is there: ``Storage.parent``)."""
    ancestor = storage.parent()
    while ancestor is not None:
        if _holds_table(ancestor):
            return ancestor
        ancestor = ancestor.parent()
    return None


def check_not_nested(storage: Storage) -> None:
    """Raise TableExistsError if a table exists in a directory above ``storage``'s root or
    below it. (Above the root only where the backend can say what is there:
    ``Storage.parent``.)"""
    ancestor = enclosing_table(storage)
    if ancestor is not None:
        raise TableExistsError(
            f"cannot create a table at {storage.root}: it is inside the table at "
            f"{ancestor.root}, whose maintenance would treat its files as its own"
        )
    for info in storage.walk(""):
        found = _SCHEMA_FILE.search(info.path)
        if found is not None and found.start() > 0:
            inner = info.path[: found.start()]
            raise TableExistsError(
                f"cannot create a table at {storage.root}: it holds the table at "
                f"{storage.uri(inner)}, whose files it would treat as its own"
            )


def _holds_table(directory: Storage) -> bool:
    """Whether ``directory`` holds a table (a ``schema/schema-<n>`` file); False when it
    cannot be listed (or its ``schema`` is a symbolic link, never followed)."""
    try:
        names = directory.listnames(layout.SCHEMA_DIR)
    except (StorageError, PathOutsideTableError):
        return False
    return any(layout.id_from_name(name, layout.SCHEMA_PREFIX) is not None for name in names)
