"""Purging deleted rows: after a purge no file under the table's location holds a deleted row's
bytes (values in data files, statistics in manifests, literals in delete records).

A delete only hides rows: earlier snapshots (time travel, tags) still show them, deletion
vectors leave them in their data files, copy-on-write leaves the original files to the
snapshots before it, manifests keep the removed files' column statistics (min/max are values),
and each delete's record keeps its filter (whose literals are values too). ``purge`` removes
all of that, in this order (each step is crash-safe; a purge killed part-way is completed by
running it again):

1. **Checks** (before anything is written): every tag whose snapshot may hold deleted rows is
   named (see ``_holds_deleted``); with ``tags="refuse"`` (the default) the purge raises
   ``PurgeBlockedError`` naming them, with ``"delete"`` they are deleted, with ``"keep"`` they
   and everything they reference stay (the result names them: their rows are not purged).
   A consumer or consumer group that has not consumed the latest snapshot blocks the purge
   (``PurgeBlockedError`` names it): the purge expires every older snapshot, which would lose
   its unread appends. Let it catch up, or delete it.
2. **Rewrite**: one COMPACT snapshot ``P`` replaces every live file that has a deletion vector
   by a copy without its deleted rows (same sequence range and creation time, so streams and
   bucket order are unchanged), and writes ``P``'s base as fresh manifests of the live files
   only; its delta names the replaced files without their statistics. ``P`` is committed even
   with nothing to rewrite, so that no older manifest stays referenced. A concurrent commit
   changing a replaced file makes the rewrite plan again.
3. **Expire** every snapshot before ``P`` (and the data files and manifests only they
   referenced), as snapshot expiration does, tags kept by ``"keep"`` excepted.
4. **Index files**: the deletion vector files and delete records that no retained snapshot
   (nor a kept tag) references are deleted: those the expired snapshots named at once, and so
   are records an earlier expiration marked as landed (``index/landed-<uuid>``, written before
   it deleted the DELETE snapshot naming the record; the mark goes after its record); any
   other (left by a delete that did not land) once older than ``older_than``. With tags kept,
   every delete record stays (they are how the next purge knows the tags hold deleted rows).
5. **Orphans**: ``remove_orphan_files`` with the same cut-off. Unreferenced files younger than
   the cut-off (an in-flight or crashed writer's) are left and listed in
   ``PurgeResult.young_orphans``: pass an ``older_than`` of now, with no writer running, to
   remove them too.

Deletes committed while the purge runs are not purged by it (the next purge does). A dry run
reads what it needs and writes nothing.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import msgspec
import pyarrow as pa

from appendtable import display
from appendtable._state import TableState
from appendtable.commit.changes import CommitRequest
from appendtable.commit.consumers import ConsumerStore
from appendtable.commit.expire import (
    execute_expiration,
    metadata_of,
    plan_expiration,
    plan_releases,
    tag_references,
)
from appendtable.commit.groups import GroupStore, list_groups
from appendtable.commit.rollback_pins import pinned_ids
from appendtable.commit.tags import TagStore
from appendtable.datafiles.reading import read_as
from appendtable.datafiles.rewrite import rewrite_files
from appendtable.datafiles.writing import FileWriteSpec
from appendtable.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    CorruptMetadataError,
    InvalidArgumentError,
    ObjectNotFoundError,
    PurgeBlockedError,
    SnapshotNotFoundError,
    StorageError,
)
from appendtable.metadata import codec, layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import (
    CommitKind,
    CommitMessage,
    ConsumerState,
    DataFileMeta,
    DeleteRecord,
    FileSource,
    ManifestEntry,
    PartitionValues,
    Snapshot,
    Tag,
)
from appendtable.orphans import refuse_nested, remove_orphan_files
from appendtable.planning.stream_rules import emits_rows

__all__ = ["PurgeResult", "TagPolicy", "purge"]

log = logging.getLogger("appendtable")

_VECTOR_NAME = re.compile(r"^dv-[0-9a-f]{32}\.puffin\Z")
_RECORD_NAME = re.compile(r"^delete-[0-9a-f]{32}\Z")


class TagPolicy(Enum):
    """What a purge does with tags whose snapshot may hold deleted rows."""

    REFUSE = "refuse"
    DELETE = "delete"
    KEEP = "keep"


@dataclass(frozen=True)
class PurgeResult:
    """What a purge did (or, with ``dry_run``, would do).

    ``files_rewritten``: live files with deletion vectors rewritten without their deleted
    rows (``rows_dropped`` rows in all); ``expired_snapshots``; ``deleted_files``: every file
    removed (data, manifests, vectors, delete records, orphans); ``tags_holding_deletes``: the
    tags whose snapshot may hold deleted rows, of which ``tags_deleted`` were deleted and
    ``tags_kept`` kept (their rows are NOT purged); ``young_orphans``: unreferenced files left
    because they are younger than the cut-off; ``blocked_by`` (dry run): the consumers,
    groups and tags a real run would refuse for; ``snapshot``: the purge's COMPACT snapshot."""

    files_rewritten: int = 0
    rows_dropped: int = 0
    expired_snapshots: list[int] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    tags_holding_deletes: list[str] = field(default_factory=list)
    tags_deleted: list[str] = field(default_factory=list)
    tags_kept: list[str] = field(default_factory=list)
    young_orphans: list[str] = field(default_factory=list)
    #: (dry run) what would make the purge refuse: consumers, groups, tags.
    blocked_by: list[str] = field(default_factory=list)
    dry_run: bool = False
    snapshot: Snapshot | None = None

    def __repr__(self) -> str:
        return display.purge_repr(self)


