"""Layer 3: the storage boundary. ``open_storage`` picks the implementation for a URI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fsspec

from appendtable.storage.base import FileInfo, Storage
from appendtable.storage.fsspec_store import FsspecStorage
from appendtable.storage.local import LocalStorage
from appendtable.storage.translate import translated

__all__ = ["FileInfo", "FsspecStorage", "LocalStorage", "Storage", "open_storage"]


def open_storage(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, fsync: bool = True
) -> Storage:
    """The storage for a table URI: a local path (or ``file://``) uses the local file system
    directly; anything else goes through fsspec with ``storage_options``."""
    text = str(uri)
    if "://" not in text:
        return LocalStorage(text, fsync=fsync)
    if text.startswith("file://"):
        return LocalStorage(text[len("file://") :], fsync=fsync)
    with translated("open", text):
        fs, path = fsspec.core.url_to_fs(text, **dict(storage_options or {}))
    return FsspecStorage(fs, path, text.rstrip("/"))
