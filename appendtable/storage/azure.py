"""Azure Blob Storage and ADLS Gen2, through adlfs (``az://``, ``abfs://``, ``abfss://``).

* Atomic create: an upload with ``If-None-Match: *`` (adlfs ``pipe_file(overwrite=False)``);
  409 ``BlobAlreadyExists`` means the name exists.
* Errors: azure-core's exceptions carry ``status_code`` and ``error_code`` (``ServerBusy``,
  503, transient); its connection errors are ``ServiceRequestError`` / ``ServiceResponseError``.
* pyarrow reads data files through the bridge to adlfs (pyarrow's own ``AzureFileSystem``
  takes other credentials than adlfs; mapping them is not done yet).
"""

from __future__ import annotations

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

    def _upload_if_absent(self, full: str, data: bytes, limit: Limit) -> None:
        self.fs.pipe_file(full, data, overwrite=False, **limit)  # If-None-Match: *