def purge(
    state: TableState,
    *,
    older_than_ms: int,
    tags: TagPolicy,
    dry_run: bool,
    commit_user: str,
) -> PurgeResult:
    """Purge the deleted rows of every delete committed so far (see the module doc). Every
    refusal comes before anything is written."""
    refuse_nested(state, "purge")  # (its last step removes orphan files)
    latest = state.snapshots.latest()
    if latest is None:
        return PurgeResult(dry_run=dry_run)
    records = _index_files(state, _RECORD_NAME)
    flagged = _tags_holding_deletes(state, records)
    blockers = _consumers_behind(state, latest)
    if blockers and not dry_run:
        raise PurgeBlockedError(
            f"{'; '.join(blockers)} has not consumed snapshot {latest.id} yet: a purge expires "
            "every snapshot before its own, which would lose the unread appends; let it catch "
            "up, or delete it (delete_consumer / delete_consumer_group)"
        )
    if flagged and tags is TagPolicy.REFUSE:
        blockers.extend(f"tag {name!r}" for name in sorted(flagged))
        if not dry_run:
            raise PurgeBlockedError(
                f"tag(s) {', '.join(sorted(flagged))} may hold deleted rows (their snapshot "
                "precedes a delete, has deletion vectors, or names files a delete replaced, "
                "whose statistics are values of the deleted rows): delete them, or purge with "
                "tags='delete' (deletes them) or tags='keep' (keeps them and their rows)"
            )
    kept = sorted(flagged) if tags is TagPolicy.KEEP else []
    removed_tags = sorted(flagged) if tags is TagPolicy.DELETE else []
    if dry_run:
        return _dry_run(state, latest, older_than_ms, sorted(flagged), kept, removed_tags, blockers)
    mirrored = state.mirror.files_in_use() if state.mirrors_iceberg else set()
    tag_store = TagStore(state.storage)
    for name in removed_tags:
        tag_store.delete(name)
    snapshot, rewritten, dropped = _rewrite(state, commit_user)
    earliest = state.snapshots.earliest_id()
    assert earliest is not None
    known_index = _index_named_by(state, range(earliest, snapshot.id))
    live_tags = tag_store.all()
    plan = plan_expiration(
        state.snapshots,
        state.manifests,
        earliest,
        snapshot.id,
        tag_references(state.manifests, live_tags.values()),
    )
    plan_releases(
        state.snapshots,
        state.manifests,
        plan,
        tag_store.released(),
        tag_references(state.manifests, live_tags.values()),
    )
    data, metadata = execute_expiration(
        state.storage,
        state.snapshots,
        state.manifests,
        plan,
        before_deleting_files=state.publish_and_prune_mirror,
    )
    # the mirror's versions before the purge (the commit's own publish prunes some of them)
    left = state.storage.listnames(layout.ICEBERG_DIR)
    pruned = mirrored - {f"{layout.ICEBERG_DIR}/{name.rsplit('/', 1)[-1]}" for name in left}
    index = _remove_index_files(state, known_index, older_than_ms, keep_records=bool(kept))
    orphans = remove_orphan_files(state, older_than_ms=older_than_ms, dry_run=False)
    young = remove_orphan_files(state, older_than_ms=int(time.time() * 1000) + 1, dry_run=True)
    return PurgeResult(
        files_rewritten=rewritten,
        rows_dropped=dropped,
        expired_snapshots=plan.snapshot_ids,
        deleted_files=sorted({*data, *metadata, *pruned, *index, *orphans.files}),
        tags_holding_deletes=sorted(flagged),
        tags_deleted=removed_tags,
        tags_kept=kept,
        young_orphans=young.files,
        dry_run=False,
        snapshot=snapshot,
    )


