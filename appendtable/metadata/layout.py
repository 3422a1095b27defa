"""Where each file of a table lives, relative to the table root (pure string functions).

::

    schema/schema-<id>
    snapshot/snapshot-<id>, snapshot/LATEST, snapshot/EARLIEST
    snapshot/expired/expired-<first>-<last>-<time ms>-<uuid>   (expiration records)
    snapshot/pinned/pin-<id>-<time ms>-<uuid>                  (rollback pins)
    manifest/manifest-<uuid>-<n>, manifest/manifest-list-<uuid>-<n>, manifest/commit-users-<uuid>
    consumer/consumer-<id>
    consumer/groups/<group>/...   (consumer groups: see ``metadata.groups``)
    tag/tag-<name>, tag/released-<name>-<uuid>   (tags; a deleted tag until expiration frees it)
    index/dv-<uuid>.puffin, index/delete-<uuid>   (deletion vectors, delete records)
    index/landed-<uuid>                           (a delete record whose snapshot expired)
    _staging/<uuid>/...   (files written by other engines, until adopted or removed)
    <k1>=<v1>/<k2>=<v2>/bucket-<b>/data-<uuid>-<n>.parquet
"""

from __future__ import annotations

import re

from appendtable.errors import InvalidArgumentError, InvalidOptionError

__all__ = [
    "CONSUMER_DIR",
    "DELETE_RECORD_NAME",
    "EARLIEST_HINT",
    "EXPIRATION_RECORD_NAME",
    "EXPIRED_DIR",
    "PINNED_DIR",
    "PIN_NAME",
    "LATEST_HINT",
    "MANIFEST_DIR",
    "SCHEMA_DIR",
    "SNAPSHOT_DIR",
    "STAGING_DIR",
    "ICEBERG_DIR",
    "INDEX_DIR",
    "ICEBERG_VERSION_HINT",
    "LANDED_MARK_NAME",
    "TAG_DIR",
    "WATERMARK_DIR",
    "bucket_dir",
    "consumer_path",
    "data_file_name",
    "expiration_record_path",
    "expiration_record_span",
    "id_from_name",
    "landed_mark_path",
    "manifest_path",
    "pin_path",
    "pin_span",
    "schema_path",
    "snapshot_path",
    "iceberg_metadata_path",
    "released_tag_path",
    "staging_dir",
    "tag_name_of",
    "tag_path",
    "validate_tag_name",
    "validate_consumer_id",
    "watermark_group_path",
]

SCHEMA_DIR = "schema"
SNAPSHOT_DIR = "snapshot"
MANIFEST_DIR = "manifest"
CONSUMER_DIR = "consumer"
TAG_DIR = "tag"
TAG_PREFIX = "tag-"
RELEASED_TAG_PREFIX = "released-"
WATERMARK_DIR = "watermark"
#: Deletion vectors (``dv-<uuid>.puffin``), delete records (``delete-<uuid>``) and landing
#: marks of delete records (``landed-<uuid>``).
INDEX_DIR = "index"
#: A delete record's name (``<uuid>``: 32 hex digits).
DELETE_RECORD_NAME = re.compile(r"^delete-([0-9a-f]{32})\Z")
#: The name of a delete record's landing mark: an empty file an expiration writes before it
#: deletes the DELETE snapshot that named the record (the delete landed).
LANDED_MARK_NAME = re.compile(r"^landed-([0-9a-f]{32})\Z")
STAGING_DIR = "_staging"
#: The Iceberg mirror (option ``metadata.iceberg.storage``): Iceberg's own names and layout.
ICEBERG_DIR = "metadata"
ICEBERG_VERSION_HINT = f"{ICEBERG_DIR}/version-hint.text"
_STAGING_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}\Z")
LATEST_HINT = f"{SNAPSHOT_DIR}/LATEST"
EARLIEST_HINT = f"{SNAPSHOT_DIR}/EARLIEST"
#: Expiration records (``ExpiredSnapshots``): which snapshot held each expired id.
EXPIRED_DIR = f"{SNAPSHOT_DIR}/expired"
#: The file name of an expiration record: first id, last id, time ms, then a unique suffix.
EXPIRATION_RECORD_NAME = re.compile(r"^expired-(\d+)-(\d+)-(\d+)-[0-9a-f]{32}\Z")
#: Rollback pins: a rollback in progress keeps its target snapshot's files from expiration.
PINNED_DIR = f"{SNAPSHOT_DIR}/pinned"
#: The file name of a rollback pin: the pinned snapshot id, time ms, then a unique suffix.
PIN_NAME = re.compile(r"^pin-(\d+)-(\d+)-[0-9a-f]{32}\Z")
SCHEMA_PREFIX = "schema-"
SNAPSHOT_PREFIX = "snapshot-"
CONSUMER_PREFIX = "consumer-"
_CONSUMER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")


def schema_path(schema_id: int) -> str:
    return f"{SCHEMA_DIR}/{SCHEMA_PREFIX}{schema_id}"


