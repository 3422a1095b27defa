"""S3 semantics of the storage layer, against a real server (SeaweedFS) where one is needed.

* put-if-absent: a 412 is followed by a read-back; our own bytes (a retried PUT of ours that had
  landed) → True, anyone else's → False, and the stored object is never replaced;
* SeaweedFS's 412 is an ``OSError(EINVAL)`` without ``Condition``: detected through the cause;
* ``exists`` / ``info`` are one HEAD each, never a LIST, never answered from s3fs's cache;
* error translation (NoSuchKey, 404, 412, 409, throttling, timeouts) and bounded retries of
  transient failures, the latter against a real closed port;
* a backend without atomic create refuses to commit unless ``commit.single-writer`` is set.

Tests that talk to the server are marked ``s3``; the rest need no server and run in
``make unit`` too.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.exceptions
import pyarrow as pa
import pytest
import s3fs

import appendtable as at
from appendtable.errors import (
    ObjectExistsError,
    ObjectNotFoundError,
    StorageError,
    TransientStorageError,
)
from appendtable.storage import FsspecStorage, open_storage
from appendtable.storage.s3 import S3_ERRORS, S3Storage
from tests.s3.seaweedfs import SeaweedFS

SCHEMA = pa.schema([("n", pa.int64())])


class S3Calls:
    """The S3 operations an s3fs client sends and the HTTP status of each (botocore's
    ``after-call`` event): an observation of real traffic, nothing is stubbed."""

    def __init__(self, fs: Any) -> None:
        self.calls: list[tuple[str, int]] = []
        fs.connect()
        fs.s3.meta.events.register("after-call.s3", self._after)

    def _after(self, http_response: Any, model: Any, **_: Any) -> None:
        self.calls.append((model.name, http_response.status_code))

    def take(self) -> list[tuple[str, int]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def s3_storage(s3_uri: str, s3_options: dict[str, Any]) -> S3Storage:
    """An S3 storage on its own s3fs client (not fsspec's shared instance), so that the
    event hooks of ``S3Calls`` stay private to the test."""
    storage = open_storage(s3_uri, {**s3_options, "skip_instance_cache": True})
    assert isinstance(storage, S3Storage)
    return storage


# ---- put-if-absent --------------------------------------------------------------------------


@pytest.mark.s3
def test_seaweedfs_412_is_einval_without_condition_and_detected_through_its_cause(
    seaweedfs: SeaweedFS,
) -> None:
    fs = seaweedfs.filesystem()
    path = f"{seaweedfs.bucket}/quirks/412"
    fs.pipe_file(path, b"first", mode="create")
    with pytest.raises(OSError) as caught:
        fs.pipe_file(path, b"second", mode="create")
    assert not isinstance(caught.value, FileExistsError)  # AWS and moto would give this
    assert caught.value.errno == errno.EINVAL
    assert isinstance(caught.value.__cause__, botocore.exceptions.ClientError)
    assert caught.value.__cause__.response["Error"]["Code"] == "PreconditionFailed"
    assert "Condition" not in caught.value.__cause__.response["Error"]
    assert S3_ERRORS.is_precondition_failed(caught.value)
    assert not S3_ERRORS.is_transient(caught.value)
    assert fs.cat_file(path) == b"first"


@pytest.mark.s3
def test_412_over_our_own_bytes_is_a_create(s3_storage: S3Storage) -> None:
    """A retried conditional PUT whose first attempt landed gets a 412 for our own object;
    the read-back recognises the bytes (snapshots carry a nonce, so they are unique)."""
    calls = S3Calls(s3_storage.fs)
    s3_storage.write("snapshot/snapshot-1", b"ours, nonce 1234")  # the attempt that landed
    calls.take()
    assert s3_storage.put_if_absent("snapshot/snapshot-1", b"ours, nonce 1234") is True
    assert calls.take() == [("PutObject", 412), ("GetObject", 200)]


@pytest.mark.s3
def test_412_over_someone_elses_bytes_is_taken(s3_storage: S3Storage) -> None:
    calls = S3Calls(s3_storage.fs)
    assert s3_storage.put_if_absent("snapshot/snapshot-1", b"theirs, nonce 1") is True
    assert calls.take() == [("PutObject", 200)]  # a create costs one request
    assert s3_storage.put_if_absent("snapshot/snapshot-1", b"ours, nonce 2") is False
    assert calls.take() == [("PutObject", 412), ("GetObject", 200)]
    assert s3_storage.read("snapshot/snapshot-1") == b"theirs, nonce 1"


@pytest.mark.s3
def test_put_if_absent_never_replaces_an_existing_object(s3_storage: S3Storage) -> None:
    s3_storage.write("schema/schema-0", b"written by a plain PUT")
    assert s3_storage.put_if_absent("schema/schema-0", b"other") is False
    assert s3_storage.put_if_absent("schema/schema-0", b"written by a plain") is False  # prefix
    assert s3_storage.read("schema/schema-0") == b"written by a plain PUT"
    s3_storage.delete("schema/schema-0")
    assert s3_storage.put_if_absent("schema/schema-0", b"new") is True  # absent again


# ---- exists / info / listing: cheap and fresh ------------------------------------------------


@pytest.mark.s3
def test_exists_and_info_cost_one_head_each(s3_storage: S3Storage) -> None:
    calls = S3Calls(s3_storage.fs)
    assert s3_storage.exists("snapshot/snapshot-9") is False
    assert calls.take() == [("HeadObject", 404)]  # s3fs's own exists() would LIST next
    with pytest.raises(ObjectNotFoundError, match="snapshot/snapshot-9") as caught:
        s3_storage.info("snapshot/snapshot-9")
    assert isinstance(caught.value, FileNotFoundError)
    assert calls.take() == [("HeadObject", 404)]

    s3_storage.write("snapshot/snapshot-9", b"12345")
    calls.take()
    assert s3_storage.exists("snapshot/snapshot-9") is True
    info = s3_storage.info("snapshot/snapshot-9")
    assert calls.take() == [("HeadObject", 200), ("HeadObject", 200)]
    assert (info.path, info.size) == ("snapshot/snapshot-9", 5)
    assert abs(info.mtime_ms - time.time() * 1000) < 120_000
    assert s3_storage.exists("snapshot") is False  # a prefix is not a file


@pytest.mark.s3
def test_other_clients_writes_are_seen_at_once(
    s3_storage: S3Storage, s3_uri: str, s3_options: dict[str, Any]
) -> None:
    """Nothing is answered from s3fs's listing cache, even when that cache is warm."""
    other = open_storage(s3_uri, {**s3_options, "skip_instance_cache": True})
    s3_storage.write("snapshot/snapshot-1", b"1")
    assert [i.path for i in s3_storage.listdir("snapshot")] == ["snapshot/snapshot-1"]
    s3_storage.fs.ls(f"{s3_storage.root_path}/snapshot", detail=True)  # warm s3fs's cache
    assert not s3_storage.exists("snapshot/snapshot-2")

    other.write("snapshot/snapshot-2", b"22")
    other.delete("snapshot/snapshot-1")
    assert s3_storage.exists("snapshot/snapshot-2")
    assert s3_storage.info("snapshot/snapshot-2").size == 2
    assert not s3_storage.exists("snapshot/snapshot-1")
    assert [i.path for i in s3_storage.listdir("snapshot")] == ["snapshot/snapshot-2"]
    assert [i.path for i in s3_storage.walk()] == ["snapshot/snapshot-2"]
    with pytest.raises(ObjectNotFoundError):
        s3_storage.read("snapshot/snapshot-1")


@pytest.mark.s3
def test_listing_reports_sizes_and_last_modified(s3_storage: S3Storage) -> None:
    s3_storage.write("manifest/a", b"abc")
    s3_storage.write("manifest/deeper/b", b"abcdef")
    listed = {i.path: i for i in s3_storage.listdir("manifest")}
    assert set(listed) == {"manifest/a"}  # files directly inside only
    walked = {i.path: i for i in s3_storage.walk("manifest")}
    assert {p: i.size for p, i in walked.items()} == {"manifest/a": 3, "manifest/deeper/b": 6}
    now_ms = time.time() * 1000
    assert all(abs(i.mtime_ms - now_ms) < 120_000 for i in [*listed.values(), *walked.values()])


@pytest.mark.s3
def test_missing_objects(s3_storage: S3Storage) -> None:
    with pytest.raises(ObjectNotFoundError, match="nothing/here") as caught:
        s3_storage.read("nothing/here")
    assert caught.value.operation == "read"
    s3_storage.delete("nothing/here")  # deleting a missing object is not an error
    assert s3_storage.listdir("nothing") == []
    assert s3_storage.walk("nothing") == []


@pytest.mark.s3
def test_raw_no_such_key_from_the_server_becomes_object_not_found(seaweedfs: SeaweedFS) -> None:
    fs = seaweedfs.filesystem()
    with pytest.raises(ObjectNotFoundError) as caught, S3_ERRORS.translated("get", "raw/missing"):
        fs.call_s3("get_object", Bucket=seaweedfs.bucket, Key="raw/missing")
    cause = caught.value.__cause__
    assert isinstance(cause, FileNotFoundError)
    assert isinstance(cause.__cause__, botocore.exceptions.ClientError)
    assert cause.__cause__.response["Error"]["Code"] == "NoSuchKey"


# ---- translation of foreign errors (no server needed) ---------------------------------------


def _client_error(code: str, status: int, **error: str) -> botocore.exceptions.ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": f"{code} message", **error},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return botocore.exceptions.ClientError(response, "PutObject")


def _translate(exc: BaseException) -> BaseException:
    with pytest.raises(BaseException) as caught, S3_ERRORS.translated("op", "some/path"):
        raise exc
    return caught.value


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_client_error("NoSuchKey", 404), ObjectNotFoundError),
        (_client_error("404", 404), ObjectNotFoundError),  # HEAD: no body, no code
        (s3fs.errors.translate_boto_error(_client_error("NoSuchKey", 404)), ObjectNotFoundError),
        (_client_error("ConditionalRequestConflict", 409), TransientStorageError),
        (_client_error("SlowDown", 503), TransientStorageError),
        (s3fs.errors.translate_boto_error(_client_error("SlowDown", 503)), TransientStorageError),
        (_client_error("InternalError", 500), TransientStorageError),
        (_client_error("AccessDenied", 403), StorageError),
        (_client_error("PreconditionFailed", 412), StorageError),
        (
            s3fs.errors.translate_boto_error(
                _client_error("PreconditionFailed", 412, Condition="If-None-Match")
            ),
            ObjectExistsError,
        ),
        (botocore.exceptions.ReadTimeoutError(endpoint_url="http://x"), TransientStorageError),
        (botocore.exceptions.EndpointConnectionError(endpoint_url="x"), TransientStorageError),
        (botocore.exceptions.SSLError(endpoint_url="x", error="bad cert"), StorageError),
        (TimeoutError("timed out"), TransientStorageError),
        (ConnectionResetError(errno.ECONNRESET, "reset"), TransientStorageError),
        (PermissionError(errno.EACCES, "denied"), StorageError),
    ],
)
def test_foreign_errors_are_translated(error: BaseException, expected: type) -> None:
    translated_error = _translate(error)
    assert type(translated_error) is expected
    assert translated_error.__cause__ is error
    assert "some/path" in str(translated_error)
    assert S3_ERRORS.is_transient(error) == (expected is TransientStorageError)