# ---- checks ---------------------------------------------------------------------------------


def _tags_holding_deletes(state: TableState, records: Sequence[str]) -> dict[str, Tag]:
    """The tags whose snapshot may hold deleted rows (conservatively, see ``_holds_deleted``)."""
    bases = _delete_bases(state, records)
    return {
        name: tag
        for name, tag in TagStore(state.storage).all().items()
        if _holds_deleted(state, tag, bases)
    }


def _delete_bases(state: TableState, records: Sequence[str]) -> list[int]:
    """The base snapshots of the delete records ``records`` (the deletes not purged yet).

    A record is written before its snapshot names it, and not atomically (``Storage.create``):
    one that no retained snapshot nor tag names, and that is truncated or gone, is a delete
    killed while writing it, one writing it now, or one another purge removed meanwhile. It
    deleted nothing and is skipped. A named record that cannot be read raises."""
    bases: list[int] = []
    named: set[str] | None = None
    for path in records:
        try:
            bases.append(_record(state, path).base_snapshot)
        except (CorruptMetadataError, ObjectNotFoundError) as exc:
            named = _referenced_index(state) if named is None else named
            if path in named:
                raise
            log.info("purge: skipping delete record %s no snapshot names: %s", path, exc)
    return bases


def _holds_deleted(state: TableState, tag: Tag, bases: Sequence[int]) -> bool:
    """A tag holds deleted rows (or their statistics) when a delete not purged yet planned on
    its snapshot or a later one (the rows it deleted may be in the tag), when a file of its
    snapshot has a deletion vector (the file holds the deleted rows) or its manifests name a
    removed file with a vector and statistics, or when a delete not purged yet exists and the
    tag's manifests still name a file the latest snapshot does not hold (a removed file's
    statistics, or the file). A purge's own snapshot names the files it rewrote with their
    vectors but without statistics: a tag on it holds no deleted row."""
    if any(base >= tag.snapshot.id for base in bases):
        return True
    if any(e.file.deletion is not None for e in state.manifests.live_files(tag.snapshot)):
        return True
    entries = state.manifests.entries(state.manifests.all_manifests(tag.snapshot))
    if any(e.file.deletion is not None and _holds_values(e.file) for e in entries):
        return True
    if not bases:
        return False
    latest = state.snapshots.latest()
    assert latest is not None
    live = {entry.file.path for entry in state.manifests.live_files(latest)}
    return any(entry.file.path not in live for entry in entries)


def _consumers_behind(state: TableState, latest: Snapshot) -> list[str]:
    """The consumers and groups that have not consumed the latest snapshot yet."""
    behind = [
        f"consumer {name!r} (at snapshot {position.next_snapshot}"
        + (_NOTHING_TO_READ if _no_rows_from(state, position, latest) else ")")
        for name, position in ConsumerStore(state.storage).all().items()
        if position.next_snapshot <= latest.id
    ]
    for group in list_groups(state.storage):
        store = GroupStore(state.storage, group)
        floor = min(
            (p.next_snapshot for p in store.positions(store.latest()).values()), default=None
        )
        if floor is not None and floor <= latest.id:
            behind.append(f"consumer group {group!r} (a unit at snapshot {floor})")
    return behind


