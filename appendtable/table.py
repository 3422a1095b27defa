"""The public facade: creating and opening tables, writing, scanning, and inspecting history."""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from typing import Any, overload

import pyarrow as pa

from appendtable import argument_checks, display
from appendtable._state import TableState
from appendtable.after_commit.guard import publish_mirror_quietly, run_maintenance
from appendtable.after_commit.hook import PostCommit
from appendtable.commit.changes import CommitRequest
from appendtable.commit.consumers import ConsumerStore
from appendtable.commit.groups import delete_group
from appendtable.commit.iceberg_mirror import MAIN_BRANCH
from appendtable.commit.rollback_pins import pinned
from appendtable.commit.schemas import SchemaStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.commit.tags import TagStore
from appendtable.compaction import (
    Compactor,
    ProgressCallback,
    merge_new_files,
)
from appendtable.datafiles.arrow_schema import check_compatible, field_specs, to_table
from appendtable.datafiles.table_write import TableWriter
from appendtable.deletes import DeleteResult, delete_rows
from appendtable.errors import (
    AtomicCreateUnsupportedError,
    CommitConflictError,
    CorruptMetadataError,
    InvalidArgumentError,
    InvalidOptionError,
    InvalidSchemaError,
    SchemaChangeError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
)
from appendtable.group import ConsumerGroup, GroupReader, describe_groups, open_member
from appendtable.lag import consumer_lag
from appendtable.locations import check_not_nested
from appendtable.maintenance import (
    ExpireResult,
    OrphanResult,
    expire_snapshots,
    remove_orphan_files,
)
from appendtable.metadata import codec, layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import (
    FORMAT_VERSION,
    CommitKind,
    CommitMessage,
    CommitUserRecord,
    Snapshot,
    Split,
    TableSchema,
)
from appendtable.planning.bucket import unsupported_bucket_key_reason
from appendtable.planning.filters import parse_filter
from appendtable.planning.iceberg_metadata import name_owners, reused_names
from appendtable.planning.schema_changes import merge_changes, with_field_ids
from appendtable.purge import PurgeResult, parse_tag_policy, purge
from appendtable.scan import Scan, check_columns, expiry_reported, read_split
from appendtable.schema_update import UpdateSchema, check_table_schema, commit_schema_change
from appendtable.staging import StagingArea
from appendtable.storage import Storage, open_storage
from appendtable.stream import StreamPosition, StreamReader, stream_config
from appendtable.stream_deletes import read_stream_split
from appendtable.system import read_system_table
from appendtable.system.files import file_listing
from appendtable.system.log import history_table
from appendtable.table_commit import TableCommit

__all__ = ["Table", "create_table", "open_table"]

log = logging.getLogger("appendtable")

_SCHEMA_MODES = ("strict", "merge")


def _storage_for(
    uri: str, options: opt.Options, storage_options: Mapping[str, Any] | None
) -> Storage:
    return open_storage(uri, storage_options, fsync=options.get(opt.COMMIT_FSYNC))


