"""A table root on the local file system, through ``os`` directly (not fsspec).

Publishing (``put_if_absent``) writes a temp file in the target directory, fsyncs it, and
``os.link``s it to the final name: ``link(2)`` fails with EEXIST if the name exists, and the name
appears with its complete content. The directory is then fsynced. ``open(path, 'x')`` is never
used (a reader could see an empty file, and a crash would leave a torn file blocking the id), and
neither is check-then-rename (two writers could both win).
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import uuid
from collections.abc import Sequence
from typing import IO, Any

import fsspec

from appendtable.errors import AtomicCreateUnsupportedError
from appendtable.storage.base import FileInfo, Storage
from appendtable.storage.translate import translated

__all__ = ["LocalStorage"]

_NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}
)


class LocalStorage(Storage):
    """Files under a local directory. ``fsync`` makes writes durable before they are published."""

    atomic_create = True
    backend = "local"

    def __init__(self, root: str, *, fsync: bool = True) -> None:
        super().__init__(os.path.abspath(os.path.expanduser(root)))
        self.fsync_enabled = fsync
        self._known_dirs: set[str] = set()
        self._dirs_lock = threading.Lock()

    def _abs(self, path: str) -> str:
        return os.path.join(self.root, path) if path else self.root

    def _ensure_dir(self, directory: str) -> None:
        if directory in self._known_dirs:
            return
        os.makedirs(directory, exist_ok=True)
        with self._dirs_lock:
            self._known_dirs.add(directory)

    def _write_temp(self, final: str, data: bytes) -> str:
        directory, name = os.path.split(final)
        self._ensure_dir(directory)
        temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        self._write_new(temp, data)
        return temp

    def _write_new(self, path: str, data: bytes) -> None:
        """Create ``path`` (failing if it exists) holding ``data``, fsynced when enabled."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, data)
            if self.fsync_enabled:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _sync_dir(self, directory: str) -> None:
        if not self.fsync_enabled:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self, path: str) -> bytes:
        with translated("read", self.uri(path)), open(self._abs(path), "rb") as handle:
            return handle.read()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with translated("read", self.uri(path)), open(self._abs(path), "rb") as handle:
            return os.pread(handle.fileno(), length, offset)

    def write(self, path: str, data: bytes) -> None:
        final = self._abs(path)
        with translated("write", self.uri(path)):
            temp = self._write_temp(final, data)
            try:
                os.replace(temp, final)
            except OSError:
                _unlink_quietly(temp)
                raise

    def create(self, path: str, data: bytes) -> None:
        final = self._abs(path)
        with translated("write", self.uri(path)):
            self._ensure_dir(os.path.dirname(final))
            self._write_new(final, data)

    def sync_file(self, path: str) -> None:
        if not self.fsync_enabled:
            return
        final = self._abs(path)
        with translated("fsync", self.uri(path)):
            _fsync_path(final)
            _fsync_path(os.path.dirname(final))

    def sync_names(self, paths: Sequence[str]) -> None:
        """The files were fsynced when written; fsync each of their directories once, so
        their names are durable too."""
        if not self.fsync_enabled or not paths:
            return
        with translated("fsync", self.uri(paths[0])):
            for directory in sorted({os.path.dirname(self._abs(p)) for p in paths}):
                _fsync_path(directory)

    def write_hint(self, path: str, data: bytes) -> None:
        final = self._abs(path)
        directory, name = os.path.split(final)
        with translated("write", self.uri(path)):
            self._ensure_dir(directory)
            temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            try:
                os.replace(temp, final)
            except OSError:
                _unlink_quietly(temp)
                raise

    def put_if_absent(self, path: str, data: bytes) -> bool:
        final = self._abs(path)
        with translated("publish", self.uri(path)):
            temp = self._write_temp(final, data)
            try:
                os.link(temp, final)
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno in _NO_HARD_LINKS:
                    raise AtomicCreateUnsupportedError(
                        f"the file system under {self.root} does not support hard links, so "
                        "snapshots cannot be published atomically; set option "
                        "'commit.single-writer' = 'true' if only one process ever writes",
                        path=self.uri(path),
                        operation="publish",
                    ) from exc
                raise
            finally:
                _unlink_quietly(temp)
            self._sync_dir(os.path.dirname(final))
            return True

    def exists(self, path: str) -> bool:
        return os.path.exists(self._abs(path))

    def info(self, path: str) -> FileInfo:
        with translated("stat", self.uri(path)):
            stat = os.stat(self._abs(path))
        return FileInfo(path, stat.st_size, int(stat.st_mtime * 1000))

    def listdir(self, directory: str) -> list[FileInfo]:
        base = self._abs(directory)
        prefix = f"{directory}/" if directory else ""
        with translated("list", self.uri(directory)):
            try:
                entries = list(os.scandir(base))
            except FileNotFoundError:
                return []
            found = []
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    try:
                        stat = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # deleted while listing
                        continue
                    found.append(
                        FileInfo(prefix + entry.name, stat.st_size, int(stat.st_mtime * 1000))
                    )
            return found

    def listnames(self, directory: str) -> list[str]:
        with translated("list", self.uri(directory)):
            try:
                return os.listdir(self._abs(directory))
            except FileNotFoundError:
                return []

    def walk(self, directory: str = "") -> list[FileInfo]:
        base = self._abs(directory)
        found: list[FileInfo] = []
        with translated("walk", self.uri(directory)):
            for current, _dirs, files in os.walk(base):
                relative_dir = os.path.relpath(current, self.root)
                for name in files:
                    relative = name if relative_dir == "." else f"{relative_dir}/{name}"
                    try:
                        stat = os.stat(os.path.join(current, name))
                    except FileNotFoundError:
                        continue
                    found.append(FileInfo(relative, stat.st_size, int(stat.st_mtime * 1000)))
        return found

    def delete(self, path: str) -> None:
        with translated("delete", self.uri(path)):
            _unlink_quietly(self._abs(path))

    def rename(self, source: str, target: str) -> None:
        final = self._abs(target)
        with translated("rename", self.uri(source)):
            self._ensure_dir(os.path.dirname(final))
            try:
                os.rename(self._abs(source), final)
            except FileNotFoundError:
                if not os.path.exists(final):  # not a retry of a move that already happened
                    raise

    def delete_tree(self, directory: str) -> None:
        base = self._abs(directory)
        with translated("delete", self.uri(directory)):
            try:
                shutil.rmtree(base)
            except FileNotFoundError:
                pass
        with self._dirs_lock:
            self._known_dirs = {d for d in self._known_dirs if not _is_within(d, base)}

    def open_output(self, path: str) -> IO[bytes]:
        final = self._abs(path)
        with translated("open", self.uri(path)):
            self._ensure_dir(os.path.dirname(final))
            return open(final, "wb")

    def local_path(self, path: str) -> str:
        return self._abs(path)

    def ensure_parent(self, path: str) -> None:
        with translated("mkdir", self.uri(path)):
            self._ensure_dir(os.path.dirname(self._abs(path)))

    def fsspec(self) -> tuple[Any, str]:
        return fsspec.filesystem("file"), self.root

    def uri(self, path: str) -> str:
        return self._abs(path)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
