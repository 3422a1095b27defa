"""The one place where foreign I/O exceptions become ``StorageError``s.

Classification (``translated`` raises the first that applies, chained with ``from``):

* ``FileNotFoundError``, S3 ``NoSuchKey`` / ``NotFound`` / HTTP 404 → ``ObjectNotFoundError``;
* ``FileExistsError`` → ``ObjectExistsError``;
* throttling (S3 ``SlowDown``, Azure ``ServerBusy``, GCS 429 …), timeouts, dropped or refused
  connections, S3 409 ``ConditionalRequestConflict`` and 5xx → ``TransientStorageError`` (safe
  to retry an idempotent operation);
* any other ``OSError`` or storage library error → ``StorageError`` (worded in the user's terms
  for mistakes in the location: a path through a file, permissions, a read-only or full disk).

Only ``OSError`` and the storage libraries' own exception types (botocore; gcsfs, aiohttp and
google-auth; azure-core) are translated; anything else (a bug, ``KeyboardInterrupt``) propagates
untouched. s3fs turns most botocore ``ClientError``s into ``OSError``s whose ``__cause__`` is
the ``ClientError``, so error codes and HTTP statuses are looked up along the ``__cause__``
chain: botocore's ``response``, azure-core's ``status_code`` and ``error_code``, gcsfs's
``code``. A conditional create that finds the name taken is a 412 (S3, GCS
``ifGenerationMatch=0``) or Azure's 409 ``BlobAlreadyExists``.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager

from appendtable.errors import (
    AppendTableError,
    ObjectExistsError,
    ObjectNotFoundError,
    StorageError,
    TransientStorageError,
)

__all__ = [
    "is_io_error",
    "is_not_found",
    "is_precondition_failed",
    "is_transient",
    "redacted",
    "translated",
]


#: Modules whose exceptions are storage failures: the stores' client libraries (botocore for
#: S3; gcsfs and the HTTP and auth libraries under it for GCS; azure-core and azure-storage for
#: Azure). They are recognised by module name, so that none is imported here: gcsfs alone takes
#: 0.4 s to import, which every ``import appendtable`` would pay.
_FOREIGN_MODULES = (
    "botocore.",
    "gcsfs.",
    "aiohttp.",
    "google.auth.",
    "google.api_core.",
    "azure.core.",
    "azure.storage.",
)
#: Exception classes (by name, of those libraries or the standard library) of a dropped,
#: refused or timed-out connection: transient.
_TRANSIENT_NAMES = frozenset(
    {
        "ConnectionError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "HTTPClientError",
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ServiceRequestError",
        "ServiceResponseError",
        "ServiceRequestTimeoutError",
        "ServiceResponseTimeoutError",
    }
)


def is_io_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a storage failure the storage layer may retry or translate: an
    ``OSError`` or an exception of a store's client library (see ``_FOREIGN_MODULES``)."""
    if isinstance(exc, OSError):
        return True
    return any(cls.__module__.startswith(_FOREIGN_MODULES) for cls in type(exc).__mro__)


def _transient_type(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "SSLError" in names:  # a certificate problem does not go away by retrying
        return False
    return isinstance(exc, TimeoutError | ConnectionError) or bool(names & _TRANSIENT_NAMES)


_TRANSIENT_ERRNOS = frozenset(
    {
        errno.EAGAIN,
        errno.EBUSY,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.EINTR,
    }
)
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "ConditionalRequestConflict",
        "OperationAborted",
        "ServerBusy",  # Azure
        "OperationTimedOut",  # Azure
    }
)
#: Codes (S3, Azure) that say a conditional create found the name taken.
_TAKEN_CODES = frozenset({"PreconditionFailed", "BlobAlreadyExists", "ConditionNotMet"})
_TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})


