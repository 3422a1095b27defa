"""The commit protocol: turn a ``CommitRequest`` into the next snapshot, atomically.

1. Read the latest snapshot. If the request's (commit user, identifier) already landed, do
   nothing (idempotence survives expiration: the last identifier per user is carried forward by
   every snapshot in a small registry file).
2. Conflict checks: appends never conflict. A request that deletes files fails with
   ``CommitConflictError`` if any of them is no longer live; an overwrite also fails if files it
   did not plan to replace appeared in its partitions since it started.
3. Write the delta manifest, merge small manifests by size tier, write both manifest lists.
4. Publish ``snapshot-<latest + 1>`` with put-if-absent. If the id is taken, delete this
   attempt's manifests, back off (capped exponential with jitter) and go to 1, for as long as
   ``commit.timeout`` allows (5 minutes by default: appends never conflict, so contention alone
   never fails one sooner). If the publish fails ambiguously, read the snapshot back and
   compare its nonce; if that cannot settle it, raise ``CommitStateUnknownError`` and delete
   nothing.
"""

from __future__ import annotations

import enum
import random
import time
import uuid
from collections.abc import Callable, Sequence

from appendtable.commit.changes import (
    ROLLBACK_PROPERTY,
    ROLLBACK_SEQUENCE_PROPERTY,
    ChangedBy,
    CommitRequest,
    SchemaBaseMovedError,
    already_committed,
    check_deletes_live,
    check_file_schema,
    check_overwrite,
    check_restored_schema,
    entries_for,
    merged_watermark,
    updated_users,
)
from appendtable.commit.expiration_records import recorded_parents
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.schemas import SchemaStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.commit.turns import CommitTurns
from appendtable.errors import (
    AtomicCreateUnsupportedError,
    CommitConflictError,
    CommitStateUnknownError,
    InvalidArgumentError,
    ObjectNotFoundError,
    SchemaChangeError,
    SnapshotNotFoundError,
    StorageError,
)
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import (
    DELETES_FORMAT_VERSION,
    CommitKind,
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
    Snapshot,
    TableSchema,
)
from appendtable.planning.manifest_merge import choose_merge
from appendtable.storage import Storage

__all__ = ["Committer"]


def _format_version(schema: TableSchema, latest: Snapshot | None) -> int:
    """A snapshot's format version: its schema's, and never below its parent's (a table
    upgraded to a newer version stays there, even when rolled back to an older schema)."""
    parent = latest.format_version if latest is not None else 0
    return max(schema.format_version, parent)


class _Lost(enum.Enum):
    """An attempt that lost the race for the next snapshot id."""

    LOST = "lost"


_LOST = _Lost.LOST
_AMBIGUOUS_PUBLISH_RETRIES = 3
#: How many snapshots back a conflict message looks for the one that changed a file.
_CULPRIT_SEARCH = 100


