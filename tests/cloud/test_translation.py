"""GCS and Azure client errors become the right StorageError, found by module and status
without the storage layer importing their libraries; secrets never reach a message."""

from __future__ import annotations

import subprocess
import sys

import pytest
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ServiceRequestError,
    ServiceResponseError,
)
from gcsfs.retry import HttpError

import appendtable as at
from appendtable.storage.translate import (
    is_io_error,
    is_precondition_failed,
    redacted,
    translated,
)


def _azure(
    status: int, code: str, kind: type[HttpResponseError] = HttpResponseError
) -> BaseException:
    error = kind(message=f"{code} (status {status})")
    error.status_code = status
    error.error_code = code
    return error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (HttpError({"code": 429, "message": "rate limit"}), at.TransientStorageError),
        (HttpError({"code": 503, "message": "backend error"}), at.TransientStorageError),
        (HttpError({"code": 403, "message": "forbidden"}), at.StorageError),
        (HttpError({"code": 404, "message": "gone"}), at.ObjectNotFoundError),
        (_azure(503, "ServerBusy"), at.TransientStorageError),
        (_azure(500, "InternalError"), at.TransientStorageError),
        (_azure(403, "AuthorizationFailure"), at.StorageError),
        (_azure(404, "BlobNotFound"), at.ObjectNotFoundError),
        (ServiceRequestError("connection refused"), at.TransientStorageError),
        (ServiceResponseError("connection reset"), at.TransientStorageError),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else "",
)
def test_client_errors_are_classified(error: BaseException, expected: type) -> None:
    assert is_io_error(error)
    with pytest.raises(expected) as caught, translated("read", "gs://bucket/table/x"):
        raise error
    assert type(caught.value) is expected
    assert caught.value.__cause__ is error


def test_a_taken_name_is_recognised_on_every_store() -> None:
    assert is_precondition_failed(FileExistsError("gs://b/x"))  # gcsfs (412), adlfs
    assert is_precondition_failed(_azure(409, "BlobAlreadyExists", ResourceExistsError))
    assert is_precondition_failed(HttpError({"code": 412, "message": "conditionNotMet"}))
    assert not is_precondition_failed(_azure(409, "LeaseIdMissing"))


def test_other_errors_of_those_libraries_are_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError), translated("read", "az://c/t"):
        raise ZeroDivisionError("a bug")  # not a storage failure: untouched
    assert not is_io_error(ValueError("x"))


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
    with pytest.raises(at.StorageError) as caught, translated("read", "az://c/t/x"):
        raise error
    message = str(caught.value)
    assert "SECRET" not in message and "sig=***" in message and "AccountKey=***" in message
    assert redacted("token=abc&x=1") == "token=***&x=1"