def snapshot_path(snapshot_id: int) -> str:
    return f"{SNAPSHOT_DIR}/{SNAPSHOT_PREFIX}{snapshot_id}"


def expiration_record_path(first: int, last: int, time_ms: int, unique: str) -> str:
    """Where an expiration of snapshots ``first``..``last`` at ``time_ms`` records them."""
    return f"{EXPIRED_DIR}/expired-{first}-{last}-{time_ms}-{unique}"


def pin_path(snapshot_id: int, time_ms: int, unique: str) -> str:
    """Where a rollback to ``snapshot_id`` started at ``time_ms`` pins it."""
    return f"{PINNED_DIR}/pin-{snapshot_id}-{time_ms}-{unique}"


def pin_span(name: str) -> tuple[int, int] | None:
    """(pinned snapshot id, time ms) of a rollback pin's file name, None for any other name."""
    found = PIN_NAME.match(name.rsplit("/", 1)[-1])
    if found is None:
        return None
    return int(found[1]), int(found[2])


def expiration_record_span(name: str) -> tuple[int, int, int] | None:
    """(first id, last id, time ms) of an expiration record's file name, None for any other
    name."""
    found = EXPIRATION_RECORD_NAME.match(name.rsplit("/", 1)[-1])
    if found is None:
        return None
    return int(found[1]), int(found[2]), int(found[3])


def manifest_path(name: str) -> str:
    return f"{MANIFEST_DIR}/{name}"


def consumer_path(consumer_id: str) -> str:
    return f"{CONSUMER_DIR}/{CONSUMER_PREFIX}{validate_consumer_id(consumer_id)}"


def iceberg_metadata_path(version: int) -> str:
    return f"{ICEBERG_DIR}/v{version}.metadata.json"


def tag_path(name: str) -> str:
    return f"{TAG_DIR}/{TAG_PREFIX}{validate_tag_name(name)}"


def released_tag_path(name: str, unique: str) -> str:
    """Where a deleted tag waits for the next expiration to free the files only it kept."""
    return f"{TAG_DIR}/{RELEASED_TAG_PREFIX}{validate_tag_name(name)}-{unique}"


def tag_name_of(path: str) -> str | None:
    """The tag name of a ``tag/tag-<name>`` path, None for anything else."""
    base = path.rsplit("/", 1)[-1]
    return base[len(TAG_PREFIX) :] if base.startswith(TAG_PREFIX) else None


def validate_tag_name(name: object) -> str:
    """Tag names become file names: letters, digits, '.', '_' and '-' only."""
    if not isinstance(name, str) or not _CONSUMER_ID.match(name):
        raise InvalidArgumentError(
            f"invalid tag name {name!r}: use 1-200 letters, digits, '.', '_' or '-', starting "
            "with a letter or digit"
        )
    return name


def watermark_group_path(group: str, member: str) -> str:
    return f"{WATERMARK_DIR}/{validate_consumer_id(group)}/{validate_consumer_id(member)}"


def validate_consumer_id(consumer_id: object, what: str = "consumer id") -> str:
    """Consumer ids (and group and member names, ``what``) become file names: letters, digits,
    '.', '_' and '-' only."""
    if not isinstance(consumer_id, str) or not _CONSUMER_ID.match(consumer_id):
        raise InvalidOptionError(
            f"invalid {what} {consumer_id!r}: use a string of 1-200 letters, digits, '.', '_' "
            "or '-', starting with a letter or digit"
        )
    return consumer_id


def staging_dir(staging_id: str) -> str:
    """The directory of staging area ``staging_id`` (letters, digits, '_' and '-')."""
    if not _STAGING_ID.match(staging_id):
        raise InvalidOptionError(
            f"invalid staging area id {staging_id!r}: use 1-100 letters, digits, '_' or '-'"
        )
    return f"{STAGING_DIR}/{staging_id}"


def bucket_dir(partition_path: str, bucket: int) -> str:
    return f"{partition_path}/bucket-{bucket}" if partition_path else f"bucket-{bucket}"


def data_file_name(writer_uuid: str, counter: int) -> str:
    return f"data-{writer_uuid}-{counter}.parquet"


def id_from_name(name: str, prefix: str) -> int | None:
    """The numeric id of ``<prefix><id>`` file names, None for anything else (temp files)."""
    base = name.rsplit("/", 1)[-1]
    if not base.startswith(prefix):
        return None
    digits = base[len(prefix) :]
    return int(digits) if digits.isdigit() else None


def landed_mark_path(record_path: str) -> str | None:
    """The landing mark of the delete record at ``record_path`` (``index/delete-<uuid>`` ->
    ``index/landed-<uuid>``); None for a path that is not a delete record's."""
    directory, _, name = record_path.rpartition("/")
    found = DELETE_RECORD_NAME.match(name)
    if directory != INDEX_DIR or found is None:
        return None
    return f"{INDEX_DIR}/landed-{found.group(1)}"
