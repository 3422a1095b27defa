"""A table whose S3 endpoint comes from the environment (``AWS_ENDPOINT_URL``, which botocore
and so s3fs read) has its data files read from that endpoint too, by pyarrow's own S3 client,
which does not read the variable."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import appendtable as at
from appendtable.storage.registry import open_storage
from tests.s3.seaweedfs import SeaweedFS

pytestmark = pytest.mark.s3


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_data_files_are_read_from_the_endpoint_the_environment_names(
    seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """Found by the GCS hunt's twin: writes went to the server the variable names, reads of
    data files to AWS (``<bucket>.s3.us-east-1.amazonaws.com``): an error here, rows of
    another bucket of the same name where AWS answers."""
    monkeypatch.setenv(variable, seaweedfs.endpoint_url)
    options = {"key": seaweedfs.key, "secret": seaweedfs.secret}  # no endpoint_url
    uri = seaweedfs.uri(f"tests/{uuid.uuid4().hex}")
    table = at.create_table(uri, pa.schema([("a", pa.int64())]), storage_options=options)
    table.append(pa.table({"a": [1, 2]}))
    table.append(pa.table({"a": [3]}))
    assert table.wait_for_maintenance(timeout=60)  # before the server stops
    reopened = at.open_table(uri, storage_options=options)
    assert sorted(reopened.scan().to_arrow()["a"].to_pylist()) == [1, 2, 3]
    assert sorted(reopened.scan(filter=[("a", ">", 1)]).to_arrow()["a"].to_pylist()) == [2, 3]


def test_the_native_client_takes_the_region_the_environment_names(
    seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """s3fs's client reads AWS_DEFAULT_REGION; pyarrow's client was given us-east-1 instead
    (on AWS, a bucket elsewhere answers with a redirect that client does not follow)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    options = {
        "key": seaweedfs.key,
        "secret": seaweedfs.secret,
        "endpoint_url": seaweedfs.endpoint_url,
    }
    storage = open_storage(seaweedfs.uri(f"tests/{uuid.uuid4().hex}"), options)
    filesystem, _root = storage.arrow_filesystem()
    assert isinstance(filesystem, pafs.S3FileSystem) and filesystem.region == "eu-west-3"
