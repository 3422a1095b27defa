"""Orphan file removal: deleting files the table wrote that nothing references any more.

What may be deleted is decided by the table's own layout, never by "everything under the root":

* only files whose place and name the table itself uses are candidates: ``manifest/`` files,
  data files (``<k>=<v>/.../bucket-<n>/data-*.parquet``, one level per partition key, named
  by that key, in key order), Iceberg mirror files in ``metadata/``, anything inside a staging area
  (``_staging/<id>/``), and temporary files of the table's own writes (``.<name>.<hex>.tmp``);
  snapshots, schemas, tags, consumers, watermarks and hints are never deleted here;
* a candidate is an orphan when no retained snapshot, tag (or deleted tag not yet released)
  or the current Iceberg mirror references it, and it is older than the cut-off; a temporary
  file also only once it is older than ``TEMP_FILE_MIN_AGE_MS`` (a live process may still be
  writing it, whatever cut-off the caller gives);
* anything else found where the walk looks (a user's file, an unknown directory, a symbolic
  link, a directory that holds another table) is listed in ``OrphanResult.not_table_files``
  and never deleted; the walk never follows a link and never descends into an unknown
  directory or into another table.

The live set is right whatever expires meanwhile: snapshots are read oldest first, and the
first one read after a gap (a snapshot that expired while we looked) counts with every file
it holds, not only those it added; snapshots committed while we looked are read too. A
rollback re-adds files of its target, which may have expired before the live set was read:
while a rollback pins a snapshot that is no longer retained, no data file or manifest is
deleted, and the snapshots committed until after the pins were read are counted (the protocol
of ``commit.rollback_pins``). A dry run
changes nothing, the Iceberg mirror included; a real run first brings the mirror up to date
and prunes its older versions (inside ``metadata/`` only).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Set
from dataclasses import dataclass, field

from appendtable import display
from appendtable._state import TableState
from appendtable.commit.discard import files_referenced_by
from appendtable.commit.expire import tag_references
from appendtable.commit.rollback_pins import pinned_ids
from appendtable.commit.tags import TagStore
from appendtable.errors import ObjectNotFoundError, PathOutsideTableError, SnapshotNotFoundError
from appendtable.locations import enclosing_table
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.planning.partitions import key_directory_prefix
from appendtable.storage import Storage
from appendtable.storage.base import DirectoryListing, FileInfo, is_temp_name

__all__ = [
    "TEMP_FILE_MIN_AGE_MS",
    "LiveFiles",
    "OrphanResult",
    "live_files",
    "refuse_nested",
    "remove_orphan_files",
]

log = logging.getLogger("appendtable.maintenance")

#: A temporary file younger than this is never an orphan, whatever the cut-off: the process
#: writing it may be alive (a hint, a snapshot being published, a large metadata file).
TEMP_FILE_MIN_AGE_MS = 60 * 60 * 1000

_METADATA_NAMES: dict[str, re.Pattern[str]] = {
    layout.SCHEMA_DIR: re.compile(r"^schema-\d+\Z"),
    layout.SNAPSHOT_DIR: re.compile(r"^(snapshot-\d+|LATEST|EARLIEST)\Z"),
    # expiration records and rollback pins: pruned by expiration, never orphans
    layout.EXPIRED_DIR: layout.EXPIRATION_RECORD_NAME,
    layout.PINNED_DIR: layout.PIN_NAME,
    layout.CONSUMER_DIR: re.compile(r"^consumer-[A-Za-z0-9][A-Za-z0-9._-]*\Z"),
    layout.TAG_DIR: re.compile(r"^(tag|released)-[A-Za-z0-9][A-Za-z0-9._-]*\Z"),
    # deletion vectors, delete records and their landing marks: kept (never orphans) until
    # purging them knows which of them no retained snapshot or tag references
    layout.INDEX_DIR: re.compile(r"^(dv-[0-9a-f]{32}\.puffin|(delete|landed)-[0-9a-f]{32})\Z"),
}
#: Directories of their own inside ``snapshot/``.
_SNAPSHOT_SUBDIRS = frozenset({layout.EXPIRED_DIR, layout.PINNED_DIR})
_MANIFEST_NAME = re.compile(r"^(manifest|manifest-list|commit-users)-[A-Za-z0-9_-]+\Z")
_MIRROR_NAME = re.compile(
    r"^(v\d+\.metadata\.json|version-hint\.text|[A-Za-z0-9_-]+\.avro|dv-[0-9a-f]{32}\.puffin)\Z"
)
_DATA_NAME = re.compile(r"^data-[A-Za-z0-9_-]+\.parquet\Z")
_BUCKET_DIR = re.compile(r"^bucket-\d+\Z")
_STAGING_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}\Z")
_WATERMARK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")


@dataclass(frozen=True)
class OrphanResult:
    """Files no retained snapshot references, older than the threshold: removed, or with
    ``dry_run`` only listed. ``not_table_files``: what was found in the table's directory that
    the table did not write (a user's files, links, unknown directories ending in ``/``,
    other tables), listed and never deleted."""

    files: list[str] = field(default_factory=list)
    bytes: int = 0
    dry_run: bool = True
    not_table_files: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return display.orphan_repr(self)

    def _repr_html_(self) -> str:
        return display.orphan_html(self)


@dataclass(frozen=True)
class _Candidate:
    """A file the table wrote, and whether something may still reference it."""

    info: FileInfo
    #: "manifest", "data", "mirror", "staging" or "temp"
    kind: str


def remove_orphan_files(state: TableState, *, older_than_ms: int, dry_run: bool) -> OrphanResult:
    """Delete (unless ``dry_run``) the table's files that nothing references and that are
    older than ``older_than_ms`` (epoch ms); see the module docstring for what is a candidate.

    The table is listed *before* the snapshots are read, so a commit that lands meanwhile is
    seen as referencing its files. Refused (PathOutsideTableError, nothing listed or deleted)
    for a table that lies inside another table's directory: the other table's files there
    follow the same layout and would be taken for orphans."""
    refuse_nested(state, "remove orphan files of")
    now = int(time.time() * 1000)
    levels = tuple(key_directory_prefix(key) for key in state.schema.partition_keys)
    candidates, foreign = _walk(state.storage, levels)
    state.refresh()  # the options as of the latest snapshot (the mirror's, above all)
    pruned = [] if dry_run else state.publish_and_prune_mirror()
    mirror_on = state.mirrors_iceberg
    mirror_version = state.mirror.current_version() if mirror_on else None  # (before its files)
    mirror = _mirror_files(state)
    live = live_files(state)
    # A rollback re-adds files of its target: the pins, then the snapshots landed meanwhile.
    held = {"data", "manifest"} if _rollback_under_way(state, now, dry_run=dry_run) else set()
    if held:
        log.info("orphan removal: a rollback is under way; no data file or manifest deleted")
    live = _landed_since(state, live)
    referenced: dict[str, Set[str]] = {
        "manifest": live.metadata,
        "mirror": mirror | set(pruned),
        "data": live.data,
        "staging": set(),
        "temp": set(),
    }
    young = dict.fromkeys(referenced, older_than_ms)
    young["temp"] = min(older_than_ms, now - TEMP_FILE_MIN_AGE_MS)
    orphans = [
        c
        for c in candidates
        if c.kind not in held
        and c.info.mtime_ms < young[c.kind]
        and _name(c) not in referenced[c.kind]
    ]
    if not dry_run:
        for orphan in orphans:
            state.storage.delete(orphan.info.path)
        gone = {c.info.path for c in orphans if c.kind == "mirror"}
        if gone:
            _keep_mirror_whole(state, gone, since=mirror_version)
    files = sorted({c.info.path for c in orphans} | set(pruned))
    listed = {c.info.path: c.info.size for c in candidates}  # sizes from before the prune
    size = sum(listed.get(path, 0) for path in files)
    return OrphanResult(files, size, dry_run, sorted(foreign))


def refuse_nested(state: TableState, doing: str) -> None:
    """PathOutsideTableError if the table lies inside another table's directory: that table's
    files there follow the same layout and would be taken for orphans."""
    outer = enclosing_table(state.storage)
    if outer is not None:
        raise PathOutsideTableError(
            f"refusing to {doing} the table at {state.storage.root}: it lies inside the table "
            f"at {outer.root}, whose files there would be taken for orphans (move one of the "
            "two tables)",
            path=outer.root,
        )


def _keep_mirror_whole(state: TableState, gone: set[str], *, since: int | None) -> None:
    """After deleting the mirror files ``gone`` as orphans, by a listing made before: mirror
    files are named by their content, so a writer may have written one again since and
    published a version using it. With the mirror on now, a version published after ``since``
    (the one whose files were kept; None: the mirror was off, or not written yet) that uses
    one is written anew from the table's own metadata (``IcebergMirror.prune`` does the same
    after its own deletions)."""
    state.refresh()
    if not state.mirrors_iceberg:
        return
    if since is None:
        state.publish_mirror(rebuild=True)  # turned on meanwhile
    else:
        max_snapshots = state.options.get(opt.ICEBERG_MAX_SNAPSHOTS)
        state.mirror.rewrite_if_used(gone, since=since, max_snapshots=max_snapshots)


def _name(candidate: _Candidate) -> str:
    """How references name a candidate: manifests by file name, the rest by path."""
    path = candidate.info.path
    # (only manifests are under manifest/: testing the kind is an equivalent mutant)
    return (
        path.removeprefix(f"{layout.MANIFEST_DIR}/")
        if candidate.kind == "manifest"  # pragma: no mutate
        else path
    )


def _mirror_files(state: TableState) -> set[str]:
    """The Iceberg mirror files the newest mirror version uses (none with the mirror off:
    every mirror file is then an orphan)."""
    if not state.mirrors_iceberg:
        return set()
    return (state.mirror.referenced() or set()) | {layout.ICEBERG_VERSION_HINT}


# ---- the walk -------------------------------------------------------------------------------


def _walk(storage: Storage, levels: tuple[str, ...]) -> tuple[list[_Candidate], list[str]]:
    """The candidates of the table's layout, and what is not the table's. ``levels``: the
    start (``<key>=``) of the partition directories' names at each depth, in key order."""
    candidates: list[_Candidate] = []
    foreign: list[str] = []
    for listing in _pruned(storage.walk_tree(), foreign):
        where = listing.path
        for name in listing.links:
            foreign.append(_join(where, name))
        place = _place(where, len(levels))
        keep: list[str] = []
        for name in listing.directories:
            if _may_hold_table_files(where, place, name, levels):
                keep.append(name)
            else:
                foreign.append(_join(where, name) + "/")
        listing.directories[:] = keep
        for info in listing.files:
            path = _join(where, info.path)
            kind = _file_kind(place, info.path)
            if kind is None:
                foreign.append(path)
            elif kind != "kept":
                candidates.append(_Candidate(FileInfo(path, info.size, info.mtime_ms), kind))
    return candidates, foreign


