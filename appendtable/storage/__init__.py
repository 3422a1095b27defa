"""Layer 3: the storage boundary. ``open_storage`` picks the implementation for a URI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fsspec

from appendtable.errors import InvalidOptionError
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
    if not text.strip():
        raise InvalidOptionError("a table location must not be empty")
    if "://" not in text:
        return LocalStorage(text, fsync=fsync)
    if text.startswith("file://"):
        return LocalStorage(text[len("file://") :], fsync=fsync)
    protocol = text.split("://", 1)[0]
    if protocol not in fsspec.available_protocols():
        raise InvalidOptionError(
            f"unknown storage protocol '{protocol}' in {text!r} (use a local path, file://, "
            "s3://, memory://, or another protocol fsspec knows)"
        )
    with translated("open", text):
        try:
            fs, path = fsspec.core.url_to_fs(text, **dict(storage_options or {}))
        except ImportError as exc:
            raise InvalidOptionError(
                f"storage protocol '{protocol}' needs a package that is not installed: {exc} "
                "(for s3://, install appendtable[s3])"
            ) from exc
    return FsspecStorage(fs, path, text.rstrip("/"))
