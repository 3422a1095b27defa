"""A table root on any fsspec file system: ``memory://``, S3 (s3fs), GCS (gcsfs), Azure Blob
Storage and ADLS Gen2 (adlfs), and others.

Atomic publish (``put_if_absent``) per backend:

* ``memory://``: a process-wide lock around check-and-create (the store lives in one process).
* S3: a conditional PUT (``If-None-Match: *``, s3fs ``pipe_file(mode="create")``); the server
  creates the object only if the key is absent, atomically, with its complete content. A 412
  means the key exists.
* GCS (gcsfs, ``gs://``): an upload with ``ifGenerationMatch=0`` through the JSON API (gcsfs
  ``pipe_file(mode="create")``), which succeeds only if no live object has the name; 412 means
  it exists. Never the S3-interoperability endpoint, which ignores create-only preconditions.
* Azure Blob / ADLS Gen2 (adlfs, ``az://``, ``abfs://``): an upload with ``If-None-Match: *``
  (adlfs ``pipe_file(overwrite=False)``); 409 ``BlobAlreadyExists`` means it exists.

On every object store a client retries a PUT whose response was lost, and a retry whose first
attempt landed finds *our own* object, so "exists" is followed by a read-back: True if the
stored bytes equal ours (the caller makes its content unique: every snapshot carries a nonce),
False otherwise. Conflicts (S3 409 ``ConditionalRequestConflict``), throttling (S3 503, GCS
429, Azure 503 ``ServerBusy``), timeouts and 5xx are retried with capped exponential backoff
and jitter; if they persist, a ``TransientStorageError`` is raised and the outcome is unknown
(the committer then reads the snapshot back).
* anything else (e.g. ``local://`` through fsspec's LocalFileSystem, whose ``mode="create"`` is
  check-then-write): no atomic create (``atomic_create = False``); the committer refuses to
  publish unless the user opts into single-writer mode.

Freshness: other processes write the same table, so nothing here trusts fsspec's listing cache.
On S3, ``exists`` and ``info`` are one raw ``HeadObject`` each (s3fs's own ``exists`` falls back
to a LIST on a miss and consults its listing cache), and listings bypass and invalidate the cache.

Retries: idempotent operations (read, write, list, delete, head) are retried a few times on
transient errors, on top of the client libraries' own retries; the last failure is raised as a
``TransientStorageError``. Streamed output (``open_output``) is not retried here. Only storage
failures (``translate.is_io_error``: ``OSError`` and the client libraries' errors) are caught;
anything else is re-raised untouched.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import IO, Any, TypeVar

from appendtable.errors import ObjectNotFoundError
from appendtable.storage.base import FileInfo, Storage
from appendtable.storage.containment import check_contained
from appendtable.storage.translate import (
    is_io_error,
    is_not_found,
    is_precondition_failed,
    is_transient,
    translated,
)

__all__ = ["FsspecStorage"]

_T = TypeVar("_T")

_MEMORY_LOCK = threading.Lock()
_S3_PROTOCOLS = frozenset({"s3", "s3a"})
_GCS_PROTOCOLS = frozenset({"gs", "gcs"})
_AZURE_PROTOCOLS = frozenset({"az", "abfs", "abfss", "adl"})
#: Attempts of an idempotent operation (read, write, list, delete, head) on transient errors.
_IO_ATTEMPTS = 4
#: Attempts of a conditional create on 409 / throttling / 5xx / timeouts before giving up.
_PUBLISH_ATTEMPTS = 8
_BACKOFF_FIRST_S = 0.02
_BACKOFF_CAP_S = 1.0


def _backoff(attempt: int) -> float:
    """Capped exponential backoff with jitter, for retry number ``attempt`` (1, 2, ...)."""
    return min(_BACKOFF_CAP_S, _BACKOFF_FIRST_S * (1 << (attempt - 1))) * (1 + random.random())


class FsspecStorage(Storage):
    """Files under ``root_path`` of the fsspec file system ``fs``.

    ``atomic_create`` is True for ``memory://`` (within one process) and the object stores
    (across processes and hosts, on servers whose conditional create is atomic: AWS S3, GCS
    and Azure Blob Storage, and the SeaweedFS, fake-gcs-server and Azurite emulators as raced
    in tests/storage; run that race test against any other compatible server before trusting
    it)."""

    def __init__(
        self,
        fs: Any,
        root_path: str,
        uri_root: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(uri_root)
        self.fs = fs
        self.root_path = root_path.rstrip("/")
        self._sleep = sleep
        protocols = fs.protocol if isinstance(fs.protocol, tuple | list) else (fs.protocol,)
        self._is_memory = "memory" in protocols
        self._is_s3 = bool(_S3_PROTOCOLS.intersection(protocols))
        self._is_gcs = bool(_GCS_PROTOCOLS.intersection(protocols))
        self._is_azure = bool(_AZURE_PROTOCOLS.intersection(protocols))
        self._is_object_store = self._is_s3 or self._is_gcs or self._is_azure
        if self._is_memory:
            self.backend = "memory"
        elif self._is_s3:
            self.backend = "s3"
        elif self._is_gcs:
            self.backend = "gcs"
        elif self._is_azure:
            self.backend = "azure"
        else:
            self.backend = str(protocols[0])
        self.atomic_create = self._is_memory or self._is_object_store

    def _full(self, path: str) -> str:
        """The file system path of ``path`` ('' is the root), after the containment rule."""
        return f"{self.root_path}/{check_contained(path, self.root)}" if path else self.root_path

    def _make_parent(self, full: str) -> None:
        """Directory-based file systems need the parent; object stores have no directories
        (and their makedirs could try to create a bucket or container)."""
        if not self._is_object_store:
            self.fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)

    def _retrying(self, call: Callable[[], _T], attempts: int = _IO_ATTEMPTS) -> _T:
        """``call()``, retried with backoff while it fails transiently (at most ``attempts``
        tries). Only for idempotent calls. The last error propagates untranslated (the caller
        runs this inside ``translated``)."""
        attempt = 0
        while True:
            try:
                return call()
            except Exception as exc:  # storage failures only (is_io_error); the rest re-raised
                attempt += 1
                if not is_io_error(exc) or attempt >= attempts or not is_transient(exc):
                    raise
            self._sleep(_backoff(attempt))

    # ---- reading ----------------------------------------------------------------------------

    def _cat(self, full: str) -> bytes:
        """The whole object in one request. (s3fs's ``cat_file`` sends a HEAD first to decide
        whether to fetch large objects in concurrent ranges; ``max_concurrency=1`` skips it.)"""
        if self._is_s3:
            data: bytes = self.fs.cat_file(full, max_concurrency=1)
        else:
            data = self.fs.cat_file(full)
        return data

    def read(self, path: str) -> bytes:
        """The whole file (one GET on S3)."""
        full = self._full(path)
        with translated("read", self.uri(path)):
            return self._retrying(lambda: self._cat(full))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """One ranged GET on S3."""
        full = self._full(path)

        def fetch() -> bytes:
            data: bytes = self.fs.cat_file(full, start=offset, end=offset + length)
            return data

        with translated("read", self.uri(path)):
            return self._retrying(fetch)

    def exists(self, path: str) -> bool:
        """Whether the file ``path`` exists now (one HEAD on S3; never answered from a cache)."""
        full = self._full(path)
        with translated("exists", self.uri(path)):
            if self._is_s3:
                return self._s3_head(full) is not None
            self.fs.invalidate_cache(full)
            return bool(self._retrying(lambda: self.fs.exists(full)))

    def info(self, path: str) -> FileInfo:
        full = self._full(path)
        with translated("stat", self.uri(path)):
            if self._is_s3:
                head = self._s3_head(full)
                if head is None:
                    raise ObjectNotFoundError(
                        f"stat: file not found: {self.uri(path)}",
                        path=self.uri(path),
                        operation="stat",
                    )
                return FileInfo(path, int(head.get("ContentLength") or 0), _mtime_ms(head))
            self.fs.invalidate_cache(full)
            details = self._retrying(lambda: self.fs.info(full))
        if details.get("type") == "directory":
            raise ObjectNotFoundError(
                f"stat: not a file: {self.uri(path)}", path=self.uri(path), operation="stat"
            )
        return FileInfo(path, int(details.get("size") or 0), _mtime_ms(details))

    def _s3_head(self, full: str) -> dict[str, Any] | None:
        """The ``HeadObject`` response for ``full``, None on 404. A raw request: no listing,
        no cache."""
        bucket, key, _version = self.fs.split_path(full)

        def head() -> dict[str, Any] | None:
            try:
                response: dict[str, Any] = self.fs.call_s3("head_object", Bucket=bucket, Key=key)
            except Exception as exc:  # storage failures only (is_io_error); the rest re-raised
                if is_io_error(exc) and is_not_found(exc):
                    return None
                raise
            return response

        return self._retrying(head)

    def listdir(self, directory: str) -> list[FileInfo]:
        full = self._full(directory)
        prefix = f"{directory}/" if directory else ""
        extra = {"refresh": True} if self._is_s3 or self._is_gcs else {}

        def listing() -> list[dict[str, Any]]:
            self.fs.invalidate_cache(full)
            try:
                entries: list[dict[str, Any]] = self.fs.ls(full, detail=True, **extra)
            except FileNotFoundError:
                return []
            return entries

        with translated("list", self.uri(directory)):
            entries = self._retrying(listing)
            if self._is_s3:
                self.fs.invalidate_cache(full)  # keep no listing for s3fs's other methods
        found = []
        for entry in entries:
            if entry.get("type") != "file":
                continue
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            found.append(FileInfo(prefix + name, int(entry.get("size") or 0), _mtime_ms(entry)))
        return found

    def walk(self, directory: str = "") -> list[FileInfo]:
        full = self._full(directory)

        def listing() -> dict[str, dict[str, Any]]:
            self.fs.invalidate_cache(full)
            try:
                entries: dict[str, dict[str, Any]] = self.fs.find(full, detail=True)
            except FileNotFoundError:
                return {}
            return entries

        with translated("walk", self.uri(directory)):
            entries = self._retrying(listing)
            if self._is_s3:
                self.fs.invalidate_cache(full)
        base = self.root_path.lstrip("/")
        found = []
        for name, entry in entries.items():
            if entry.get("type") != "file":
                continue
            relative = str(name).lstrip("/")[len(base) :].lstrip("/")
            found.append(FileInfo(relative, int(entry.get("size") or 0), _mtime_ms(entry)))
        return found

    # ---- writing ----------------------------------------------------------------------------

    def write(self, path: str, data: bytes) -> None:
        """Create or replace ``path`` (one PUT on S3: readers see the old or the new object)."""
        full = self._full(path)
        with translated("write", self.uri(path)):
            self._make_parent(full)
            self._retrying(lambda: self.fs.pipe_file(full, data))

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """See ``Storage.put_if_absent``. True also when the stored bytes equal ``data`` after a
        412 on S3 (our own retried PUT landed): identical content from two callers is
        indistinguishable, so callers must make their content unique."""
        full = self._full(path)
        with translated("publish", self.uri(path)):
            if self._is_memory:
                with _MEMORY_LOCK:
                    if self.fs.exists(full):
                        return False
                    self._make_parent(full)
                    self.fs.pipe_file(full, data)
                    return True
            if self._is_s3 or self._is_gcs:  # If-None-Match: * / ifGenerationMatch=0
                return self._create(
                    full, data, lambda: self.fs.pipe_file(full, data, mode="create")
                )
            if self._is_azure:  # If-None-Match: *
                return self._create(
                    full, data, lambda: self.fs.pipe_file(full, data, overwrite=False)
                )
            # No atomic primitive: best effort, for single-writer mode only.
            self.fs.invalidate_cache(full)
            if self.fs.exists(full):
                return False
            self._make_parent(full)
            self.fs.pipe_file(full, data)
            return True

    def _create(self, full: str, data: bytes, create: Callable[[], object]) -> bool:
        """``create()`` (a conditional upload); when the name is taken compare the stored bytes;
        retry transient failures."""
        attempt = 0
        while True:
            taken = False
            try:
                create()
                return True
            except Exception as exc:  # storage failures only (is_io_error); the rest re-raised
                if not is_io_error(exc):
                    raise
                taken = is_precondition_failed(exc)
                if not taken:
                    attempt += 1
                    if attempt >= _PUBLISH_ATTEMPTS or not is_transient(exc):
                        raise
            # Outside the except block, so that errors of the read-back are not chained to
            # (and classified by) the 412.
            if taken:
                return self._holds_bytes(full, data)
            self._sleep(_backoff(attempt))

    def _holds_bytes(self, full: str, data: bytes) -> bool:
        """After a 412: True if the object holds exactly ``data`` (our own PUT landed before a
        retry of it), False if it holds anything else or vanished since (someone else's)."""

        def stored() -> bytes | None:
            try:
                return self._cat(full)
            except FileNotFoundError:
                return None

        return self._retrying(stored) == data

    def delete(self, path: str) -> None:
        full = self._full(check_contained(path, self.root))

        def remove() -> None:
            try:
                self.fs.rm_file(full)
            except FileNotFoundError:
                pass
            finally:
                self.fs.invalidate_cache(full)

        with translated("delete", self.uri(path)):
            self._retrying(remove)

    def rename(self, source: str, target: str) -> None:
        """On S3 a server-side copy then a delete of the source (s3fs ``mv``)."""
        full_source, full_target = self._full(source), self._full(target)

        def move() -> None:
            try:
                self.fs.mv(full_source, full_target)
            except FileNotFoundError:
                self.fs.invalidate_cache(full_target)
                if not self.fs.exists(full_target):  # not a retry of a move that happened
                    raise
            finally:
                self.fs.invalidate_cache(full_source)
                self.fs.invalidate_cache(full_target)

        with translated("rename", self.uri(source)):
            self._make_parent(full_target)
            self._retrying(move)

    def delete_tree(self, directory: str) -> None:
        full = self._full(check_contained(directory, self.root))

        def remove() -> None:
            try:
                self.fs.rm(full, recursive=True)
            except FileNotFoundError:
                pass
            finally:
                self.fs.invalidate_cache(full)

        with translated("delete", self.uri(directory)):
            self._retrying(remove)

    def open_output(self, path: str) -> IO[bytes]:
        """A file to stream a new, uniquely named file into; it appears when closed (on S3 in
        one PUT or at multipart completion). Not retried: a failed stream must be rewritten."""
        full = self._full(path)
        with translated("open", self.uri(path)):
            self._make_parent(full)
            handle: IO[bytes] = self.fs.open(full, "wb")
            return handle

    def local_path(self, path: str) -> str | None:
        return None

    def fsspec(self) -> tuple[Any, str]:
        return self.fs, self.root_path


def _mtime_ms(details: dict[str, Any]) -> int:
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