def _pruned(listings: Iterator[DirectoryListing], foreign: list[str]) -> Iterator[DirectoryListing]:
    """The listings, without directories (other than the root) that hold another table: such
    a directory is reported whole and never walked into."""
    for listing in listings:
        if listing.path and layout.SCHEMA_DIR in listing.directories:
            foreign.append(listing.path + "/")
            listing.directories.clear()
        else:
            yield listing


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def _place(path: str, partition_depth: int) -> str:
    """What a directory of the table is: "root", a metadata directory name, "watermark-group",
    "staging", "staging-area", "partition", "bucket"."""
    if not path:
        return "root"
    if path in _SNAPSHOT_SUBDIRS:
        return path
    parts = path.split("/")
    top = parts[0]
    if top == layout.WATERMARK_DIR:
        return layout.WATERMARK_DIR if len(parts) == 1 else "watermark-group"
    if top == layout.STAGING_DIR:
        return "staging" if len(parts) == 1 else "staging-area"
    if top in _METADATA_NAMES or top in (layout.MANIFEST_DIR, layout.ICEBERG_DIR):
        return top
    return "bucket" if len(parts) == partition_depth + 1 else "partition"


def _may_hold_table_files(where: str, place: str, name: str, levels: tuple[str, ...]) -> bool:
    """Whether the walk goes into subdirectory ``name`` of directory ``where`` (of kind
    ``place``)."""
    if place == "root":
        if name in _METADATA_NAMES or name in (
            layout.MANIFEST_DIR,
            layout.ICEBERG_DIR,
            layout.WATERMARK_DIR,
            layout.STAGING_DIR,
        ):
            return True
        return _data_directory(name, 0, levels)
    if place == layout.WATERMARK_DIR:
        return _WATERMARK_NAME.match(name) is not None
    if place == "staging":
        return _STAGING_ID.match(name) is not None
    if place == "staging-area":
        return True  # an engine's own layout (partition directories, _temporary/...)
    if place == "partition":
        return _data_directory(name, len(where.split("/")), levels)
    return place == layout.SNAPSHOT_DIR and f"{where}/{name}" in _SNAPSHOT_SUBDIRS


