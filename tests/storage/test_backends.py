"""Which backend serves each URI, and what each one says of itself without a server: its
atomic create, the pyarrow file system data files are read with, the URI Spark's own readers
use, and the directory above it (for the nested-table check). The contract suite
(test_contract.py) and tests/cloud cover what they do against real servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from google.oauth2.credentials import Credentials

import appendtable as at
from appendtable.storage import FsspecStorage, LocalStorage, open_storage
from appendtable.storage.azure import AzureStorage
from appendtable.storage.gcs import GcsStorage
from appendtable.storage.memory import MemoryStorage
from appendtable.storage.s3 import S3Storage
from tests.storage.dict_backend import SCHEME, DictStorage

S3_OPTIONS = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://127.0.0.1:1"}}
AZURE_OPTIONS = {"account_name": "acct", "anon": True}


CASES: list[tuple[str, dict[str, Any], type, str, type, str]] = [
    ("s3://bucket/t", S3_OPTIONS, S3Storage, "s3", pafs.S3FileSystem, "s3a://bucket/t/d/f"),
    ("s3a://bucket/t", S3_OPTIONS, S3Storage, "s3", pafs.S3FileSystem, "s3a://bucket/t/d/f"),
    (
        "gs://bucket/t",
        {"token": "anon"},
        GcsStorage,
        "gcs",
        pafs.GcsFileSystem,
        "gs://bucket/t/d/f",
    ),
    (
        "gcs://bucket/t",
        {"token": Credentials(token="x")},  # credentials pyarrow cannot hold: the bridge
        GcsStorage,
        "gcs",
        pafs.PyFileSystem,
        "gcs://bucket/t/d/f",
    ),
    ("az://c/t", AZURE_OPTIONS, AzureStorage, "azure", pafs.PyFileSystem, "az://c/t/d/f"),
    ("abfs://c/t", AZURE_OPTIONS, AzureStorage, "azure", pafs.PyFileSystem, "abfs://c/t/d/f"),
    ("memory://x/t", {}, MemoryStorage, "memory", pafs.PyFileSystem, "memory://x/t/d/f"),
    (f"{SCHEME}://x/t", {}, DictStorage, "dict", pafs.PyFileSystem, f"{SCHEME}://x/t/d/f"),
]


@pytest.mark.parametrize(
    ("uri", "options", "kind", "backend", "arrow", "hadoop"),
    [pytest.param(*case, id=case[0]) for case in CASES],
)
def test_each_scheme_gets_its_backend(
    uri: str, options: dict[str, Any], kind: type, backend: str, arrow: type, hadoop: str
) -> None:
    storage = open_storage(uri, options)
    assert type(storage) is kind and storage.backend == backend and storage.atomic_create
    filesystem, _root = storage.arrow_filesystem()
    assert type(filesystem) is arrow
    assert storage.arrow_filesystem()[0] is filesystem  # built once
    assert storage.hadoop_uri("d/f") == hadoop
    with pytest.raises(at.PathOutsideTableError):
        storage.hadoop_uri("../f")
    parent = storage.parent()
    assert parent is not None and type(parent) is kind
    assert parent.root == uri.rsplit("/", 1)[0]


def test_local_disk_and_other_fsspec_protocols(tmp_path: Path) -> None:
    local = open_storage(str(tmp_path / "t"))
    assert type(local) is LocalStorage and local.atomic_create
    assert type(local.arrow_filesystem()[0]) is pafs.LocalFileSystem
    assert local.hadoop_uri("d/f") == f"file://{tmp_path}/t/d/f"
    assert type(open_storage(f"file://{tmp_path}/t")) is LocalStorage
    roots = []
    above = local.parent()
    while above is not None:
        roots.append(above.root)
        above = above.parent()
    assert roots == [str(p) for p in [tmp_path, *tmp_path.parents]]
    other = open_storage(f"local://{tmp_path}/t")  # fsspec's LocalFileSystem: no backend
    assert type(other) is FsspecStorage and not other.atomic_create
    assert type(other.arrow_filesystem()[0]) is pafs.PyFileSystem


def test_the_root_of_a_bucket_has_no_parent() -> None:
    assert open_storage("s3://bucket", S3_OPTIONS).parent() is None
    top = open_storage("memory://t").parent()
    assert top is not None and top.parent() is None
