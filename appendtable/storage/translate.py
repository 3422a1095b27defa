"""How foreign I/O exceptions become ``StorageError``s: one ``Translator`` per store.

A translator knows one store's client library: which modules' exceptions are storage failures,
where its error code and HTTP status sit on an exception (``code_of``), and which codes mean
"not found", "name taken" and "try again". ``OS_ERRORS`` knows the operating system alone; each
backend module defines its store's (``storage.s3.S3_ERRORS``, ...), and ``Storage`` applies
its backend's translator around every operation, so foreign errors are translated in one place
per backend.

Classification (``Translator.translated`` raises the first that applies, chained with
``from``):

* ``FileNotFoundError``, a not-found code of the store or HTTP 404 → ``ObjectNotFoundError``;
* ``FileExistsError`` → ``ObjectExistsError``;
* throttling and the store's other transient codes, timeouts, dropped or refused connections
  (an errno, or an exception class the store's library raises for them), HTTP 408, 409, 429
  and 5xx → ``TransientStorageError`` (safe to retry an idempotent operation);
* any other ``OSError`` or error of the store's library → ``StorageError`` (worded in the
  user's terms for mistakes in the location: a path through a file, permissions, a read-only
  or full disk).

Only ``OSError`` and exceptions of the store's modules are translated (recognised by module
name, so that no store library is imported here); anything else (a bug, ``KeyboardInterrupt``)
propagates untouched. Codes and statuses are looked up along the ``__cause__`` chain, since
client libraries wrap their errors (s3fs turns botocore's ``ClientError`` into an ``OSError``
caused by it). A conditional create that finds the name taken is a 412 or one of the store's
"taken" codes.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from appendtable.errors import (
    AppendTableError,
    ObjectExistsError,
    ObjectNotFoundError,
    StorageError,
    TransientStorageError,
)

__all__ = ["OS_ERRORS", "Translated", "Translator", "redacted"]


def _no_code(exc: BaseException) -> tuple[str, int]:
    return "", 0


@dataclass(frozen=True)
class Translator:
    """How one store reports failures (see the module docstring). The defaults describe the
    operating system alone: ``OSError``s and nothing else."""

    #: Prefixes of the modules (``"botocore."``) whose exceptions are storage failures.
    modules: tuple[str, ...] = ()
    #: The error code and HTTP status one exception carries (``("", 0)`` if none); the
    #: translator walks the ``__cause__`` chain.
    code_of: Callable[[BaseException], tuple[str, int]] = _no_code
    #: Codes that say the object does not exist.
    not_found: frozenset[str] = frozenset()
    #: Codes that say a conditional create found the name taken.
    taken: frozenset[str] = frozenset()
    #: Codes of throttling and other failures that go away by retrying.
    transient: frozenset[str] = frozenset()
    #: Class names of the library's exceptions for dropped, refused or timed-out connections.
    transient_classes: frozenset[str] = frozenset()

    def is_io_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a storage failure: an ``OSError`` or an exception of the store's
        library."""
        if isinstance(exc, OSError):
            return True
        return any(cls.__module__.startswith(self.modules) for cls in type(exc).__mro__)

    def error_code(self, exc: BaseException) -> tuple[str, int]:
        """The error code and HTTP status found on ``exc`` or its causes; ``("", 0)`` if
        none."""
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            code, status = self.code_of(current)
            if code or status:
                return code, status
            current = current.__cause__ or current.__context__
        return "", 0

    def is_precondition_failed(self, exc: BaseException) -> bool:
        """True when a conditional create found the name taken: ``FileExistsError``, a 412 or
        one of the store's "taken" codes (found along the causes: some servers answer without
        naming the condition, and the client then raises a plain ``OSError``)."""
        if isinstance(exc, FileExistsError):
            return True
        code, status = self.error_code(exc)
        return code in self.taken or status == 412

    def is_not_found(self, exc: BaseException) -> bool:
        """True when ``exc`` says the object does not exist."""
        if isinstance(exc, FileNotFoundError):
            return True
        code, status = self.error_code(exc)
        return code in self.not_found or status == 404

    def is_transient(self, exc: BaseException) -> bool:
        """True for throttling, timeouts, broken connections, 409 conflicts and 5xx: an
        idempotent operation that failed this way may be retried."""
        if isinstance(exc, TransientStorageError):
            return True
        if isinstance(exc, AppendTableError):
            return False
        return isinstance(self.classify(exc, "", ""), TransientStorageError)

    def translated(self, operation: str, path: str) -> Translated:
        """A block of storage I/O on ``path`` whose failures are translated (see the module
        docstring): ``with translator.translated("read", uri): ...``. ``AppendTableError``s
        pass through unchanged."""
        return Translated(self, operation, path)

    def _transient_type(self, exc: BaseException) -> bool:
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "SSLError" in names:  # a certificate problem does not go away by retrying
            return False
        return isinstance(exc, TimeoutError | ConnectionError) or bool(
            names & self.transient_classes
        )

    def classify(self, exc: BaseException, operation: str, path: str) -> StorageError:
        """The ``StorageError`` for a storage failure ``exc`` of ``operation`` on ``path``."""
        code, status = self.error_code(exc)
        mistake = _USER_MISTAKES.get(getattr(exc, "errno", None) or 0)
        if mistake is not None:
            return StorageError(
                f"cannot {operation} {path}: {mistake}", path=path, operation=operation
            )
        message = f"{operation} failed for {path}: {type(exc).__name__}: {redacted(str(exc))}"
        if code in self.not_found or status == 404:
            return ObjectNotFoundError(message, path=path, operation=operation)
        transient = (
            self._transient_type(exc)
            or getattr(exc, "errno", None) in _TRANSIENT_ERRNOS
            or code in self.transient
            or status in _TRANSIENT_STATUSES
        )
        if transient:
            return TransientStorageError(message, path=path, operation=operation)
        return StorageError(message, path=path, operation=operation)


class Translated:
    """A block of storage I/O whose failures ``translator`` translates, naming ``path`` (or,
    with ``uri``, ``uri(path)``, formatted only when something fails)."""

    __slots__ = ("_operation", "_path", "_translator", "_uri")

    def __init__(
        self,
        translator: Translator,
        operation: str,
        path: str,
        uri: Callable[[str], str] | None = None,
    ) -> None:
        self._translator = translator
        self._operation = operation
        self._path = path
        self._uri = uri

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, AppendTableError) or not isinstance(exc, Exception):
            return
        operation = self._operation
        path = self._path if self._uri is None else self._uri(self._path)
        if isinstance(exc, FileNotFoundError):
            raise ObjectNotFoundError(
                f"{operation}: file not found: {path}", path=path, operation=operation
            ) from exc
        if isinstance(exc, FileExistsError):
            raise ObjectExistsError(
                f"{operation}: file exists: {path}", path=path, operation=operation
            ) from exc
        if not self._translator.is_io_error(exc):
            return  # a bug, not a storage failure: untouched
        raise self._translator.classify(exc, operation, path) from exc


#: The operating system alone (local disk, fsspec's memory:// and other Python file systems).
OS_ERRORS = Translator()

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
#: HTTP statuses worth a retry: timeout, conflict, throttling and server errors.
_TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})

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