def _data_directory(name: str, level: int, levels: tuple[str, ...]) -> bool:
    """Whether ``name`` is a data directory at ``level`` (0: in the root): ``<k>=<v>`` of the
    table's partition key of that level above the partition depth (another key, or the keys in
    another order, is not the table's), ``bucket-<n>`` at it."""
    if level < len(levels):
        return name.startswith(levels[level])
    return level == len(levels) and _BUCKET_DIR.match(name) is not None


def _file_kind(place: str, name: str) -> str | None:
    """ "kept" (the table's, never an orphan), a candidate kind, or None (not the table's)."""
    if place == "staging-area":
        return "staging"
    if is_temp_name(name):
        return None if place in ("root", "staging", "partition") else "temp"
    pattern = _METADATA_NAMES.get(place)
    if pattern is not None:
        return "kept" if pattern.match(name) else None
    if place == layout.MANIFEST_DIR:
        return "manifest" if _MANIFEST_NAME.match(name) else None
    if place == layout.ICEBERG_DIR:
        return "mirror" if _MIRROR_NAME.match(name) else None
    if place == "watermark-group":
        return "kept" if _WATERMARK_NAME.match(name) else None
    if place == "bucket":
        return "data" if _DATA_NAME.match(name) else None
    return None


# ---- the live set ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveFiles:
    """The files that retained snapshots, tags and deleted tags not yet released reference."""

    #: data file paths
    data: frozenset[str]
    #: metadata file names (manifests, manifest lists, commit-users files)
    metadata: frozenset[str]
    #: the newest snapshot id counted
    through: int


