"""A commit is data: the request, and pure functions that apply it to the latest state.

Nothing here does I/O, so every rule of the commit protocol (sequence numbers, conflicts,
watermarks, idempotence records) is testable on plain values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from appendtable.errors import CommitConflictError, SchemaMismatchError
from appendtable.metadata.models import (
    CommitKind,
    CommitMessage,
    CommitUserRecord,
    DataFileMeta,
    FileKind,
    ManifestEntry,
    PartitionValues,
    Snapshot,
    TableSchema,
)
from appendtable.planning.partitions import outside_overwrite
from appendtable.planning.schema_changes import missing_required

__all__ = [
    "ROLLBACK_SEQUENCE_PROPERTY",
    "ROLLBACK_PROPERTY",
    "CommitRequest",
    "PartitionScope",
    "SchemaBaseMovedError",
    "SchemaUpdate",
    "already_committed",
    "ChangedBy",
    "check_deletes_live",
    "check_file_schema",
    "check_overwrite",
    "check_restored_schema",
    "entries_for",
    "merged_watermark",
    "updated_users",
]


#: Snapshot property naming the snapshot a rollback restored.
ROLLBACK_PROPERTY = "rollback-to"
#: Snapshot property of a rollback: the restored snapshot's ``next_sequence``. Rows the
#: rollback undid have sequence numbers from it on (sequence numbers are never reused).
ROLLBACK_SEQUENCE_PROPERTY = "rollback-sequence"


@dataclass(frozen=True)
class PartitionScope:
    """A set of partitions: all (``partitions`` None) or those whose values match every key of
    one of ``partitions`` (static partition specs, in stored form). Used by overwrites (which
    files to replace) and by compaction (which partitions to compact)."""

    partitions: tuple[Mapping[str, object], ...] | None = None

    def matches(self, partition: PartitionValues, keys: Sequence[str]) -> bool:
        if self.partitions is None:
            return True
        values = dict(zip(keys, partition, strict=True))
        return any(
            all(values.get(key) == value for key, value in spec.items()) for spec in self.partitions
        )

    def require(
        self,
        partition: PartitionValues,
        keys: Sequence[str],
        *,
        named: str,
        scope_named: str | None = None,
    ) -> None:
        """Raise SchemaMismatchError unless rows of ``partition`` (rendered as ``named``, e.g.
        ``day=2024-01-02``) may be written by an overwrite of this scope (``scope_named``:
        its rendering, else the stored values)."""
        if self.matches(partition, keys):
            return
        if scope_named is None:
            scope_named = "; ".join(
                ", ".join(f"{k}={v}" for k, v in spec.items()) for spec in self.partitions or ()
            )
        raise outside_overwrite(named, scope_named, keys[0] if keys else None)


class SchemaBaseMovedError(CommitConflictError):
    """A schema change was planned on a schema that is no longer current (another change
    landed first): it was not applied; re-plan it on the new schema."""


@dataclass(frozen=True)
class SchemaUpdate:
    """A schema change to commit: schema ``schema_id`` (already written) replaces
    ``base_schema_id``, which must still be current. ``requires_empty``: it adds a required
    field, so the table must hold no rows."""

    base_schema_id: int
    schema_id: int
    requires_empty: bool = False


@dataclass(frozen=True)
class CommitRequest:
    """Everything a commit wants, independent of the table state it will land on.

    ``identifier`` (with ``commit_user``) makes the commit idempotent: if that user already
    committed this or a larger identifier, the commit is skipped. ``base_snapshot_id`` is the
    snapshot an overwrite planned against: files appended after it in the overwritten partitions
    make the overwrite conflict instead of silently disappearing.
    """

    kind: CommitKind
    commit_user: str
    messages: tuple[CommitMessage, ...]
    identifier: int | None = None
    watermark: int | None = None
    overwrite: PartitionScope | None = None
    base_snapshot_id: int | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    #: Who numbers ``commit_user``'s identifiers (recorded with the identifier; see
    #: ``CommitUserRecord.owner``).
    owner: str = ""
    #: Make the table hold exactly the files of this snapshot again (an OVERWRITE), read
    #: under the current schema (``restore_schema``: under the snapshot's own schema version,
    #: options included, which becomes current again). ``rollback_snapshot``: that snapshot
    #: itself, read before the commit (a tag's may have expired from the log; an expired
    #: one's files stay while the rollback pins it, see ``rollback_pins``).
    rollback_to: int | None = None
    rollback_snapshot: Snapshot | None = None
    restore_schema: bool = False
    #: A schema (or option) change: an ALTER snapshot.
    schema_change: SchemaUpdate | None = None
    #: A DELETE's record of what it deleted (file name under ``index/``, see
    #: ``DeleteRecord``), named by the snapshot.
    delete_record: str | None = None
    #: Write the new snapshot's base as fresh manifests of its live files only (a purge:
    #: no manifest of the history, with its removed files' statistics, stays referenced).
    rewrite_manifests: bool = False

    @property
    def is_empty(self) -> bool:
        return (
            self.overwrite is None
            and not self.rewrite_manifests
            and self.rollback_to is None
            and self.schema_change is None
            and all(m.is_empty for m in self.messages)
        )


def entries_for(
    messages: Iterable[CommitMessage], next_sequence: int
) -> tuple[list[ManifestEntry], list[ManifestEntry], int]:
    """(ADD entries, DELETE entries, the table's next sequence number afterwards).

    New files get contiguous sequence ranges in message order and, within a message, file order
    (their local ranges are shifted); compaction outputs keep the ranges they were given."""
    adds: list[ManifestEntry] = []
    deletes: list[ManifestEntry] = []
    for message in messages:
        for file in message.new_files:
            shifted = msgspec.structs.replace(
                file,
                min_seq=next_sequence,
                max_seq=next_sequence + file.row_count - 1,
            )
            next_sequence += file.row_count
            adds.append(
                ManifestEntry(
                    FileKind.ADD, message.partition, message.bucket, message.total_buckets, shifted
                )
            )
        for file in message.compact_after:
            adds.append(
                ManifestEntry(
                    FileKind.ADD, message.partition, message.bucket, message.total_buckets, file
                )
            )
        for file in message.compact_before:
            deletes.append(
                ManifestEntry(
                    FileKind.DELETE, message.partition, message.bucket, message.total_buckets, file
                )
            )
    return adds, deletes, next_sequence


def check_file_schema(file_schema: TableSchema, schema: TableSchema, path: str) -> None:
    """A data file written with ``file_schema`` may join a table of ``schema`` (read by field
    id) unless the table gained a required column since: the file's rows would be null there."""
    missing = missing_required(file_schema.fields, schema.fields)
    if missing is not None:
        raise SchemaMismatchError(
            f"data file {path} was written with schema {file_schema.id}, which lacks column "
            f"'{missing}' that schema {schema.id} requires (added while this write was in "
            "flight): write the data again",
            column=missing,
        )


def check_restored_schema(
    file_schema: TableSchema, schema: TableSchema, path: str, target_id: int
) -> None:
    """A file of snapshot ``target_id`` may be restored by a rollback that keeps ``schema``
    (read by field id) unless that schema requires a column the file's schema lacks."""
    missing = missing_required(file_schema.fields, schema.fields)
    if missing is not None:
        raise SchemaMismatchError(
            f"cannot roll back to snapshot {target_id} under the current schema {schema.id}: "
            f"its data file {path} was written with schema {file_schema.id}, which lacks column "
            f"'{missing}' that the current schema requires (its rows would be null there); "
            "roll back with restore_schema=True (CLI: --restore-schema) to take the snapshot's "
            "schema again",
            column=missing,
        )


#: Finds the snapshot that last removed (or re-added with a new deletion vector) a data file
#: path, for conflict messages; None when not found.
ChangedBy = Callable[[str], Snapshot | None]


def _who(path: str, changed_by: ChangedBy | None, unknown: str) -> str:
    snapshot = changed_by(path) if changed_by is not None else None
    if snapshot is None:
        return unknown
    article = "an" if snapshot.kind.value[0] in "AEIOU" else "a"
    return f"snapshot {snapshot.id} ({article} {snapshot.kind.value}) changed it first"


def check_deletes_live(
    removed: Iterable[DataFileMeta],
    live: Mapping[str, ManifestEntry] | set[str],
    changed_by: ChangedBy | None = None,
) -> None:
    """A commit may only remove files that are still live as it planned them: the same path
    with the same deletion vector (else it would resurrect rows a concurrent delete removed,
    or lose rows rewritten by a concurrent compaction, overwrite or delete). ``live``: the
    live entries by path (or only the live paths, for files that never carry vectors).
    ``changed_by`` names the snapshot that changed the first such file in the message."""
    gone: list[str] = []
    changed: list[str] = []
    for file in removed:
        if file.path not in live:
            gone.append(file.path)
        elif isinstance(live, Mapping) and live[file.path].file.key != file.key:
            changed.append(file.path)
    if changed:
        first = sorted(changed)[0]
        who = _who(first, changed_by, "another commit deleted rows of it")
        raise CommitConflictError(
            f"{len(changed)} file(s) this commit removes had rows deleted since it planned "
            f"(a new deletion vector), e.g. {first}: {who}; re-plan and try again"
        )
    if gone:
        first = sorted(gone)[0]
        who = _who(first, changed_by, "another compaction, overwrite or delete changed it first")
        raise CommitConflictError(
            f"{len(gone)} file(s) this commit removes are no longer live, e.g. {first}: {who}; "
            "re-plan and try again"
        )


def check_overwrite(
    planned_deletes: set[str], live_in_scope: set[str], changed_by: ChangedBy | None = None
) -> None:
    """The live files of the overwritten partitions must be exactly those the overwrite planned
    to replace: any other file was appended (or compacted) after it planned."""
    appeared = sorted(live_in_scope - planned_deletes)
    if appeared:
        raise CommitConflictError(
            f"{len(appeared)} file(s) were added to the overwritten partitions after the "
            f"overwrite started (e.g. {appeared[0]}); committing would silently drop them, so "
            "the overwrite was not applied: retry it"
        )
    gone = sorted(planned_deletes - live_in_scope)
    if gone:
        who = _who(gone[0], changed_by, "another compaction, overwrite or delete changed it first")
        raise CommitConflictError(
            f"{len(gone)} file(s) this commit removes are no longer live, e.g. {gone[0]}: "
            f"{who}; re-plan and try again"
        )


def merged_watermark(previous: int | None, new: int | None) -> int | None:
    """Snapshot watermarks never decrease: the max of the non-null values."""
    if previous is None:
        return new
    if new is None:
        return previous
    return max(previous, new)


def already_committed(
    records: Sequence[CommitUserRecord], commit_user: str, identifier: int
) -> bool:
    """True if ``commit_user`` already committed ``identifier`` or a later one."""
    return any(r.user == commit_user and r.identifier >= identifier for r in records)


def updated_users(
    records: Sequence[CommitUserRecord],
    commit_user: str,
    identifier: int,
    snapshot_id: int,
    now_ms: int,
    retention_ms: int,
    owner: str = "",
) -> list[CommitUserRecord]:
    """The registry after ``commit_user`` committed ``identifier`` (numbered by ``owner``):
    other users idle longer than the retention are dropped; sorted by user for deterministic
    bytes."""
    kept = [r for r in records if r.user != commit_user and now_ms - r.time_ms <= retention_ms]
    kept.append(CommitUserRecord(commit_user, identifier, snapshot_id, now_ms, owner))
    return sorted(kept, key=lambda r: r.user)