def _error_code(exc: BaseException) -> tuple[str, int]:
    """The error code and HTTP status found on ``exc`` or its causes (botocore's
    ``.response``, azure-core's ``.status_code`` / ``.error_code``, gcsfs's ``.code``);
    ``("", 0)`` if there is none."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        if isinstance(response, dict):  # botocore
            error = response.get("Error") or {}
            meta = response.get("ResponseMetadata") or {}
            code = str(error.get("Code", ""))
            status = int(meta.get("HTTPStatusCode", 0) or 0)
            if code or status:
                return code, status
        azure_status: object = getattr(current, "status_code", None)  # azure-core
        if isinstance(azure_status, int) and azure_status:
            return str(getattr(current, "error_code", "") or ""), azure_status
        gcs_status: object = getattr(current, "code", None)  # gcsfs's HttpError
        if isinstance(gcs_status, int) and gcs_status and not isinstance(current, OSError):
            return "", gcs_status
        current = current.__cause__ or current.__context__
    return "", 0


def is_precondition_failed(exc: BaseException) -> bool:
    """True when a conditional create found the name taken: a 412 (S3 ``If-None-Match: *``,
    GCS ``ifGenerationMatch=0``) or Azure's 409 ``BlobAlreadyExists``. s3fs raises
    ``FileExistsError`` only when the server names the condition (AWS, moto); SeaweedFS and
    others answer without it and s3fs raises ``OSError(EINVAL)``, so the causes are inspected
    as well. (gcsfs and adlfs raise ``FileExistsError``.)"""
    if isinstance(exc, FileExistsError):
        return True
    code, status = _error_code(exc)
    return code in _TAKEN_CODES or status == 412


def is_not_found(exc: BaseException) -> bool:
    """True when ``exc`` says the object does not exist (``FileNotFoundError`` or an S3 404)."""
    if isinstance(exc, FileNotFoundError):
        return True
    code, status = _error_code(exc)
    return code in _NOT_FOUND_CODES or status == 404


def is_transient(exc: BaseException) -> bool:
    """True for throttling, timeouts, broken connections, 409 conflicts and 5xx: an idempotent
    operation that failed this way may be retried."""
    if isinstance(exc, TransientStorageError):
        return True
    if isinstance(exc, AppendTableError):
        return False
    return isinstance(_classify(exc, "", ""), TransientStorageError)


@contextmanager
def translated(operation: str, path: str) -> Iterator[None]:
    """Run a block of storage I/O and translate what it raises (see the module docstring).
    ``AppendTableError``s pass through unchanged."""
    try:
        yield
    except AppendTableError:
        raise
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(
            f"{operation}: file not found: {path}", path=path, operation=operation
        ) from exc
    except FileExistsError as exc:
        raise ObjectExistsError(
            f"{operation}: file exists: {path}", path=path, operation=operation
        ) from exc
    except Exception as exc:  # a storage library's own error types, recognised by module
        if not is_io_error(exc):
            raise  # a bug, not a storage failure: untouched
        raise _classify(exc, operation, path) from exc


#: OS errors that come from a mistake in the location (the user's terms for them).
_USER_MISTAKES = {
    errno.ENOTDIR: "a part of the path is a file, not a directory (a table is a directory)",
    errno.EISDIR: "it is a directory where a file was expected",
    errno.EACCES: "permission denied (check who owns the location and its mode)",
    errno.EPERM: "operation not permitted on this location",
    errno.EROFS: "the location is on a read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.ENAMETOOLONG: "a name in the path is too long for the file system",
}


#: Secrets that storage libraries' messages can carry (SAS signatures in URLs, account keys in
#: connection strings, bearer tokens): never repeated in our errors or logs.
_SECRETS = re.compile(
    r"\b(sig|signature|accountkey|sharedaccesssignature|access_token|x-amz-security-token|"
    r"x-amz-signature|token|password)=([^&;\s'\"]+)"
    r"|(authorization:\s*\w+\s+)(\S+)",
    re.IGNORECASE,
)


def redacted(text: str) -> str:
    """``text`` with the values of secret-looking parameters replaced by ``***``."""

    def hide(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return f"{match.group(1)}=***"
        return f"{match.group(3)}***"

    return _SECRETS.sub(hide, text)


def _classify(exc: BaseException, operation: str, path: str) -> StorageError:
    code, status = _error_code(exc)
    mistake = _USER_MISTAKES.get(getattr(exc, "errno", None) or 0)
    if mistake is not None:
        return StorageError(f"cannot {operation} {path}: {mistake}", path=path, operation=operation)
    message = f"{operation} failed for {path}: {type(exc).__name__}: {redacted(str(exc))}"
    if code in _NOT_FOUND_CODES or status == 404:
        return ObjectNotFoundError(message, path=path, operation=operation)
    transient = (
        _transient_type(exc)
        or getattr(exc, "errno", None) in _TRANSIENT_ERRNOS
        or code in _TRANSIENT_CODES
        or status in _TRANSIENT_STATUSES
    )
    if transient:
        return TransientStorageError(message, path=path, operation=operation)
    return StorageError(message, path=path, operation=operation)
