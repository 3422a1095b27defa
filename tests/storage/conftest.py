"""The storage backends every contract test runs against."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from appendtable.storage import Storage, open_storage


@pytest.fixture(params=["local", "memory"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "local":
        yield open_storage(str(tmp_path / "root"))
        return
    root = f"memory://contract/{uuid.uuid4().hex}"
    yield open_storage(root)
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)
