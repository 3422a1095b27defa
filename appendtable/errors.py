"""The exception tree of appendtable (layer 0: imports nothing from the package).

Every error the library raises on purpose derives from :class:`AppendTableError`, so callers
can catch one class. Foreign exceptions (OSError, botocore, msgspec, pyarrow) are translated
at the boundary where they occur and chained with ``raise ... from``::

    AppendTableError
    ├── TableNotFoundError            the URI holds no table
    ├── TableExistsError              create_table on an existing table
    ├── InvalidSchemaError            a bad table definition (partition keys, unsupported types)
    │   └── SchemaChangeError         a refused schema change (names the column and the reason)
    ├── InvalidOptionError            unknown option key, bad value, contradictory options
    ├── InvalidFilterError            a filter that names an unknown column or operator
    ├── InvalidArgumentError          an argument of the wrong type (also a TypeError)
    ├── SchemaMismatchError           input data does not fit the table schema (names the column)
    ├── UnsupportedFormatVersionError table written by a newer format version
    │                                 (deletion vectors), refusing rather than return them
    ├── CorruptMetadataError          checksum mismatch or undecodable metadata (names the file)
    ├── CorruptDataFileError          a data file that is not readable Parquet (names the file)
    ├── PathOutsideTableError         a path that would leave the table root (refused, no I/O)
    ├── PurgeBlockedError             a purge would lose a tag's or a consumer's rows (refused)
    ├── SnapshotNotFoundError         a snapshot id or timestamp that does not exist
    │   └── SnapshotExpiredError      the snapshot existed but was expired
    ├── TagNotFoundError              no tag of that name (also a LookupError)
    ├── TagExistsError                create_tag on a name already taken
    ├── StorageError                  an I/O failure (carries .path and .operation)
    │   ├── ObjectNotFoundError       a file that should exist does not (e.g. a lost data file)
    │   ├── ObjectExistsError         put-if-absent found the name taken
    │   ├── AtomicCreateUnsupportedError  the backend cannot publish atomically
    │   └── TransientStorageError     throttling, timeouts: safe to retry
    └── CommitError
        ├── CommitConflictError       definitely NOT applied: safe to re-plan and retry
        ├── CommitStateUnknownError   the outcome is unknown: never delete its files
        ├── CommitUserReusedError     another writer numbers this commit user's identifiers
        └── ConsumerFencedError       a consumer group member's progress was refused: another
                                      member holds those buckets now (names group and buckets)
"""

from __future__ import annotations

__all__ = [
    "AppendTableError",
    "AtomicCreateUnsupportedError",
    "CommitConflictError",
    "CommitError",
    "CommitStateUnknownError",
    "CommitUserReusedError",
    "ConsumerFencedError",
    "CorruptDataFileError",
    "CorruptMetadataError",
    "InvalidArgumentError",
    "InvalidFilterError",
    "InvalidOptionError",
    "InvalidSchemaError",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "PathOutsideTableError",
    "PurgeBlockedError",
    "SchemaChangeError",
    "SchemaMismatchError",
    "SnapshotExpiredError",
    "SnapshotNotFoundError",
    "StorageError",
    "TableExistsError",
    "TagExistsError",
    "TagNotFoundError",
    "TableNotFoundError",
    "TransientStorageError",
    "UnsupportedFormatVersionError",
]


class AppendTableError(Exception):
    """The root of every error raised by appendtable."""


class TableNotFoundError(AppendTableError):
    """No table exists at the given URI."""


class TableExistsError(AppendTableError):
    """A table already exists at the given URI."""


class InvalidSchemaError(AppendTableError, ValueError):
    """The table definition is not valid (partition keys, unsupported column types).
    ``column`` names the (top-level) column when one is at fault."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


class SchemaChangeError(InvalidSchemaError):
    """A schema change that is not allowed (narrowing, dropping a partition column, a name
    taken, ...) or no longer applies after a concurrent change. ``column`` names the column;
    nothing of the change (or of the write that needed it) landed."""


class InvalidOptionError(AppendTableError, ValueError):
    """An option key is unknown, its value does not parse, or options contradict each other."""


class InvalidFilterError(AppendTableError, ValueError):
    """A filter names an unknown column, an unknown operator, or a value of the wrong type."""


class InvalidArgumentError(AppendTableError, TypeError, ValueError):
    """An argument of the wrong type or form (a snapshot id that is not an integer, an instant
    that is neither epoch milliseconds nor a datetime, ...). The message names the argument."""


class SchemaMismatchError(AppendTableError, ValueError):
    """Input data does not fit the table schema. The message names the offending column."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