_NOTHING_TO_READ = (
    ", from which on no snapshot carries rows for it: it passes them at its next poll, and "
    "commits that position)"
)
#: Snapshots looked at, at most, to tell that a consumer has nothing left to read.
_NOTHING_TO_READ_LOOKS = 64


def _no_rows_from(state: TableState, position: ConsumerState, latest: Snapshot) -> bool:
    """Whether no snapshot from the consumer's to ``latest`` carries rows for it (deltas of
    deletes, compactions and schema changes carry none; a full read of any snapshot does),
    looking at a few at most."""
    first = position.next_snapshot
    if position.full or latest.id - first >= _NOTHING_TO_READ_LOOKS:
        return False
    read_overwrite = state.options.get(opt.STREAMING_READ_OVERWRITE)
    try:
        kinds = [state.snapshots.get(i).kind for i in range(first, latest.id + 1)]
    except SnapshotNotFoundError:
        return False
    return not any(emits_rows(kind, read_overwrite=read_overwrite) for kind in kinds)


# ---- the rewrite ----------------------------------------------------------------------------


def _rewrite(state: TableState, commit_user: str) -> tuple[Snapshot, int, int]:
    """Commit the purge's COMPACT snapshot (see the module doc, step 2): the snapshot, files
    rewritten, rows dropped. Plans again after a conflict, for as long as ``commit.timeout``
    allows."""
    started = time.monotonic()
    attempt = 0
    while True:
        latest = state.snapshots.latest()
        assert latest is not None
        view = state.refresh(latest)
        projection = state.projection(view)
        spec = FileWriteSpec.for_table(view.schema, view.arrow_schema, view.options)
        vectored = [e for e in state.manifests.live_files(latest) if e.file.deletion is not None]
        created: list[str] = []
        try:
            grouped: dict[
                tuple[PartitionValues, int], list[tuple[ManifestEntry, list[DataFileMeta]]]
            ]
            grouped = {}
            for entry in vectored:
                file = entry.file
                directory = layout.bucket_dir(state.partition_name(entry.partition), entry.bucket)
                outputs = rewrite_files(
                    state.storage,
                    directory,
                    [file],
                    spec,
                    projection=projection,
                    source=FileSource(file.source),
                    keep_sequence=True,
                    chunks=(
                        pa.Table.from_batches([batch])
                        for batch in read_as(state.storage, file, projection)
                    ),
                    on_file=created.append,
                )
                grouped.setdefault((entry.partition, entry.bucket), []).append(
                    (
                        entry,
                        [
                            msgspec.structs.replace(o, creation_time_ms=file.creation_time_ms)
                            for o in outputs
                        ],
                    )
                )
            messages = tuple(
                CommitMessage(
                    partition=partition,
                    bucket=bucket,
                    total_buckets=items[0][0].total_buckets,
                    schema_id=max(e.file.schema_id for e, _ in items),
                    compact_before=tuple(_without_statistics(e.file) for e, _ in items),
                    compact_after=tuple(o for _, outs in items for o in outs),
                )
                for (partition, bucket), items in grouped.items()
            )
            snapshot = state.committer().commit(
                CommitRequest(
                    kind=CommitKind.COMPACT,
                    commit_user=commit_user,
                    messages=messages,
                    rewrite_manifests=True,
                    properties={"purge": "true"},
                )
            )
        except CommitConflictError:
            state.discard(created, since_snapshot_id=latest.id)
            attempt += 1
            budget_ms = view.options.get(opt.COMMIT_TIMEOUT)
            if budget_ms and (time.monotonic() - started) * 1000 > budget_ms:
                raise
            log.info("purge conflicted with a concurrent change; re-planning (attempt %d)", attempt)
            time.sleep(min(1.0, 0.01 * (1 << min(attempt, 7))) * random.uniform(0.5, 1.5))
            continue
        except CommitStateUnknownError:
            raise  # it may land yet (a publish delivered late): every file it wrote stays
        except BaseException:
            state.discard(created, since_snapshot_id=latest.id)
            raise
        assert snapshot is not None
        dropped = sum(e.file.row_count - e.file.live_row_count for e in vectored)
        return snapshot, len(vectored), dropped


def _holds_values(file: DataFileMeta) -> bool:
    """Whether a manifest entry of ``file`` holds values of its rows (what
    ``_without_statistics`` leaves out)."""
    return file != _without_statistics(file)


