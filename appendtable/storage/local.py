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
import stat
import threading
import uuid
from collections.abc import Iterator
from typing import IO

import pyarrow.fs as pafs

from appendtable.errors import AtomicCreateUnsupportedError, PathOutsideTableError
from appendtable.storage.base import Storage
from appendtable.storage.entries import DirectoryListing, FileInfo

__all__ = ["LocalStorage"]

_NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}
)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC


class LocalStorage(Storage):
    """Files under a local directory. ``fsync`` makes writes durable before they are published.

    Containment (see ``storage.containment`` and docs/security.md): ``Storage`` checks every
    path by the rule before any I/O, and no symbolic link below the root is followed. Files
    are opened, created, moved and deleted through directory descriptors reached one component
    at a time with ``O_NOFOLLOW`` (a link swapped in meanwhile makes the call fail, it never
    redirects it); paths handed to other readers and writers (``local_path``, ``checked``)
    are checked for links just before."""

    atomic_create = True
    backend = "local"

    def __init__(self, root: str, *, fsync: bool = True) -> None:
        super().__init__(os.path.abspath(os.path.expanduser(root)))
        self.fsync_enabled = fsync
        self._known_dirs: set[str] = set()
        self._dirs_lock = threading.Lock()

    def _abs(self, path: str) -> str:
        """The absolute path of a contained ``path`` ('' is the root)."""
        return os.path.join(self.root, path) if path else self.root

    # ---- reaching a directory without following links ---------------------------------------

    def _link_error(self, relative: str) -> PathOutsideTableError:
        return PathOutsideTableError(
            f"refused path {self.root}/{relative}: it passes through a symbolic link, which could "
            "lead outside the table (links inside a table are never followed)",
            path=f"{self.root}/{relative}",
        )

    def _open_dir(self, relative_dir: str, *, create: bool) -> int:
        """A descriptor of directory ``relative_dir`` ('' is the root), reached without
        following symbolic links; missing directories are made when ``create``."""
        if create and not os.path.isdir(self.root):
            os.makedirs(self.root, exist_ok=True)
        fd = os.open(self.root, _DIR_FLAGS)
        done: list[str] = []
        try:
            for part in relative_dir.split("/") if relative_dir else ():
                done.append(part)
                child = self._open_child(fd, part, "/".join(done), create=create)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_child(self, fd: int, name: str, relative: str, *, create: bool) -> int:
        try:
            return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, fd):
                raise self._link_error(relative) from None
            raise
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
        except FileExistsError:
            pass
        return self._open_child(fd, name, relative, create=False)

    def _parent(self, path: str, *, create: bool = False) -> tuple[int, str]:
        """(descriptor of the directory holding ``path``, the file's name in it)."""
        directory, _, name = path.rpartition("/")
        return self._open_dir(directory, create=create), name

    def _no_links(self, relative: str) -> None:
        """Raise if a component of ``relative`` below the root is a symbolic link (for paths
        handed to other libraries, which follow links)."""
        current = self.root
        done: list[str] = []
        for part in relative.split("/") if relative else ():
            current = os.path.join(current, part)
            done.append(part)
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return
            if stat.S_ISLNK(mode):
                raise self._link_error("/".join(done))

    def _check_handoff(self, path: str) -> None:
        self._no_links(path)

    # ---- files ------------------------------------------------------------------------------

    def _write_new_at(self, fd: int, name: str, data: bytes, *, sync: bool) -> None:
        """Create ``name`` in directory ``fd`` (failing if it exists) holding ``data``."""
        file_fd = os.open(name, _NEW_FLAGS, 0o644, dir_fd=fd)
        try:
            _write_all(file_fd, data)
            if sync:
                os.fsync(file_fd)
        finally:
            os.close(file_fd)

    def _sync_fd(self, fd: int) -> None:
        if self.fsync_enabled:
            os.fsync(fd)

    def _read_fd(self, path: str) -> int:
        fd, name = self._parent(path)
        try:
            return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link_error(path) from None
            raise
        finally:
            os.close(fd)

    def _read(self, path: str) -> bytes:
        with open(self._read_fd(path), "rb") as handle:
            return handle.read()

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        file_fd = self._read_fd(path)
        try:
            return os.pread(file_fd, length, offset)
        finally:
            os.close(file_fd)

    def _replace(self, path: str, data: bytes, *, sync: bool) -> None:
        """Write a temp file beside ``path`` and rename it over ``path`` (whole or nothing)."""
        fd, name = self._parent(path, create=True)
        try:
            temp = temp_name(name)
            self._write_new_at(fd, temp, data, sync=sync)
            try:
                os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except OSError:
                _unlink_quietly(temp, fd)
                raise
        finally:
            os.close(fd)

    def _write(self, path: str, data: bytes) -> None:
        self._replace(path, data, sync=self.fsync_enabled)

    def _create(self, path: str, data: bytes) -> None:
        fd, name = self._parent(path, create=True)
        try:
            self._write_new_at(fd, name, data, sync=self.fsync_enabled)
        finally:
            os.close(fd)

    def _sync_file(self, path: str) -> None:
        if not self.fsync_enabled:
            return
        fd, name = self._parent(path)
        try:
            file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=fd)
            try:
                os.fsync(file_fd)
            finally:
                os.close(file_fd)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _sync_names(self, paths: list[str]) -> None:
        """The files were fsynced when written; fsync each of their directories once, so
        their names are durable too."""
        if not self.fsync_enabled:
            return
        for directory in sorted({path.rpartition("/")[0] for path in paths}):
            fd = self._open_dir(directory, create=False)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _write_hint(self, path: str, data: bytes) -> None:
        self._replace(path, data, sync=False)

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        fd, name = self._parent(path, create=True)
        try:
            return self._link_new(fd, name, data, path)
        finally:
            os.close(fd)

    def _link_new(self, fd: int, name: str, data: bytes, path: str) -> bool:
        temp = temp_name(name)
        self._write_new_at(fd, temp, data, sync=self.fsync_enabled)
        try:
            os.link(temp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
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
            _unlink_quietly(temp, fd)
        self._sync_fd(fd)
        return True

    def _exists(self, path: str) -> bool:
        return os.path.lexists(self._abs(path))

    def _info(self, path: str) -> FileInfo:
        fd, name = self._parent(path)
        try:
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
        return FileInfo(path, found.st_size, int(found.st_mtime * 1000))

    def _listdir(self, directory: str) -> list[FileInfo]:
        prefix = f"{directory}/" if directory else ""
        return [
            FileInfo(prefix + info.path, info.size, info.mtime_ms)
            for info in self._list_directory(directory).files
        ]

    def _list_directory(self, directory: str) -> DirectoryListing:
        """The entries of a contained ``directory`` (translated: a walk calls this lazily)."""
        with self.translated("list", directory):
            try:
                fd = self._open_dir(directory, create=False)
            except FileNotFoundError:
                return DirectoryListing(directory)
            try:
                return _scan(fd, directory)
            finally:
                os.close(fd)

    def _listnames(self, directory: str) -> list[str]:
        try:
            fd = self._open_dir(directory, create=False)
        except FileNotFoundError:
            return []
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def _walk(self, directory: str) -> list[FileInfo]:
        found: list[FileInfo] = []
        for listing in self._walk_tree(directory):
            prefix = f"{listing.path}/" if listing.path else ""
            found.extend(FileInfo(prefix + f.path, f.size, f.mtime_ms) for f in listing.files)
        return found

    def _walk_tree(self, directory: str) -> Iterator[DirectoryListing]:
        """Top-down, never through a symbolic link (links are listed, not followed)."""
        pending = [directory]
        while pending:
            current = pending.pop()
            listing = self._list_directory(current)
            yield listing
            prefix = f"{current}/" if current else ""
            pending.extend(prefix + name for name in reversed(listing.directories))

    def _delete(self, path: str) -> None:
        try:
            fd, name = self._parent(path)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            _unlink_quietly(name, fd)
        finally:
            os.close(fd)

    def _rename(self, source: str, target: str) -> None:
        source_fd, source_name = self._parent(source)
        try:
            target_fd, target_name = self._parent(target, create=True)
            try:
                if _is_link(source_name, source_fd):
                    raise self._link_error(source)
                try:
                    os.rename(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
                except FileNotFoundError:
                    if not os.path.lexists(self._abs(target)):  # not a retried move
                        raise
            finally:
                os.close(target_fd)
        finally:
            os.close(source_fd)

    def _delete_tree(self, directory: str) -> None:
        base = self._abs(directory)
        try:
            fd, name = self._parent(directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            if _is_link(name, fd):
                raise self._link_error(directory)
            try:
                shutil.rmtree(name, dir_fd=fd)
            except FileNotFoundError:
                pass
        finally:
            os.close(fd)
        with self._dirs_lock:
            self._known_dirs = {d for d in self._known_dirs if not _is_within(d, base)}

    def _open_output(self, path: str) -> IO[bytes]:
        fd, name = self._parent(path, create=True)
        try:
            file_fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | _CLOEXEC,
                0o644,
                dir_fd=fd,
            )
        finally:
            os.close(fd)
        return open(file_fd, "wb")

    def _local_path(self, path: str) -> str:
        if not path:
            return self.root
        self._no_links(path)
        return self._abs(path)

    def _ensure_directory(self, directory: str) -> None:
        full = self._abs(directory)
        # (a directory made before may have been removed since by another handle or process,
        # e.g. a staging area removed and made again: known ones are checked, cheaply)
        if full in self._known_dirs and os.path.isdir(full):
            return
        os.close(self._open_dir(directory, create=True))
        with self._dirs_lock:
            self._known_dirs.add(full)

    def _arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        return pafs.LocalFileSystem(), self.root

    def _hadoop_uri(self, path: str) -> str:
        return f"file://{self.uri(path)}"

    def parent(self) -> LocalStorage | None:
        above = os.path.dirname(self.root)
        if above == self.root:
            return None
        return LocalStorage(above, fsync=self.fsync_enabled)

    def uri(self, path: str) -> str:
        return os.path.join(self.root, path) if path else self.root


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _scan(fd: int, directory: str) -> DirectoryListing:
    """One directory's entries from its descriptor: subdirectories, files, symbolic links."""
    listing = DirectoryListing(directory)
    for name in os.listdir(fd):
        try:
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:  # deleted while listing
            continue
        if stat.S_ISLNK(found.st_mode):
            listing.links.append(name)
        elif stat.S_ISDIR(found.st_mode):
            listing.directories.append(name)
        elif stat.S_ISREG(found.st_mode):
            listing.files.append(FileInfo(name, found.st_size, int(found.st_mtime * 1000)))
        else:
            listing.links.append(name)  # a device, fifo or socket: never the table's
    return listing


def temp_name(name: str) -> str:
    """The name of a temporary file beside ``name`` (see ``storage.base.is_temp_name``)."""
    return f".{name}.{uuid.uuid4().hex}.tmp"
