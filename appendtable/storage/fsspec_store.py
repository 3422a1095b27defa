"""A table root on any fsspec file system: ``memory://``, S3 (s3fs) and others.

Atomic publish per backend:

* ``memory://``: a process-wide lock around check-and-create (the store is per process).
* S3: a conditional PUT (``If-None-Match: *``). A 412 means the key exists; because botocore may
  retry a PUT whose first attempt landed, a 412 is followed by a read-back that compares the
  stored bytes with ours (every snapshot carries a unique nonce). A 409 (a concurrent conditional
  write in flight) is retried with backoff.
* anything else: no atomic create (``atomic_create = False``); the committer refuses to publish
  unless the user opts into single-writer mode.

Listing caches of fsspec are invalidated before every listing and existence probe, so other
processes' writes are always seen.
"""

from __future__ import annotations

import random
import threading
import time
from typing import IO, Any

from appendtable.errors import ObjectNotFoundError
from appendtable.storage.base import FileInfo, Storage
from appendtable.storage.translate import is_precondition_failed, is_transient, translated

__all__ = ["FsspecStorage"]

_MEMORY_LOCK = threading.Lock()
_S3_PROTOCOLS = frozenset({"s3", "s3a"})
_CONFLICT_RETRIES = 8


class FsspecStorage(Storage):
    """Files under ``root_path`` of the fsspec file system ``fs``."""

    def __init__(self, fs: Any, root_path: str, uri_root: str) -> None:
        super().__init__(uri_root)
        self.fs = fs
        self.root_path = root_path.rstrip("/")
        protocols = fs.protocol if isinstance(fs.protocol, tuple | list) else (fs.protocol,)
        self._is_memory = "memory" in protocols
        self._is_s3 = bool(_S3_PROTOCOLS.intersection(protocols))
        self.backend = "memory" if self._is_memory else "s3" if self._is_s3 else str(protocols[0])
        self.atomic_create = self._is_memory or self._is_s3

    def _full(self, path: str) -> str:
        return f"{self.root_path}/{path}" if path else self.root_path

    def _make_parent(self, full: str) -> None:
        """Directory-based file systems need the parent; object stores have no directories
        (and s3fs.makedirs could try to create a bucket)."""
        if not self._is_s3:
            self.fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)

    def read(self, path: str) -> bytes:
        with translated("read", self.uri(path)):
            data: bytes = self.fs.cat_file(self._full(path))
            return data

    def write(self, path: str, data: bytes) -> None:
        full = self._full(path)
        with translated("write", self.uri(path)):
            self._make_parent(full)
            self.fs.pipe_file(full, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        full = self._full(path)
        with translated("publish", self.uri(path)):
            if self._is_memory:
                with _MEMORY_LOCK:
                    if self.fs.exists(full):
                        return False
                    self._make_parent(full)
                    self.fs.pipe_file(full, data)
                    return True
            if self._is_s3:
                return self._s3_create(path, full, data)
            # No atomic primitive: best effort for single-writer mode only.
            self.fs.invalidate_cache(full)
            if self.fs.exists(full):
                return False
            self._make_parent(full)
            self.fs.pipe_file(full, data)
            return True

    def _s3_create(self, path: str, full: str, data: bytes) -> bool:
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self.fs.pipe_file(full, data, mode="create")
                return True
            except OSError as exc:
                if is_precondition_failed(exc):
                    return self._stored_bytes_equal(full, data)
                if not is_transient(exc) or attempt == _CONFLICT_RETRIES - 1:
                    raise
                time.sleep(min(1.0, 0.01 * 2**attempt) * (1 + random.random()))
        raise AssertionError("unreachable: the loop returns or raises")

    def _stored_bytes_equal(self, full: str, data: bytes) -> bool:
        """After a 412: True if the object holds our bytes (our own retried PUT landed)."""
        self.fs.invalidate_cache(full)
        try:
            stored = self.fs.cat_file(full)
        except FileNotFoundError:
            return False
        return bool(stored == data)

    def exists(self, path: str) -> bool:
        full = self._full(path)
        with translated("exists", self.uri(path)):
            self.fs.invalidate_cache(full)
            return bool(self.fs.exists(full))

    def info(self, path: str) -> FileInfo:
        full = self._full(path)
        with translated("stat", self.uri(path)):
            self.fs.invalidate_cache(full)
            details = self.fs.info(full)
        if details.get("type") == "directory":
            raise ObjectNotFoundError(f"not a file: {self.uri(path)}", path=self.uri(path))
        return FileInfo(path, int(details.get("size") or 0), _mtime_ms(details))

    def listdir(self, directory: str) -> list[FileInfo]:
        full = self._full(directory)
        prefix = f"{directory}/" if directory else ""
        with translated("list", self.uri(directory)):
            self.fs.invalidate_cache(full)
            try:
                entries = self.fs.ls(full, detail=True)
            except FileNotFoundError:
                return []
        found = []
        for entry in entries:
            if entry.get("type") != "file":
                continue
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            found.append(FileInfo(prefix + name, int(entry.get("size") or 0), _mtime_ms(entry)))
        return found

    def walk(self, directory: str = "") -> list[FileInfo]:
        full = self._full(directory)
        with translated("walk", self.uri(directory)):
            self.fs.invalidate_cache(full)
            try:
                entries = self.fs.find(full, detail=True)
            except FileNotFoundError:
                return []
        base = self.root_path.lstrip("/")
        found = []
        for name, entry in entries.items():
            if entry.get("type") != "file":
                continue
            relative = str(name).lstrip("/")[len(base) :].lstrip("/")
            found.append(FileInfo(relative, int(entry.get("size") or 0), _mtime_ms(entry)))
        return found

    def delete(self, path: str) -> None:
        full = self._full(path)
        with translated("delete", self.uri(path)):
            try:
                self.fs.rm_file(full)
            except FileNotFoundError:
                pass

    def open_output(self, path: str) -> IO[bytes]:
        full = self._full(path)
        with translated("open", self.uri(path)):
            self._make_parent(full)
            handle: IO[bytes] = self.fs.open(full, "wb")
            return handle

    def sync(self, path: str) -> None:
        """Object stores and memory make a file durable when it is closed."""

    def local_path(self, path: str) -> str | None:
        return None

    def fsspec(self) -> tuple[Any, str]:
        return self.fs, self.root_path


def _mtime_ms(details: dict[str, Any]) -> int:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = details.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        if isinstance(value, int | float):
            return int(value * 1000)
    return 0