class Committer:
    """Commits requests to one table. Safe to use from many processes at once."""

    def __init__(
        self,
        storage: Storage,
        snapshots: SnapshotStore,
        manifests: ManifestStore,
        schemas: SchemaStore,
        options: opt.Options,
        *,
        partition_keys: Sequence[str],
        sleep: Callable[[float], None] = time.sleep,
        turns: CommitTurns | None = None,
    ) -> None:
        self._storage = storage
        self._snapshots = snapshots
        self._manifests = manifests
        self._schemas = schemas
        self._options = options
        self._partition_keys = tuple(partition_keys)
        self._sleep = sleep
        self._turns = turns if turns is not None else CommitTurns()

    def commit(self, request: CommitRequest) -> Snapshot | None:
        """Commit ``request``; the new snapshot, or None when there was nothing to do (empty, or
        this identifier of this commit user already landed)."""
        self._check_atomic_publish()
        self._check_buckets(request)
        self._check_overwrite_scope(request)
        if request.identifier is not None and request.identifier < 0:
            raise InvalidArgumentError(
                f"identifier: commit identifiers must be >= 0, got {request.identifier}"
            )
        if request.is_empty and request.watermark is None:
            return None
        max_retries = self._options.get(opt.COMMIT_MAX_RETRIES)
        timeout_ms = self._options.get(opt.COMMIT_TIMEOUT)
        started = time.monotonic()
        deadline = started + timeout_ms / 1000 if timeout_ms else None
        planned: tuple[int, set[str]] | None = None
        attempt = 0
        lost = 0  # attempts another commit beat to the snapshot id
        while True:
            # one attempt at a time among this handle's commits (see ``turns``)
            with self._turns.turn(deadline) as held:
                if held:
                    latest = self._snapshots.latest()
                    if self._landed(latest, request):
                        return None
                    if request.overwrite is not None and planned is None:
                        planned = self._overwrite_targets(request, latest)
                    outcome = self._attempt(request, latest, planned)
                    if outcome is not _LOST:
                        return outcome
                    lost += 1
            attempt += 1
            out_of_tries = 0 <= max_retries < attempt
            if out_of_tries or (deadline is not None and time.monotonic() > deadline):
                raise CommitConflictError(_gave_up(attempt, lost, time.monotonic() - started))
            self._sleep(self._backoff(attempt))

    # ---- steps ------------------------------------------------------------------------------

    def _attempt(
        self,
        request: CommitRequest,
        latest: Snapshot | None,
        planned: tuple[int, set[str]] | None,
    ) -> Snapshot | _Lost | None:
        """One attempt on top of ``latest``: the new snapshot, None when there is nothing to
        do, or ``_LOST`` when another commit took the id (this attempt's files deleted)."""
        planned_overwrite = (
            None if planned is None else self._compacted_forward(*planned, latest, request)
        )
        written: list[str] = []
        try:
            snapshot = self._prepare(request, latest, planned_overwrite, written)
        except (ObjectNotFoundError, SnapshotNotFoundError):
            self._delete_quietly(written)
            if latest is None or self._snapshots.holds(latest.id, latest.nonce):
                raise
            # The base snapshot expired while this commit prepared: a lost race (its id may
            # exist again for a moment, re-created by a stalled commit).
            self._snapshots.resync_latest()
            return _LOST
        if snapshot is None:
            return None
        self._storage.sync_names(written)  # this attempt's metadata, durably
        if self._publish(snapshot):
            if self._settled_in_log(snapshot):
                self._snapshots.announce(snapshot)
                return snapshot
            self._snapshots.unpublish(snapshot)
        self._delete_quietly(written)
        return _LOST

    def _settled_in_log(self, snapshot: Snapshot) -> bool:
        """``_in_log``, or CommitStateUnknownError when the log cannot be read: the snapshot
        is published, so its files must be kept whatever happens next."""
        try:
            return self._in_log(snapshot)
        except StorageError as exc:
            raise CommitStateUnknownError(
                f"snapshot {snapshot.id} was published, but checking that it continues the log "
                f"failed ({exc}): treat the commit as landed unless the table says otherwise; "
                "do not delete its files"
            ) from exc

    def _in_log(self, snapshot: Snapshot) -> bool:
        """Whether a snapshot just published continues the log, or re-created an id that had
        expired (a commit that stalled past the retention). Expiration removes snapshots oldest
        first, so while the parent is there the id cannot have expired. Otherwise the
        successor decides: every snapshot ever held at ``id + 1`` was built on this one if it
        is part of the log, while a re-created id has the original successor, built on
        another. The successor is read if it exists, else its expiration record; with
        neither, this snapshot is a re-creation if it is still there (a snapshot of the log
        expires before its successor), and otherwise CommitStateUnknownError (nothing of this
        commit is left to delete)."""
        parent = snapshot.parent_id
        if parent is None:
            return True
        if self._snapshots.holds(parent, snapshot.parent_nonce):
            return True
        # the parent expired (its id may hold a stalled commit's re-creation: that says
        # nothing about this snapshot)
        if not any(i > snapshot.id for i in self._snapshots.list_ids()):
            return True
        try:
            successor = self._snapshots.get(snapshot.id + 1)
        except SnapshotNotFoundError:
            parents = recorded_parents(self._storage, snapshot.id + 1)
        else:
            parents = {successor.parent_nonce}
        if not parents and self._snapshots.holds(snapshot.id, snapshot.nonce):
            return False
        if not parents:
            raise CommitStateUnknownError(
                f"snapshot {snapshot.id} was published and has expired with its parent and its "
                "successor, and no expiration record names the successor (records are kept an "
                "hour; older versions write none): the commit has landed unless that id was "
                "re-created; check the table before committing it again"
            )
        known = parents - {""}  # a successor written by a version without parent nonces
        return not known or known == {snapshot.nonce}

    def _check_atomic_publish(self) -> None:
        if self._storage.atomic_create or self._options.get(opt.COMMIT_SINGLE_WRITER):
            return
        raise AtomicCreateUnsupportedError(
            f"the '{self._storage.backend}' storage under {self._storage.root} cannot create a "
            "file atomically-if-absent, so two concurrent commits could overwrite each other and "
            "lose data; if only one process ever writes this table, set option "
            "'commit.single-writer' = 'true'",
            path=self._storage.root,
            operation="commit",
        )

    def _check_buckets(self, request: CommitRequest) -> None:
        expected = self._options.bucket
        for message in request.messages:
            if message.total_buckets != expected:
                raise CommitConflictError(
                    f"a commit message was written for bucket = {message.total_buckets} but the "
                    f"table has bucket = {expected}"
                )

    def _check_overwrite_scope(self, request: CommitRequest) -> None:
        """An overwrite of given partitions adds files to those partitions only (writers check
        the rows first; this catches any path that did not)."""
        scope = request.overwrite
        if scope is None or scope.partitions is None:
            return
        keys = self._partition_keys
        for message in request.messages:
            if message.new_files:
                named = ", ".join(f"{k}={v}" for k, v in zip(keys, message.partition, strict=True))
                scope.require(message.partition, keys, named=named)

    def _landed(self, latest: Snapshot | None, request: CommitRequest) -> bool:
        if latest is None or request.identifier is None:
            return False
        records = self._manifests.read_users(latest.commit_users)
        return already_committed(records, request.commit_user, request.identifier)

    def _overwrite_targets(
        self, request: CommitRequest, latest: Snapshot | None
    ) -> tuple[int, set[str]]:
        """The files the overwrite replaces: live in its base snapshot, in its scope; and the
        base snapshot's id (0 for an empty table). Without a base, the base is ``latest``, the
        snapshot this attempt prepares on: a second read of the latest could see a compaction
        that landed in between, whose outputs the attempt's own view would then take for
        files appended after the overwrite started."""
        scope = request.overwrite
        assert scope is not None
        base_id = request.base_snapshot_id
        base = self._snapshots.get(base_id) if base_id is not None else latest
        if base is None:
            return 0, set()
        return base.id, {
            entry.file.path
            for entry in self._manifests.live_files(base)
            if scope.matches(entry.partition, self._partition_keys)
        }

    def _compacted_forward(
        self, base_id: int, targets: set[str], latest: Snapshot | None, request: CommitRequest
    ) -> set[str]:
        """The overwrite's targets followed through the compactions committed since its base:
        a compaction that rewrote only target files holds only rows the overwrite replaces, so
        its output files replace its inputs among the targets (an automatic compaction racing
        an overwrite is not a conflict). A compaction that also took files appended since is
        not followed, so those rows still conflict. Where a snapshot in between has expired,
        the targets stay as planned (the overwrite then conflicts and is retried by its
        caller)."""
        scope = request.overwrite
        assert scope is not None
        found = set(targets)
        if latest is None:
            return found
        try:
            for snapshot_id in range(base_id + 1, latest.id + 1):
                snapshot = self._snapshots.get(snapshot_id)
                if snapshot.kind not in (CommitKind.COMPACT, CommitKind.DELETE):
                    continue  # (a delete's outputs, like a compaction's, hold its inputs' rows)
                entries = [
                    e
                    for e in self._manifests.delta_entries(snapshot)
                    if scope.matches(e.partition, self._partition_keys)
                ]
                removed = {e.file.path for e in entries if e.kind == FileKind.DELETE}
                if removed and removed <= found:
                    found -= removed
                    found |= {e.file.path for e in entries if e.kind == FileKind.ADD}
        except SnapshotNotFoundError:
            return set(targets)
        return found

    def _changed_by(self, latest: Snapshot | None) -> ChangedBy:
        """For a conflict message: the newest snapshot up to ``latest`` (looking back at most
        ``_CULPRIT_SEARCH`` snapshots) whose delta removed a path; read only on conflict."""

        def find(path: str) -> Snapshot | None:
            if latest is None:
                return None
            try:
                for snapshot_id in range(latest.id, max(0, latest.id - _CULPRIT_SEARCH), -1):
                    snapshot = self._snapshots.get(snapshot_id)
                    if any(
                        e.kind == FileKind.DELETE and e.file.path == path
                        for e in self._manifests.delta_entries(snapshot)
                    ):
                        return snapshot
            except (SnapshotNotFoundError, ObjectNotFoundError):
                return None  # expired meanwhile: the message does without the culprit
            return None

        return find

    def already_landed(self, request: CommitRequest) -> bool:
        """Whether this request's (commit user, identifier) is already committed (never for a
        request without an identifier: no lookup of the latest snapshot then, which costs
        requests on an object store)."""
        if request.identifier is None:
            return False
        return self._landed(self._snapshots.latest(), request)

    def _prepare(
        self,
        request: CommitRequest,
        latest: Snapshot | None,
        planned_overwrite: set[str] | None,
        written: list[str],
    ) -> Snapshot | None:
        if request.rollback_to is not None:
            return self._prepare_rollback(request, latest, written)
        schema = self._schema_for(request, latest)
        options = opt.Options(schema.options)
        self._check_file_schemas(request, schema)
        next_sequence = latest.next_sequence if latest is not None else 0
        adds, deletes, next_sequence = entries_for(request.messages, next_sequence)
        if planned_overwrite is not None or deletes:
            live = self._live_paths(latest, request, planned_overwrite)
            if planned_overwrite is not None:
                scope = request.overwrite
                assert scope is not None
                in_scope = {
                    path
                    for path, entry in live.items()
                    if scope.matches(entry.partition, self._partition_keys)
                }
                check_overwrite(planned_overwrite, in_scope, self._changed_by(latest))
                deletes.extend(
                    ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file)
                    for path, e in live.items()
                    if path in planned_overwrite
                )
            check_deletes_live((entry.file for entry in deletes), live, self._changed_by(latest))
        if (
            not adds
            and not deletes
            and request.schema_change is None
            and not request.rewrite_manifests
            and latest is not None
            and (merged_watermark(latest.watermark, request.watermark) == latest.watermark)
        ):
            return None

        delta = self._manifests.write_manifests(adds + deletes)
        written.extend(layout.manifest_path(m.file_name) for m in delta)
        previous: list[ManifestFileMeta] = (
            self._manifests.all_manifests(latest) if latest is not None else []
        )
        base = previous
        choice = choose_merge(
            previous,
            target_size=options.get(opt.MANIFEST_TARGET_SIZE),
            merge_min_count=options.get(opt.MANIFEST_MERGE_MIN_COUNT),
            full_threshold=options.get(opt.MANIFEST_FULL_COMPACTION_SIZE),
        )
        if request.rewrite_manifests and latest is not None:
            gone = {entry.file.key for entry in deletes}
            base = self._manifests.write_manifests(
                [e for e in self._manifests.live_files(latest) if e.file.key not in gone]
            )
            written.extend(layout.manifest_path(m.file_name) for m in base)
        elif choice is not None:
            base, merged_names = self._manifests.merge(previous, choice)
            written.extend(layout.manifest_path(name) for name in merged_names)
        base_list = self._manifests.write_list(base)
        delta_list = self._manifests.write_list(delta)
        written.extend(layout.manifest_path(name) for name in (base_list, delta_list))

        snapshot_id = latest.id + 1 if latest is not None else 1
        now_ms = int(time.time() * 1000)
        users_file = latest.commit_users if latest is not None else None
        if request.identifier is not None:
            records = self._manifests.read_users(users_file)
            users_file = self._manifests.write_users(
                updated_users(
                    records,
                    request.commit_user,
                    request.identifier,
                    snapshot_id,
                    now_ms,
                    options.get(opt.COMMIT_USER_RETENTION),
                    request.owner,
                )
            )
            written.append(layout.manifest_path(users_file))
        added_rows = sum(e.file.live_row_count for e in adds)
        deleted_rows = sum(e.file.live_row_count for e in deletes)
        kind = request.kind
        if kind == CommitKind.APPEND and deletes:
            kind = CommitKind.OVERWRITE
        format_version = _format_version(schema, latest)
        if kind == CommitKind.DELETE:
            format_version = max(format_version, DELETES_FORMAT_VERSION)
        return Snapshot(
            format_version=format_version,
            id=snapshot_id,
            schema_id=schema.id,
            parent_id=latest.id if latest is not None else None,
            kind=kind,
            commit_user=request.commit_user,
            commit_identifier=request.identifier if request.identifier is not None else -1,
            time_ms=now_ms,
            base_manifest_list=base_list,
            delta_manifest_list=delta_list,
            total_record_count=(latest.total_record_count if latest else 0)
            + added_rows
            - deleted_rows,
            delta_record_count=added_rows - deleted_rows,
            total_file_count=(latest.total_file_count if latest else 0) + len(adds) - len(deletes),
            next_sequence=next_sequence,
            watermark=merged_watermark(
                latest.watermark if latest is not None else None, request.watermark
            ),
            nonce=uuid.uuid4().hex,
            commit_users=users_file,
            properties=dict(request.properties),
            last_rollback=latest.last_rollback if latest is not None else None,
            parent_nonce=latest.nonce if latest is not None else "",
            delete_record=request.delete_record,
        )

    def _prepare_rollback(
        self, request: CommitRequest, latest: Snapshot | None, written: list[str]
    ) -> Snapshot:
        """The table as of ``rollback_to``, as a new OVERWRITE snapshot. Its base is a fresh
        manifest of the target's files (no manifest is shared with the history in between); its
        delta removes the files added since, so expiration reclaims them in due course. The
        snapshot keeps the current schema (the restored files are read by field id), unless
        the request restores the target's; files lacking a column the current schema requires
        are refused (checked here, on the state the rollback lands on)."""
        assert request.rollback_to is not None and latest is not None
        target = request.rollback_snapshot or self._snapshots.get(request.rollback_to)
        restored = self._manifests.live_files(target)
        if request.restore_schema:
            schema = self._schemas.get(target.schema_id)
        else:
            schema = self._schemas.current(latest)
            checked: set[int] = {schema.id}
            for entry in restored:
                if entry.file.schema_id not in checked:
                    file_schema = self._schemas.get(entry.file.schema_id)
                    check_restored_schema(file_schema, schema, entry.file.path, target.id)
                    checked.add(entry.file.schema_id)
        keep = {entry.file.path for entry in restored}
        removed = [
            ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file)
            for e in self._manifests.live_files(latest)
            if e.file.path not in keep
        ]
        base = self._manifests.write_manifests(restored)
        delta = self._manifests.write_manifests(removed)
        written.extend(layout.manifest_path(m.file_name) for m in (*base, *delta))
        base_list = self._manifests.write_list(base)
        delta_list = self._manifests.write_list(delta)
        written.extend(layout.manifest_path(name) for name in (base_list, delta_list))
        properties = {
            ROLLBACK_PROPERTY: str(target.id),
            ROLLBACK_SEQUENCE_PROPERTY: str(target.next_sequence),
            **request.properties,
        }
        if latest.last_rollback is not None:
            properties["previous-rollback"] = str(latest.last_rollback)
        rows = sum(e.file.live_row_count for e in restored)
        return Snapshot(
            format_version=_format_version(schema, latest),
            id=latest.id + 1,
            schema_id=schema.id,
            parent_id=latest.id,
            kind=CommitKind.OVERWRITE,
            commit_user=request.commit_user,
            commit_identifier=-1,
            time_ms=int(time.time() * 1000),
            base_manifest_list=base_list,
            delta_manifest_list=delta_list,
            total_record_count=rows,
            delta_record_count=rows - latest.total_record_count,
            total_file_count=len(restored),
            next_sequence=latest.next_sequence,
            watermark=latest.watermark,
            nonce=uuid.uuid4().hex,
            commit_users=latest.commit_users,
            properties=properties,
            last_rollback=latest.id + 1,
            parent_nonce=latest.nonce,
        )

    def _schema_for(self, request: CommitRequest, latest: Snapshot | None) -> TableSchema:
        """The schema the new snapshot names: the latest snapshot's, or the one a schema
        change introduces (whose preconditions are checked here, on the state it lands on)."""
        current = self._schemas.current(latest)
        change = request.schema_change
        if change is None:
            return current
        if change.base_schema_id != current.id:
            raise SchemaBaseMovedError(
                f"the schema changed (now schema {current.id}) while this change was planned on "
                f"schema {change.base_schema_id}"
            )
        if change.requires_empty and latest is not None and latest.total_record_count:
            rows = latest.total_record_count
            raise SchemaChangeError(
                f"cannot add a required (non-nullable) column: the table holds "
                f"{'1 row' if rows == 1 else f'{rows:,} rows'}, which would have no value for "
                "it (add it as nullable)"
            )
        return self._schemas.get(change.schema_id)

    def _check_file_schemas(self, request: CommitRequest, schema: TableSchema) -> None:
        """Files written under an older schema join only if the current one can read them."""
        checked: set[int] = set()
        for message in request.messages:
            for file in (*message.new_files, *message.compact_after):
                if file.schema_id in checked or file.schema_id == schema.id:
                    continue
                check_file_schema(self._schemas.get(file.schema_id), schema, file.path)
                checked.add(file.schema_id)

    def _live_paths(
        self,
        latest: Snapshot | None,
        request: CommitRequest,
        planned_overwrite: set[str] | None,
    ) -> dict[str, ManifestEntry]:
        if latest is None:
            return {}
        partitions = {m.partition for m in request.messages}
        scope = request.overwrite
        keys = self._partition_keys

        overwriting = planned_overwrite is not None and scope is not None

        def relevant(entry: ManifestEntry) -> bool:
            if overwriting and scope is not None and scope.matches(entry.partition, keys):
                return True
            return entry.partition in partitions

        return {e.file.path: e for e in self._manifests.live_files(latest, entry_filter=relevant)}

    def _publish(self, snapshot: Snapshot) -> bool:
        """True if published; False if another commit holds the id.

        A failed publish may still have landed (or land later, on object stores), so after one,
        the outcome is settled by reading the snapshot back and comparing its nonce; retrying
        with the same bytes is safe for the same reason."""
        ambiguous: StorageError | None = None
        for _ in range(_AMBIGUOUS_PUBLISH_RETRIES):
            try:
                created = self._snapshots.publish(snapshot)
            except AtomicCreateUnsupportedError:
                raise
            except StorageError as exc:
                ambiguous = exc
                ours = self._read_back(snapshot, exc)
                if ours is not None:
                    return ours
                continue
            if created or ambiguous is None:
                return created
            # The id is taken after an ambiguous attempt: possibly by that attempt itself.
            return bool(self._read_back(snapshot, ambiguous))
        raise CommitStateUnknownError(
            f"publishing snapshot {snapshot.id} kept failing ({ambiguous}); the commit may or "
            "may not have landed: do not delete its files"
        ) from ambiguous

    def _read_back(self, snapshot: Snapshot, cause: StorageError) -> bool | None:
        try:
            return self._snapshots.read_back_is_ours(snapshot)
        except StorageError as exc:
            raise CommitStateUnknownError(
                f"publishing snapshot {snapshot.id} failed ({cause}) and reading it back failed "
                f"too ({exc}): the commit may or may not have landed; do not delete its files"
            ) from exc

    def _backoff(self, attempt: int) -> float:
        """Seconds to wait after lost race number ``attempt``: exponential from
        ``commit.min-retry-wait``, capped at ``commit.max-retry-wait``, jittered by half either
        way so that writers that lost together do not come back together."""
        low = self._options.get(opt.COMMIT_MIN_RETRY_WAIT)
        high = self._options.get(opt.COMMIT_MAX_RETRY_WAIT)
        wait_ms = min(high, low * (1 << min(attempt - 1, 30)))
        return min(high, wait_ms * random.uniform(0.5, 1.5)) / 1000

    def _delete_quietly(self, paths: Sequence[str]) -> None:
        for path in paths:
            try:
                self._storage.delete(path)
            except StorageError:
                pass  # unreferenced: orphan-file removal reclaims it


def _gave_up(attempts: int, lost: int, seconds: float) -> str:
    """Why a commit gave up (nothing of it landed): other commits took the snapshot ids it
    tried, or it waited for the commits of its own handle (its maintenance) to finish."""
    waited = attempts - lost
    reasons = []
    if lost:
        reasons.append(f"{lost} lost the next snapshot id to other commits")
    if waited:
        reasons.append(
            f"{waited} waited for this handle's own commit or maintenance to finish (slow or "
            "unreachable storage makes it hold on)"
        )
    return (
        f"gave up committing after {attempts} attempts in {seconds:.1f} s: "
        f"{'; '.join(reasons)} (raise 'commit.timeout' or 'commit.max-retries')"
    )
