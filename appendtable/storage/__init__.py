"""Layer 3: the storage boundary. One class per backend (``local``, ``memory``, ``s3``,
``gcs``, ``azure``, and ``fsspec_store`` for any other protocol fsspec knows), all under the
contract of ``base.Storage``; ``registry.open_storage`` picks one for a URI, and
``registry.register_storage`` lets users add their own."""

from __future__ import annotations

from appendtable.storage.base import Storage, is_temp_name
from appendtable.storage.entries import DirectoryListing, FileInfo
from appendtable.storage.fsspec_store import FsspecStorage
from appendtable.storage.local import LocalStorage
from appendtable.storage.registry import StorageFactory, open_storage, register_storage

__all__ = [
    "DirectoryListing",
    "FileInfo",
    "FsspecStorage",
    "LocalStorage",
    "Storage",
    "StorageFactory",
    "is_temp_name",
    "open_storage",
    "register_storage",
]
