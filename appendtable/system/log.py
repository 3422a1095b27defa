"""System tables of the table's log and names: ``snapshots``, ``schemas``, ``options``, ``tags``
and ``consumers``. They describe the table as it is now (no time travel)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import msgspec
import numpy as np
import pyarrow as pa

from appendtable import display
from appendtable._state import TableState
from appendtable.commit.consumers import ConsumerStore
from appendtable.commit.tags import TagStore
from appendtable.errors import SnapshotExpiredError
from appendtable.metadata.models import Snapshot
from appendtable.system.columns import (
    INT32,
    INT64,
    STRING,
    STRING_LIST,
    STRING_MAP,
    UTC_MS,
    Column,
    SystemTableInfo,
)

__all__ = [
    "CONSUMERS",
    "OPTIONS",
    "SCHEMAS",
    "SNAPSHOTS",
    "TAGS",
    "consumers_table",
    "history_table",
    "options_table",
    "retained_snapshots",
    "schemas_table",
    "snapshots_table",
    "string_map",
    "tags_table",
]

#: Snapshot files read at once from object stores (a local disk reads them one by one).
_REMOTE_READERS = 16

SNAPSHOTS = SystemTableInfo(
    name="snapshots",
    doc="One row per retained snapshot, oldest first.",
    time_travel=False,
    columns=(
        Column("snapshot_id", INT64, "The snapshot's id (1, 2, 3, ... without gaps)."),
        Column("parent_id", INT64, "The previous snapshot's id; null for the first.", True),
        Column("schema_id", INT64, "The schema version the table has as of this snapshot."),
        Column("commit_user", STRING, "Who committed (a writer's commit user)."),
        Column(
            "commit_identifier",
            INT64,
            "The identifier the commit user gave its commit (-1: none).",
        ),
        Column(
            "commit_kind",
            STRING,
            "APPEND (files added), COMPACT (files rewritten, same rows), OVERWRITE (rows "
            "replaced or removed, also rollbacks), ALTER (a schema or option change) or DELETE "
            "(rows deleted by a filter).",
        ),
        Column("commit_time", UTC_MS, "When the snapshot was committed."),
        Column(
            "base_manifest_list",
            STRING,
            "The manifest list of the files live in the parent snapshot (under manifest/).",
        ),
        Column(
            "delta_manifest_list",
            STRING,
            "The manifest list of this commit's own changes (under manifest/).",
        ),
        Column("total_record_count", INT64, "Rows in the table as of this snapshot."),
        Column(
            "delta_record_count",
            INT64,
            "Rows this commit added minus rows it removed (0 for COMPACT and ALTER).",
        ),
        Column("total_file_count", INT64, "Live data files as of this snapshot."),
        Column(
            "next_sequence_number",
            INT64,
            "The table's next unused row sequence number (rows are numbered in commit order).",
        ),
        Column(
            "watermark",
            UTC_MS,
            "The event-time watermark reached (never decreases); null if none was recorded.",
            True,
        ),
        Column("format_version", INT32, "The on-disk format version of this snapshot."),
        Column(
            "properties",
            STRING_MAP,
            "Properties of the commit, e.g. rollback-to (the snapshot a rollback restored).",
        ),
    ),
)

SCHEMAS = SystemTableInfo(
    name="schemas",
    doc=(
        "One row per schema version written, oldest first (a version no snapshot names is a "
        "change that lost a race or crashed: listed, never current)."
    ),
    time_travel=False,
    columns=(
        Column("schema_id", INT64, "The schema version's id."),
        Column(
            "fields",
            STRING,
            "The columns as JSON in the stored form (docs/format.md section 2): name, type, "
            "nullable (left out when true), id (the implicit ids of a format version 1 "
            "schema), doc.",
        ),
        Column(
            "columns",
            STRING,
            "The columns as DDL, comma-separated: 'name type [not null]' (names quoted with "
            "backticks where they are not plain identifiers, nested fields with their names "
            "and nullability, as `appendtable.format_schema` writes and the command line "
            "reads), each followed by '(doc: \"...\")' (a JSON string) when it has a doc.",
        ),
        Column("partition_keys", STRING_LIST, "The partition columns, in order."),
        Column("options", STRING_MAP, "The options set in this version (defaults omitted)."),
        Column("update_time", UTC_MS, "When this schema version was written."),
        Column(
            "highest_field_id",
            INT64,
            "The largest field id assigned so far in the table's lineage.",
        ),
        Column("current", pa.bool_(), "Whether this is the schema of the latest snapshot."),
    ),
)

OPTIONS = SystemTableInfo(
    name="options",
    doc=(
        "One row per option set on the table (as of the latest snapshot's schema), by key; "
        "options not listed have their default (docs/options.md)."
    ),
    time_travel=False,
    columns=(
        Column("key", STRING, "The option's key."),
        Column("value", STRING, "Its value, as set."),
    ),
)

TAGS = SystemTableInfo(
    name="tags",
    doc="One row per tag, by name.",
    time_travel=False,
    columns=(
        Column("tag_name", STRING, "The tag's name."),
        Column("snapshot_id", INT64, "The snapshot it names."),
        Column("schema_id", INT64, "That snapshot's schema version."),
        Column("commit_time", UTC_MS, "When that snapshot was committed."),
        Column("record_count", INT64, "Rows in the table as of that snapshot."),
        Column("file_count", INT64, "Live data files as of that snapshot."),
        Column("create_time", UTC_MS, "When the tag was created."),
        Column(
            "snapshot_expired",
            pa.bool_(),
            "Whether the snapshot has left the snapshot log (the tag still reads it and keeps "
            "its files).",
        ),
    ),
)

CONSUMERS = SystemTableInfo(
    name="consumers",
    doc="One row per named stream consumer, by id.",
    time_travel=False,
    columns=(
        Column("consumer_id", STRING, "The consumer's id."),
        Column(
            "next_snapshot_id",
            INT64,
            "The next snapshot the consumer needs; expiration keeps it and every later one.",
        ),
        Column(
            "reads_full_snapshot",
            pa.bool_(),
            "True while the consumer's initial read is unfinished: its next unit is the whole "
            "of snapshot next_snapshot_id, not only that snapshot's changes.",
        ),
        Column(
            "update_time",
            UTC_MS,
            "When the consumer last recorded progress (null if not recorded).",
            True,
        ),
    ),
)


def string_map(maps: Sequence[dict[str, str]]) -> pa.Array:
    """Python string dicts as a ``map<string, string>`` array (entries sorted by key)."""
    lengths = np.fromiter((len(m) for m in maps), dtype=np.int32, count=len(maps))
    offsets = np.zeros(len(maps) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    items = [item for m in maps for item in sorted(m.items())]
    keys = pa.array([k for k, _ in items], pa.string())
    values = pa.array([v for _, v in items], pa.string())
    return pa.MapArray.from_arrays(pa.array(offsets), keys, values, type=STRING_MAP)


def retained_snapshots(state: TableState) -> list[Snapshot]:
    """Every retained snapshot, oldest first: consecutive ids from the oldest still retained
    once the last one is read (snapshots that expire meanwhile are left out). Object stores
    are read by several threads at once."""
    store = state.snapshots

    def read(snapshot_id: int) -> Snapshot | None:
        try:
            return store.get(snapshot_id)
        except SnapshotExpiredError:
            return None

    ids = store.list_ids()
    if state.storage.local_path("") is not None or len(ids) < 2:
        found = [read(i) for i in ids]
    else:
        with ThreadPoolExecutor(max_workers=min(_REMOTE_READERS, len(ids))) as pool:
            found = list(pool.map(read, ids))
    # Expiration removes snapshots oldest first: those older than one found expired have
    # expired too (even when read in time), so the rows are a run of consecutive retained ids.
    expired = [i for i, s in zip(ids, found, strict=True) if s is None]
    floor = max(expired, default=0)
    return [s for s in found if s is not None and s.id > floor]


def snapshots_table(state: TableState, _at: Snapshot | None) -> pa.Table:
    snapshots = retained_snapshots(state)
    return SNAPSHOTS.assemble(
        {
            "snapshot_id": [s.id for s in snapshots],
            "parent_id": [s.parent_id for s in snapshots],
            "schema_id": [s.schema_id for s in snapshots],
            "commit_user": [s.commit_user for s in snapshots],
            "commit_identifier": [s.commit_identifier for s in snapshots],
            "commit_kind": [s.kind.value for s in snapshots],
            "commit_time": [s.time_ms for s in snapshots],
            "base_manifest_list": [s.base_manifest_list for s in snapshots],
            "delta_manifest_list": [s.delta_manifest_list for s in snapshots],
            "total_record_count": [s.total_record_count for s in snapshots],
            "delta_record_count": [s.delta_record_count for s in snapshots],
            "total_file_count": [s.total_file_count for s in snapshots],
            "next_sequence_number": [s.next_sequence for s in snapshots],
            "watermark": [s.watermark for s in snapshots],
            "format_version": [s.format_version for s in snapshots],
            "properties": string_map([s.properties for s in snapshots]),
        }
    )


#: ``Table.history()``'s names for the columns it shows of the ``snapshots`` system table.
_HISTORY_NAMES = {
    "snapshot_id": "id",
    "commit_kind": "kind",
    "commit_time": "time",
    "commit_user": "commit_user",
    "commit_identifier": "identifier",
    "total_record_count": "total_rows",
    "delta_record_count": "delta_rows",
    "total_file_count": "files",
    "watermark": "watermark",
}


def history_table(state: TableState) -> pa.Table:
    """What ``Table.history()`` returns: columns of the ``snapshots`` system table under the
    history's own names (plain nullable fields, as it always had)."""
    snapshots = snapshots_table(state, None)
    return pa.table({new: snapshots[old] for old, new in _HISTORY_NAMES.items()})


