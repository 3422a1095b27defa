"""The options a Spark reader or writer receives, checked once against the option registries.

Spark hands a data source its options as strings with lower-cased keys (``path`` holds the
``load``/``save`` argument). Keys starting with ``storage.`` become fsspec storage options (for
example ``storage.key``, ``storage.client_kwargs`` as JSON); keys of the core's registry (such as
``bucket``, ``scan.mode``, ``consumer-id``) go to the table or the stream and are checked by the
core; the adapter's own options are declared in :mod:`appendtable_spark.options`. An unknown key
or a bad value raises ``InvalidOptionError`` naming the option.

A ``Settings`` is immutable and derived from one call's options only: nothing of one query
reaches another.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import appendtable as at
from appendtable_spark import options as registry
from appendtable_spark.options import SparkOption, Use
from appendtable_spark.write_mode import WriteMode, resolve

__all__ = ["Settings", "check_append"]

T = TypeVar("T")

_STORAGE = "storage."
#: Options given at most one at a time.
_EXCLUSIVE = (
    (registry.MAX_FILES_PER_TRIGGER, registry.MAX_ROWS_PER_TRIGGER),
    (registry.OVERWRITE_PARTITIONS, registry.PARTITION_OVERWRITE_MODE),
)


def _storage_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _local_path(path: str) -> str:
    if path.startswith("file:"):
        path = path[len("file:") :]
        if path.startswith("//"):
            path = path[2:]
    return path


@dataclass(frozen=True)
class Settings:
    """Checked options: the table location, storage options, the core's options (strings, as
    the core takes them) and the adapter's own (their values, keyed by option name)."""

    uri: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    format_options: dict[str, str] = field(default_factory=dict)
    adapter: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def parse(
        options: Mapping[str, str],
        use: Use,
        *,
        location: str | None = None,
        keywords: Mapping[SparkOption[Any], object] | None = None,
    ) -> Settings:
        """Check every key and value of ``options`` for ``use`` (where the options were given;
        several flags when not yet known, such as at ``load()``). ``location``: the table's
        location when the options cannot name it (a catalog table). ``keywords``: values of
        the helpers' keywords standing for adapter options (``write_table(partitions=...)``),
        checked as those options are; an option may be given either way, not both."""
        given = {str(k).lower(): str(k) for k in options}  # as written, for messages
        lowered = {str(k).lower(): str(v) for k, v in dict(options).items()}
        path = lowered.get("path") or lowered.get("location") or location
        if not path:
            raise at.InvalidOptionError(
                "no table location: use .load(uri) / .save(uri) or .option('path', uri)"
            )
        storage: dict[str, Any] = {}
        core: dict[str, str] = {}
        adapter: dict[str, Any] = {}
        texts: dict[str, str] = {}
        core_keys = at.option_keys()
        for key, value in lowered.items():
            if Use.CREATE in use and key.startswith("option."):
                key = key[len("option.") :]
            option = registry.lookup(key)
            if key.startswith(_STORAGE):
                storage[key[len(_STORAGE) :]] = _storage_value(value)
            elif key in core_keys:
                core[key] = value
            elif option is not None:
                _take(adapter, texts, option, value, use)
            elif key in registry.SPARK_KEYS or (Use.CREATE in use and key in registry.CATALOG_KEYS):
                continue
            else:
                raise at.InvalidOptionError(
                    registry.unknown_key_message(given.get(key, key), core_keys)
                )
        at.check_options(core)
        for option, keyword in (keywords or {}).items():
            if option.name in adapter:
                raise at.InvalidArgumentError(
                    f"give {option.keyword}= or option '{option.name}', not both"
                )
            adapter[option.name] = option.keyword_value(keyword)
        for group in _EXCLUSIVE:
            both = [option.name for option in group if option.name in adapter]
            if len(both) > 1:
                raise at.InvalidOptionError(f"give one of options {' and '.join(both)}, not both")
        settings = Settings(_local_path(path), storage, core, adapter)
        settings.commit_identity()
        settings.commit_owner()
        settings.read_target()
        return settings

    def get(self, option: SparkOption[T]) -> T:
        """The option's value, or its default when it was not given."""
        if option.name not in self.adapter:
            return option.default
        return cast(T, self.adapter[option.name])

    def given(self, option: SparkOption[Any]) -> bool:
        return option.name in self.adapter

    def open(self) -> at.Table:
        return at.open_table(self.uri, storage_options=self.storage_options)

    def columns(self) -> list[str] | None:
        return list(self.get(registry.COLUMNS)) or None

    def partition_by(self) -> list[str]:
        return list(self.get(registry.PARTITION_BY) or self.get(registry.SPARK_PARTITION_COLUMNS))

    def commit_identity(self) -> tuple[str | None, int | None]:
        """(commit user, identifier) of an idempotent write: options ``commitUser`` and
        ``commitIdentifier`` (or Delta's ``txnAppId`` and ``txnVersion``)."""
        user = self.get(registry.COMMIT_USER) or None
        identifier = (
            self.get(registry.COMMIT_IDENTIFIER) if self.given(registry.COMMIT_IDENTIFIER) else None
        )
        if identifier is not None and user is None:
            raise at.InvalidOptionError(
                "option 'commitIdentifier' needs 'commitUser' (a name stable across retries)"
            )
        return user, identifier

    def commit_owner(self) -> str:
        """Option ``commitOwner``: the streaming query a write with ``commitUser`` and
        ``commitIdentifier`` belongs to (``foreach_batch_sink`` sets it), or empty."""
        owner = self.get(registry.COMMIT_OWNER)
        if owner and not self.given(registry.COMMIT_IDENTIFIER):
            raise at.InvalidOptionError(
                "option 'commitOwner' needs 'commitUser' and 'commitIdentifier'"
            )
        return owner

    def overwrite_partitions(self) -> list[dict[str, object]] | None:
        """Option ``overwritePartitions``: the static partitions an overwrite replaces
        (``[{"day": "2024-05-01"}]``; dates, timestamps and decimals as text)."""
        return list(self.get(registry.OVERWRITE_PARTITIONS)) or None

    def dynamic_overwrite(self) -> bool:
        """Option ``partitionOverwriteMode`` = ``dynamic``: an overwrite replaces only the
        partitions it writes rows into."""
        return self.get(registry.PARTITION_OVERWRITE_MODE) == "dynamic"

    def write_mode(self, overwrite: bool) -> WriteMode:
        """What a write Spark says appends or overwrites does, by these options."""
        return resolve(
            overwrite,
            partitions=self.overwrite_partitions() or (),
            dynamic=self.dynamic_overwrite(),
        )

    def merge_schema(self) -> bool:
        """Option ``mergeSchema``: add the DataFrame's new columns (and struct fields) to the
        table before writing, and write the table columns it lacks as nulls."""
        return self.get(registry.MERGE_SCHEMA)

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
        return (
            int(snapshot) if snapshot is not None else None,
            int(timestamp) if timestamp is not None else None,
            tag,
        )


