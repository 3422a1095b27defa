"""Azure Blob Storage and ADLS Gen2, through adlfs (``az://``, ``abfs://``, ``abfss://``).

* Atomic create: an upload with ``If-None-Match: *`` (adlfs ``pipe_file(overwrite=False)``);
  409 ``BlobAlreadyExists`` means the name exists. A conditional replace is an upload with
  ``If-Match`` (the blob's ETag); 412 ``ConditionNotMet`` means it changed.
* Errors: azure-core's exceptions carry ``status_code`` and ``error_code`` (``ServerBusy``,
  503, transient); its connection errors are ``ServiceRequestError`` / ``ServiceResponseError``.
* pyarrow reads data files through the bridge to adlfs (pyarrow's own ``AzureFileSystem``
  takes other credentials than adlfs; mapping them is not done yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from appendtable.storage.fsspec_store import Limit
from appendtable.storage.object_store import AIOHTTP_MODULES, AIOHTTP_TRANSIENT, ObjectStore
from appendtable.storage.translate import Translator

__all__ = ["AZURE_ERRORS", "AzureStorage"]


def _azure_code(exc: BaseException) -> tuple[str, int]:
    """The code and status of azure-core's ``HttpResponseError``."""
    status: object = getattr(exc, "status_code", None)
    if isinstance(status, int) and status:
        return str(getattr(exc, "error_code", "") or ""), status
    return "", 0


#: How azure-core and azure-storage (under adlfs) report Azure's failures.
AZURE_ERRORS = Translator(
    modules=("azure.core.", "azure.storage.", *AIOHTTP_MODULES),
    code_of=_azure_code,
    taken=frozenset({"BlobAlreadyExists", "ConditionNotMet"}),
    transient=frozenset({"ServerBusy", "OperationTimedOut", "InternalError"}),
    transient_classes=frozenset(
        {
            "ServiceRequestError",
            "ServiceResponseError",
            "ServiceRequestTimeoutError",
            "ServiceResponseTimeoutError",
            *AIOHTTP_TRANSIENT,
        }
    ),
)


class AzureStorage(ObjectStore):
    """A prefix of an Azure Blob Storage container."""

    backend = "azure"
    translator = AZURE_ERRORS
    extra = "azure"

    def _upload_if_version(self, full: str, data: bytes, version: str | None, limit: Limit) -> str:
        condition: dict[str, Any] = (
            {"overwrite": False}  # If-None-Match: *
            if version is None
            else {"if_match": version}  # If-Match: <ETag>
        )
        written: Mapping[str, Any] = self.fs.pipe_file(full, data, **condition, **limit)
        return str(written["etag"])

    def _version(self, path: str) -> str | None:
        """The blob's ETag (one properties request)."""
        info = self._fresh_info(self._full(path))
        return None if info is None else str(info["etag"])
