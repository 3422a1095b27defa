"""``operation_timeout``: one storage operation on an object store, its attempts and both
layers' retries included, ends within the limit, against a server that accepts connections
and never answers (a hung load balancer, a stopped emulator). Before the limit a table's open
on such a server ran for more than 400 s on S3, GCS and Azure alike.

The server is a real listening socket of this process; the clients are the real s3fs, gcsfs
and adlfs, so what is checked is that each of their calls we make is cancelled in time.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import appendtable as at
from appendtable.storage import open_storage
from appendtable.storage.object_store import ObjectStore

#: Azurite's well-known development key (public: it only opens the emulator).
_AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A port whose server accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(512)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            held.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for connection in held:
        connection.close()


def _store(backend: str, port: int) -> tuple[str, dict[str, Any]]:
    """A table location on ``backend`` served by the silent port, and its storage options."""
    endpoint = f"http://127.0.0.1:{port}"
    if backend == "s3":
        return "s3://bucket/table", {"endpoint_url": endpoint, "key": "k", "secret": "s"}
    if backend == "gcs":
        return "gs://bucket/table", {"endpoint_url": endpoint, "token": "anon"}
    account = "devstoreaccount1"
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={_AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{account};"
    )
    return "az://container/table", {"connection_string": connection}


_OPERATIONS: dict[str, Callable[[at.Storage], object]] = {
    "read": lambda s: s.read("a"),
    "read_range": lambda s: s.read_range("a", 0, 4),
    "write": lambda s: s.write("a", b"1"),
    "put_if_absent": lambda s: s.put_if_absent("b", b"1"),
    "exists": lambda s: s.exists("a"),
    "info": lambda s: s.info("a"),
    "listdir": lambda s: s.listdir("d"),
    "delete": lambda s: s.delete("a"),
    "rename": lambda s: s.rename("a", "c"),
}


@pytest.mark.parametrize("operation", sorted(_OPERATIONS))
@pytest.mark.parametrize("backend", ["s3", "gcs", "azure"])
def test_each_operation_gives_up_at_the_limit_with_a_transient_error(
    silent_port: int, backend: str, operation: str
) -> None:
    uri, options = _store(backend, silent_port)
    storage = open_storage(uri, {**options, "operation_timeout": 0.5})
    with pytest.raises(at.TransientStorageError, match=r"operation_timeout") as raised:
        _OPERATIONS[operation](storage)
    assert raised.value.path.startswith(uri), raised.value.path
    assert "not done within 0.5 s" in str(raised.value)


@pytest.mark.parametrize("backend", ["s3", "gcs", "azure"])
def test_tables_fail_to_open_and_create_at_the_limit(silent_port: int, backend: str) -> None:
    uri, options = _store(backend, silent_port)
    bounded = {**options, "operation_timeout": dt.timedelta(seconds=0.5)}
    with pytest.raises(at.TransientStorageError, match=r"operation_timeout"):
        at.open_table(uri, storage_options=bounded)
    with pytest.raises(at.TransientStorageError, match=r"operation_timeout"):
        at.create_table(uri, pa.schema([("id", pa.int64())]), storage_options=bounded)


def test_the_cli_reports_a_silent_store_as_one_error_line(silent_port: int) -> None:
    uri, options = _store("s3", silent_port)
    args = [f"--storage-option={key}={value}" for key, value in options.items()]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "appendtable.cli",
            *args,
            "--storage-option=operation_timeout=1",
            "info",
            uri,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error:"), done.stderr
    assert "not done within 1 s" in lines[-1] and "s3://bucket/table" in lines[-1], lines


@pytest.mark.parametrize("backend", ["s3", "gcs", "azure"])
def test_object_stores_are_bounded_by_default(silent_port: int, backend: str) -> None:
    uri, options = _store(backend, silent_port)
    assert open_storage(uri, options).operation_timeout == 60.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (30, 30.0),
        (2.5, 2.5),
        ("2.5", 2.5),
        (dt.timedelta(seconds=45), 45.0),
        (0, None),
        (None, None),
    ],
)
def test_the_limit_takes_seconds_a_timedelta_or_none(
    silent_port: int, value: object, seconds: float | None
) -> None:
    uri, options = _store("s3", silent_port)
    storage = open_storage(uri, {**options, "operation_timeout": value})
    assert storage.operation_timeout == seconds


@pytest.mark.parametrize(
    "value", [-1, "-3", "2 min", "soon", True, float("inf"), float("nan"), [30]]
)
def test_a_bad_limit_is_refused_by_name(silent_port: int, value: object) -> None:
    uri, options = _store("s3", silent_port)
    with pytest.raises(at.InvalidOptionError, match=r"'operation_timeout'.*got"):
        open_storage(uri, {**options, "operation_timeout": value})


@pytest.mark.parametrize("local", ["plain", "file", "memory"])
def test_a_store_that_cannot_cancel_a_call_refuses_a_limit(tmp_path: Path, local: str) -> None:
    uri = {
        "plain": str(tmp_path / "t"),
        "file": f"file://{tmp_path / 't'}",
        "memory": f"memory://{tmp_path.name}/t",
    }[local]
    for limit in (5, "2.5", dt.timedelta(seconds=1)):
        with pytest.raises(at.InvalidOptionError, match=r"'operation_timeout' applies to object"):
            open_storage(uri, {"operation_timeout": limit})
    for malformed in ("abc", -1):
        with pytest.raises(at.InvalidOptionError, match=r"'operation_timeout' must be"):
            open_storage(uri, {"operation_timeout": malformed})
    for none in (0, "0", None, dt.timedelta(0)):
        assert open_storage(uri, {"operation_timeout": none}).root


def test_memory_takes_no_limit_by_default() -> None:
    assert (
        open_storage("memory://unbounded/t", {"operation_timeout": None}).operation_timeout is None
    )
    assert open_storage("memory://default/t").operation_timeout is None


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_data_file_streamed_to_a_silent_s3_server_fails_instead_of_hanging(
    silent_port: int,
) -> None:
    """Data files stream through pyarrow's S3 client, whose SDK gives up on a stalled request
    (measured: about 30 s); s3fs's stream waited more than 500 s for a stopped server."""
    uri, options = _store("s3", silent_port)
    storage = open_storage(uri, options)
    with (
        pytest.raises(at.TransientStorageError, match=r"NETWORK_CONNECTION"),
        storage.translated("write", "data-1.parquet"),
    ):
        stream = storage.open_output("data-1.parquet")
        stream.write(b"x" * 100_000)
        stream.close()


@pytest.mark.parametrize(
    "extra",
    [{"s3_additional_kwargs": {"ServerSideEncryption": "aws:kms"}}, {"requester_pays": True}],
    ids=["encryption-headers", "requester-pays"],
)
def test_s3_options_that_add_headers_keep_data_files_on_s3fs(
    silent_port: int, extra: dict[str, Any]
) -> None:
    """pyarrow's client would not send s3fs's extra headers (a bucket policy requiring
    server-side encryption refuses a PUT without them; a requester-pays bucket refuses a GET
    without its header): such tables write and read data files through s3fs."""
    uri, options = _store("s3", silent_port)
    plain = open_storage(uri, options)
    with_headers = open_storage(uri, {**options, **extra})
    assert isinstance(plain, ObjectStore) and isinstance(with_headers, ObjectStore)
    assert isinstance(plain._native_output(), pafs.S3FileSystem)
    assert isinstance(plain.arrow_filesystem()[0], pafs.S3FileSystem)
    assert with_headers._native_output() is None  # fsspec's stream: s3fs sends the headers
    assert isinstance(with_headers.arrow_filesystem()[0], pafs.PyFileSystem)  # reads too
