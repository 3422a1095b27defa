"""The persisted metadata model: schemas, snapshots, manifests, commit messages, consumers.

All of these are immutable ``msgspec.Struct``s serialised only by ``metadata.codec``.
Evolution rule: structs only ever gain *trailing* fields with defaults, and stored structs never
forbid unknown fields, so an older reader can read a newer file and the reverse.

Hot-path structs (``DataFileMeta``, ``ManifestEntry``, ``ManifestFileMeta``) are encoded as
arrays (``array_like``) and opt out of GC tracking: they are decoded by the ten thousand.
"""

from __future__ import annotations

import datetime as dt
import enum
import html
from typing import Any, Literal, TypeAlias

import msgspec

from appendtable.metadata import codec
from appendtable.metadata.types import FieldSpec, TypeSpec
from appendtable.metadata.values import to_python

__all__ = [
    "CommitKind",
    "CommitMessage",
    "CommitUserRecord",
    "CommitUsers",
    "CompactionTask",
    "ConsumerState",
    "DataFileMeta",
    "DeleteRecord",
    "ExpiredSnapshots",
    "DeletionVectorRef",
    "StoredPredicate",
    "FieldStats",
    "FileKind",
    "FileSource",
    "Manifest",
    "ManifestEntry",
    "ManifestFileMeta",
    "ManifestList",
    "PartitionValues",
    "Snapshot",
    "Split",
    "StatValue",
    "BloomFilter",
    "FileIndex",
    "TableSchema",
    "Tag",
    "WatermarkMember",
]

#: A value stored for statistics or partitions: ints (also dates as days, timestamps and times in
#: their unit), floats, strings, bytes, booleans, decimal as a canonical string, or None.
StatValue: TypeAlias = "bool | int | float | str | bytes | None"
#: How stored values are declared in structs: MessagePack keeps str and bytes apart by itself,
#: and msgspec cannot decode a union holding both, so fields are declared as Any.
_Stored: TypeAlias = Any
#: Partition values in the order of the table's partition keys.
PartitionValues: TypeAlias = "tuple[_Stored, ...]"

#: The format version new tables are written in. 1: fields without ids (implicit ids);
#: 2: field ids, schema changes (ALTER snapshots), tags. A table stays at version 1 until its
#: first schema change or tag, which upgrades it in place without rewriting data.
FORMAT_VERSION = 2
#: The format version of a table that has deleted rows (DELETE snapshots, deletion vectors):
#: its first delete upgrades it, so that a reader knowing only version 2 refuses it rather
#: than return deleted rows.
DELETES_FORMAT_VERSION = 3


class CommitKind(enum.StrEnum):
    """What a snapshot did. Streaming readers emit only APPEND (and OVERWRITE when asked)."""

    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    #: A schema or option change (format version 2): no data file added or removed.
    ALTER = "ALTER"
    #: Rows deleted by a predicate (format version 3): files re-added with a deletion vector,
    #: rewritten without the rows (copy-on-write), or removed when all their rows went.
    DELETE = "DELETE"


class FileKind(enum.IntEnum):
    ADD = 0
    DELETE = 1


class FileSource(enum.IntEnum):
    APPEND = 0
    COMPACT = 1


class TableSchema(msgspec.Struct, frozen=True, kw_only=True):
    """``schema/schema-<id>``: columns, partition keys and table options.

    A table's current schema is the one its latest snapshot names (schema 0 before the first
    snapshot). ``highest_field_id`` is the largest field id ever assigned in this schema's
    lineage (format version 2; 0 in version 1 schemas, whose ids are implicit)."""

    format_version: int = FORMAT_VERSION
    id: int
    fields: tuple[FieldSpec, ...]
    partition_keys: tuple[str, ...] = ()
    options: dict[str, str] = msgspec.field(default_factory=dict)
    time_ms: int = 0
    highest_field_id: int = 0

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


class DataFileMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One Parquet data file.

    ``path`` is relative to the table root. ``min_seq``/``max_seq`` are the table sequence
    numbers of the file's first and last row: within a (partition, bucket), sorting files by
    ``min_seq`` gives the write order. Statistics are aligned with the top-level fields of schema
    ``schema_id``; ``None`` means unknown.
    """

    path: str
    file_size: int
    row_count: int
    min_seq: int
    max_seq: int
    schema_id: int
    creation_time_ms: int
    source: int
    null_counts: tuple[int | None, ...] = ()
    min_values: tuple[_Stored, ...] = ()
    max_values: tuple[_Stored, ...] = ()
    #: CRC-32 of the file's tail (footer, its length, ``PAR1``); None: not recorded.
    footer_crc: int | None = None
    #: Per-file indexes (bloom filters) for skipping the file; None: the file has none.
    file_index: FileIndex | None = None
    #: Statistics of struct fields below the top level (leaves reached through structs
    #: only), by field id; () when the writer recorded none (older files, other engines').
    nested_stats: tuple[FieldStats, ...] = ()
    #: The rows of this file that are deleted (format version 3); None: none are.
    deletion: DeletionVectorRef | None = None

    @property
    def live_row_count(self) -> int:
        """Rows not deleted: ``row_count`` minus the deletion vector's cardinality."""
        return self.row_count - (self.deletion.cardinality if self.deletion else 0)

    @property
    def key(self) -> tuple[str, str | None]:
        """The identity of this file in a snapshot: its path and its deletion vector's. A
        delete re-adds a path with a new vector (DELETE of the old key, ADD of the new), so a
        manifest fold by key stays independent of order (vector files are never reused)."""
        return (self.path, self.deletion.path if self.deletion else None)