def create_table(
    uri: str,
    schema: pa.Schema,
    *,
    partition_by: Sequence[str] | None = None,
    options: Mapping[str, object] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Table:
    """Create an empty table at ``uri`` (a local path or any fsspec URL).

    Raises TableExistsError if a table is already there, InvalidSchemaError for a bad schema or
    partition keys, InvalidOptionError for unknown, malformed or contradictory options.
    """
    if not isinstance(schema, pa.Schema):
        raise InvalidSchemaError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    fields = field_specs(schema)
    names = [f.name for f in fields]
    partition_keys = tuple(argument_checks.names(partition_by, "partition_by") or ())
    for key in partition_keys:
        if key not in names:
            raise InvalidSchemaError(
                f"partition column '{key}' is not in the schema (columns: {', '.join(names)})"
            )
    if len(set(partition_keys)) != len(partition_keys):
        raise InvalidSchemaError("a partition column is listed twice")
    if len(partition_keys) == len(names):
        raise InvalidSchemaError("every column is a partition column: a table needs data columns")
    raw_options = opt.parse_options(options)
    parsed = opt.Options(raw_options)
    opt.validate_table_options(parsed, columns=names, partition_keys=partition_keys)
    check_table_schema(fields, partition_keys, parsed)
    for key in parsed.bucket_key:
        reason = unsupported_bucket_key_reason(schema.field(key).type)
        if reason is not None:
            raise InvalidSchemaError(f"bucket key column '{key}' cannot be hashed: {reason}")

    storage = _storage_for(uri, parsed, storage_options)
    if not storage.atomic_create and not parsed.get(opt.COMMIT_SINGLE_WRITER):
        raise AtomicCreateUnsupportedError(
            f"the '{storage.backend}' storage cannot create files atomically, so concurrent "
            "commits could lose data; set option 'commit.single-writer' = 'true' if only one "
            "process ever writes this table",
            path=storage.root,
            operation="create",
        )
    if storage.listdir(layout.SCHEMA_DIR):
        raise TableExistsError(f"a table already exists at {storage.root}")
    check_not_nested(storage)
    table_schema = with_field_ids(
        TableSchema(
            id=0,
            fields=fields,
            partition_keys=partition_keys,
            options=raw_options,
            time_ms=int(time.time() * 1000),
        )
    )
    created = storage.put_if_absent(
        layout.schema_path(0), codec.encode(table_schema, codec.Kind.SCHEMA)
    )
    if not created:
        raise TableExistsError(f"a table already exists at {storage.root}")
    return Table(TableState(storage, table_schema))


def open_table(uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Table:
    """Open the table at ``uri``. Raises TableNotFoundError if there is none."""
    storage = open_storage(uri, storage_options)
    try:
        listed = storage.listdir(layout.SCHEMA_DIR)
    except StorageError as exc:
        if isinstance(exc.__cause__, NotADirectoryError):
            raise TableNotFoundError(
                f"no table at {storage.root}: it is a file (a table is a directory)"
            ) from exc
        raise
    ids = [layout.id_from_name(info.path, layout.SCHEMA_PREFIX) for info in listed]
    if not any(i is not None for i in ids):
        raise TableNotFoundError(f"no table at {storage.root} (no {layout.SCHEMA_DIR}/ files)")
    # The current schema is the latest snapshot's (a newer schema file may be a change that
    # lost its race and never landed).
    schemas = SchemaStore(storage)
    try:
        table_schema = schemas.current(SnapshotStore(storage).latest())
    except CorruptMetadataError:
        # A damaged latest snapshot must not stop the table from opening (to inspect it,
        # roll back, or repair it): the newest schema file stands in until it is readable.
        table_schema = schemas.get(schemas.list_ids()[-1])
    options = opt.Options(table_schema.options)
    if not options.get(opt.COMMIT_FSYNC):
        storage = _storage_for(uri, options, storage_options)
    return Table(TableState(storage, table_schema))


def _check_schema_mode(mode: object) -> None:
    if mode not in _SCHEMA_MODES:
        raise InvalidArgumentError(
            f"schema_mode must be one of {', '.join(_SCHEMA_MODES)}, got {mode!r}"
        )


class Table:
    """An append-only table: atomic snapshots of Parquet files, ordered per bucket."""

    def __init__(self, state: TableState) -> None:
        self._state = state
        self._commit_user = f"appendtable-{uuid.uuid4().hex}"
        self._post_commit = PostCommit(state)

    # ---- description ------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._state.storage.root

    def hadoop_uri(self, path: str = "") -> str:
        """The URI under which Hadoop's file systems (Spark's own Parquet reader and writer)
        reach ``path``, relative to the table's root ('' for the root; e.g. a data file's
        ``path`` from ``files()``): ``file://`` on local disk, ``s3a://`` on S3, the table's
        own scheme elsewhere. Raises PathOutsideTableError for a path outside the table."""
        return self._state.storage.hadoop_uri(path)

    @property
    def schema(self) -> pa.Schema:
        """The current schema (that of the latest snapshot; read again on each access)."""
        return self._state.refresh().arrow_schema

    @property
    def schema_id(self) -> int:
        """The id of the current schema version."""
        return self._state.refresh().schema.id

    def schemas(self) -> dict[int, pa.Schema]:
        """Every schema version written, by id, oldest first (a version no snapshot names is
        a change that lost a race or crashed: listed, but never current)."""
        state = self._state
        return {i: state.view_of(i).arrow_schema for i in state.schemas.list_ids()}

    def schema_history(self) -> pa.Table:
        """One row per schema version: ``schema_id``, ``time`` (UTC), ``columns`` (a
        compact DDL of the columns), ``options`` (``k=v`` pairs), ``current``."""
        state = self._state
        current = state.refresh().schema.id
        ids = state.schemas.list_ids()
        schemas = [state.schemas.get(i) for i in ids]
        return pa.table(
            {
                "schema_id": pa.array(ids, pa.int64()),
                "time": pa.array([s.time_ms for s in schemas], pa.timestamp("ms", tz="UTC")),
                "columns": [display.columns_text(s.fields) for s in schemas],
                "options": [
                    ", ".join(f"{k}={v}" for k, v in sorted(s.options.items())) for s in schemas
                ],
                "current": [i == current for i in ids],
            }
        )

    @property
    def partition_by(self) -> list[str]:
        return list(self._state.schema.partition_keys)

    @property
    def options(self) -> dict[str, str]:
        """The options set on the table (defaults are not listed), as of the latest schema."""
        return self._state.refresh().options.as_dict()

    def option(self, key: str) -> object:
        """The effective value of an option (the table's, else the default), parsed: sizes in
        bytes, durations in milliseconds, booleans, numbers, strings. InvalidOptionError for an
        unknown key."""
        definition = opt.OPTIONS.get(key)
        if definition is None:
            opt.parse_options({key: ""})  # raises, with a suggestion
        return self._state.refresh().options.get(opt.OPTIONS[key])

    @property
    def bucket(self) -> int:
        return self._state.options.bucket

    @property
    def bucket_key(self) -> list[str]:
        return list(self._state.options.bucket_key)

    def __repr__(self) -> str:
        return display.table_repr(self, self._state)

    def _repr_html_(self) -> str:
        return display.table_html(self, self._state)

    # ---- evolution --------------------------------------------------------------------------

    def update_schema(self) -> UpdateSchema:
        """Changes to the schema, committed together as one new schema version (an ALTER
        snapshot) when the ``with`` block ends, or none of them::

            with table.update_schema() as update:
                update.add_column("country", pa.string(), after="action")
                update.rename_column("amount", "amount_eur")

        Data files are never rewritten: they are read by field id. See ``UpdateSchema``."""
        return UpdateSchema(self._state, self._commit_user, on_commit=self._landed)

    def _landed(self, snapshot: Snapshot | None) -> None:
        """After a snapshot landed outside ``TableCommit`` (compaction, rollback, a schema
        change): the Iceberg mirror follows. Never raises."""
        if snapshot is not None:
            publish_mirror_quietly(self._state, snapshot)

    def set_options(self, options: Mapping[str, object]) -> Snapshot | None:
        """Change table options, as a new schema version (validated as at creation; options
        that define the layout, such as ``bucket``, are refused). Every writer applies them
        from its next commit. Returns the ALTER snapshot, or None if nothing changed."""
        with self.update_schema() as update:
            update.set_options(options)
        return update.snapshot

    def unset_options(self, keys: Sequence[str] | str) -> Snapshot | None:
        """Return options to their defaults, as a new schema version (see ``set_options``)."""
        with self.update_schema() as update:
            update.unset_options(keys)
        return update.snapshot

    # ---- writing ----------------------------------------------------------------------------

    def writer(self, *, schema_mode: str = "strict") -> TableWriter:
        """A writer for the first phase of a two-phase write: ``write(data)`` any number of
        times, then ``prepare_commit()`` for messages to hand to ``committer(...).commit``.
        It writes the current schema (its files keep that schema's id, and commit after a
        later compatible change). ``schema_mode="merge"``: nullable columns the data lacks
        are written as nulls."""
        _check_schema_mode(schema_mode)
        state = self._state
        state.refresh()
        return TableWriter(
            state.storage,
            state.schema,
            state.arrow_schema,
            state.options,
            missing_as_null=schema_mode == "merge",
        )

    def staging_area(
        self,
        area_id: str | None = None,
        *,
        since_snapshot_id: int | None = None,
        schema_id: int | None = None,
    ) -> StagingArea:
        """A new private directory inside the table for the files of one write (or, with
        ``area_id``, an existing one re-opened by a worker): another engine's Parquet files,
        which ``StagingArea.adopt`` turns into commit messages without rewriting them, or
        files of ``StagingArea.writer()``, which ``adopt_written`` moves into the table. Use
        it as a context manager: leaving the block removes the directory (see
        ``appendtable.staging``). A new area pins the current schema (``area.view``); a
        worker re-opening it passes ``schema_id=area.view.schema.id`` to write the same."""
        return StagingArea(
            self._state, area_id, since_snapshot_id=since_snapshot_id, schema_id=schema_id
        )

    def reused_names(self) -> list[str]:
        """The columns of the current schema (dotted paths into structs) whose name another
        column of this table held before, as after ``drop_column("x")`` then
        ``add_column("x", ...)``. A Parquet file without field ids holding such a column
        cannot be adopted (``StagingArea.adopt``): readers that match columns by name through
        the Iceberg mirror's name mapping would read the earlier column there."""
        view = self._state.refresh()
        schemas = self._state.schemas
        owners = name_owners(schemas.get(i) for i in schemas.list_ids() if i <= view.schema.id)
        return reused_names(owners, view.schema.fields)

    def committer(self, commit_user: str | None = None) -> TableCommit:
        """The second phase: commit messages as ``commit_user`` (stable per job for
        idempotent commits; a fresh one by default). Commits run the table's pre-commit
        compaction and, unless ``write-only``, compaction and snapshot expiration after (as
        the table's options say at the time of each commit)."""
        return TableCommit(
            self._state,
            commit_user or f"appendtable-{uuid.uuid4().hex}",
            after_commit=self._post_commit,
            before_commit=self._before_commit,
        )

    def _before_commit(
        self, messages: list[CommitMessage], since_snapshot_id: int | None
    ) -> list[CommitMessage]:
        # The options as of the last refresh (``writer()``, the previous commit): no extra
        # metadata read on the commit path.
        if not self._state.options.get(opt.PRECOMMIT_COMPACT):
            return messages
        return merge_new_files(self._state, messages, since_snapshot_id=since_snapshot_id)

    def wait_for_maintenance(self, timeout: float | None = None) -> bool:
        """Block until the compaction and expiration that this handle's commits started in
        the background (``commit.maintenance=background``, the default) have finished; True
        once they have, False if ``timeout`` seconds passed first."""
        return self._post_commit.wait(timeout)

    def close(self) -> None:
        """Finish this handle's background maintenance. The handle stays usable; leaving a
        ``with`` block calls this, and so does interpreter exit for handles never closed."""
        self._post_commit.wait()

    def __enter__(self) -> Table:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(
        self, data: object, *, watermark: int | None = None, schema_mode: str = "strict"
    ) -> Snapshot | None:
        """Append ``data`` (pyarrow Table, RecordBatch, iterable of RecordBatches or pandas
        DataFrame) as one snapshot. Atomic: on any error no row becomes visible. Returns the
        new snapshot, or None if ``data`` has no rows (and no watermark to record).

        ``schema_mode="merge"``: columns (and struct fields) only in the data are first added
        to the table as nullable columns, and types that widen the table's are widened (one
        ALTER snapshot, before the data's); nullable columns the data lacks are written as
        nulls. The default, ``"strict"``, refuses data whose columns differ."""
        _check_schema_mode(schema_mode)
        if schema_mode == "merge":
            data = self._merge_schema(data)
        return self._write_and_commit(
            data,
            watermark=argument_checks.maybe_epoch_ms(watermark, "watermark"),
            overwrite=None,
            schema_mode=schema_mode,
        )

    def _merge_schema(self, data: object) -> pa.Table:
        """Evolve the schema so that ``data`` fits it (``schema_mode="merge"``)."""
        table = to_table(data, self._state.refresh().arrow_schema)
        self.merge_schema(table.schema)
        return table

    def merge_schema(self, schema: pa.Schema) -> Snapshot | None:
        """Add the columns and struct fields of ``schema`` the table lacks, as nullable
        fields, in one ALTER snapshot (None if it has them all). Types are never changed.
        Concurrent merges adding the same column both succeed: what to add is computed again
        against the schema each attempt lands on. What ``schema_mode="merge"`` writes do."""
        if not isinstance(schema, pa.Schema):
            raise InvalidArgumentError(
                f"schema must be a pyarrow.Schema, got {type(schema).__name__}"
            )
        try:
            incoming = field_specs(schema)
        except InvalidSchemaError as exc:  # a column of a type no table can hold
            raise SchemaChangeError(str(exc), column=exc.column) from exc
        snapshot = commit_schema_change(
            self._state, lambda base: merge_changes(base.fields, incoming), self._commit_user
        )
        self._landed(snapshot)
        return snapshot

    def overwrite(
        self,
        data: object,
        *,
        partitions: Sequence[Mapping[str, object]] | None = None,
        watermark: int | None = None,
        schema_mode: str = "strict",
    ) -> Snapshot | None:
        """Replace all rows (or those of the given static partitions, e.g.
        ``[{"day": date(2024, 1, 2)}]``) with ``data``, atomically. ``schema_mode`` as for
        ``append``."""
        _check_schema_mode(schema_mode)
        partitions = argument_checks.overwrite_specs(partitions)
        if schema_mode == "merge":
            data = self._merge_schema(data)
        return self._write_and_commit(
            data,
            watermark=argument_checks.maybe_epoch_ms(watermark, "watermark"),
            overwrite=partitions or [],
            schema_mode=schema_mode,
        )

    def _write_and_commit(
        self,
        data: object,
        *,
        watermark: int | None,
        overwrite: Sequence[Mapping[str, object]] | None,
        schema_mode: str,
    ) -> Snapshot | None:
        base = self._state.snapshots.latest_id() if overwrite is not None else None
        committer = self.committer(self._commit_user)
        with self.writer(schema_mode=schema_mode) as writer:
            if overwrite:  # given partitions: rows of any other are refused before writing
                scope = self._state.partition_scope(overwrite)
                keys = self._state.schema.partition_keys
                writer.restrict_partitions(
                    lambda partition: scope.matches(partition, keys),
                    self._state.describe_specs(overwrite),
                )
            writer.write(data)
            messages = writer.prepare_commit()
        with committer.discarding(messages, since_snapshot_id=base):
            if overwrite is not None:
                return committer.overwrite(
                    messages,
                    partitions=overwrite or None,
                    base_snapshot_id=base,
                    watermark=watermark,
                )
            return committer.commit(messages, watermark=watermark)

    def check_write_schema(self, schema: pa.Schema, *, schema_mode: str = "strict") -> None:
        """Raise SchemaMismatchError (naming the column) unless data with ``schema`` can be
        written: same column names, types that cast safely. Null values in non-nullable
        columns are rejected when the data is written. ``schema_mode="merge"``: columns the
        table lacks are fine (they would be added) and so are missing nullable ones."""
        _check_schema_mode(schema_mode)
        table_schema = self._state.refresh().arrow_schema
        if schema_mode == "merge":
            present = set(schema.names)
            common = [f for f in schema if f.name in table_schema.names]
            expected = [f for f in table_schema if f.name in present or not f.nullable]
            check_compatible(pa.schema(common), pa.schema(expected))
            return
        check_compatible(schema, table_schema)

    def has_committed(
        self,
        commit_user: str,
        identifier: int | None = None,
        *,
        since_snapshot_id: int | None = None,
    ) -> bool:
        """Whether ``commit_user`` committed ``identifier`` (or a later one), or, without an
        identifier, committed anything after ``since_snapshot_id``. What an engine asks before
        deleting the files of a write that may or may not have landed."""
        snapshots = self._state.snapshots
        latest = snapshots.latest()
        if latest is None:
            return False
        if identifier is not None:
            records = self._state.manifests.read_users(latest.commit_users)
            return any(r.user == commit_user and r.identifier >= identifier for r in records)
        floor = max(since_snapshot_id or 0, (snapshots.earliest_id() or 1) - 1)
        return any(
            snapshots.get(snapshot_id).commit_user == commit_user
            for snapshot_id in range(latest.id, floor, -1)
        )

    def last_commit(self, commit_user: str) -> CommitUserRecord | None:
        """The last identifier ``commit_user`` committed, with the snapshot that recorded it,
        when, and who numbers that user's identifiers (``owner``, as the committer gave it);
        None if it committed none (or was idle longer than ``commit.user-retention``). Kept
        across snapshot expiration."""
        latest = self._state.snapshots.latest()
        if latest is None:
            return None
        records = self._state.manifests.read_users(latest.commit_users)
        return next((r for r in records if r.user == commit_user), None)

    # ---- reading ----------------------------------------------------------------------------

    def delete(self, filter: object, *, dry_run: bool = False) -> DeleteResult:
        """Delete the rows matching ``filter`` (the scan's filter forms: DNF, struct fields by
        path) as one atomic DELETE snapshot; returns how many rows and files it deleted, or
        with ``dry_run`` would delete (then nothing is written).

        With option ``deletion-vectors.enabled`` the touched files get deletion vectors
        (merge-on-read: fast deletes, readers skip the rows); otherwise they are rewritten
        without the rows (copy-on-write); files no row of which matches are never touched,
        and files whose every row matches are dropped. Earlier snapshots (time travel, tags)
        still show the rows. The delete applies to the rows of the latest snapshot when it
        plans: rows appended concurrently are kept; a concurrent compaction or delete of the
        same files makes it plan again. The table's format version becomes 3."""
        dry_run = argument_checks.flag(dry_run, "dry_run")
        result = delete_rows(self._state, filter, dry_run=dry_run, commit_user=self._commit_user)
        snapshot = result.snapshot
        if snapshot is not None:  # maintenance as after an append (it publishes the mirror)
            run_maintenance(lambda: self._post_commit.after_delete(snapshot), snapshot)
        return result

    def scan(
        self,
        *,
        columns: Sequence[str] | None = None,
        filter: object = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
    ) -> Scan:
        """A read of the latest snapshot, or of ``snapshot_id``, or of the newest snapshot
        committed at or before ``timestamp_ms``, or of a tag (time travel), in the schema
        that snapshot had."""
        return Scan(
            self._state,
            self._pick_snapshot(snapshot_id, timestamp_ms, tag),
            columns=columns,
            filter=filter,
            from_tag=tag is not None,
        )

    def _pick_snapshot(
        self, snapshot_id: object, timestamp_ms: object, tag: object = None
    ) -> Snapshot | None:
        snapshots = self._state.snapshots
        given = [
            n
            for n, v in (("snapshot_id", snapshot_id), ("timestamp_ms", timestamp_ms), ("tag", tag))
            if v is not None
        ]
        if len(given) > 1:
            raise InvalidArgumentError(f"give one of {' or '.join(given)}, not both")
        if tag is not None:
            return TagStore(self._state.storage).get(layout.validate_tag_name(tag)).snapshot
        if snapshot_id is not None:
            return snapshots.get(argument_checks.snapshot_id(snapshot_id))
        if timestamp_ms is not None:
            timestamp_ms = argument_checks.epoch_ms(timestamp_ms, "timestamp_ms")
            found = snapshots.find_by_time(timestamp_ms)
            if found is not None:
                return found
            earliest = snapshots.earliest_id()
            if earliest is not None and earliest > 1:  # the one at that time may have expired
                raise SnapshotExpiredError(
                    f"the snapshot of {timestamp_ms} ms is older than the earliest retained "
                    f"one (snapshot {earliest}, committed at {snapshots.get(earliest).time_ms} "
                    "ms): it has expired, or nothing was committed by then"
                )
            raise SnapshotNotFoundError(f"no snapshot was committed at or before {timestamp_ms} ms")
        return snapshots.latest()

    def read(
        self,
        split: Split,
        *,
        columns: Sequence[str] | None = None,
        filter: object = None,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of one split (from ``scan().plan()`` or a stream unit), in order, in the
        schema the split was planned with (the scanned snapshot's, or the stream's). A stream
        unit's split is read without the rows deleted since (see docs/queue.md)."""
        state = self._state
        view = state.refresh() if split.schema_id is None else state.view_of(split.schema_id)
        batches = (read_stream_split if split.stream else read_split)(
            state,
            split,
            state.projection(view),
            columns=check_columns(view, columns),
            row_filter=parse_filter(filter, view.column_types),
        )
        return expiry_reported(state, split, batches)

    # ---- streaming --------------------------------------------------------------------------

    @overload
    def stream(
        self,
        *,
        mode: str | None = None,
        snapshot_id: int | None = None,
        tag: str | None = None,
        timestamp_ms: int | None = None,
        file_creation_time_ms: int | None = None,
        consumer_id: str | None = None,
        bounded_watermark: int | None = None,
        buckets: Sequence[int] | None = None,
        columns: Sequence[str] | None = None,
        filter: object = None,
        poll_interval: float | None = None,
        position: StreamPosition | None = None,
        options: Mapping[str, object] | None = None,
        group: None = None,
        member: None = None,
    ) -> StreamReader: ...

    @overload
    def stream(
        self,
        *,
        mode: str | None = None,
        snapshot_id: int | None = None,
        tag: str | None = None,
        timestamp_ms: int | None = None,
        file_creation_time_ms: int | None = None,
        bounded_watermark: int | None = None,
        columns: Sequence[str] | None = None,
        filter: object = None,
        poll_interval: float | None = None,
        options: Mapping[str, object] | None = None,
        group: str,
        member: str | None = None,
    ) -> GroupReader: ...

    def stream(
        self,
        *,
        mode: str | None = None,
        snapshot_id: int | None = None,
        tag: str | None = None,
        timestamp_ms: int | None = None,
        file_creation_time_ms: int | None = None,
        consumer_id: str | None = None,
        bounded_watermark: int | None = None,
        buckets: Sequence[int] | None = None,
        columns: Sequence[str] | None = None,
        filter: object = None,
        poll_interval: float | None = None,
        position: StreamPosition | None = None,
        options: Mapping[str, object] | None = None,
        group: str | None = None,
        member: str | None = None,
    ) -> StreamReader | GroupReader:
        """Tail the table like a queue (see ``appendtable.stream``). Keyword arguments win over
        read ``options``, which win over table options (Paimon keys: ``scan.mode``,
        ``scan.snapshot-id``, ``consumer-id``, ``scan.bounded.watermark``, ...). A saved
        ``position`` (or a consumer's committed progress) overrides the start mode. ``tag``:
        start at the tagged snapshot (``from-snapshot`` unless ``mode`` says otherwise, e.g.
        ``from-snapshot-full``); the snapshot must still be in the log.

        ``group``: join that consumer group as ``member`` (default: a fresh name) and read
        the buckets the group gives this member, with fenced exactly-once progress per bucket
        (a ``GroupReader``, see ``appendtable.group``). The start mode applies only when the
        group is created."""
        if tag is None and options and options.get(opt.SCAN_TAG_NAME.key):
            tag = str(options[opt.SCAN_TAG_NAME.key])
        if tag is not None:
            if snapshot_id is not None:
                raise InvalidArgumentError("give snapshot_id or tag, not both")
            snapshot_id = (
                TagStore(self._state.storage).get(layout.validate_tag_name(tag)).snapshot.id
            )
            mode = mode or "from-snapshot"
        if group is None and member is not None:
            raise InvalidArgumentError("member= needs group=: the consumer group to join")
        if group is not None:
            for name, given in (
                ("consumer_id", consumer_id),
                ("buckets", buckets),
                ("position", position),
            ):
                if given is not None:
                    raise InvalidArgumentError(
                        f"{name}= cannot be combined with group=: a consumer group assigns the "
                        "buckets and keeps the progress"
                    )
        config = stream_config(
            self._state,
            options,
            mode=mode,
            snapshot_id=argument_checks.maybe_snapshot_id(snapshot_id),
            timestamp_ms=argument_checks.maybe_epoch_ms(timestamp_ms, "timestamp_ms"),
            file_creation_time_ms=argument_checks.maybe_epoch_ms(
                file_creation_time_ms, "file_creation_time_ms"
            ),
            consumer_id=consumer_id,
            bounded_watermark=argument_checks.maybe_epoch_ms(
                bounded_watermark, "bounded_watermark"
            ),
            buckets=buckets,
            poll_interval=poll_interval,
        )
        if group is not None:
            return open_member(
                self._state,
                config,
                options,
                group=group,
                member=member,
                columns=columns,
                filter=filter,
            )
        return StreamReader(self._state, config, columns=columns, filter=filter, position=position)

    def consumers(self) -> dict[str, int]:
        """Named consumers and the next snapshot each one needs."""
        stored = ConsumerStore(self._state.storage).all()
        return {name: state.next_snapshot for name, state in sorted(stored.items())}

    def delete_consumer(self, consumer_id: str) -> None:
        """Forget a consumer (its snapshots are no longer protected from expiration). A name
        that is a consumer group's, not a consumer's, is refused: see
        ``delete_consumer_group``."""
        store = ConsumerStore(self._state.storage)
        if store.get(consumer_id) is None and consumer_id in self.consumer_groups():
            raise InvalidArgumentError(
                f"consumer_id: '{consumer_id}' is a consumer group, not a consumer: "
                f"delete_consumer_group('{consumer_id}') forgets a group"
            )
        store.delete(consumer_id)

    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        """The consumer groups reading the table, by name: members and their buckets."""
        return describe_groups(self._state)

    def delete_consumer_group(self, group: str) -> None:
        """Forget a consumer group and all its progress (its snapshots are no longer
        protected from expiration; members still running start it again from their mode)."""
        delete_group(self._state.storage, layout.validate_consumer_id(group, "consumer group name"))

    def consumer_lag(self, *, group: str | None = None, stalled_after: float = 30.0) -> pa.Table:
        """How far behind the latest snapshot each consumer is, and each bucket of each
        consumer group with the member holding it (only ``group``'s with ``group``): snapshots,
        rows, bytes and time behind, the last commit and a status (``caught-up``, ``behind``,
        ``stalled``: rows waiting and no commit for ``stalled_after`` seconds; for group
        buckets also ``expired``: the holder's lease ran out, ``rebalancing``, ``unassigned``).
        Columns: ``appendtable.lag.LAG_SCHEMA``; see docs/queue.md."""
        if group is not None:
            layout.validate_consumer_id(group, "consumer group name")
        return consumer_lag(
            self._state, group=group, stalled_after_ms=_stalled_after_ms(stalled_after)
        )

    # ---- maintenance ------------------------------------------------------------------------

    def expire_snapshots(
        self,
        *,
        retain_min: int | None = None,
        retain_max: int | None = None,
        older_than_ms: int | None = None,
        dry_run: bool = False,
    ) -> ExpireResult:
        """Expire old snapshots and the files only they reference, and idle consumers
        (``consumer.expiration-time``). Defaults come from the table options
        (``snapshot.num-retained.min`` 10, ``snapshot.num-retained.max``,
        ``snapshot.time-retained`` 1 h, ``snapshot.expire.limit`` 50), as of the latest
        snapshot (another handle may have changed them)."""
        self._state.refresh()
        return expire_snapshots(
            self._state,
            retain_min=retain_min,
            retain_max=retain_max,
            older_than_ms=argument_checks.maybe_epoch_ms(older_than_ms, "older_than_ms"),
            dry_run=argument_checks.flag(dry_run, "dry_run"),
        )

    def compact(
        self,
        *,
        full: bool = False,
        partitions: Sequence[Mapping[str, object]] | None = None,
        parallelism: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Snapshot | None:
        """Run one compaction round: plan, rewrite in ``parallelism`` threads, commit one
        COMPACT snapshot (None if there was nothing to do). ``full`` merges every run of small
        files, not only ripe ones; ``partitions`` limits it to static partition specs;
        ``progress`` is called after each task. Rows are never lost, duplicated or reordered
        within a bucket; a conflicting concurrent change makes it re-plan."""
        compactor = Compactor(self._state)
        snapshot = compactor.run(
            lambda: compactor.plan(full=full, partitions=partitions),
            parallelism=parallelism,
            progress=progress,
        )
        self._landed(snapshot)
        return snapshot

    def sort_compact(
        self,
        by: Sequence[str],
        *,
        strategy: str = "order",
        partitions: Sequence[Mapping[str, object]] | None = None,
        parallelism: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Snapshot | None:
        """Rewrite each partition ordered by ``by`` (``strategy``: ``order``, or ``zorder`` /
        ``hilbert`` to cluster on several columns at once), sharpening the file statistics for
        filters on those columns. Scalable-mode tables only. Each partition is sorted in
        memory. The result is a COMPACT snapshot: the same rows, so streams do not re-read
        them, and appends made meanwhile are kept."""
        compactor = Compactor(self._state)
        snapshot = compactor.run(
            lambda: compactor.plan_sort(by, strategy=strategy, partitions=partitions),
            parallelism=parallelism,
            progress=progress,
        )
        self._landed(snapshot)
        return snapshot

    def compactor(self, commit_user: str | None = None) -> Compactor:
        """The separable pieces of compaction, for distributed runs: ``plan()`` on a
        coordinator, ``run_task(task)`` on workers (tasks pickle and ``to_bytes``), then
        ``commit(messages)`` once."""
        return Compactor(self._state, commit_user=commit_user)

    def remove_orphan_files(
        self,
        *,
        older_than: dt.timedelta | dt.datetime | int = dt.timedelta(days=1),
        dry_run: bool = True,
    ) -> OrphanResult:
        """Files no retained snapshot references that are older than ``older_than`` (a
        timedelta before now, or a cut-off: a datetime or epoch milliseconds). Only listed
        unless ``dry_run=False``, which deletes them."""
        cut = argument_checks.age_cut(older_than, "older_than", int(time.time() * 1000))
        return remove_orphan_files(
            self._state, older_than_ms=cut, dry_run=argument_checks.flag(dry_run, "dry_run")
        )

    def purge(
        self,
        *,
        older_than: dt.timedelta | dt.datetime | int = dt.timedelta(days=1),
        tags: str = "refuse",
        dry_run: bool = False,
    ) -> PurgeResult:
        """Remove every stored byte of the rows deleted so far (docs/maintenance.md,
        "Purging deleted rows"): files with deletion vectors are rewritten without their
        deleted rows and the manifests without the removed files' statistics (one COMPACT
        snapshot), every older snapshot expires, then the unreferenced vectors, delete records
        and orphan files go. ``older_than`` (a timedelta before now, or a datetime or epoch
        milliseconds) is the age below which an unreferenced file of unknown origin is left
        (an in-flight writer's; listed in ``young_orphans``). ``tags``: what to do with tags
        that hold deleted rows: "refuse" (``PurgeBlockedError`` naming them), "delete" or
        "keep" (they keep their rows; the result names them). A consumer or group that has
        not consumed the latest snapshot blocks the purge (``PurgeBlockedError``). A dry run
        writes nothing."""
        cut = argument_checks.age_cut(older_than, "older_than", int(time.time() * 1000))
        self._state.refresh()  # the options as of the latest snapshot
        result = purge(
            self._state,
            older_than_ms=cut,
            tags=parse_tag_policy(tags),
            dry_run=argument_checks.flag(dry_run, "dry_run"),
            commit_user=self._commit_user,
        )
        self._landed(result.snapshot)
        return result

    def rollback_to(
        self,
        snapshot_id: int | None = None,
        *,
        tag: str | None = None,
        restore_schema: bool = False,
    ) -> Snapshot:
        """Make the table hold exactly the rows snapshot ``snapshot_id`` (or the snapshot of
        ``tag``) held, as a new OVERWRITE snapshot (history is kept: snapshot ids never go
        back; streams skip it). A tag's snapshot may have expired from the log.

        Only the data goes back: the current schema and options stay, and the restored files
        are read by field id under the current schema (renamed columns keep their values,
        columns added since read as null, dropped ones are gone, widened ones are cast).
        SchemaMismatchError, naming the column, when the current schema requires a column
        those files lack. ``restore_schema=True``: the table takes the snapshot's schema
        version again, its columns *and* its options. The Iceberg mirror follows the rollback
        at once (if the rollback turns it off, its last version describes the restored
        rows)."""
        if (snapshot_id is None) == (tag is None):
            raise InvalidArgumentError("give a snapshot id or tag=, exactly one")
        if not isinstance(restore_schema, bool):
            raise InvalidArgumentError(
                f"restore_schema must be True or False, got {restore_schema!r}"
            )
        # Pinned, then still there: an expiration (or orphan removal) deleting the target
        # snapshot, or freeing the files of the deleted tag, from now on keeps its files
        # until this rollback has landed (``rollback_pins``).
        with ExitStack() as pins:
            if tag is not None:
                tags = TagStore(self._state.storage)
                name = layout.validate_tag_name(tag)
                target = tags.get(name).snapshot
                snapshot_id = target.id
                pins.enter_context(pinned(self._state.storage, snapshot_id))
                if tags.get(name).snapshot.id != snapshot_id:  # TagNotFoundError if deleted
                    raise CommitConflictError(
                        f"tag '{name}' was moved to another snapshot during the rollback to "
                        "it; nothing was committed: roll back again"
                    )
            else:
                snapshot_id = argument_checks.snapshot_id(snapshot_id)
                target = self._state.snapshots.get(snapshot_id)  # retained, or raise
                pins.enter_context(pinned(self._state.storage, snapshot_id))
                self._state.snapshots.check_retained(snapshot_id)
            mirrored = self._state.refresh().options.get(opt.ICEBERG_STORAGE) != "disabled"
            landed = self._state.committer().commit(
                CommitRequest(
                    kind=CommitKind.OVERWRITE,
                    commit_user=self._commit_user,
                    messages=(),
                    rollback_to=snapshot_id,
                    rollback_snapshot=target,
                    restore_schema=restore_schema,
                )
            )
        assert landed is not None
        self._state.refresh(landed)
        # A mirror the rollback turned off is left describing the restored rows, never the
        # rows the rollback removed.
        publish_mirror_quietly(self._state, landed, even_if_off=mirrored)
        return landed

    # ---- interop ----------------------------------------------------------------------------

    def iceberg_metadata_location(self) -> str | None:
        """The URI of the newest Iceberg ``metadata.json`` of the mirror (option
        ``metadata.iceberg.storage``), for any Iceberg reader; None when the mirror is off, not
        written yet, or not written again yet since it was turned back on (its newest version
        then describes the table before it was off, whose files may be gone)."""
        self._state.refresh()
        if not self._state.mirrors_iceberg:
            return None
        return self._state.mirror.current_location()

    def publish_iceberg(self, *, rebuild: bool = False) -> str | None:
        """Write (or complete) the Iceberg mirror now, raising what fails; the location of the
        metadata file. ``rebuild``: a new version written from the table's own metadata alone,
        re-creating any mirror file that went missing. What ``appendtable iceberg --repair``
        runs (with ``rebuild``)."""
        self._state.refresh()
        if not self._state.mirrors_iceberg:
            raise InvalidOptionError(
                "the Iceberg mirror is off: set option 'metadata.iceberg.storage' = "
                "'table-location' first"
            )
        return self._state.publish_mirror(rebuild=rebuild)

    # ---- tags -------------------------------------------------------------------------------

    def create_tag(self, name: str, snapshot_id: int | None = None) -> Snapshot:
        """Name snapshot ``snapshot_id`` (default: the latest) ``name``: it stays readable
        (``scan(tag=name)``), and its files are kept, after it expires, until the tag is
        deleted. TagExistsError if the name is taken. Returns the tagged snapshot. A table
        of format version 1 is first upgraded in place (an ALTER snapshot), so that older
        releases, which do not know tags, cannot expire the tagged files."""
        layout.validate_tag_name(name)
        state = self._state
        latest = state.snapshots.latest()
        if latest is None:
            raise SnapshotNotFoundError("the table has no snapshot to tag yet")
        if latest.format_version < FORMAT_VERSION:
            self._landed(commit_schema_change(state, [], self._commit_user))
        if snapshot_id is None:
            target = latest
        else:
            target = state.snapshots.get(argument_checks.snapshot_id(snapshot_id))
        if name == MAIN_BRANCH and state.refresh(latest).options.get(opt.ICEBERG_STORAGE) != (
            "disabled"
        ):
            raise InvalidArgumentError(
                f"tag name '{name}' is the Iceberg mirror's branch of the latest snapshot: "
                "choose another name"
            )
        tags = TagStore(state.storage)
        tags.create(name, target)
        # Expiration deletes snapshot files before data files and reads the tags again in
        # between: a snapshot still there now keeps its files (see commit.expire).
        if not state.snapshots.on_storage(target.id):
            tags.delete(name)
            raise SnapshotExpiredError(
                f"snapshot {target.id} expired while it was being tagged '{name}'"
            )
        self._republish_mirror()
        return target

    def delete_tag(self, name: str) -> None:
        """Delete tag ``name``: the Iceberg mirror drops its ref at once, and the next
        expiration frees the files only it kept. TagNotFoundError if there is no such tag."""
        TagStore(self._state.storage).delete(layout.validate_tag_name(name))
        self._republish_mirror()

    def _republish_mirror(self) -> None:
        """The Iceberg mirror follows a change of the tags (its refs). Never raises."""
        latest = self._state.snapshots.latest()
        if latest is not None:
            publish_mirror_quietly(self._state, latest)

    def tags(self) -> dict[str, int]:
        """Every tag and the snapshot id it names, by name."""
        stored = TagStore(self._state.storage).all()
        return {name: tag.snapshot.id for name, tag in sorted(stored.items())}

    # ---- history ----------------------------------------------------------------------------

    def latest_snapshot(self) -> Snapshot | None:
        return self._state.snapshots.latest()

    def earliest_snapshot(self) -> Snapshot | None:
        """The oldest retained snapshot (found from the EARLIEST hint, without listing)."""
        earliest = self._state.snapshots.earliest_id()
        return None if earliest is None else self._state.snapshots.get(earliest)

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self._state.snapshots.get(argument_checks.snapshot_id(snapshot_id))

    def snapshots(self) -> list[Snapshot]:
        """Every retained snapshot, oldest first."""
        store = self._state.snapshots
        return [store.get(i) for i in store.list_ids()]

    def history(self) -> pa.Table:
        """One row per retained snapshot, oldest first: ``id``, ``kind``, ``time`` (UTC),
        ``commit_user``, ``identifier``, ``total_rows``, ``delta_rows``, ``files`` (live data
        files), ``watermark`` (UTC). Plots directly:
        ``table.history().to_pandas().plot(x="time", y="total_rows")``."""
        return history_table(self._state)

    def files(self, snapshot_id: int | None = None) -> pa.Table:
        """One row per live data file of a snapshot (default: the latest): ``partition``,
        ``bucket``, ``path`` (relative to the table), ``uri`` (absolute: a local path or a URL
        such as ``s3://...``, what another engine opens), ``rows`` (not deleted), ``bytes``,
        sequence range, ``created``, ``source``, ``deleted_rows`` and where the file's deletion
        vector is (``deletion_vector_uri``, ``_offset``, ``_length``; null without one). These
        are exactly the files of that snapshot: give them to another engine instead of
        globbing the table's directory (see docs/python.md); a file with a deletion vector
        still holds its deleted rows, which an engine reading the Parquet file must drop
        itself (or read through ``scan()``). The rows of ``system_table("files")``, without
        its statistics, under shorter names."""
        return file_listing(self._state, self._pick_snapshot(snapshot_id, None))

    def system_table(
        self,
        name: str,
        *,
        snapshot_id: int | None = None,
        tag: str | None = None,
        timestamp_ms: int | None = None,
    ) -> pa.Table:
        """The table's metadata as an Arrow table, after Apache Paimon's system tables:
        ``snapshots``, ``schemas``, ``options``, ``tags``, ``consumers`` (as the table is
        now), and ``files``, ``manifests``, ``partitions``, ``buckets`` of the latest snapshot,
        or of ``snapshot_id``, ``tag`` or the newest snapshot at or before ``timestamp_ms``.
        Columns: ``appendtable.system_table_schema(name)`` and docs/system_tables.md.
        InvalidArgumentError for an unknown name, or time travel on a table without it."""
        return read_system_table(
            self._state,
            name,
            when={"snapshot_id": snapshot_id, "tag": tag, "timestamp_ms": timestamp_ms},
            pick=lambda: self._pick_snapshot(snapshot_id, timestamp_ms, tag),
        )


def _stalled_after_ms(stalled_after: object) -> int:
    """``stalled_after`` seconds (a non-negative number) in milliseconds."""
    if isinstance(stalled_after, bool) or not isinstance(stalled_after, int | float):
        raise InvalidArgumentError(
            f"stalled_after: expected seconds as a number, got {stalled_after!r}"
        )
    if not stalled_after >= 0:
        raise InvalidArgumentError(f"stalled_after: must be >= 0 seconds, got {stalled_after}")
    return int(stalled_after * 1000)
