"""Fixtures of the S3 tests: a fresh table location on the session's SeaweedFS server.

The server itself is the session fixture ``seaweedfs`` in tests/conftest.py (shared with the
storage contract tests in tests/storage, so one run starts one server). Every test that needs
the server is marked ``s3`` (deselect with ``-m "not s3"``); the few here that do not (error
translation, retries against a closed port) need only s3fs and botocore and run everywhere.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.s3.seaweedfs import SeaweedFS


@pytest.fixture
def s3_options(seaweedfs: SeaweedFS) -> dict[str, Any]:
    """s3fs ``storage_options`` for the session's server."""
    return seaweedfs.storage_options


@pytest.fixture
def s3_uri(seaweedfs: SeaweedFS) -> str:
    """A fresh ``s3://bucket/<unique prefix>`` location. Nothing is deleted afterwards: the
    server's whole data directory goes at the end of the session (deleting the 5000 objects of
    the race test one by one would take longer than the test's own cleanup is worth)."""
    return seaweedfs.uri(f"tests/{uuid.uuid4().hex}")
