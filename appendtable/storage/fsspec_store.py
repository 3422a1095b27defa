"""A table root on an fsspec file system, and the base of the backends built on fsspec.

``FsspecStorage`` itself serves any protocol fsspec knows that has no backend of its own (e.g.
``local://`` through fsspec's LocalFileSystem, whose ``mode="create"`` is check-then-write):
it has no atomic create (``atomic_create = False``), so the committer refuses to publish
unless the user opts into single-writer mode. The backends for particular stores subclass it
and override what differs (``storage.memory``, ``storage.object_store`` and the stores under
it): their conditional create, how they answer HEAD, their listing caches, their error codes
and their native pyarrow file system.

Freshness: other processes write the same table, so nothing here trusts fsspec's listing cache:
every existence probe, stat and listing invalidates it first.

Retries: idempotent operations (read, write, list, delete, head) are retried a few times on
transient errors, on top of the client libraries' own retries; the last failure is raised as a
``TransientStorageError``. Streamed output (``open_output``) is not retried here. Only storage
failures (``Translator.is_io_error``: ``OSError`` and the client library's errors) are caught;
anything else is re-raised untouched.

Time: on fsspec's asynchronous file systems (the object stores) one operation, its attempts
and both layers' retries included, takes at most the storage option ``operation_timeout``
(object stores: 60 s by default); an attempt still running then is cancelled and the operation
fails with a ``TransientStorageError`` that names the limit. Without it a server that accepts
connections and never answers held a caller for tens of minutes (the clients' read timeouts
times their retries times ours). Whole-tree listings and deletions (``walk``,
``delete_tree``: many requests, as many as the tree needs) and streamed output are bounded by
the clients' own per-request timeouts only.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import random
import time
from collections.abc import Callable, Mapping
from typing import IO, Any, ClassVar, Self, TypeVar

import fsspec
import pyarrow.fs as pafs

from appendtable.errors import InvalidOptionError, ObjectNotFoundError
from appendtable.storage.base import Storage
from appendtable.storage.entries import FileInfo

__all__ = [
    "OPERATION_TIMEOUT",
    "FsspecStorage",
    "Limit",
    "backoff",
    "mtime_ms",
    "refuse_operation_timeout",
]

_T = TypeVar("_T")

#: Attempts of an idempotent operation (read, write, list, delete, head) on transient errors.
_IO_ATTEMPTS = 4
_BACKOFF_FIRST_S = 0.02
_BACKOFF_CAP_S = 1.0

#: The storage option bounding one storage operation with all its retries (see the module
#: docstring): seconds (a number or its text) or a ``timedelta``; 0 or None for no limit.
OPERATION_TIMEOUT = "operation_timeout"

#: What one attempt of an operation passes to the file system's method: ``{"timeout": s}``
#: (fsspec's asynchronous file systems cancel the call after ``s`` seconds), or nothing.
Limit = Mapping[str, float]

_NO_LIMIT: Limit = {}
_GIVEN_NOTHING = object()


def backoff(attempt: int) -> float:
    """Capped exponential backoff with jitter, for retry number ``attempt`` (1, 2, ...)."""
    return min(_BACKOFF_CAP_S, _BACKOFF_FIRST_S * (1 << (attempt - 1))) * (1 + random.random())


def _check_segments(root_path: str, uri: str) -> None:
    """Refuse a root with an empty, ``.`` or ``..`` segment: object stores keep such names
    literally while HTTP clients, emulators and pyarrow's native clients normalise or refuse
    them, so one table would have two names (or be unreadable after its first commit)."""
    inner = root_path.lstrip("/")
    odd = [part for part in inner.split("/") if part in ("", ".", "..")] if inner else []
    if odd:
        raise InvalidOptionError(
            f"table location {uri!r} has an empty, '.' or '..' path segment, which object "
            "stores and their clients do not read alike: name it without one"
        )


def operation_timeout(value: object) -> float | None:
    """Seconds from a value of the ``operation_timeout`` storage option (None: no limit)."""
    seconds: float
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
        seconds = float(value)  # as the command line and Spark's options pass it
    else:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise InvalidOptionError(
            f"storage option {OPERATION_TIMEOUT!r} must be a number of seconds (30, '2.5') or a "
            f"timedelta (0 or None: no limit), got {value!r}"
        )
    return seconds or None


def refuse_operation_timeout(storage_options: Mapping[str, Any], uri: str) -> None:
    """Raise InvalidOptionError if ``storage_options`` set a limit (not 0 or None) for a store
    that cannot cancel a call (local disk, fsspec's synchronous file systems)."""
    if operation_timeout(storage_options.get(OPERATION_TIMEOUT)) is not None:
        raise InvalidOptionError(
            f"storage option {OPERATION_TIMEOUT!r} applies to object stores (s3://, gs://, "
            f"az:// and fsspec's other asynchronous file systems), not to {uri!r}"
        )


class FsspecStorage(Storage):
    """Files under ``root_path`` of the fsspec file system ``fs`` (``uri_root`` names the root
    in messages)."""

    #: Whether files need their parent directories made first (object stores have none, and
    #: their ``makedirs`` could try to create a bucket or container).
    has_directories: ClassVar[bool] = True
    #: Keyword arguments of ``fs.ls`` for a fresh listing (s3fs and gcsfs: ``refresh=True``).
    fresh_listing: ClassVar[Mapping[str, Any]] = {}
    #: The extra of the appendtable package that installs the store's library (for the message
    #: when it is missing).
    extra: ClassVar[str] = ""
    #: ``operation_timeout`` when the storage options do not set it (seconds; None: no limit).
    default_operation_timeout: ClassVar[float | None] = None

    def __init__(
        self,
        fs: Any,
        root_path: str,
        uri_root: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        operation_timeout: float | None = None,
    ) -> None:
        super().__init__(uri_root)
        self.fs = fs
        self.root_path = root_path.rstrip("/")
        _check_segments(self.root_path, uri_root)
        self._sleep = sleep
        #: Seconds one operation may take, retries included (None: no limit); it holds only on
        #: fsspec's asynchronous file systems, which can cancel a call.
        self.operation_timeout = operation_timeout if _can_cancel(fs) else None
        if type(self).backend == Storage.backend:  # no backend of its own: the protocol's name
            protocols = fs.protocol if isinstance(fs.protocol, tuple | list) else (fs.protocol,)
            self.backend = str(protocols[0])

    @classmethod
    def open(cls, uri: str, storage_options: Mapping[str, Any]) -> Self:
        """The storage at ``uri`` through fsspec, with ``storage_options`` as the file system's
        keyword arguments (a factory for ``storage.registry``), except ``operation_timeout``,
        which is this storage's own."""
        options = dict(storage_options)
        given = options.pop(OPERATION_TIMEOUT, _GIVEN_NOTHING)
        limit = cls.default_operation_timeout
        if given is not _GIVEN_NOTHING:
            limit = operation_timeout(given)
        with cls.translator.translated("open", uri):
            try:
                fs, path = fsspec.core.url_to_fs(uri, **options)
            except ImportError as exc:
                install = f" (install appendtable[{cls.extra}])" if cls.extra else ""
                raise InvalidOptionError(
                    f"storage protocol '{uri.split('://', 1)[0]}' needs a package that is not "
                    f"installed: {exc}{install}"
                ) from exc
        if given is not _GIVEN_NOTHING and not _can_cancel(fs):
            refuse_operation_timeout(storage_options, uri)
        return cls(fs, path, uri.rstrip("/"), operation_timeout=limit)

    def _full(self, path: str) -> str:
        """The file system path of a contained ``path`` ('' is the root)."""
        return f"{self.root_path}/{path}" if path else self.root_path

    def _make_parent(self, full: str) -> None:
        if self.has_directories:
            self.fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)

    def _retrying(self, call: Callable[[Limit], _T], attempts: int = _IO_ATTEMPTS) -> _T:
        """``call(limit)``, retried with backoff while it fails transiently (at most
        ``attempts`` tries, all within ``operation_timeout``; ``call`` passes ``limit`` to the
        file system's method). Only for idempotent calls. The last error propagates
        untranslated (``Storage`` translates it)."""
        deadline = self._deadline()
        attempt = 0
        while True:
            try:
                return call(self._limit(deadline))
            except Exception as exc:  # storage failures only (is_io_error); the rest re-raised
                attempt += 1
                if not self.translator.is_io_error(exc) or not self.translator.is_transient(exc):
                    raise
                self._check_deadline(deadline, exc)
                if attempt >= attempts:
                    raise
            self._pause(backoff(attempt), deadline)

    def _deadline(self) -> float | None:
        """When an operation starting now must end (``time.monotonic``), None if never."""
        limit = self.operation_timeout
        return None if limit is None else time.monotonic() + limit

    @staticmethod
    def _limit(deadline: float | None) -> Limit:
        """The keyword arguments that make one attempt end by ``deadline``."""
        if deadline is None:
            return _NO_LIMIT
        return {"timeout": max(deadline - time.monotonic(), 0.001)}

    def _check_deadline(self, deadline: float | None, failure: BaseException) -> None:
        """Raise a ``TimeoutError`` naming the limit, caused by ``failure``, if ``deadline``
        has passed."""
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(
                f"not done within {self.operation_timeout:g} s, retries included (storage "
                f"option {OPERATION_TIMEOUT!r}): the store did not answer, or refused or failed "
                "while the client library retried; last failure: "
                f"{type(failure).__name__}{': ' if str(failure) else ''}{failure}"
            ) from failure

    def _pause(self, seconds: float, deadline: float | None) -> None:
        """Back off for ``seconds``, or until ``deadline`` if that comes first."""
        if deadline is not None:
            seconds = max(min(seconds, deadline - time.monotonic()), 0.0)
        self._sleep(seconds)

    # ---- reading ----------------------------------------------------------------------------

    def _cat(self, full: str, limit: Limit) -> bytes:
        """The whole object in one request."""
        data: bytes = self.fs.cat_file(full, **limit)
        return data

    def _read(self, path: str) -> bytes:
        full = self._full(path)
        return self._retrying(lambda limit: self._cat(full, limit))

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        full = self._full(path)

        def fetch(limit: Limit) -> bytes:
            data: bytes = self.fs.cat_file(full, start=offset, end=offset + length, **limit)
            return data

        return self._retrying(fetch)

    def _exists(self, path: str) -> bool:
        full = self._full(path)
        self.fs.invalidate_cache(full)
        return bool(self._retrying(lambda limit: self.fs.exists(full, **limit)))

    def _info(self, path: str) -> FileInfo:
        full = self._full(path)
        self.fs.invalidate_cache(full)
        details = self._retrying(lambda limit: self.fs.info(full, **limit))
        if details.get("type") == "directory":
            raise ObjectNotFoundError(
                f"stat: not a file: {self.uri(path)}", path=self.uri(path), operation="stat"
            )
        return FileInfo(path, int(details.get("size") or 0), mtime_ms(details))

    def _listed(self, full: str) -> None:
        """Called after each listing of ``full`` (S3 drops what s3fs cached of it)."""

    def _listdir(self, directory: str) -> list[FileInfo]:
        full = self._full(directory)
        prefix = f"{directory}/" if directory else ""

        def listing(limit: Limit) -> list[dict[str, Any]]:
            self.fs.invalidate_cache(full)
            try:
                entries: list[dict[str, Any]] = self.fs.ls(
                    full, detail=True, **self.fresh_listing, **limit
                )
            except FileNotFoundError:
                return []
            return entries

        entries = self._retrying(listing)
        self._listed(full)
        found = []
        for entry in entries:
            if entry.get("type") != "file":
                continue
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            found.append(FileInfo(prefix + name, int(entry.get("size") or 0), mtime_ms(entry)))
        return found

    def _walk(self, directory: str) -> list[FileInfo]:
        full = self._full(directory)

        def listing(_unbounded: Limit) -> dict[str, dict[str, Any]]:  # many requests
            self.fs.invalidate_cache(full)
            try:
                entries: dict[str, dict[str, Any]] = self.fs.find(full, detail=True)
            except FileNotFoundError:
                return {}
            return entries

        entries = self._retrying(listing)
        self._listed(full)
        base = self.root_path.lstrip("/")
        found = []
        for name, entry in entries.items():
            if entry.get("type") != "file":
                continue
            relative = str(name).lstrip("/")[len(base) :].lstrip("/")
            found.append(FileInfo(relative, int(entry.get("size") or 0), mtime_ms(entry)))
        return found

    # ---- writing ----------------------------------------------------------------------------

    def _write(self, path: str, data: bytes) -> None:
        """One PUT on an object store: readers see the old or the new object."""
        full = self._full(path)
        self._make_parent(full)
        self._retrying(lambda limit: self.fs.pipe_file(full, data, **limit))

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        """No atomic primitive: check, then write; for single-writer mode only."""
        full = self._full(path)
        self.fs.invalidate_cache(full)
        if self.fs.exists(full):
            return False
        self._make_parent(full)
        self.fs.pipe_file(full, data)
        return True

    def _delete(self, path: str) -> None:
        full = self._full(path)

        def remove(limit: Limit) -> None:
            try:
                self.fs.rm_file(full, **limit)
            except FileNotFoundError:
                pass
            finally:
                self.fs.invalidate_cache(full)

        self._retrying(remove)

    def _rename(self, source: str, target: str) -> None:
        """On object stores a server-side copy then a delete of the source (what fsspec's
        ``mv`` does, which drops the time limit)."""
        full_source, full_target = self._full(source), self._full(target)

        def move(limit: Limit) -> None:
            try:
                self.fs.copy(full_source, full_target, on_error="raise", **limit)
                self.fs.rm_file(full_source, **limit)
            except FileNotFoundError:
                self.fs.invalidate_cache(full_target)
                if not self.fs.exists(full_target, **limit):  # not a retry of a move that happened
                    raise
            finally:
                self.fs.invalidate_cache(full_source)
                self.fs.invalidate_cache(full_target)

        self._make_parent(full_target)
        self._retrying(move)

    def _delete_tree(self, directory: str) -> None:
        full = self._full(directory)

        def remove(_unbounded: Limit) -> None:  # as many requests as the tree needs
            try:
                self.fs.rm(full, recursive=True)
            except FileNotFoundError:
                pass
            finally:
                self.fs.invalidate_cache(full)

        self._retrying(remove)

    def _open_output(self, path: str) -> IO[bytes]:
        """A file to stream a new, uniquely named file into; it appears when closed (on S3 in
        one PUT or at multipart completion). Not retried: a failed stream must be rewritten."""
        full = self._full(path)
        self._make_parent(full)
        handle: IO[bytes] = self.fs.open(full, "wb")
        return handle

    # ---- other readers ----------------------------------------------------------------------

    def _arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The fsspec file system bridged into pyarrow (stores with a native pyarrow client
        override this)."""
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs)), self.root_path

    def parent(self) -> Storage | None:
        above = posixpath.dirname(self.root_path)
        if not above or above == self.root_path:
            return None
        scheme = self.root.split("://", 1)[0]
        head = self.root.rpartition("/")[0]
        uri = head if len(head) > len(scheme) + 3 else f"{scheme}://"
        return type(self)(
            self.fs, above, uri, sleep=self._sleep, operation_timeout=self.operation_timeout
        )


def _can_cancel(fs: Any) -> bool:
    """Whether ``fs`` is one of fsspec's asynchronous file systems, whose blocking methods take
    a ``timeout`` and cancel the call when it runs out."""
    return bool(getattr(fs, "async_impl", False))


def mtime_ms(details: Mapping[str, Any]) -> int:
    """Modification time in epoch ms from an fsspec entry or an S3 response (0 if unknown)."""
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = details.get(key)
        if value is None or value == "":
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        if isinstance(value, int | float):
            return int(value * 1000)
    return 0
