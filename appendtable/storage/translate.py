"""The one place where foreign I/O exceptions become ``StorageError``s.

Classification (``translated`` raises the first that applies, chained with ``from``):

* ``FileNotFoundError``, S3 ``NoSuchKey`` / ``NotFound`` / HTTP 404 → ``ObjectNotFoundError``;
* ``FileExistsError`` → ``ObjectExistsError``;
* throttling (``SlowDown`` …), timeouts, dropped or refused connections, S3 409
  ``ConditionalRequestConflict`` and 5xx → ``TransientStorageError`` (safe to retry an
  idempotent operation);
* any other ``OSError`` or botocore error → ``StorageError`` (worded in the user's terms for
  mistakes in the location: a path through a file, permissions, a read-only or full disk).

Only ``OSError`` and botocore's own exception types are translated; anything else (a bug,
``KeyboardInterrupt``) propagates untouched. s3fs turns most botocore ``ClientError``s into
``OSError``s whose ``__cause__`` is the ``ClientError``, so the S3 error code and HTTP status are
looked up along the ``__cause__`` chain.
"""

from __future__ import annotations

import errno
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
    "FOREIGN_IO_ERRORS",
    "IO_ERRORS",
    "is_not_found",
    "is_precondition_failed",
    "is_transient",
    "translated",
]

try:  # botocore is present only with the s3 extra; its errors are not all OSErrors.
    from botocore.exceptions import BotoCoreError, ClientError, SSLError
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError as BotoHTTPClientError

    FOREIGN_IO_ERRORS: tuple[type[BaseException], ...] = (BotoCoreError, ClientError)
    _TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
        TimeoutError,
        ConnectionError,
        BotoConnectionError,
        BotoHTTPClientError,
    )
    _NEVER_TRANSIENT: tuple[type[BaseException], ...] = (SSLError,)
except ImportError:  # pragma: no cover - depends on the installed extras
    FOREIGN_IO_ERRORS = ()
    _TRANSIENT_TYPES = (TimeoutError, ConnectionError)
    _NEVER_TRANSIENT = ()

#: Every exception type the storage layer may catch (to retry or translate): ``OSError`` and
#: botocore's. Nothing broader is ever caught.
IO_ERRORS: tuple[type[BaseException], ...] = (OSError, *FOREIGN_IO_ERRORS)

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
    }
)
_TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})


def _error_code(exc: BaseException) -> tuple[str, int]:
    """The S3 error code and HTTP status found on ``exc`` or its causes (a botocore
    ``ClientError`` carries them in ``.response``); ``("", 0)`` if there is none."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            error = response.get("Error") or {}
            meta = response.get("ResponseMetadata") or {}
            code = str(error.get("Code", ""))
            status = int(meta.get("HTTPStatusCode", 0) or 0)
            if code or status:
                return code, status
        current = current.__cause__ or current.__context__
    return "", 0


def is_precondition_failed(exc: BaseException) -> bool:
    """True when ``exc`` is an S3 412: a conditional create (``If-None-Match: *``) found the key
    taken. s3fs raises ``FileExistsError`` only when the server names the condition (AWS, moto);
    SeaweedFS and others answer without it and s3fs raises ``OSError(EINVAL)``, so the
    botocore cause is inspected as well."""
    if isinstance(exc, FileExistsError):
        return True
    code, status = _error_code(exc)
    return code == "PreconditionFailed" or status == 412


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
    except IO_ERRORS as exc:
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


def _classify(exc: BaseException, operation: str, path: str) -> StorageError:
    code, status = _error_code(exc)
    mistake = _USER_MISTAKES.get(getattr(exc, "errno", None) or 0)
    if mistake is not None:
        return StorageError(f"cannot {operation} {path}: {mistake}", path=path, operation=operation)
    message = f"{operation} failed for {path}: {type(exc).__name__}: {exc}"
    if code in _NOT_FOUND_CODES or status == 404:
        return ObjectNotFoundError(message, path=path, operation=operation)
    transient = not isinstance(exc, _NEVER_TRANSIENT) and (
        isinstance(exc, _TRANSIENT_TYPES)
        or getattr(exc, "errno", None) in _TRANSIENT_ERRNOS
        or code in _TRANSIENT_CODES
        or status in _TRANSIENT_STATUSES
    )
    if transient:
        return TransientStorageError(message, path=path, operation=operation)
    return StorageError(message, path=path, operation=operation)
