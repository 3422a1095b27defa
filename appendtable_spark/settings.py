"""The options a Spark reader or writer receives, parsed once.

Spark hands a data source its options as strings with case-insensitive keys (``path`` holds the
``load``/``save`` argument). Keys starting with ``storage.`` become fsspec storage options (for
example ``storage.key``, ``storage.client_kwargs`` as JSON); keys the table format knows (such as
``bucket``, ``scan.mode``, ``consumer-id``) go to the table or the stream; the rest are the
adapter's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import appendtable as at

__all__ = ["Settings"]

#: Options of the adapter itself (lower-case, as Spark delivers them).
ADAPTER_OPTIONS = frozenset(
    {
        "path",
        "columns",
        "partition-by",
        "partitionby",
        "__partition_columns",
        "commituser",
        "commitidentifier",
        "txnappid",
        "txnversion",
        "maxfilespertrigger",
        "maxrowspertrigger",
        "splittargetbytes",
        "checkpointlocation",
        "overwritepartitions",
        "mergeschema",
    }
)


def _storage_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class Settings:
    uri: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    format_options: dict[str, str] = field(default_factory=dict)
    adapter: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def parse(options: Mapping[str, str]) -> Settings:
        lowered = {str(k).lower(): str(v) for k, v in dict(options).items()}
        path = lowered.get("path")
        if not path:
            raise at.InvalidOptionError(
                "no table location: use .load(uri) / .save(uri) or .option('path', uri)"
            )
        if path.startswith("file:"):
            path = path[len("file:") :]
            if path.startswith("//"):
                path = path[2:]
        storage = {
            key[len("storage.") :]: _storage_value(value)
            for key, value in lowered.items()
            if key.startswith("storage.")
        }
        adapter = {k: v for k, v in lowered.items() if k in ADAPTER_OPTIONS}
        format_options = {
            key: value
            for key, value in lowered.items()
            if key not in ADAPTER_OPTIONS and not key.startswith("storage.")
        }
        return Settings(path, storage, format_options, adapter)

    def open(self) -> at.Table:
        return at.open_table(self.uri, storage_options=self.storage_options)

    def columns(self) -> list[str] | None:
        text = self.adapter.get("columns")
        return [c.strip() for c in text.split(",") if c.strip()] if text else None

    def partition_by(self) -> list[str]:
        text = self.adapter.get("partition-by") or self.adapter.get("partitionby")
        if text:
            return [c.strip() for c in text.split(",") if c.strip()]
        spark_given = self.adapter.get("__partition_columns")
        return list(json.loads(spark_given)) if spark_given else []

    def commit_identity(self) -> tuple[str | None, int | None]:
        """(commit user, identifier) of an idempotent write: options ``commitUser`` and
        ``commitIdentifier`` (or Delta's ``txnAppId`` and ``txnVersion``)."""
        user = self.adapter.get("commituser") or self.adapter.get("txnappid")
        text = self.adapter.get("commitidentifier") or self.adapter.get("txnversion")
        if text is not None and user is None:
            raise at.InvalidOptionError(
                "option 'commitIdentifier' needs 'commitUser' (a name stable across retries)"
            )
        return user, int(text) if text is not None else None

    def overwrite_partitions(self) -> list[dict[str, object]] | None:
        """Option ``overwritePartitions``: the static partitions an overwrite replaces, as JSON
        (``[{"day": "2024-05-01"}]``; dates, timestamps and decimals as text)."""
        text = self.adapter.get("overwritepartitions")
        if not text:
            return None
        try:
            specs = json.loads(text)
        except ValueError as exc:
            raise at.InvalidOptionError(
                f"option 'overwritePartitions' is not JSON: {text!r} ({exc})"
            ) from exc
        if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
            raise at.InvalidOptionError(
                "option 'overwritePartitions' must be a JSON list of objects such as "
                '[{"day": "2024-05-01"}]'
            )
        return specs

    def merge_schema(self) -> bool:
        """Option ``mergeSchema``: add the DataFrame's new columns (and struct fields) to the
        table before writing, and write the table columns it lacks as nulls."""
        text = self.adapter.get("mergeschema", "false").strip().lower()
        if text not in ("true", "false"):
            raise at.InvalidOptionError(f"option 'mergeSchema' must be true or false, not {text!r}")
        return text == "true"

    def read_target(self) -> tuple[int | None, int | None, str | None]:
        """The snapshot a batch read names: (``scan.snapshot-id``, ``scan.timestamp-millis``,
        ``scan.tag-name``), at most one of them set."""
        snapshot = self.format_options.get("scan.snapshot-id") or None
        timestamp = self.format_options.get("scan.timestamp-millis") or None
        tag = self.format_options.get("scan.tag-name") or None
        given = [
            name
            for name, value in (
                ("scan.snapshot-id", snapshot),
                ("scan.timestamp-millis", timestamp),
                ("scan.tag-name", tag),
            )
            if value is not None
        ]
        if len(given) > 1:
            raise at.InvalidOptionError(f"give one of options {' and '.join(given)}, not both")
        try:
            return (
                int(snapshot) if snapshot is not None else None,
                int(timestamp) if timestamp is not None else None,
                tag,
            )
        except ValueError as exc:
            raise at.InvalidOptionError(f"option {given[0]} must be an integer: {exc}") from exc

    def integer(self, key: str) -> int | None:
        value = self.adapter.get(key)
        return int(value) if value not in (None, "") else None