class DeletionVectorRef(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Where a data file's deletion vector is: a ``deletion-vector-v1`` blob (Iceberg v3) of
    ``length`` bytes at byte ``offset`` of the Puffin file ``path`` (relative to the table
    root, under ``index/``), holding ``cardinality`` row positions (row ordinals in the data
    file, from 0) that are deleted."""

    path: str
    offset: int
    length: int
    cardinality: int


class FieldStats(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The statistics of one struct field of a data file: its null count (rows where it
    reads as null, a null parent struct included) and stored min/max (None: unknown)."""

    field_id: int
    null_count: int | None
    min_value: _Stored = None
    max_value: _Stored = None


class BloomFilter(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The Parquet split-block bloom filter of one column in one row group of a data file.

    ``bits`` is the filter's bitset (``num_bytes`` bytes), kept here when the file's filters
    are small (``file-index.in-manifest-threshold``); otherwise it is empty and the bitset is
    read from the data file itself, where it starts at byte ``offset``. Values are found by the
    XXH64 hash of their PLAIN encoding as ``value_type`` (the column's Arrow type in the file,
    ``str(type)``; see ``planning.parquet_bloom``).
    """

    field_id: int
    value_type: str
    num_bytes: int
    bits: bytes = b""
    offset: int = 0


class FileIndex(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The indexes of one data file of ``row_groups`` row groups (Parquet bloom filters)."""

    blooms: tuple[BloomFilter, ...]
    row_groups: int


class ManifestEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """An ADD or DELETE of one data file in one (partition, bucket)."""

    kind: int
    partition: PartitionValues
    bucket: int
    total_buckets: int
    file: DataFileMeta


class Manifest(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """``manifest/manifest-<uuid>``: a list of entries."""

    entries: list[ManifestEntry]


class ManifestFileMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A manifest as listed in a manifest list, with what is needed to prune it unread."""

    file_name: str
    file_size: int
    num_added: int
    num_deleted: int
    schema_id: int
    min_bucket: int
    max_bucket: int
    partition_min: PartitionValues
    partition_max: PartitionValues
    partition_null_counts: tuple[int, ...]
    min_seq: int = 0
    max_seq: int = -1


class ManifestList(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """``manifest/manifest-list-<uuid>``: manifests in commit order."""

    manifests: list[ManifestFileMeta]


class StoredPredicate(msgspec.Struct, frozen=True, array_like=True):
    """One comparison of a recorded delete filter: ``column`` (a top-level column; ``path``
    the struct fields below it, ``field_id`` the compared field's id), the operator's text
    (``=``, ``in``, ``is null``, ...), its values in stored form, and the field's type."""

    column: str
    path: tuple[str, ...]
    op: str
    values: tuple[_Stored, ...]
    type: TypeSpec
    field_id: int | None = None


class DeleteRecord(msgspec.Struct, frozen=True, kw_only=True):
    """``index/delete-<uuid>``: what a DELETE snapshot deleted, for streams. Its rows are the
    rows of snapshot ``base_snapshot`` that match ``clauses`` (DNF: any clause whose
    predicates all hold), read as schema ``schema_id``; rows appended after the base are
    never deleted by it. Kept out of the snapshot, so that later snapshots and tags do not
    copy the deleted values."""

    base_snapshot: int
    schema_id: int
    clauses: tuple[tuple[StoredPredicate, ...], ...]


class ExpiredSnapshots(msgspec.Struct, frozen=True, kw_only=True):
    """``snapshot/expired/expired-<first>-<last>-<time ms>-<uuid>``: the nonce and the parent
    nonce of each snapshot one expiration removed (by id), written before the first of them is
    deleted.

    A snapshot id can be held by more than one snapshot over time: a commit that stalled past
    the retention may publish under an id that had expired. A commit that published snapshot
    ``n`` and then finds its parent and its successor gone reads the records of ``n + 1``: a
    snapshot of the log has every snapshot ever held at ``n + 1`` built on it (their parent
    nonce is its nonce); a re-creation has the original ``n + 1``, built on another."""

    time_ms: int
    #: snapshot id (in decimal) -> its nonce
    nonces: dict[str, str]
    #: snapshot id (in decimal) -> its parent's nonce ("" for snapshots of format 1)
    parent_nonces: dict[str, str]


class CommitUserRecord(msgspec.Struct, frozen=True, array_like=True):
    """The last identifier a commit user committed, and when. ``owner``: who numbers that
    user's identifiers, as the committing engine describes it (a Spark streaming query: its
    id), so that a new writer reusing the commit user is recognised; empty when not told."""

    user: str
    identifier: int
    snapshot_id: int
    time_ms: int
    owner: str = ""


class CommitUsers(msgspec.Struct, frozen=True, array_like=True):
    """``manifest/commit-users-<uuid>``: last identifier per commit user, carried forward by
    every snapshot so idempotence survives snapshot expiration."""

    records: list[CommitUserRecord]


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """``snapshot/snapshot-<id>``: one atomic version of the table."""

    format_version: int = FORMAT_VERSION
    id: int
    schema_id: int
    parent_id: int | None
    kind: CommitKind
    commit_user: str
    commit_identifier: int
    time_ms: int
    base_manifest_list: str
    delta_manifest_list: str
    total_record_count: int
    delta_record_count: int
    total_file_count: int
    next_sequence: int
    watermark: int | None = None
    nonce: str = ""
    commit_users: str | None = None
    properties: dict[str, str] = msgspec.field(default_factory=dict)
    #: The newest rollback snapshot at or before this one (rollbacks re-add files, which
    #: expiration must then keep).
    last_rollback: int | None = None
    #: The parent's nonce: links the log, so a snapshot re-created under an id that had
    #: expired (by a commit that stalled past the retention) is recognised as not part of it.
    parent_nonce: str = ""
    #: A DELETE snapshot's record of what it deleted (``index/delete-<uuid>``, see
    #: ``DeleteRecord``); None for every other snapshot.
    delete_record: str | None = None

    @property
    def identifier(self) -> int:
        """Alias of ``commit_identifier``."""
        return self.commit_identifier

    def __repr__(self) -> str:
        watermark = "None" if self.watermark is None else _format_ms(self.watermark)
        return (
            f"Snapshot(id={self.id}, kind={self.kind.value}, time={_format_ms(self.time_ms)}, "
            f"rows={self.total_record_count:,} ({self.delta_record_count:+,}), "
            f"files={self.total_file_count:,}, watermark={watermark})"
        )

    def _repr_html_(self) -> str:
        watermark = "-" if self.watermark is None else _format_ms(self.watermark)
        return _html_card(
            f"Snapshot {self.id}",
            [
                ("kind", self.kind.value),
                ("time", _format_ms(self.time_ms)),
                ("rows", f"{self.total_record_count:,} ({self.delta_record_count:+,})"),
                ("files", f"{self.total_file_count:,}"),
                ("watermark", watermark),
                ("commit", f"{self.commit_user} #{self.commit_identifier}"),
                ("parent", "-" if self.parent_id is None else str(self.parent_id)),
            ],
        )


class CommitMessage(msgspec.Struct, frozen=True, kw_only=True):
    """What a writer (or a compaction worker) hands to the committer for one (partition, bucket).

    ``new_files`` carry sequence numbers local to the message (0-based, contiguous, in write
    order); the committer shifts them into the table's sequence space. ``compact_before`` are
    files the change removes and ``compact_after`` their replacements, which already carry final
    sequence numbers. Picklable, and convertible to bytes with ``to_bytes`` / ``from_bytes``.
    """

    partition: PartitionValues
    bucket: int
    total_buckets: int
    schema_id: int
    new_files: tuple[DataFileMeta, ...] = ()
    compact_before: tuple[DataFileMeta, ...] = ()
    compact_after: tuple[DataFileMeta, ...] = ()
    #: The largest event time (``watermark.column``, epoch ms) among the new rows, if declared.
    max_event_time_ms: int | None = None

    def to_bytes(self) -> bytes:
        """Serialise (framed and checksummed like every metadata file)."""
        return codec.encode(self, codec.Kind.COMMIT_MESSAGE)

    @staticmethod
    def from_bytes(data: bytes) -> CommitMessage:
        """Inverse of ``to_bytes``; raises ``CorruptMetadataError`` on damaged input."""
        return codec.decode(data, CommitMessage, codec.Kind.COMMIT_MESSAGE, "<commit message>")

    @property
    def is_empty(self) -> bool:
        return not (self.new_files or self.compact_before or self.compact_after)


class ConsumerState(msgspec.Struct, frozen=True, kw_only=True):
    """``consumer/consumer-<id>``: the next snapshot a named consumer still needs. With ``full``
    the consumer's next unit is the whole of that snapshot (its initial read), else its delta.

    ``buckets``: what the consumer reads, ``"all"`` or the ids of a subset (sorted); None when
    not recorded (written before this field existed). The position holds for that selection
    only: resuming with other buckets would skip the rows the new ones got before it."""

    next_snapshot: int
    time_ms: int = 0
    full: bool = False
    buckets: tuple[int, ...] | Literal["all"] | None = None


class Tag(msgspec.Struct, frozen=True, kw_only=True):
    """``tag/tag-<name>``: a named snapshot, copied whole so that it stays readable after
    the snapshot itself expires. Expiration keeps every file it references."""

    snapshot: Snapshot
    time_ms: int


class WatermarkMember(msgspec.Struct, frozen=True, kw_only=True):
    """``watermark/<group>/<member>``: the watermark a stream reader of an alignment group has
    reached, and when it last said so."""

    watermark: int | None
    time_ms: int


class Split(msgspec.Struct, frozen=True, kw_only=True):
    """A unit of reading: files of one (partition, bucket) of one snapshot, in read order.

    For a bucketed table the files are consecutive in write order (sorted by ``min_seq``), so
    reading splits of a bucket in order yields its rows in exactly the order they were written.
    Serialisable (``to_bytes``/``from_bytes``) and picklable, to ship to engine workers.
    """

    snapshot_id: int
    partition_keys: tuple[str, ...]
    partition_types: tuple[TypeSpec, ...]
    partition_values: PartitionValues
    bucket: int
    files: tuple[DataFileMeta, ...]
    #: The schema version the split's rows read as (files of other versions are projected
    #: onto it by field id); None in splits made before schema evolution: the latest.
    schema_id: int | None = None
    #: A split of a stream unit of snapshot ``snapshot_id``: read without the rows that
    #: deletes committed after that snapshot removed (see ``appendtable.stream_deletes``).
    stream: bool = False

    @property
    def partition(self) -> dict[str, object]:
        """Partition values by key, as Python values (dates, datetimes, Decimals, ...)."""
        return {
            key: to_python(value, type_spec)
            for key, value, type_spec in zip(
                self.partition_keys, self.partition_values, self.partition_types, strict=True
            )
        }

    @property
    def row_count(self) -> int:
        """Rows to read: the files' rows minus those their deletion vectors delete."""
        return sum(f.live_row_count for f in self.files)

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self.files)

    def _partition_text(self) -> str:
        try:
            values = self.partition
        except (OverflowError, ValueError):  # a stored value Python cannot represent
            values = dict(zip(self.partition_keys, self.partition_values, strict=True))
        return ", ".join(f"{k}={v}" for k, v in values.items()) or "-"

    def __repr__(self) -> str:
        return (
            f"Split(snapshot={self.snapshot_id}, partition={self._partition_text()}, "
            f"bucket={self.bucket}, files={len(self.files)}, rows={self.row_count:,}, "
            f"bytes={self.file_size:,})"
        )

    def _repr_html_(self) -> str:
        return _html_card(
            f"Split of snapshot {self.snapshot_id}",
            [
                ("partition", self._partition_text()),
                ("bucket", str(self.bucket)),
                ("files", f"{len(self.files):,}"),
                ("rows", f"{self.row_count:,}"),
                ("bytes", f"{self.file_size:,}"),
            ],
        )

    def to_bytes(self) -> bytes:
        return codec.encode(self, codec.Kind.SPLIT)

    @staticmethod
    def from_bytes(data: bytes) -> Split:
        return codec.decode(data, Split, codec.Kind.SPLIT, "<split>")


class CompactionTask(msgspec.Struct, frozen=True, kw_only=True):
    """One rewrite: files of one (partition, bucket) to merge, planned on ``snapshot_id``.

    With ``ordered`` (queue mode) the files are adjacent in write order and are rewritten in that
    order, keeping their sequence range. ``sort_by`` asks for a sort compaction (rows reordered
    by those columns with ``strategy`` order, zorder or hilbert). Serialisable
    (``to_bytes``/``from_bytes``) and picklable, so any worker can run it.
    """

    snapshot_id: int
    partition: PartitionValues
    bucket: int
    total_buckets: int
    schema_id: int
    files: tuple[DataFileMeta, ...]
    ordered: bool
    sort_by: tuple[str, ...] = ()
    strategy: str = "order"

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self.files)

    def __repr__(self) -> str:
        how = f"sort by {','.join(self.sort_by)} ({self.strategy})" if self.sort_by else "merge"
        return (
            f"CompactionTask(snapshot={self.snapshot_id}, partition={self.partition!r}, "
            f"bucket={self.bucket}, files={len(self.files)}, bytes={self.file_size:,}, {how})"
        )

    def to_bytes(self) -> bytes:
        return codec.encode(self, codec.Kind.COMPACTION_TASK)

    @staticmethod
    def from_bytes(data: bytes) -> CompactionTask:
        return codec.decode(data, CompactionTask, codec.Kind.COMPACTION_TASK, "<compaction task>")


def _format_ms(epoch_ms: int) -> str:
    """Epoch milliseconds as ``2024-05-01 10:00:00.123 UTC`` (for reprs; the number itself if
    out of range)."""
    try:
        moment = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(epoch_ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def _html_card(title: str, rows: list[tuple[str, str]]) -> str:
    """A titled two-column HTML table for notebooks (every text escaped). The facade's richer
    reprs live in ``appendtable.display``, which this layer must not import."""
    cell = "text-align:left;padding:1px 8px 1px 0"
    body = "".join(
        f'<tr><th style="{cell}">{html.escape(label)}</th>'
        f'<td style="{cell}">{html.escape(value)}</td></tr>'
        for label, value in rows
    )
    return f"<div><strong>{html.escape(title)}</strong><table>{body}</table></div>"