def check_append(options: Mapping[str, str]) -> None:
    """Refuse, in a write that appends (not an overwrite), the options of that write saying
    what an overwrite replaces (``overwritePartitions``, ``partitionOverwriteMode`` =
    ``dynamic``): appending with them would silently add the rows beside those they were
    meant to replace."""
    for key, value in options.items():
        option = registry.lookup(str(key).lower())
        if option is registry.OVERWRITE_PARTITIONS or (
            option is registry.PARTITION_OVERWRITE_MODE and option.value(str(value)) == "dynamic"
        ):
            raise at.InvalidOptionError(
                f"option '{option.name}' says which partitions an overwrite replaces, but this "
                'write appends: use mode("overwrite") (SQL: INSERT OVERWRITE), or drop the '
                "option to append"
            )


def _take(
    adapter: dict[str, Any], texts: dict[str, str], option: SparkOption[Any], value: str, use: Use
) -> None:
    if not option.uses & use:
        raise at.InvalidOptionError(
            f"option '{option.name}' applies to {option.uses.describe()}, not to {use.describe()}"
        )
    if option.name in texts and texts[option.name] != value:
        names = " and ".join(f"'{name}'" for name in (option.name, *option.aliases))
        raise at.InvalidOptionError(f"options {names} name the same setting: give one")
    adapter[option.name] = option.value(value)
    texts[option.name] = value
