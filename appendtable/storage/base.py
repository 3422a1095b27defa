"""The storage contract: bytes at paths relative to a table root.

This is the only I/O boundary of the library. Implementations translate every foreign exception
into the ``StorageError`` family (see ``storage.translate``). The one operation that races is
:meth:`Storage.put_if_absent`, the commit point of the table.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from appendtable.storage.containment import check_contained

__all__ = ["DirectoryListing", "FileInfo", "Storage", "is_temp_name"]

#: A temporary file of a write in flight: ``.<name>.<hex>.tmp`` beside its final name (local
#: disk writes whole files this way, then renames or links them into place).
_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{8,}\.tmp$")


def is_temp_name(name: str) -> bool:
    """Whether the file name ``name`` (no directory) is a temporary file of a write in flight.
    Such a file is never part of the table: listings of the table's files skip it, copies and
    byte counts should too, and orphan removal deletes it only once it is old (see
    ``maintenance.TEMP_FILE_MIN_AGE_MS``)."""
    return _TEMP_NAME.match(name) is not None


@dataclass(frozen=True)
class FileInfo:
    """A file found by listing: its path relative to the root, size and modification time."""

    path: str
    size: int
    mtime_ms: int


@dataclass
class DirectoryListing:
    """The entries directly inside one directory: ``path`` relative to the root ('' for the
    root), subdirectory names, files (``FileInfo.path`` is the bare name) and the names of
    symbolic links and other special files, which are never followed."""

    path: str
    directories: list[str] = field(default_factory=list)
    files: list[FileInfo] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


class Storage(ABC):
    """Files under one root. Paths are ``/``-separated and relative to the root."""

    #: True when ``put_if_absent`` is atomic across processes (and hosts, for object stores).
    atomic_create: bool = False
    #: A short name of the backend for messages: "local", "memory", "s3", ...
    backend: str = "unknown"

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"

    @abstractmethod
    def read(self, path: str) -> bytes:
        """The whole file. Raises ObjectNotFoundError if it does not exist."""

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``path`` from byte ``offset`` (fewer at its end). Raises
        ObjectNotFoundError if it does not exist."""
        return self.read(path)[offset : offset + length]

    @abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Create or replace ``path``. Readers see either nothing/the old content or all of
        ``data``, never a prefix."""

    def create(self, path: str, data: bytes) -> None:
        """Write a new, uniquely named file (nobody else uses the name) durably. Nothing may
        refer to it before ``sync_new`` also made its name durable."""
        self.write(path, data)

    def sync_names(self, paths: Sequence[str]) -> None:  # noqa: B027 - durable on close elsewhere
        """Make the names of files just created durable (their directories, once each)."""

    def sync_file(self, path: str) -> None:  # noqa: B027 - durable on close elsewhere
        """Make a file written through ``open_output`` or a local path durable, with its name."""

    def write_hint(self, path: str, data: bytes) -> None:
        """Replace a hint file atomically but without forcing it to disk: a lost or stale hint
        only costs readers a listing."""
        self.write(path, data)

    @abstractmethod
    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if no file of that name exists.

        Returns True if this call created it (complete content visible at once), False if the
        name was already taken by someone else. Raises ``StorageError`` when the outcome is
        unknown; the caller then reads the file back to find out.
        """

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def info(self, path: str) -> FileInfo:
        """Size and mtime of one file. Raises ObjectNotFoundError."""

    @abstractmethod
    def listdir(self, directory: str) -> list[FileInfo]:
        """Files directly inside ``directory`` (empty if it does not exist), unordered."""

    def listnames(self, directory: str) -> list[str]:
        """Names of the entries directly inside ``directory`` (cheaper than ``listdir`` where
        sizes and times cost extra calls; may include subdirectory names)."""
        return [info.path.rsplit("/", 1)[-1] for info in self.listdir(directory)]

    @abstractmethod
    def walk(self, directory: str = "") -> list[FileInfo]:
        """Every file below ``directory``, recursively (empty if it does not exist)."""

    def walk_tree(self, directory: str = "") -> Iterator[DirectoryListing]:
        """Every directory below ``directory`` (itself first), top-down, as listings; a caller
        may remove names from a listing's ``directories`` to keep the walk out of them.
        Symbolic links are listed and never followed. This default builds the tree from one
        recursive listing (object stores have no directories, only keys)."""
        base = f"{directory}/" if directory else ""
        tree: dict[str, DirectoryListing] = {directory: DirectoryListing(directory)}
        for info in self.walk(directory):
            relative = info.path[len(base) :] if info.path.startswith(base) else info.path
            parts = relative.split("/")
            current = directory
            for part in parts[:-1]:
                child = f"{current}/{part}" if current else part
                if child not in tree:
                    tree[child] = DirectoryListing(child)
                    tree[current].directories.append(part)
                current = child
            tree[current].files.append(FileInfo(parts[-1], info.size, info.mtime_ms))
        pending = [directory]
        while pending:
            listing = tree[pending.pop()]
            yield listing
            prefix = f"{listing.path}/" if listing.path else ""
            pending.extend(prefix + name for name in reversed(listing.directories))

    def checked(self, path: str) -> str:
        """``path`` once it passed the containment rule (for handing a file to another reader,
        such as pyarrow, as ``<fsspec root>/<path>``). Raises PathOutsideTableError."""
        return check_contained(path, self.root)

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove a file; a missing file is not an error."""

    @abstractmethod
    def rename(self, source: str, target: str) -> None:
        """Move a file to ``target``, a new, unused name (its parent is created where
        directories exist). Readers see the file under one name or the other, whole; on object
        stores the move is a server-side copy then a delete. The new name is durable only after
        ``sync_names([target])``. Retrying after a failure is safe."""

    @abstractmethod
    def delete_tree(self, directory: str) -> None:
        """Remove ``directory`` and everything below it; a missing directory is not an error."""

    @abstractmethod
    def open_output(self, path: str) -> IO[bytes]:
        """A binary file to stream a new (uniquely named) file into."""

    @abstractmethod
    def local_path(self, path: str) -> str | None:
        """The absolute local file-system path, when the storage is a local directory."""

    def ensure_parent(self, path: str) -> None:  # noqa: B027 - an optional hook
        """Create the parent directory of ``path`` where directories exist (local disk)."""

    @abstractmethod
    def fsspec(self) -> tuple[Any, str]:
        """The fsspec file system and the root path within it (for engines such as pyarrow)."""

    def uri(self, path: str) -> str:
        """The full URI of ``path``, for messages."""
        return f"{self.root}/{path}" if path else self.root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"