def _without_statistics(file: DataFileMeta) -> DataFileMeta:
    """A removed file as the purge's delta names it: its identity and counts, no values."""
    return msgspec.structs.replace(
        file, null_counts=(), min_values=(), max_values=(), file_index=None, nested_stats=()
    )


# ---- index files ----------------------------------------------------------------------------


def _index_files(state: TableState, pattern: re.Pattern[str]) -> list[str]:
    return [
        info.path
        for info in state.storage.listdir(layout.INDEX_DIR)
        if pattern.match(info.path.rsplit("/", 1)[-1])
    ]


def _record(state: TableState, path: str) -> DeleteRecord:
    return codec.decode(
        state.storage.read(path), DeleteRecord, codec.Kind.DELETE_RECORD, state.storage.uri(path)
    )


def _index_named_by(state: TableState, snapshot_ids: Iterable[int]) -> set[str]:
    """The vector files and delete records the snapshots ``snapshot_ids`` reference."""
    named: set[str] = set()
    for snapshot_id in snapshot_ids:
        try:
            snapshot = state.snapshots.get(snapshot_id)
            entries = state.manifests.entries(state.manifests.all_manifests(snapshot))
        except (SnapshotNotFoundError, ObjectNotFoundError):
            continue
        if snapshot.delete_record is not None:
            named.add(snapshot.delete_record)
        named.update(e.file.deletion.path for e in entries if e.file.deletion is not None)
    return named


def _referenced_index(state: TableState) -> set[str]:
    """The index files the retained snapshots and the tags reference."""
    ids = state.snapshots.list_ids()
    return _index_named_by(state, ids) | _index_of_tags(
        state, TagStore(state.storage).all().values()
    )


def _index_of_tags(state: TableState, tags: Iterable[Tag]) -> set[str]:
    """The vector files and delete records the snapshots of ``tags`` reference."""
    named: set[str] = set()
    for tag in tags:
        if tag.snapshot.delete_record is not None:
            named.add(tag.snapshot.delete_record)
        entries = state.manifests.entries(state.manifests.all_manifests(tag.snapshot))
        named.update(e.file.deletion.path for e in entries if e.file.deletion is not None)
    return named


def _remove_index_files(
    state: TableState, known: set[str], older_than_ms: int, *, keep_records: bool
) -> list[str]:
    """Delete the unreferenced index files (module doc, step 4); the paths deleted. None
    while a rollback is under way: it may restore vectors of a snapshot this purge expired
    (``rollback_pins``: the pins are read after the expiration, the references after them)."""
    if pinned_ids(state.storage, now_ms=int(time.time() * 1000)):
        return []  # the next purge removes them
    deleted: list[str] = []
    unreferenced = _unreferenced_index_files(
        state, _referenced_index(state), known, older_than_ms, keep_records=keep_records
    )
    failed: set[str] = set()
    for path in unreferenced:
        record = _record_of_mark(path)
        if record in failed:
            continue  # the mark stays with its record
        try:
            state.storage.delete(path)
        except StorageError:
            failed.add(path)
            continue  # left for the next purge
        if record not in known:  # (this purge's own expiration wrote the others' marks)
            deleted.append(path)
    return deleted


def _unreferenced_index_files(
    state: TableState,
    referenced: set[str],
    known: set[str],
    older_than_ms: int,
    *,
    keep_records: bool,
) -> list[str]:
    """The vector files and delete records that are not ``referenced`` (nor records kept
    with ``keep_records``), and are either ``known`` (named by an expired snapshot), marked as
    landed (an expiration deleted the snapshot that named them) or older than the cut-off
    (else perhaps a delete in flight); then the landing marks of the records that go or are
    gone (records and vectors first: a mark goes after its record)."""
    listing = state.storage.listdir(layout.INDEX_DIR)
    present = {info.path for info in listing}
    landed = {
        f"{layout.INDEX_DIR}/delete-{found.group(1)}": info.path
        for info in listing
        if (found := layout.LANDED_MARK_NAME.match(info.path.rsplit("/", 1)[-1])) is not None
    }
    found_files: list[str] = []
    for info in listing:
        name = info.path.rsplit("/", 1)[-1]
        is_record = _RECORD_NAME.match(name) is not None
        if not is_record and _VECTOR_NAME.match(name) is None:
            continue
        if info.path in referenced or (is_record and keep_records):
            continue
        if info.path not in known and info.path not in landed and info.mtime_ms >= older_than_ms:
            continue
        found_files.append(info.path)
    if not keep_records:
        going = set(found_files)
        found_files.extend(
            mark
            for record, mark in sorted(landed.items())
            if record not in present or record in going
        )
    return found_files