def live_files(state: TableState) -> LiveFiles:
    """What a retained snapshot, a tag or a deleted tag not yet released references.

    Snapshots are read oldest first; a snapshot read right after its predecessor counts with
    the files it added (its predecessor's are already counted), any other (the first, one
    after a gap left by a snapshot that expired meanwhile, a rollback) with every file it
    holds. Snapshots committed meanwhile are read too. A retained snapshot whose metadata
    cannot be read raises: the live set is then unknown and nothing may be deleted."""
    data: set[str] = set()
    metadata: set[str] = set()
    through = _count_snapshots(state, state.snapshots.list_ids(), data, metadata)
    # Tags (and deleted tags not yet released) keep their snapshot's files and manifests.
    tag_store = TagStore(state.storage)
    tags = tag_references(state.manifests, tag_store.all().values())
    released = tag_references(state.manifests, tag_store.released().values(), released=True)
    return LiveFiles(
        frozenset(data | tags.data | released.data),
        frozenset(metadata | tags.metadata | released.metadata),
        through,
    )


def _landed_since(state: TableState, live: LiveFiles) -> LiveFiles:
    """``live`` with the files of the snapshots committed after it was read."""
    latest = state.snapshots.latest_id()
    if latest is None or latest <= live.through:
        return live
    data, metadata = set(live.data), set(live.metadata)
    through = _count_snapshots(state, list(range(live.through + 1, latest + 1)), data, metadata)
    return LiveFiles(frozenset(data), frozenset(metadata), through)


def _count_snapshots(state: TableState, ids: list[int], data: set[str], metadata: set[str]) -> int:
    """Add the files of snapshots ``ids`` (ascending), and of those committed meanwhile, to
    ``data`` and ``metadata``; the newest id counted (0: none)."""
    snapshots, manifests = state.snapshots, state.manifests
    previous = 0  # pragma: no mutate (the snapshot read last; 0: none, or a gap since)
    through = 0
    while ids:
        for snapshot_id in ids:
            # Counting a snapshot whole where its additions would do is never wrong, only
            # slower: mutations that only widen this are equivalent.
            whole = snapshot_id - previous != 1  # pragma: no mutate
            try:
                snapshot = snapshots.get(snapshot_id)
                # one pass over the whole history: nothing of it is kept in the caches
                listed = manifests.all_manifests(snapshot, cache=False)
                entries = files_referenced_by(manifests, snapshot, first=whole, cache=False)
            except (SnapshotNotFoundError, ObjectNotFoundError):
                if snapshots.on_storage(snapshot_id):
                    raise  # a retained snapshot whose metadata is gone: damage
                previous = 0  # expired while we looked: the next one counts whole
                continue
            metadata.update((snapshot.base_manifest_list, snapshot.delta_manifest_list))
            if snapshot.commit_users is not None:
                metadata.add(snapshot.commit_users)
            metadata.update(m.file_name for m in listed)
            data.update(e.file.path for e in entries)
            previous = snapshot_id  # pragma: no mutate (see ``whole``)
        through = ids[-1]
        latest = snapshots.latest_id()
        # (a table always keeps a snapshot: latest is None only if it was deleted meanwhile)
        ids = [] if latest is None else list(range(ids[-1] + 1, latest + 1))  # pragma: no mutate
    return through


def _rollback_under_way(state: TableState, now_ms: int, *, dry_run: bool) -> bool:
    """Whether a rollback in progress pins a snapshot that is no longer retained: it may
    re-add files of that snapshot, which no live set read before it lands counts
    (``commit.rollback_pins``; the pins are read before the retained snapshots)."""
    pinned = pinned_ids(state.storage, now_ms=now_ms, prune=not dry_run)
    return bool(pinned) and not pinned <= set(state.snapshots.list_ids())