def schemas_table(state: TableState, _at: Snapshot | None) -> pa.Table:
    current = state.refresh().schema.id
    ids = state.schemas.list_ids()
    schemas = [state.schemas.get(i) for i in ids]
    return SCHEMAS.assemble(
        {
            "schema_id": ids,
            "fields": [msgspec.json.encode(s.fields).decode() for s in schemas],
            "columns": [display.columns_text(s.fields) for s in schemas],
            "partition_keys": [list(s.partition_keys) for s in schemas],
            "options": string_map([s.options for s in schemas]),
            "update_time": [s.time_ms for s in schemas],
            "highest_field_id": [s.highest_field_id for s in schemas],
            "current": [i == current for i in ids],
        }
    )


def options_table(state: TableState, _at: Snapshot | None) -> pa.Table:
    options = sorted(state.refresh().options.as_dict().items())
    return OPTIONS.assemble({"key": [k for k, _ in options], "value": [v for _, v in options]})


def tags_table(state: TableState, _at: Snapshot | None) -> pa.Table:
    tags = sorted(TagStore(state.storage).all().items())
    earliest = state.snapshots.earliest_id()
    snapshots = [tag.snapshot for _, tag in tags]
    return TAGS.assemble(
        {
            "tag_name": [name for name, _ in tags],
            "snapshot_id": [s.id for s in snapshots],
            "schema_id": [s.schema_id for s in snapshots],
            "commit_time": [s.time_ms for s in snapshots],
            "record_count": [s.total_record_count for s in snapshots],
            "file_count": [s.total_file_count for s in snapshots],
            "create_time": [tag.time_ms for _, tag in tags],
            "snapshot_expired": [earliest is None or s.id < earliest for s in snapshots],
        }
    )


def consumers_table(state: TableState, _at: Snapshot | None) -> pa.Table:
    consumers = sorted(ConsumerStore(state.storage).all().items())
    return CONSUMERS.assemble(
        {
            "consumer_id": [name for name, _ in consumers],
            "next_snapshot_id": [c.next_snapshot for _, c in consumers],
            "reads_full_snapshot": [c.full for _, c in consumers],
            "update_time": [c.time_ms or None for _, c in consumers],
        }
    )
