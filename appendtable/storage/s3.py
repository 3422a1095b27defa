"""Amazon S3 and compatible servers, through s3fs (``s3://``, ``s3a://``).

* Atomic create: a conditional PUT (``If-None-Match: *``, s3fs ``pipe_file(mode="create")``);
  the server creates the object only if the key is absent, atomically, with its complete
  content. A 412 means the key exists. A conditional replace is a PUT with ``If-Match`` (the
  object's ETag; AWS since 2024, SeaweedFS). s3fs raises ``FileExistsError`` only when the server
  names the condition (AWS, moto); SeaweedFS and others answer without it and s3fs raises
  ``OSError(EINVAL)`` caused by the ``ClientError``, which ``S3_ERRORS`` finds through the
  cause.
* Freshness: ``exists`` and ``info`` are one raw ``HeadObject`` each (s3fs's own ``exists``
  falls back to a LIST on a miss and consults its listing cache); listings bypass the cache
  and drop what they put in it.
* Errors: botocore's codes and statuses, throttling (``SlowDown``, 503) and 409
  ``ConditionalRequestConflict`` transient; pyarrow's client names the AWS SDK's error in its
  messages (``AWS Error NETWORK_CONNECTION``), network failures and throttling transient.
* pyarrow reads and writes data files with its own S3 client, configured like the s3fs file
  system (the bridge through s3fs costs a HEAD per file opened; the native client reads with
  ranged GETs, writes a small file in one PUT, and gives up on a stalled request),
  at the endpoint s3fs's client resolved: pyarrow reads neither ``AWS_ENDPOINT_URL`` nor the
  AWS config's ``endpoint_url``.
* Spark (Hadoop) reaches the table as ``s3a://``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from appendtable.errors import ObjectNotFoundError
from appendtable.storage.entries import FileInfo
from appendtable.storage.fsspec_store import Limit, mtime_ms
from appendtable.storage.object_store import AIOHTTP_MODULES, AIOHTTP_TRANSIENT, ObjectStore
from appendtable.storage.translate import Translator

__all__ = ["S3_ERRORS", "S3Storage"]


#: How pyarrow's S3 client (the AWS C++ SDK) names an error in its ``OSError``'s message.
_ARROW_AWS_ERROR = re.compile(r"\bAWS Error ([A-Z_]+)\b")


def _s3_code(exc: BaseException) -> tuple[str, int]:
    """The code and status of botocore's ``ClientError`` (its ``response``), or the AWS SDK's
    error name in the message of pyarrow's ``OSError`` (``AWS Error NETWORK_CONNECTION``)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        found = _ARROW_AWS_ERROR.search(str(exc)) if isinstance(exc, OSError) else None
        return (found.group(1), 0) if found else ("", 0)
    error = response.get("Error") or {}
    meta = response.get("ResponseMetadata") or {}
    return str(error.get("Code", "")), int(meta.get("HTTPStatusCode", 0) or 0)


#: How botocore (under s3fs and aiobotocore) reports S3's failures.
S3_ERRORS = Translator(
    modules=("botocore.", "aiobotocore.", *AIOHTTP_MODULES),
    code_of=_s3_code,
    not_found=frozenset({"NoSuchKey", "NotFound", "404"}),
    taken=frozenset({"PreconditionFailed"}),
    transient=frozenset(
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
            # the AWS C++ SDK's names, in the messages of pyarrow's S3 client
            "NETWORK_CONNECTION",
            "SLOW_DOWN",
            "THROTTLING",
            "SERVICE_UNAVAILABLE",
            "REQUEST_TIMEOUT",
            "INTERNAL_FAILURE",
        }
    ),
    transient_classes=frozenset(
        {
            "ConnectionError",
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ReadTimeoutError",
            "HTTPClientError",
            *AIOHTTP_TRANSIENT,
        }
    ),
)


def _resolved(fs: Any) -> tuple[str | None, str | None]:
    """The endpoint and region botocore resolved for s3fs's client from the environment or
    the AWS config (``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_S3``, ``AWS_DEFAULT_REGION``, a
    profile's ``endpoint_url`` and ``region``), which pyarrow's client does not all read; the
    endpoint is None for AWS's own endpoints (pyarrow's default)."""
    client = getattr(fs, "_s3", None)
    if client is None:
        fs.connect()  # the session s3fs's own calls would open
        client = getattr(fs, "_s3", None)
    meta = getattr(client, "meta", None)
    endpoint = str(getattr(meta, "endpoint_url", None) or "")
    host = urlsplit(endpoint).hostname or ""
    region = getattr(meta, "region_name", None)
    return (
        endpoint if host and not host.endswith(".amazonaws.com") else None,
        str(region) if region else None,
    )