class UnsupportedFormatVersionError(AppendTableError):
    """The table (or one of its files) was written by a newer, incompatible format version."""


class PurgeBlockedError(AppendTableError):
    """A purge cannot remove every deleted row without losing something else: a tag that
    holds deleted rows (with ``tags="refuse"``), or a consumer or consumer group that has
    not consumed the latest snapshot. Nothing was changed; the message names them."""


class CorruptMetadataError(AppendTableError):
    """A metadata file failed its checksum or could not be decoded. ``path`` names the file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class CorruptDataFileError(AppendTableError):
    """A data file the table references is not readable Parquet (truncated, overwritten,
    damaged footer or pages). ``path`` names the file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class PathOutsideTableError(AppendTableError, ValueError):
    """A path that would leave the table root (``..``, absolute, a scheme, a NUL byte, or a
    symbolic link on local disk): refused before any I/O. ``path`` names it. Paths read from
    metadata files are reported as ``CorruptMetadataError`` naming the file instead."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class SnapshotNotFoundError(AppendTableError, LookupError):
    """The requested snapshot does not exist."""


class SnapshotExpiredError(SnapshotNotFoundError):
    """The requested snapshot existed but has been expired."""


class TagNotFoundError(AppendTableError, LookupError):
    """No tag of the requested name."""


class TagExistsError(AppendTableError):
    """A tag of that name already exists (tags are never moved: delete it first)."""


class StorageError(AppendTableError, OSError):
    """An I/O operation failed. ``path`` and ``operation`` say which one."""

    def __init__(self, message: str, *, path: str = "", operation: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.operation = operation

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """A file that should exist does not."""


class ObjectExistsError(StorageError, FileExistsError):
    """A create-if-absent found the name already taken."""


class AtomicCreateUnsupportedError(StorageError):
    """The storage backend cannot create a file atomically-if-absent, so concurrent commits
    could overwrite each other. Opt into single-writer mode to commit anyway."""


class TransientStorageError(StorageError):
    """A temporary failure (throttling, timeout, connection reset); the operation may be retried."""


class CommitError(AppendTableError):
    """A commit did not complete normally."""


class CommitConflictError(CommitError):
    """The commit was definitely not applied: re-plan against the new table state and retry.

    Raised when a commit that deletes files (compaction, overwrite) finds them no longer live, when
    an overwrite would drop files appended concurrently, or when retries are exhausted."""


class CommitStateUnknownError(CommitError):
    """The outcome of the commit is unknown (for example the publish request failed after it may
    have reached the store). Never delete the commit's files: they may be referenced."""


class CommitUserReusedError(CommitError):
    """Not applied: the commit user's identifiers are numbered by another writer (for example
    another streaming query, with its own checkpoint, whose batch ids the new one repeats), so
    this commit could be taken for one of theirs and skipped. Nothing was committed."""


class ConsumerFencedError(CommitError):
    """A member of a consumer group could not commit the progress of some buckets: a newer
    generation of the group gave them to another member (or to this member again, after it
    lost them for a while), which has claimed them. Nothing was committed for ``fenced``; the
    rows read from them since their last commit will be delivered again to their owner.
    ``committed`` lists the buckets whose progress this same commit did save. The member has
    stopped reading the fenced buckets."""

    def __init__(
        self,
        message: str,
        *,
        group: str,
        member: str,
        fenced: tuple[int, ...] = (),
        committed: tuple[int, ...] = (),
    ) -> None:
        super().__init__(message)
        self.group = group
        self.member = member
        self.fenced = fenced
        self.committed = committed