def _record_of_mark(path: str) -> str | None:
    """The delete record whose landing mark is ``path`` (None: not a landing mark)."""
    found = layout.LANDED_MARK_NAME.match(path.rsplit("/", 1)[-1])
    return None if found is None else f"{layout.INDEX_DIR}/delete-{found.group(1)}"


# ---- dry run --------------------------------------------------------------------------------


def _dry_run(
    state: TableState,
    latest: Snapshot,
    older_than_ms: int,
    flagged: list[str],
    kept: list[str],
    removed_tags: list[str],
    blockers: list[str],
) -> PurgeResult:
    """What ``purge`` would do, reading only. ``deleted_files`` lists every data file, vector
    and delete record it would delete, the orphans, and the metadata files of the snapshots
    before the latest (the latest's own manifest lists are replaced by the purge's commit too,
    under names that commit chooses: those are not listed)."""
    vectored = [e for e in state.manifests.live_files(latest) if e.file.deletion is not None]
    earliest = state.snapshots.earliest_id(repair=False)
    expired = [] if earliest is None else list(range(earliest, latest.id + 1))
    all_tags = TagStore(state.storage).all()
    remaining = [tag for name, tag in all_tags.items() if name not in removed_tags]
    kept_by_tags = tag_references(state.manifests, remaining)
    files: set[str] = set()
    if earliest is not None:
        plan = plan_expiration(state.snapshots, state.manifests, earliest, latest.id, kept_by_tags)
        released = {name: tag for name, tag in all_tags.items() if name in removed_tags}
        plan_releases(
            state.snapshots,
            state.manifests,
            plan,
            {**TagStore(state.storage).released(), **released},
            kept_by_tags,
        )
        files.update(plan.data_files, plan.metadata_files)
        # the purge's commit writes every manifest anew (no statistics of deleted rows stay)
        replaced = metadata_of(latest, state.manifests) - kept_by_tags.metadata
        replaced.discard(latest.commit_users or "")  # carried forward
        files.update(layout.manifest_path(name) for name in replaced)
    files.update(e.file.path for e in vectored if e.file.path not in kept_by_tags.data)
    # the purge snapshot's delta names the vectors of the files it rewrites: the next purge
    # removes them (they hold positions, not values)
    rewritten_vectors = {e.file.deletion.path for e in vectored if e.file.deletion is not None}
    files.update(
        _unreferenced_index_files(
            state,
            _index_of_tags(state, remaining) | rewritten_vectors,
            _index_named_by(state, expired),
            older_than_ms,
            keep_records=bool(kept),
        )
    )
    orphans = remove_orphan_files(state, older_than_ms=older_than_ms, dry_run=True)
    files.update(orphans.files)
    if state.mirrors_iceberg:  # republished: every version so far goes, with the files
        # of every snapshot but the tags' (which the new version keeps listing)
        files.update(
            state.mirror.files_in_use(
                except_snapshots=frozenset(tag.snapshot.id for tag in remaining)
            )
        )
    return PurgeResult(
        files_rewritten=len(vectored),
        rows_dropped=sum(e.file.row_count - e.file.live_row_count for e in vectored),
        expired_snapshots=expired,
        deleted_files=sorted(files),
        tags_holding_deletes=flagged,
        tags_deleted=removed_tags,
        tags_kept=kept,
        blocked_by=blockers,
        dry_run=True,
    )


def parse_tag_policy(value: object) -> TagPolicy:
    """``tags=`` of ``purge``: "refuse", "delete" or "keep"."""
    if isinstance(value, TagPolicy):
        return value
    for policy in TagPolicy:
        if value == policy.value:
            return policy
    raise InvalidArgumentError(f"purge's tags must be 'refuse', 'delete' or 'keep', got {value!r}")
