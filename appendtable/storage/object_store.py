"""What S3, GCS and Azure Blob Storage have in common: a bucket of objects without directories,
and an atomic create that is a conditional upload.

Each store's class (``storage.s3``, ``storage.gcs``, ``storage.azure``) supplies the upload
that succeeds only if the object has a given version or none (``_upload_if_version``: ETag or
generation; with none it is the atomic create), how to read the version (``_version``) and
its error codes. On every object store a client retries a PUT whose response was lost, and a
retry whose first attempt landed finds *our own* object, so "taken" (or "changed") is followed
by a read-back: ours if the stored bytes equal ours (the caller makes its content unique:
every snapshot carries a nonce, every consumer record its time), someone else's otherwise.
Conflicts, throttling, timeouts and 5xx are retried with capped exponential backoff and
jitter; if they persist, a ``TransientStorageError`` is raised and the outcome is unknown (the
committer then reads the snapshot back).

``atomic_create`` holds on servers whose conditional create is atomic: AWS S3, GCS and Azure
Blob Storage, and the SeaweedFS, fake-gcs-server and Azurite emulators as raced in
tests/storage and tests/cloud; run that race test against any other compatible server before
trusting it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import IO, Any, ClassVar, TypeVar, cast

import pyarrow.fs as pafs

from appendtable.storage.fsspec_store import FsspecStorage, Limit, backoff

__all__ = ["AIOHTTP_MODULES", "AIOHTTP_TRANSIENT", "ObjectStore"]

#: The HTTP client under fsspec's asynchronous stores (s3fs through aiobotocore, gcsfs, adlfs):
#: its errors can surface unwrapped.
AIOHTTP_MODULES = ("aiohttp.",)
#: aiohttp's exception classes for dropped, refused or timed-out connections.
AIOHTTP_TRANSIENT = frozenset(
    {
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
    }
)
#: Attempts of a conditional create on 409 / throttling / 5xx / timeouts before giving up.
_PUBLISH_ATTEMPTS = 8

_T = TypeVar("_T")


class ObjectStore(FsspecStorage):
    """A prefix of a bucket (or container) on an object store."""

    atomic_create = True
    conditional_replace = True
    has_directories = False
    default_operation_timeout: ClassVar[float | None] = 60.0

    @abstractmethod
    def _upload_if_version(self, full: str, data: bytes, version: str | None, limit: Limit) -> str:
        """Upload ``data`` to ``full`` only if the object holds ``version`` (None: only if
        there is none), passing ``limit`` to the file system's method; returns the version
        written. Another version raises what ``translator.is_precondition_failed``
        recognises."""

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        """True also when the stored bytes equal ``data`` after a "taken" answer (our own
        retried upload landed): identical content from two callers is indistinguishable, so
        callers must make their content unique."""
        full = self._full(path)
        landed = self._conditionally(
            full, data, lambda limit: self._upload_if_version(full, data, None, limit)
        )
        return landed is not False

    def _fresh_info(self, full: str) -> Mapping[str, Any] | None:
        """The file system's ``info`` of ``full`` (never from its cache), None if absent."""

        def head(limit: Limit) -> Mapping[str, Any] | None:
            self.fs.invalidate_cache(full)
            try:
                return cast(Mapping[str, Any], self.fs.info(full, **limit))
            except FileNotFoundError:
                return None

        return self._retrying(head)

    def _replace_if_unchanged(self, path: str, data: bytes, version: str | None) -> str | None:
        """One conditional upload (If-Match, ifGenerationMatch), retried like a create."""
        full = self._full(path)
        try:
            landed = self._conditionally(
                full, data, lambda limit: self._upload_if_version(full, data, version, limit)
            )
        finally:
            self.fs.invalidate_cache(full)
        if landed is True:  # our own retried upload had landed: its version now
            return self._version(path)
        return None if landed is False else landed

    def _conditionally(self, full: str, data: bytes, upload: Callable[[Limit], _T]) -> _T | bool:
        """``upload``'s result, retried on 409 / throttling / 5xx / timeouts within the
        operation's time limit. When the store refuses it for its condition: True if the
        object holds exactly ``data`` (our own upload landed before a retry of it), else
        False."""
        deadline = self._deadline()
        attempt = 0
        while True:
            refused = False
            try:
                return upload(self._limit(deadline))
            except Exception as exc:  # storage failures only (is_io_error); the rest re-raised
                if not self.translator.is_io_error(exc):
                    raise
                refused = self.translator.is_precondition_failed(exc)
                if not refused:
                    attempt += 1
                    if not self.translator.is_transient(exc):
                        raise
                    self._check_deadline(deadline, exc)
                    if attempt >= _PUBLISH_ATTEMPTS:
                        raise
            # Outside the except block, so that errors of the read-back are not chained to
            # (and classified by) the refusal.
            if refused:
                return self._holds_bytes(full, data)
            self._pause(backoff(attempt), deadline)

    def _open_output(self, path: str) -> IO[bytes]:
        """Data files stream through pyarrow's own client where the store has one (S3, and
        GCS with anonymous or default credentials), as they are read: its SDK bounds each
        request and its retries, so a stalled upload fails in seconds, where s3fs sent a body
        the server did not read without a limit (a stopped server held an append's data file
        for more than 500 s). Other stores stream through fsspec."""
        native = self._native_output()
        if native is None:
            return super()._open_output(path)
        return cast(IO[bytes], native.open_output_stream(f"{self.root_path}/{path}"))

    def _native_output(self) -> pafs.FileSystem | None:
        """pyarrow's own client to stream data files into (None: fsspec's)."""
        native, _root = self.arrow_filesystem()
        return None if isinstance(native, pafs.PyFileSystem) else native

    def _holds_bytes(self, full: str, data: bytes) -> bool:
        """After "taken": True if the object holds exactly ``data`` (our own upload landed
        before a retry of it), False if it holds anything else or vanished since (someone
        else's)."""

        def stored(limit: Limit) -> bytes | None:
            try:
                return self._cat(full, limit)
            except FileNotFoundError:
                return None

        return self._retrying(stored) == data
