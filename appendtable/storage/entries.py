"""What a listing returns: files with their sizes and times, and one directory's entries."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DirectoryListing", "FileInfo"]


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