def test_precondition_failed_is_detected_with_and_without_condition() -> None:
    bare = s3fs.errors.translate_boto_error(_client_error("PreconditionFailed", 412))
    assert type(bare) is OSError and bare.errno == errno.EINVAL  # what SeaweedFS produces
    assert S3_ERRORS.is_precondition_failed(bare)
    named = _client_error("PreconditionFailed", 412, Condition="If-None-Match")
    assert S3_ERRORS.is_precondition_failed(s3fs.errors.translate_boto_error(named))
    assert not S3_ERRORS.is_precondition_failed(
        s3fs.errors.translate_boto_error(_client_error("x", 400))
    )


def test_errors_that_are_not_io_errors_pass_through_untranslated() -> None:
    error = ValueError("a bug, not an I/O failure")
    assert _translate(error) is error


# ---- bounded retries, against a real dead endpoint -------------------------------------------


@pytest.fixture
def dead_endpoint_storage() -> Iterator[tuple[S3Storage, list[float]]]:
    """An S3 storage pointed at a closed port (connections refused), whose backoff sleeps are
    recorded instead of slept. The port stays bound, never listening, for the whole test: no
    server of another test process (pytest-xdist) can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        fs = s3fs.S3FileSystem(
            skip_instance_cache=True,
            key="k",
            secret="s",
            client_kwargs={
                "endpoint_url": f"http://127.0.0.1:{port}",
                "region_name": "us-east-1",
            },
            config_kwargs={"retries": {"total_max_attempts": 1}, "connect_timeout": 1},
        )
        sleeps: list[float] = []
        yield S3Storage(fs, "bucket/table", "s3://bucket/table", sleep=sleeps.append), sleeps


@pytest.mark.parametrize(
    ("operation", "attempts"),
    [
        (lambda s: s.read("x"), 4),
        (lambda s: s.write("x", b"1"), 4),
        (lambda s: s.exists("x"), 4),
        (lambda s: s.info("x"), 4),
        (lambda s: s.listdir("d"), 4),
        (lambda s: s.delete("x"), 4),
        (lambda s: s.put_if_absent("snapshot/snapshot-1", b"1"), 8),
    ],
    ids=["read", "write", "exists", "info", "listdir", "delete", "put_if_absent"],
)
def test_transient_failures_are_retried_then_raised(
    dead_endpoint_storage: tuple[S3Storage, list[float]], operation: Any, attempts: int
) -> None:
    storage, sleeps = dead_endpoint_storage
    with pytest.raises(TransientStorageError, match=r"127\.0\.0\.1") as caught:
        operation(storage)
    assert isinstance(caught.value.__cause__, botocore.exceptions.EndpointConnectionError)
    assert len(sleeps) == attempts - 1
    assert all(0 < wait <= 2.0 for wait in sleeps)  # capped exponential backoff with jitter


# ---- a backend without atomic create ------------------------------------------------------


def test_fsspec_local_files_have_no_atomic_create(tmp_path: Path) -> None:
    storage = open_storage(f"local://{tmp_path}/t")
    assert isinstance(storage, FsspecStorage)
    assert storage.atomic_create is False and storage.backend in ("file", "local")


def test_opening_an_atomic_table_through_a_non_atomic_backend_refuses_to_commit(
    tmp_path: Path,
) -> None:
    """tests/table/test_commit_protocol.py covers create_table; this is the commit itself: a
    table made on local disk (atomic link) and then opened as ``local://`` (fsspec, check then
    write) must not commit, and the message says how to opt in."""
    at.create_table(str(tmp_path / "t"), SCHEMA).append(pa.table({"n": [1]}, schema=SCHEMA))
    reopened = at.open_table(f"local://{tmp_path}/t")
    with pytest.raises(at.AtomicCreateUnsupportedError, match=r"commit\.single-writer") as caught:
        reopened.append(pa.table({"n": [2]}, schema=SCHEMA))
    assert "atomically" in str(caught.value)
    assert reopened.scan().to_arrow().column("n").to_pylist() == [1]  # nothing landed
