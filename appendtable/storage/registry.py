"""Which backend serves a table URI: the built-in stores, and the ones users register.

``open_storage``: a local path or ``file://`` is local disk; otherwise the URI's scheme picks
the factory registered for it (the built-in ones: ``memory``; ``s3``, ``s3a``; ``gs``,
``gcs``; ``az``, ``abfs``, ``abfss``, ``adl``), and a protocol fsspec knows with no backend of
its own gets the generic fsspec storage (no atomic create). ``register_storage`` adds a
scheme, or replaces one (pyiceberg's ``py-io-impl`` is the precedent).

Whatever a factory returns is checked before use: it must be a ``Storage`` that keeps
``Storage``'s final operations, the ones that apply the containment rule (docs/security.md),
so a registered backend cannot read, write or delete outside the table's root by skipping the
check.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import fsspec

from appendtable.errors import InvalidArgumentError, InvalidOptionError
from appendtable.storage.azure import AzureStorage
from appendtable.storage.base import Storage, final_operations
from appendtable.storage.fsspec_store import FsspecStorage, refuse_operation_timeout
from appendtable.storage.gcs import GcsStorage
from appendtable.storage.local import LocalStorage
from appendtable.storage.memory import MemoryStorage
from appendtable.storage.s3 import S3Storage

__all__ = ["StorageFactory", "open_storage", "register_storage"]

#: Makes the storage for a table URI: ``factory(uri, storage_options)``, the storage rooted at
#: ``uri`` (a ``Storage`` subclass that implements the hooks).
StorageFactory = Callable[[str, Mapping[str, Any]], Storage]

_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*\Z")
_LOCK = threading.Lock()
_FACTORIES: dict[str, StorageFactory] = {
    "memory": MemoryStorage.open,
    "s3": S3Storage.open,
    "s3a": S3Storage.open,
    "gs": GcsStorage.open,
    "gcs": GcsStorage.open,
    "az": AzureStorage.open,
    "abfs": AzureStorage.open,
    "abfss": AzureStorage.open,
    "adl": AzureStorage.open,
}


def register_storage(scheme: str, factory: StorageFactory, *, replace: bool = False) -> None:
    """Serve tables at ``<scheme>://...`` with ``factory(uri, storage_options)``, which
    returns the ``Storage`` rooted at ``uri``. Holds for this process: other processes that
    open such tables (Spark's Python workers, for one) must register too.

    Raises InvalidArgumentError for a malformed scheme, for ``file`` (local disk is built in),
    for a factory that is not callable, and for a scheme already served unless ``replace``
    (which also replaces a built-in store's backend)."""
    if not isinstance(scheme, str) or not _SCHEME.match(scheme):
        raise InvalidArgumentError(
            f"storage scheme must be lowercase letters, digits, '+', '-' or '.', starting with "
            f"a letter (as in 'mystore' for mystore://...), got {scheme!r}"
        )
    if scheme == "file":
        raise InvalidArgumentError("storage scheme 'file' is local disk and cannot be replaced")
    if not callable(factory):
        raise InvalidArgumentError(
            f"the storage factory for '{scheme}' must be callable as factory(uri, "
            f"storage_options), got {type(factory).__name__}"
        )
    with _LOCK:
        if scheme in _FACTORIES and not replace:
            raise InvalidArgumentError(
                f"storage scheme '{scheme}' is already served by {_name(_FACTORIES[scheme])}; "
                "pass replace=True to replace it"
            )
        _FACTORIES[scheme] = factory


def open_storage(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, fsync: bool = True
) -> Storage:
    """The storage for a table URI (see the module docstring); ``fsync`` applies to local
    disk."""
    text = str(uri)
    if not text.strip():
        raise InvalidOptionError("a table location must not be empty")
    scheme = text.split("://", 1)[0] if "://" in text else "file"
    if scheme == "file":
        refuse_operation_timeout(storage_options or {}, text)
        return LocalStorage(text.removeprefix("file://"), fsync=fsync)
    with _LOCK:
        factory = _FACTORIES.get(scheme)
    if factory is None:
        if scheme not in fsspec.available_protocols():
            raise InvalidOptionError(
                f"unknown storage protocol '{scheme}' in {text!r} (use a local path, file://, "
                "s3://, gs://, az://, memory://, another protocol fsspec knows, or register "
                "one with appendtable.register_storage)"
            )
        factory = FsspecStorage.open
    return _checked(factory(text, dict(storage_options or {})), scheme)


def _checked(storage: object, scheme: str) -> Storage:
    """``storage`` if it is a ``Storage`` that keeps every final operation ``Storage``'s
    own (on its class and on the object)."""
    if not isinstance(storage, Storage):
        raise InvalidArgumentError(
            f"the storage factory for '{scheme}' returned {type(storage).__name__}, not an "
            "appendtable Storage"
        )
    own = getattr(storage, "__dict__", {})
    overridden = sorted(
        name
        for name in final_operations()
        if name in own or getattr(type(storage), name) is not getattr(Storage, name)
    )
    if overridden:
        raise InvalidArgumentError(
            f"the storage backend {type(storage).__name__} for '{scheme}' overrides "
            f"{', '.join(overridden)}: a backend implements the hooks (_read, _write, ...) and "
            "leaves Storage's operations, which keep every path inside the table, as they are"
        )
    return storage


def _name(factory: StorageFactory) -> str:
    return str(getattr(factory, "__qualname__", None) or type(factory).__name__)
