"""pyarrow reading a table's files through any ``Storage``: the native file system of a
backend that has none of its own (a user's backend, for one).

The bridge is read-only (data files are written through ``Storage.open_output``) and reaches
files through the storage's own operations, so the containment rule and the backend's error
translation apply to every byte pyarrow reads. Paths are ``/<path relative to the root>``
(``Storage.arrow_filesystem`` returns the root ``""``). A file is read in ranges
(``read_range``), so reading a footer never fetches the whole file.
"""

from __future__ import annotations

import io
from typing import Protocol

import pyarrow as pa
import pyarrow.fs as pafs

from appendtable.errors import ObjectNotFoundError, StorageError
from appendtable.storage.entries import FileInfo

__all__ = ["bridged"]


class _Files(Protocol):
    """What the bridge needs of a storage (``Storage`` has it)."""

    backend: str
    root: str

    def read_range(self, path: str, offset: int, length: int) -> bytes: ...

    def info(self, path: str) -> FileInfo: ...

    def walk(self, directory: str = "") -> list[FileInfo]: ...


def bridged(storage: _Files) -> pafs.FileSystem:
    """A pyarrow file system reading ``storage``'s files (paths ``/<relative path>``)."""
    return pafs.PyFileSystem(_Handler(storage))


def _relative(path: str) -> str:
    """The storage path of a bridge path (one leading ``/`` off; the storage checks the rest)."""
    return path[1:] if path.startswith("/") else path


class _RangeReader(io.RawIOBase):
    """One file of the storage as a seekable binary file, each read one ranged read."""

    def __init__(self, storage: _Files, path: str, size: int) -> None:
        super().__init__()
        self._storage = storage
        self._path = path
        self._size = size
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self._size - self._position)
        if wanted <= 0:
            return 0
        data = self._storage.read_range(self._path, self._position, wanted)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)


class _Handler(pafs.FileSystemHandler):  # type: ignore[misc]
    """pyarrow's view of the storage: file information, listings, and ranged reads."""

    def __init__(self, storage: _Files) -> None:
        self._storage = storage

    def get_type_name(self) -> str:
        return f"appendtable-{self._storage.backend}"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: object) -> bool:
        return isinstance(other, _Handler) and other._storage is self._storage

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._file_info(path) for path in paths]

    def _file_info(self, path: str) -> pafs.FileInfo:
        relative = _relative(path)
        if not relative:
            return pafs.FileInfo(path, pafs.FileType.Directory)
        try:
            found = self._storage.info(relative)
        except ObjectNotFoundError:
            if self._storage.walk(relative):
                return pafs.FileInfo(path, pafs.FileType.Directory)
            return pafs.FileInfo(path, pafs.FileType.NotFound)
        return pafs.FileInfo(
            path, pafs.FileType.File, size=found.size, mtime_ns=found.mtime_ms * 1_000_000
        )

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = _relative(selector.base_dir).rstrip("/")
        prefix = f"{base}/" if base else ""
        found: dict[str, pafs.FileInfo] = {}
        for info in self._storage.walk(base):
            parts = info.path[len(prefix) :].split("/")
            depth = len(parts) if selector.recursive else 1
            for index in range(min(depth, len(parts) - 1)):
                directory = prefix + "/".join(parts[: index + 1])
                found.setdefault(directory, pafs.FileInfo(f"/{directory}", pafs.FileType.Directory))
            if len(parts) == 1 or selector.recursive:
                found[info.path] = pafs.FileInfo(
                    f"/{info.path}",
                    pafs.FileType.File,
                    size=info.size,
                    mtime_ns=info.mtime_ms * 1_000_000,
                )
        if not found and not selector.allow_not_found:
            raise ObjectNotFoundError(
                f"list: directory not found: {self._storage.root}/{base}",
                path=f"{self._storage.root}/{base}",
                operation="list",
            )
        return list(found.values())

    def open_input_file(self, path: str) -> pa.NativeFile:
        relative = _relative(path)
        size = self._storage.info(relative).size
        return pa.PythonFile(_RangeReader(self._storage, relative, size), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def _read_only(self, operation: str, path: str) -> StorageError:
        return StorageError(
            f"{operation}: {self._storage.root}/{_relative(path)} is read-only through pyarrow "
            "(a table's files are written through its storage)",
            path=f"{self._storage.root}/{_relative(path)}",
            operation=operation,
        )

    def create_dir(self, path: str, recursive: bool) -> None:
        raise self._read_only("mkdir", path)

    def delete_dir(self, path: str) -> None:
        raise self._read_only("delete", path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        raise self._read_only("delete", path)

    def delete_root_dir_contents(self) -> None:
        raise self._read_only("delete", "/")

    def delete_file(self, path: str) -> None:
        raise self._read_only("delete", path)

    def move(self, src: str, dest: str) -> None:
        raise self._read_only("rename", src)

    def copy_file(self, src: str, dest: str) -> None:
        raise self._read_only("copy", dest)

    def open_output_stream(self, path: str, metadata: object = None) -> pa.NativeFile:
        raise self._read_only("write", path)

    def open_append_stream(self, path: str, metadata: object = None) -> pa.NativeFile:
        raise self._read_only("write", path)
