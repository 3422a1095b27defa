"""What S3, GCS and Azure Blob Storage have in common: a bucket of objects without directories,
and an atomic create that is a conditional upload.

Each store's class (``storage.s3``, ``storage.gcs``, ``storage.azure``) supplies the upload
that succeeds only if no object has the name (``_upload_if_absent``) and its error codes. On
every object store a client retries a PUT whose response was lost, and a retry whose first
attempt landed finds *our own* object, so "taken" is followed by a read-back: True if the
stored bytes equal ours (the caller makes its content unique: every snapshot carries a nonce),
False otherwise. Conflicts, throttling, timeouts and 5xx are retried with capped exponential
backoff and jitter; if they persist, a ``TransientStorageError`` is raised and the outcome is
unknown (the committer then reads the snapshot back).

``atomic_create`` holds on servers whose conditional create is atomic: AWS S3, GCS and Azure
Blob Storage, and the SeaweedFS, fake-gcs-server and Azurite emulators as raced in
tests/storage and tests/cloud; run that race test against any other compatible server before
trusting it.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import IO, ClassVar, cast

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


class ObjectStore(FsspecStorage):
    """A prefix of a bucket (or container) on an object store."""

    atomic_create = True
    has_directories = False
    default_operation_timeout: ClassVar[float | None] = 60.0

    @abstractmethod
    def _upload_if_absent(self, full: str, data: bytes, limit: Limit) -> None:
        """Upload ``data`` to ``full`` only if no object has that name (passing ``limit`` to
        the file system's method); a taken name raises what
        ``translator.is_precondition_failed`` recognises."""

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        """True also when the stored bytes equal ``data`` after a "taken" answer (our own
        retried upload landed): identical content from two callers is indistinguishable, so
        callers must make their content unique."""
        full = self._full(path)
        deadline = self._deadline()
        attempt = 0
        while True:
            taken = False
            try:
                self._upload_if_absent(full, data, self._limit(deadline))
                return True
            except Exception as exc:  # storage failures only (is_io_error); the rest re-raised
                if not self.translator.is_io_error(exc):
                    raise
                taken = self.translator.is_precondition_failed(exc)
                if not taken:
                    attempt += 1
                    if not self.translator.is_transient(exc):
                        raise
                    self._check_deadline(deadline, exc)
                    if attempt >= _PUBLISH_ATTEMPTS:
                        raise
            # Outside the except block, so that errors of the read-back are not chained to
            # (and classified by) the "taken" answer.
            if taken:
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