class S3Storage(ObjectStore):
    """A prefix of an S3 bucket."""

    backend = "s3"
    translator = S3_ERRORS
    fresh_listing: ClassVar[Mapping[str, Any]] = {"refresh": True}
    extra = "s3"
    _output: pafs.FileSystem | None = None

    def _upload_if_version(self, full: str, data: bytes, version: str | None, limit: Limit) -> str:
        condition: dict[str, str] = {"mode": "create"} if version is None else {"IfMatch": version}
        # If-None-Match: * or If-Match: <ETag>
        response: Mapping[str, Any] = self.fs.pipe_file(full, data, **condition, **limit)
        return str(response["ETag"])

    def _version(self, path: str) -> str | None:
        """The object's ETag (one HEAD)."""
        head = self._head(self._full(path))
        return None if head is None else str(head["ETag"])

    def _cat(self, full: str, limit: Limit) -> bytes:
        """One GET (s3fs's ``cat_file`` sends a HEAD first to decide whether to fetch large
        objects in concurrent ranges; ``max_concurrency=1`` skips it)."""
        data: bytes = self.fs.cat_file(full, max_concurrency=1, **limit)
        return data

    def _exists(self, path: str) -> bool:
        return self._head(self._full(path)) is not None

    def _info(self, path: str) -> FileInfo:
        head = self._head(self._full(path))
        if head is None:
            raise ObjectNotFoundError(
                f"stat: file not found: {self.uri(path)}", path=self.uri(path), operation="stat"
            )
        return FileInfo(path, int(head.get("ContentLength") or 0), mtime_ms(head))

    def _head(self, full: str) -> dict[str, Any] | None:
        """The ``HeadObject`` response for ``full``, None on 404. A raw request: no listing,
        no cache."""
        bucket, key, _version = self.fs.split_path(full)

        def head(limit: Limit) -> dict[str, Any] | None:
            try:
                response: dict[str, Any] = self.fs.call_s3(
                    "head_object", Bucket=bucket, Key=key, **limit
                )
            except Exception as exc:  # storage failures only (is_io_error); the rest re-raised
                if self.translator.is_io_error(exc) and self.translator.is_not_found(exc):
                    return None
                raise
            return response

        return self._retrying(head)

    def _listed(self, full: str) -> None:
        self.fs.invalidate_cache(full)  # keep no listing for s3fs's other methods

    def _arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """pyarrow's S3 client with s3fs's credentials, region and endpoint; the bridge to s3fs
        when the storage options add headers to s3fs's requests (``s3_additional_kwargs``, such
        as server-side encryption with a customer key, ``requester_pays``), which pyarrow's
        client would not send (the store would refuse its requests)."""
        if self._adds_headers():
            return super()._arrow_filesystem()
        return pafs.S3FileSystem(**self._native_options()), self.root_path

    def _native_output(self) -> pafs.FileSystem | None:
        """The native client, opening streams lazily: a data file smaller than a part is one
        PUT at close (an eager open starts a multipart upload: three requests); None (s3fs's
        stream) where ``_arrow_filesystem`` is the bridge."""
        if self._adds_headers():
            return None
        if self._output is None:
            self._output = pafs.S3FileSystem(**self._native_options(), allow_delayed_open=True)
        return self._output

    def _adds_headers(self) -> bool:
        """Whether the storage options add headers to every s3fs request."""
        return bool(
            getattr(self.fs, "s3_additional_kwargs", None) or getattr(self.fs, "req_kw", None)
        )

    def _native_options(self) -> dict[str, Any]:
        """The keyword arguments of pyarrow's ``S3FileSystem`` that reach s3fs's bucket."""
        fs = self.fs
        client = dict(getattr(fs, "client_kwargs", None) or {})
        resolved_endpoint, resolved_region = _resolved(fs)
        options: dict[str, Any] = {
            "access_key": getattr(fs, "key", None),
            "secret_key": getattr(fs, "secret", None),
            "session_token": getattr(fs, "token", None),
            "region": client.get("region_name") or resolved_region or "us-east-1",
        }
        if getattr(fs, "anon", False):
            options = {"anonymous": True, "region": options["region"]}
        endpoint = (
            client.get("endpoint_url") or getattr(fs, "endpoint_url", None) or resolved_endpoint
        )
        if endpoint:
            parsed = urlsplit(str(endpoint))
            options["endpoint_override"] = parsed.netloc or parsed.path
            options["scheme"] = parsed.scheme or "https"
        return {k: v for k, v in options.items() if v is not None}

    def _hadoop_uri(self, path: str) -> str:
        """Hadoop's S3 file system is ``s3a://``."""
        return "s3a://" + self.uri(path).split("://", 1)[1]
