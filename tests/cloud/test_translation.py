"""GCS and Azure client errors become the right StorageError, each by its own backend's
translator (found by module and status without the storage layer importing their libraries);
secrets never reach a message."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys
from collections.abc import Callable

import pyarrow.fs as pafs
import pytest
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ServiceRequestError,
    ServiceResponseError,
)
from gcsfs.retry import HttpError

import appendtable as at
from appendtable.storage.azure import AZURE_ERRORS
from appendtable.storage.gcs import GCS_ERRORS
from appendtable.storage.s3 import S3_ERRORS
from appendtable.storage.translate import OS_ERRORS, Translator, redacted


def _azure(
    status: int, code: str, kind: type[HttpResponseError] = HttpResponseError
) -> BaseException:
    error = kind(message=f"{code} (status {status})")
    error.status_code = status
    error.error_code = code
    return error


@pytest.mark.parametrize(
    ("translator", "error", "expected"),
    [
        (GCS_ERRORS, HttpError({"code": 429, "message": "rate limit"}), at.TransientStorageError),
        (GCS_ERRORS, HttpError({"code": 503, "message": "backend"}), at.TransientStorageError),
        (GCS_ERRORS, HttpError({"code": 403, "message": "forbidden"}), at.StorageError),
        (GCS_ERRORS, HttpError({"code": 404, "message": "gone"}), at.ObjectNotFoundError),
        (AZURE_ERRORS, _azure(503, "ServerBusy"), at.TransientStorageError),
        (AZURE_ERRORS, _azure(500, "InternalError"), at.TransientStorageError),
        (AZURE_ERRORS, _azure(403, "AuthorizationFailure"), at.StorageError),
        (AZURE_ERRORS, _azure(404, "BlobNotFound"), at.ObjectNotFoundError),
        (AZURE_ERRORS, ServiceRequestError("connection refused"), at.TransientStorageError),
        (AZURE_ERRORS, ServiceResponseError("connection reset"), at.TransientStorageError),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else "",
)
def test_client_errors_are_classified(
    translator: Translator, error: BaseException, expected: type
) -> None:
    assert translator.is_io_error(error)
    with pytest.raises(expected) as caught, translator.translated("read", "gs://bucket/t/x"):
        raise error
    assert type(caught.value) is expected
    assert caught.value.__cause__ is error


def test_a_taken_name_is_recognised_on_every_store() -> None:
    assert GCS_ERRORS.is_precondition_failed(FileExistsError("gs://b/x"))  # gcsfs (412)
    assert AZURE_ERRORS.is_precondition_failed(FileExistsError("az://c/x"))  # adlfs
    assert AZURE_ERRORS.is_precondition_failed(
        _azure(409, "BlobAlreadyExists", ResourceExistsError)
    )
    assert GCS_ERRORS.is_precondition_failed(HttpError({"code": 412, "message": "conditionNotMet"}))
    assert not AZURE_ERRORS.is_precondition_failed(_azure(409, "LeaseIdMissing"))


@pytest.mark.parametrize(
    ("owner", "error"),
    [
        (GCS_ERRORS, HttpError({"code": 503, "message": "backend"})),
        (AZURE_ERRORS, _azure(503, "ServerBusy")),
    ],
    ids=["gcs", "azure"],
)
def test_each_backend_translates_its_own_library_only(
    owner: Translator, error: BaseException
) -> None:
    """A store's library error is a storage failure for that store's backend; for any other
    backend it is not one of its storage failures, and passes through untouched."""
    assert owner.is_io_error(error)
    for other in {OS_ERRORS, S3_ERRORS, GCS_ERRORS, AZURE_ERRORS} - {owner}:
        assert not other.is_io_error(error)
        with pytest.raises(type(error)) as caught, other.translated("read", "x"):
            raise error
        assert caught.value is error


def test_other_errors_of_those_libraries_are_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError), AZURE_ERRORS.translated("read", "az://c/t"):
        raise ZeroDivisionError("a bug")  # not a storage failure: untouched
    assert not AZURE_ERRORS.is_io_error(ValueError("x"))


def test_the_storage_layer_imports_no_store_library() -> None:
    """gcsfs alone costs 0.4 s to import: a table on local disk must not pay it."""
    code = (
        "import sys, appendtable; "
        "print(sorted(m for m in ('gcsfs', 'adlfs', 'azure.core') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_secrets_never_reach_a_message() -> None:
    sas = "https://acct.blob.core.windows.net/c/t/x?sv=2023&sig=SECRETSIG%2B&se=2030"
    connection = "AccountName=acct;AccountKey=SECRETKEY==;BlobEndpoint=http://x"
    error = _azure(403, f"denied for {sas}; {connection}; Authorization: Bearer SECRETTOKEN")
    with pytest.raises(at.StorageError) as caught, AZURE_ERRORS.translated("read", "az://c/t/x"):
        raise error
    message = str(caught.value)
    assert "SECRET" not in message and "sig=***" in message and "AccountKey=***" in message
    assert redacted("token=abc&x=1") == "token=***&x=1"


def _arrow_failure(read: Callable[[], object]) -> OSError:
    """The error pyarrow's own client raises reading from a port nobody listens on."""
    try:
        read()
    except OSError as exc:
        return exc
    raise AssertionError("a read from a closed port succeeded")


def test_pyarrow_clients_network_failures_are_transient() -> None:
    """Data files are read by pyarrow's own S3 and GCS clients, whose errors are plain
    ``OSError``s naming the SDK's error in the message: a refused connection is as transient
    there as it is through s3fs and gcsfs."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{closed.getsockname()[1]}"
        s3 = pafs.S3FileSystem(
            access_key="k", secret_key="s", endpoint_override=endpoint, scheme="http"
        )
        gcs = pafs.GcsFileSystem(
            anonymous=True,
            endpoint_override=endpoint,
            scheme="http",
            retry_time_limit=dt.timedelta(seconds=0.5),
        )
        failures = {
            S3_ERRORS: _arrow_failure(lambda: s3.open_input_file("bucket/t/x").read()),
            GCS_ERRORS: _arrow_failure(lambda: gcs.open_input_file("bucket/t/x").read()),
        }
    for translator, error in failures.items():
        with pytest.raises(at.TransientStorageError) as caught, translator.translated("read", "x"):
            raise error
        assert caught.value.__cause__ is error
    assert S3_ERRORS.error_code(failures[S3_ERRORS])[0] == "NETWORK_CONNECTION"
    assert GCS_ERRORS.error_code(failures[GCS_ERRORS])[0] == "UNAVAILABLE"
    refused = OSError("When reading information for key 'x': AWS Error ACCESS_DENIED during Get")
    with pytest.raises(at.StorageError) as caught, S3_ERRORS.translated("read", "x"):
        raise refused
    assert type(caught.value) is at.StorageError  # a permission problem is not retried
