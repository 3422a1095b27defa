"""The containment rule: every path the library reads, writes, moves or deletes is inside the
table root. This module is the rule; every ``Storage`` operation applies it to its path before
any I/O (see docs/security.md).

A path is relative to the root, ``/``-separated, and contained when it is made of one or more
components none of which is empty, ``.`` or ``..``, and it has no NUL byte, no backslash, no
leading ``/`` and no scheme or drive (``s3:``, ``file:``, ``C:`` as its first component). The
rule is lexical, so it means the same on local disk and for object-store keys; local disk
also refuses symbolic links on the way (``storage.local``).
"""

from __future__ import annotations

import re

from appendtable.errors import PathOutsideTableError

__all__ = ["check_contained", "path_problem"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def path_problem(path: object) -> str | None:
    """Why ``path`` is not a contained relative path (a short reason), or None if it is."""
    if not isinstance(path, str):
        return f"not a string ({type(path).__name__})"
    if not path:
        return "empty"
    if "\x00" in path:
        return "a NUL byte"
    if "\\" in path:
        return "a backslash"
    if path.startswith("/"):
        return "absolute"
    if ":" in path and _SCHEME.match(path):  # (the test first: most paths have no colon)
        return "a scheme or drive"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"a '{part}' component" if part else "an empty component"
    return None


def check_contained(path: str, root: str) -> str:
    """``path`` itself when it is contained, else PathOutsideTableError naming it and ``root``."""
    problem = path_problem(path)
    if problem is not None:
        raise PathOutsideTableError(
            f"refused path {path!r}: it would not stay inside the table at {root} ({problem})",
            path=str(path),
        )
    return path
