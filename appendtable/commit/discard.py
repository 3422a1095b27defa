"""Deleting the data files of a write that did not land: the one gate every such delete takes.

A data file's name leaves the process that wrote it only inside a commit message. From then
on it may be referenced by a snapshot (the commit landed, perhaps although its caller saw an
error), so whoever gives up on the write (an aborted commit, a failed Spark job, compaction
that lost a race, pre-commit merging that replaced small files, a staging area being removed)
deletes its files through :func:`discard_files` and nothing else.

Guarantee: a file that a retained snapshot or a tag references is never deleted here. Before
deleting, the snapshots and tags are read; a file is kept when some snapshot adds it (or holds
it, for the earliest retained snapshot and rollbacks) or a tag's snapshot holds it, and every
file is kept when they cannot be read completely (a storage error, damaged metadata, a
snapshot expiring under the check). Kept files that nothing references are orphans, which
``remove_orphan_files`` reclaims.

``since_snapshot_id`` narrows the check: the files were written after the caller saw that
snapshot as the latest, so only later snapshots can reference them. Without it every retained
snapshot is checked.

What the gate cannot see is a commit whose outcome is unknown (its snapshot may still appear,
for instance a PUT an object store applies late): callers never discard the files of a commit
that raised ``CommitStateUnknownError``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from appendtable.commit.changes import ROLLBACK_PROPERTY
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.commit.tags import TagStore
from appendtable.errors import AppendTableError, PathOutsideTableError, StorageError
from appendtable.metadata.models import FileKind, ManifestEntry, Snapshot, Tag
from appendtable.storage import Storage

__all__ = [
    "DiscardResult",
    "discard_files",
    "discard_tree",
    "files_referenced_by",
    "referenced_files",
]

log = logging.getLogger("appendtable.commit")


@dataclass(frozen=True)
class DiscardResult:
    """What :func:`discard_files` did with each file."""

    #: Deleted (or already gone).
    deleted: tuple[str, ...] = ()
    #: Kept because a retained snapshot references them: the write had landed.
    referenced: tuple[str, ...] = ()
    #: Kept for another reason: the snapshots could not be read completely, or the delete
    #: failed (orphans then, for ``remove_orphan_files``).
    left: tuple[str, ...] = ()

    @property
    def kept(self) -> tuple[str, ...]:
        return self.referenced + self.left


def files_referenced_by(
    manifests: ManifestStore, snapshot: Snapshot, *, first: bool, cache: bool = True
) -> list[ManifestEntry]:
    """The entries of the data files ``snapshot`` references beyond its retained parents: all
    it holds when it is the ``first`` (earliest) retained one or a rollback (which re-adds
    files), else the files it added (read without caching them with ``cache=False``)."""
    if first or ROLLBACK_PROPERTY in snapshot.properties:
        return manifests.live_files(snapshot, cache=cache)
    return [e for e in manifests.delta_entries(snapshot, cache=cache) if e.kind == FileKind.ADD]


def referenced_files(
    snapshots: SnapshotStore,
    manifests: ManifestStore,
    paths: Iterable[str],
    *,
    since_snapshot_id: int | None = None,
    tags: Iterable[Tag] = (),
) -> set[str]:
    """Which of ``paths`` a retained snapshot (after ``since_snapshot_id``, if given) or one
    of ``tags`` (whose snapshot may have expired) references. Raises whatever reading the
    snapshots raises: the answer is then unknown."""
    wanted = set(paths)
    latest = snapshots.latest_id()
    if not wanted or latest is None:
        return set()
    found = _tagged(manifests, wanted, tags)
    # (never None here: there is a latest snapshot; "or 2" is an equivalent mutant)
    earliest = snapshots.earliest_id() or 1  # pragma: no mutate
    if since_snapshot_id is None or since_snapshot_id < earliest:
        whole, first = True, earliest  # every retained snapshot, the earliest with all it holds
    else:
        whole, first = False, since_snapshot_id + 1
    for snapshot_id in range(first, latest + 1):
        if found == wanted:
            break
        snapshot = snapshots.get(snapshot_id)
        entries = files_referenced_by(manifests, snapshot, first=whole and snapshot_id == first)
        found.update(entry.file.path for entry in entries if entry.file.path in wanted)
    return found


def _tagged(manifests: ManifestStore, wanted: set[str], tags: Iterable[Tag]) -> set[str]:
    """Which of ``wanted`` a tag holds."""
    found: set[str] = set()
    for tag in tags:
        found.update(
            e.file.path for e in manifests.live_files(tag.snapshot) if e.file.path in wanted
        )
    return found


def discard_files(
    storage: Storage,
    snapshots: SnapshotStore,
    manifests: ManifestStore,
    paths: Iterable[str],
    *,
    since_snapshot_id: int | None = None,
) -> DiscardResult:
    """Delete those of ``paths`` (data files of a write given up on) that no retained snapshot
    references; keep the rest, and keep all when that cannot be told. Never raises for a file
    that could not be deleted (it is an orphan then)."""
    unique = list(dict.fromkeys(paths))
    if not unique:
        return DiscardResult()
    # (``since_snapshot_id`` only narrows the check: dropping it is an equivalent mutant)
    since = since_snapshot_id  # pragma: no mutate
    found = _referenced_or_none(storage, snapshots, manifests, unique, since)  # pragma: no mutate
    if found is None:
        return DiscardResult(left=tuple(unique))
    return _delete_unreferenced(storage, unique, found)


def discard_tree(
    storage: Storage,
    snapshots: SnapshotStore,
    manifests: ManifestStore,
    directory: str,
    *,
    since_snapshot_id: int | None = None,
) -> DiscardResult:
    """``discard_files`` for everything below ``directory`` (a staging area): removed whole
    when no snapshot references any file in it."""
    try:
        files = [info.path for info in storage.walk(directory)]
    except (StorageError, PathOutsideTableError) as exc:
        # a link in its place is never followed: what it points at is not the table's
        log.warning(
            "could not list %s to remove it (%s); left as orphans",  # pragma: no mutate
            directory,
            exc,
        )
        return DiscardResult()
    # (as in discard_files, ``since_snapshot_id`` only narrows the check)
    referenced = _referenced_or_none(
        storage,
        snapshots,
        manifests,
        files,
        since_snapshot_id,  # pragma: no mutate
    )
    if referenced is None:
        return DiscardResult(left=tuple(files))
    if referenced:
        return _delete_unreferenced(storage, files, referenced)
    try:
        storage.delete_tree(directory)
    except StorageError:
        return _delete_unreferenced(storage, files, referenced)
    return DiscardResult(deleted=tuple(files))


def _referenced_or_none(
    storage: Storage,
    snapshots: SnapshotStore,
    manifests: ManifestStore,
    paths: list[str],
    since_snapshot_id: int | None,
) -> set[str] | None:
    """The referenced ones among ``paths``, or None when that cannot be told."""
    # (log texts, and ``since_snapshot_id``, which only narrows the check: equivalent mutants)
    try:
        referenced = referenced_files(
            snapshots,
            manifests,
            paths,
            since_snapshot_id=since_snapshot_id,  # pragma: no mutate
            tags=TagStore(storage).all().values(),
        )
    except AppendTableError as exc:
        log.warning(
            "keeping %d data file(s) of a failed write: could not tell "  # pragma: no mutate
            "whether a snapshot references them (%s); "  # pragma: no mutate
            "remove_orphan_files reclaims them if none does",  # pragma: no mutate
            len(paths),
            exc,
        )
        return None
    if referenced:
        log.warning(
            "keeping %d data file(s) of a write given up on: "  # pragma: no mutate
            "a snapshot references them (the commit had landed), "  # pragma: no mutate
            "e.g. %s",  # pragma: no mutate
            len(referenced),
            min(referenced),
        )
    return referenced


def _delete_unreferenced(storage: Storage, paths: list[str], referenced: set[str]) -> DiscardResult:
    deleted, left = [], []
    for path in paths:
        if path in referenced:
            continue
        try:
            storage.delete(path)
        except StorageError:
            left.append(path)  # an orphan: remove_orphan_files reclaims it
            continue
        deleted.append(path)
    kept = tuple(p for p in paths if p in referenced)
    return DiscardResult(deleted=tuple(deleted), referenced=kept, left=tuple(left))
