"""The one place where foreign I/O exceptions become ``StorageError``s."""

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

__all__ = ["is_precondition_failed", "is_transient", "translated"]

try:  # botocore is present only with the s3 extra; its errors are not OSErrors.
    from botocore.exceptions import BotoCoreError, ClientError

    _FOREIGN_ERRORS: tuple[type[BaseException], ...] = (BotoCoreError, ClientError)
except ImportError:  # pragma: no cover - depends on the installed extras
    _FOREIGN_ERRORS = ()

_TRANSIENT_ERRNOS = frozenset(
    {errno.EAGAIN, errno.EBUSY, errno.ETIMEDOUT, errno.ECONNRESET, errno.ECONNREFUSED, errno.EINTR}
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


def _error_code(exc: BaseException) -> tuple[str, int]:
    """The S3 error code and HTTP status found on ``exc`` or its causes (botocore ClientError)."""
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
    """True when ``exc`` is an S3 412 (the conditional create found the key taken)."""
    if isinstance(exc, FileExistsError):
        return True
    code, status = _error_code(exc)
    return code == "PreconditionFailed" or status == 412


@contextmanager
def translated(operation: str, path: str) -> Iterator[None]:
    """Run a block of storage I/O and translate what it raises."""
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
    except OSError as exc:
        raise _classify(exc, operation, path) from exc
    except _FOREIGN_ERRORS as exc:
        raise _classify(exc, operation, path) from exc


def is_transient(exc: BaseException) -> bool:
    """True for throttling, timeouts, 409 conflicts and 5xx: worth retrying."""
    return isinstance(_classify(exc, "", ""), TransientStorageError)


def _classify(exc: BaseException, operation: str, path: str) -> StorageError:
    code, status = _error_code(exc)
    message = f"{operation} failed for {path}: {exc}"
    if code in ("NoSuchKey", "NotFound") or status == 404:
        return ObjectNotFoundError(message, path=path, operation=operation)
    if (
        getattr(exc, "errno", None) in _TRANSIENT_ERRNOS
        or code in _TRANSIENT_CODES
        or status in (408, 409, 429, 500, 502, 503, 504)
    ):
        return TransientStorageError(message, path=path, operation=operation)
    return StorageError(message, path=path, operation=operation)
