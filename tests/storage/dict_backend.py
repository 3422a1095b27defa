"""A storage backend written from outside the library, through its public names only: files in
a Python dict shared by every handle of the process, at ``dictmem://<name>/<path>``.

It is what docs/python.md's "Your own storage backend" asks of a backend, and no more: the
hooks of ``appendtable.Storage`` (each gets a path already checked by the containment rule,
and raises ``FileNotFoundError`` for a missing file), ``atomic_create`` backed by a lock (the
dict lives in one process, as memory:// does), and ``parent`` so that tables cannot nest. It
does no containment of its own and resolves ``..`` as a file system would, so a path that
left the root would reach a neighbour's file: tests/security/test_containment.py shows the
base class refuses every such path first. pyarrow reads its data files through the bridge
``Storage`` provides.

Importing this module registers the scheme (``register``).
"""

from __future__ import annotations

import io
import posixpath
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

import appendtable as at

__all__ = ["SCHEME", "DictStorage", "drop", "files", "put", "register"]

SCHEME = "dictmem"

#: Every file of every dictmem:// table: key ``<name>/<path>`` -> (content, mtime in epoch ms).
_FILES: dict[str, tuple[bytes, int]] = {}
_LOCK = threading.Lock()


def files(prefix: str = "") -> dict[str, bytes]:
    """The files whose key starts with ``prefix`` (for tests to look behind the backend)."""
    with _LOCK:
        return {key: data for key, (data, _) in _FILES.items() if key.startswith(prefix)}


def drop(prefix: str) -> None:
    """Forget the files whose key starts with ``prefix`` (a test's clean-up)."""
    with _LOCK:
        for key in [key for key in _FILES if key.startswith(prefix)]:
            del _FILES[key]


def put(key: str, data: bytes) -> None:
    """Store a file behind the backend's back (what another program writing there does)."""
    with _LOCK:
        _FILES[key] = (bytes(data), int(time.time() * 1000))


class DictStorage(at.Storage):
    """The files under ``dictmem://<key prefix>``."""

    atomic_create = True
    backend = "dict"

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.prefix = uri.split("://", 1)[1].strip("/")

    @classmethod
    def open(cls, uri: str, storage_options: Mapping[str, Any]) -> DictStorage:
        if storage_options:
            raise at.InvalidOptionError(f"{SCHEME}:// takes no storage options")
        return cls(uri)

    def _key(self, path: str) -> str:
        return posixpath.normpath(f"{self.prefix}/{path}") if path else self.prefix

    def _below(self, directory: str) -> dict[str, tuple[bytes, int]]:
        """Files below ``directory``, by their path relative to the root."""
        base = self._key(directory) + "/"
        skip = len(self.prefix) + 1
        with _LOCK:
            return {key[skip:]: entry for key, entry in _FILES.items() if key.startswith(base)}

    def _read(self, path: str) -> bytes:
        with _LOCK:
            found = _FILES.get(self._key(path))
        if found is None:
            raise FileNotFoundError(path)
        return found[0]

    def _write(self, path: str, data: bytes) -> None:
        put(self._key(path), data)

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        with _LOCK:
            if self._key(path) in _FILES:
                return False
            _FILES[self._key(path)] = (bytes(data), int(time.time() * 1000))
            return True

    def _exists(self, path: str) -> bool:
        with _LOCK:
            return self._key(path) in _FILES

    def _info(self, path: str) -> at.FileInfo:
        with _LOCK:
            found = _FILES.get(self._key(path))
        if found is None:
            raise FileNotFoundError(path)
        return at.FileInfo(path, len(found[0]), found[1])

    def _walk(self, directory: str) -> list[at.FileInfo]:
        return [
            at.FileInfo(p, len(data), mtime) for p, (data, mtime) in self._below(directory).items()
        ]

    def _listdir(self, directory: str) -> list[at.FileInfo]:
        depth = directory.count("/") + 1 if directory else 0
        return [info for info in self._walk(directory) if info.path.count("/") == depth]

    def _delete(self, path: str) -> None:
        with _LOCK:
            _FILES.pop(self._key(path), None)

    def _rename(self, source: str, target: str) -> None:
        with _LOCK:
            found = _FILES.pop(self._key(source), None)
            if found is None:
                if self._key(target) in _FILES:  # a retry of a move that happened
                    return
                raise FileNotFoundError(source)
            _FILES[self._key(target)] = found

    def _delete_tree(self, directory: str) -> None:
        base = self._key(directory) + "/"
        with _LOCK:
            for key in [key for key in _FILES if key.startswith(base)]:
                del _FILES[key]

    def _open_output(self, path: str) -> IO[bytes]:
        return _Upload(self._key(path))

    def parent(self) -> DictStorage | None:
        above = posixpath.dirname(self.prefix)
        return DictStorage(f"{SCHEME}://{above}") if above else None


class _Upload(io.BytesIO):
    """A file being streamed: stored whole when closed."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self._key = key

    def close(self) -> None:
        if not self.closed:
            put(self._key, self.getvalue())
        super().close()


def register() -> None:
    """Serve ``dictmem://`` tables with ``DictStorage`` (again: idempotent)."""
    at.register_storage(SCHEME, DictStorage.open, replace=True)


register()
