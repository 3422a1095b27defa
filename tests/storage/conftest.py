"""The storage backends every contract test runs against: local disk, fsspec's memory://, a
backend registered from outside the library (``dict_backend``, ``dictmem://``), S3 (the
session's SeaweedFS server, marked ``s3``), GCS (fake-gcs-server, marked ``gcs``) and Azure
Blob Storage (Azurite, marked ``azure``); each server is started only if a test that needs it
is selected."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from appendtable.storage import Storage, open_storage
from tests.storage import dict_backend


@pytest.fixture(
    params=[
        "local",
        "memory",
        "registered",
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "local":
        yield open_storage(str(tmp_path / "root"))
        return
    if request.param == "registered":
        name = f"contract/{uuid.uuid4().hex}"
        yield open_storage(f"{dict_backend.SCHEME}://{name}")
        dict_backend.drop(f"{name}/")
        return
    if request.param in ("gcs", "azure"):
        emulator = request.getfixturevalue("fake_gcs" if request.param == "gcs" else "azurite")
        yield open_storage(emulator.fresh_uri(), emulator.storage_options)
        return
    if request.param == "s3":
        # a fresh prefix in the session's bucket (the server's data goes at session end)
        server = request.getfixturevalue("seaweedfs")
        yield open_storage(server.uri(f"contract/{uuid.uuid4().hex}"), server.storage_options)
        return
    root = f"memory://contract/{uuid.uuid4().hex}"
    yield open_storage(root)
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)
