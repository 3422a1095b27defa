"""The storage contract: bytes at paths relative to a table root, and how a backend plugs in.

This is the only I/O boundary of the library. ``Storage``'s public operations are final: each
checks its paths against the containment rule (``storage.containment``), then calls the
backend's hook of the same name with a leading underscore (``read`` → ``_read``) inside the
backend's error translation (``Storage.translator``, see ``storage.translate``). A backend
implements hooks only, receives only contained paths, and may raise ``OSError``s (or its
library's errors, which its translator knows): no backend, built in or registered from outside
(``storage.registry``), can skip the containment check or leak a foreign exception.

The one operation that races is :meth:`Storage.put_if_absent`, the commit point of the table.
:meth:`Storage.replace_if_unchanged` replaces a small record (a consumer's progress) only if it
still holds the version its writer last saw, so that a request the network delivers late
cannot overwrite a later one.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import IO, final

import pyarrow.fs as pafs

from appendtable.storage.arrow_bridge import bridged
from appendtable.storage.containment import check_contained
from appendtable.storage.entries import DirectoryListing, FileInfo
from appendtable.storage.translate import OS_ERRORS, Translated, Translator

__all__ = [
    "DirectoryListing",
    "FileInfo",
    "Storage",
    "content_version",
    "final_operations",
    "is_temp_name",
]

#: A temporary file of a write in flight: ``.<name>.<hex>.tmp`` beside its final name (local
#: disk writes whole files this way, then renames or links them into place).
_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{8,}\.tmp\Z")


def is_temp_name(name: str) -> bool:
    """Whether the file name ``name`` (no directory) is a temporary file of a write in flight.
    Such a file is never part of the table: listings of the table's files skip it, copies and
    byte counts should too, and orphan removal deletes it only once it is old (see
    ``maintenance.TEMP_FILE_MIN_AGE_MS``)."""
    return _TEMP_NAME.match(name) is not None


class Storage(ABC):
    """Files under one root. Paths are ``/``-separated and relative to the root.

    To write a backend, subclass and implement the abstract hooks (``_read``, ``_write``,
    ``_put_if_absent``, ``_exists``, ``_info``, ``_listdir``, ``_walk``, ``_delete``,
    ``_rename``, ``_delete_tree``, ``_open_output``); the other hooks have defaults. Hooks
    receive paths that passed the containment rule ('' is the root, where a directory is
    meant) and raise ``FileNotFoundError`` for a missing file. Set ``atomic_create`` only if
    ``_put_if_absent`` is atomic across every process that may write the table."""

    #: True when ``put_if_absent`` is atomic across processes (and hosts, for object stores).
    atomic_create: bool = False
    #: True when the store itself checks ``replace_if_unchanged``'s version with the write (a
    #: conditional request), so the write is refused whenever it arrives after another one.
    #: Elsewhere the check and the write are two steps: right for stores whose requests cannot
    #: arrive late (local disk, memory), not for two writers racing.
    conditional_replace: bool = False
    #: A short name of the backend for messages: "local", "memory", "s3", ...
    backend: str = "unknown"
    #: How the backend's failures become ``StorageError``s.
    translator: Translator = OS_ERRORS

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"
        self._arrow: tuple[pafs.FileSystem, str] | None = None

    # ---- the operations: final, contained, translated ---------------------------------------

    @final
    def read(self, path: str) -> bytes:
        """The whole file. Raises ObjectNotFoundError if it does not exist."""
        relative = self._contained(path)
        with self.translated("read", relative):
            return self._read(relative)

    @final
    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``path`` from byte ``offset`` (fewer at its end). Raises
        ObjectNotFoundError if it does not exist."""
        relative = self._contained(path)
        with self.translated("read", relative):
            return self._read_range(relative, offset, length)

    @final
    def write(self, path: str, data: bytes) -> None:
        """Create or replace ``path``. Readers see either nothing/the old content or all of
        ``data``, never a prefix."""
        relative = self._contained(path)
        with self.translated("write", relative):
            self._write(relative, data)

    @final
    def create(self, path: str, data: bytes) -> None:
        """Write a new, uniquely named file (nobody else uses the name) durably. Nothing may
        refer to it before ``sync_names`` also made its name durable."""
        relative = self._contained(path)
        with self.translated("write", relative):
            self._create(relative, data)

    @final
    def write_hint(self, path: str, data: bytes) -> None:
        """Replace a hint file atomically but without forcing it to disk: a lost or stale hint
        only costs readers a listing."""
        relative = self._contained(path)
        with self.translated("write", relative):
            self._write_hint(relative, data)

    @final
    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if no file of that name exists.

        Returns True if this call created it (complete content visible at once), False if the
        name was already taken by someone else. Raises ``StorageError`` when the outcome is
        unknown; the caller then reads the file back to find out.
        """
        relative = self._contained(path)
        with self.translated("publish", relative):
            return self._put_if_absent(relative, data)

    @final
    def version(self, path: str) -> str | None:
        """A token for the content ``path`` holds now (None if it does not exist), for
        ``replace_if_unchanged``: an object store's ETag or generation, elsewhere a digest of
        the content."""
        relative = self._contained(path)
        with self.translated("read", relative):
            return self._version(relative)

    @final
    def replace_if_unchanged(self, path: str, data: bytes, version: str | None) -> str | None:
        """Replace ``path`` with ``data`` if it still holds ``version`` (from ``version`` or
        an earlier call of this; None: only if it does not exist). Returns the version written,
        or None if ``path`` holds another version (nothing written). Atomic as ``write``.

        On stores with ``conditional_replace`` the condition travels with the request: a
        request delivered late (after its client gave up and wrote again) finds another
        version and is refused. A retried request whose first attempt landed is recognised by
        its content, as in ``put_if_absent`` (callers make their content unique). Raises
        ``StorageError`` when the outcome is unknown."""
        relative = self._contained(path)
        with self.translated("write", relative):
            return self._replace_if_unchanged(relative, data, version)

    @final
    def exists(self, path: str) -> bool:
        """Whether the file ``path`` exists now (never answered from a cache)."""
        relative = self._contained(path)
        with self.translated("exists", relative):
            return self._exists(relative)

    @final
    def info(self, path: str) -> FileInfo:
        """Size and mtime of one file. Raises ObjectNotFoundError."""
        relative = self._contained(path)
        with self.translated("stat", relative):
            return self._info(relative)

    @final
    def listdir(self, directory: str) -> list[FileInfo]:
        """Files directly inside ``directory`` ('' is the root; empty if it does not exist),
        unordered, each with its path relative to the root."""
        relative = self._contained(directory, directory=True)
        with self.translated("list", relative):
            return self._listdir(relative)

    @final
    def listnames(self, directory: str) -> list[str]:
        """Names of the entries directly inside ``directory`` (cheaper than ``listdir`` where
        sizes and times cost extra calls; may include subdirectory names)."""
        relative = self._contained(directory, directory=True)
        with self.translated("list", relative):
            return self._listnames(relative)

    @final
    def walk(self, directory: str = "") -> list[FileInfo]:
        """Every file below ``directory``, recursively (empty if it does not exist)."""
        relative = self._contained(directory, directory=True)
        with self.translated("walk", relative):
            return self._walk(relative)

    @final
    def walk_tree(self, directory: str = "") -> Iterator[DirectoryListing]:
        """Every directory below ``directory`` (itself first), top-down, as listings; a caller
        may remove names from a listing's ``directories`` to keep the walk out of them.
        Symbolic links are listed and never followed."""
        return self._walk_tree(self._contained(directory, directory=True))

    @final
    def delete(self, path: str) -> None:
        """Remove a file; a missing file is not an error."""
        relative = self._contained(path)
        with self.translated("delete", relative):
            self._delete(relative)

    @final
    def rename(self, source: str, target: str) -> None:
        """Move a file to ``target``, a new, unused name (its parent is created where
        directories exist). Readers see the file under one name or the other, whole; on object
        stores the move is a server-side copy then a delete. The new name is durable only after
        ``sync_names([target])``. Retrying after a failure is safe."""
        contained_target = self._contained(target)
        relative = self._contained(source)
        with self.translated("rename", relative):
            self._rename(relative, contained_target)

    @final
    def delete_tree(self, directory: str) -> None:
        """Remove ``directory`` and everything below it; a missing directory is not an error.
        (Never the root: ``directory`` must not be empty.)"""
        relative = self._contained(directory)
        with self.translated("delete", relative):
            self._delete_tree(relative)

    @final
    def open_output(self, path: str) -> IO[bytes]:
        """A binary file to stream a new (uniquely named) file into; it appears when closed.
        (Failures while streaming are the caller's to translate: ``translated``.)"""
        relative = self._contained(path)
        with self.translated("open", relative):
            return self._open_output(relative)

    @final
    def sync_file(self, path: str) -> None:
        """Make a file written through ``open_output`` or a local path durable, with its name."""
        relative = self._contained(path)
        with self.translated("fsync", relative):
            self._sync_file(relative)

    @final
    def sync_names(self, paths: Sequence[str]) -> None:
        """Make the names of files just created durable (their directories, once each)."""
        if not paths:
            return
        contained = [self._contained(path) for path in paths]
        with self.translated("fsync", contained[0]):
            self._sync_names(contained)

    @final
    def ensure_parent(self, path: str) -> None:
        """Create the parent directory of ``path`` where directories exist (local disk)."""
        directory = path.rpartition("/")[0]
        relative = self._contained(directory, directory=True)
        with self.translated("mkdir", relative):
            self._ensure_directory(relative)

    @final
    def local_path(self, path: str) -> str | None:
        """The absolute local file-system path of ``path`` ('' is the root), when the storage
        is a local directory; None otherwise."""
        relative = self._contained(path, directory=True)
        with self.translated("open", relative):
            return self._local_path(relative)

    @final
    def checked(self, path: str) -> str:
        """``path`` once it passed the containment rule (for handing a file to another reader,
        such as pyarrow, as ``<arrow_filesystem root>/<path>``). Raises PathOutsideTableError."""
        relative = self._contained(path)
        with self.translated("open", relative):
            self._check_handoff(relative)
        return relative

    @final
    def hadoop_uri(self, path: str) -> str:
        """The URI under which Hadoop's file systems (Spark's own Parquet reader and writer)
        reach ``path`` ('' is the root)."""
        relative = self._contained(path, directory=True)
        with self.translated("open", relative):
            return self._hadoop_uri(relative)

    @final
    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """A pyarrow file system and the root's path in it, for reading data files natively
        (``<root>/<checked(path)>``). Built once per storage."""
        if self._arrow is None:
            self._arrow = self._arrow_filesystem()
        return self._arrow

    @final
    def translated(self, operation: str, path: str) -> Translated:
        """A block of I/O on ``path``, its failures translated as this backend's (around every
        hook, and around another library's I/O on the storage's files: pyarrow reading or
        writing a data file)."""
        return Translated(self.translator, operation, path, self.uri)

    @final
    def _contained(self, path: str, *, directory: bool = False) -> str:
        """``path`` after the containment rule ('' is allowed for a ``directory``: the root)."""
        return "" if directory and path == "" else check_contained(path, self.root)

    # ---- what a backend implements -----------------------------------------------------------

    @abstractmethod
    def _read(self, path: str) -> bytes: ...

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        return self._read(path)[offset : offset + length]

    @abstractmethod
    def _write(self, path: str, data: bytes) -> None: ...

    def _create(self, path: str, data: bytes) -> None:
        self._write(path, data)

    def _write_hint(self, path: str, data: bytes) -> None:
        self._write(path, data)

    @abstractmethod
    def _put_if_absent(self, path: str, data: bytes) -> bool: ...

    def _version(self, path: str) -> str | None:
        """A digest of the content (a store with versions of its own overrides this): a
        rewrite with the same bytes counts as unchanged, which is harmless, as they are the
        same."""
        try:
            return content_version(self._read(path))
        except FileNotFoundError:
            return None

    def _replace_if_unchanged(self, path: str, data: bytes, version: str | None) -> str | None:
        """Check, then write (see ``conditional_replace``)."""
        if self._version(path) != version:
            return None
        self._write(path, data)
        return content_version(data)

    @abstractmethod
    def _exists(self, path: str) -> bool: ...

    @abstractmethod
    def _info(self, path: str) -> FileInfo: ...

    @abstractmethod
    def _listdir(self, directory: str) -> list[FileInfo]: ...

    def _listnames(self, directory: str) -> list[str]:
        return [info.path.rsplit("/", 1)[-1] for info in self._listdir(directory)]

    @abstractmethod
    def _walk(self, directory: str) -> list[FileInfo]: ...

    def _walk_tree(self, directory: str) -> Iterator[DirectoryListing]:
        """Built from one recursive listing (object stores have no directories, only keys)."""
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

    @abstractmethod
    def _delete(self, path: str) -> None: ...

    @abstractmethod
    def _rename(self, source: str, target: str) -> None: ...

    @abstractmethod
    def _delete_tree(self, directory: str) -> None: ...

    @abstractmethod
    def _open_output(self, path: str) -> IO[bytes]: ...

    def _sync_file(self, path: str) -> None:  # noqa: B027 - durable on close elsewhere
        """Nothing to do where a file is durable once closed (object stores)."""

    def _sync_names(self, paths: list[str]) -> None:  # noqa: B027 - durable on close elsewhere
        """Nothing to do where names are durable once the files are closed."""

    def _ensure_directory(self, directory: str) -> None:  # noqa: B027 - an optional hook
        """Nothing to do where there are no directories."""

    def _local_path(self, path: str) -> str | None:
        return None

    def _check_handoff(self, path: str) -> None:  # noqa: B027 - an optional hook
        """Refuse ``path`` where another reader could be led outside the root by it (local
        disk: a symbolic link); nothing to check elsewhere."""

    def _hadoop_uri(self, path: str) -> str:
        return self.uri(path)

    def _arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """pyarrow reaching the files through this storage's own operations (read-only)."""
        return bridged(self), ""

    # ---- optional ----------------------------------------------------------------------------

    def parent(self) -> Storage | None:
        """The same store rooted at the directory above the root, or None at the top (or where
        the backend cannot say). Used only to refuse a table inside another table."""
        return None

    def uri(self, path: str) -> str:
        """The full URI of ``path``, for messages."""
        return f"{self.root}/{path}" if path else self.root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"


def content_version(data: bytes) -> str:
    """The version token of stores without versions of their own: a digest of the content."""
    return hashlib.sha256(data).hexdigest()


def final_operations() -> frozenset[str]:
    """The names of ``Storage``'s final operations: the ones that apply the containment rule,
    which no backend may override."""
    return frozenset(
        name for name, value in vars(Storage).items() if getattr(value, "__final__", False)
    )
