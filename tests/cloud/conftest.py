"""A fresh table location on each object store the suite runs against: S3 (SeaweedFS), GCS
(fake-gcs-server) and Azure Blob Storage (Azurite), each a real server started once per
session (tests/conftest.py). Tests take ``cloud`` and run once per store (markers ``s3``,
``gcs``, ``azure``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import fsspec
import pytest


@dataclass(frozen=True)
class CloudStore:
    """One object store: a fresh table location on it, and how to reach it."""

    name: str
    uri: str
    storage_options: dict[str, Any]

    def filesystem(self) -> Any:
        scheme = self.uri.split("://", 1)[0]
        return fsspec.filesystem(scheme, skip_instance_cache=True, **self.storage_options)

    def path(self, uri: str) -> str:
        """The store's path of ``uri`` (without the scheme)."""
        return uri.split("://", 1)[1]

    def objects(self, uri: str) -> set[str]:
        """Every object below ``uri``, relative to it (a fresh listing)."""
        fs = self.filesystem()
        root = self.path(uri)
        return {name[len(root) + 1 :] for name in fs.find(root)}


@pytest.fixture(
    params=[
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def cloud(request: pytest.FixtureRequest) -> CloudStore:
    prefix = f"tests/{uuid.uuid4().hex}"
    if request.param == "s3":
        server = request.getfixturevalue("seaweedfs")
        return CloudStore("s3", server.uri(prefix), server.storage_options)
    emulator = request.getfixturevalue("fake_gcs" if request.param == "gcs" else "azurite")
    return CloudStore(request.param, emulator.uri(prefix), emulator.storage_options)
