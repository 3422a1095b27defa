"""Manifests and manifest lists: writing, reading (cached: they are immutable), folding entries
into the live file set, and executing manifest merges."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from appendtable.commit.metadata_cache import MetadataCache
from appendtable.commit.validation import (
    check_entries,
    check_manifest_list,
    metadata_name_problem,
)
from appendtable.errors import CorruptMetadataError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import (
    CommitUserRecord,
    CommitUsers,
    FileKind,
    Manifest,
    ManifestEntry,
    ManifestFileMeta,
    ManifestList,
    PartitionValues,
    Snapshot,
    StatValue,
)
from appendtable.planning.manifest_merge import MergeChoice
from appendtable.storage import Storage

__all__ = ["ManifestStore", "fold_live"]

_T = TypeVar("_T")
EntryFilter = Callable[[ManifestEntry], bool]
ManifestFilter = Callable[[ManifestFileMeta], bool]

#: Decoded manifests, manifest lists and commit user records of every table in the process
#: (they are immutable: see ``metadata_cache``), bounded by the entries they hold.
_MANIFESTS: MetadataCache[list[ManifestEntry]] = MetadataCache(max_weight=2_000_000)
_LISTS: MetadataCache[list[ManifestFileMeta]] = MetadataCache(max_weight=500_000)
_USERS: MetadataCache[list[CommitUserRecord]] = MetadataCache(max_weight=500_000)


def _decode_manifest(data: bytes, uri: str) -> Manifest:
    manifest = codec.decode(data, Manifest, codec.Kind.MANIFEST, uri)
    check_entries(manifest.entries, uri)
    return manifest


def _decode_list(data: bytes, uri: str) -> list[ManifestFileMeta]:
    manifests = codec.decode(data, ManifestList, codec.Kind.MANIFEST_LIST, uri).manifests
    check_manifest_list(manifests, uri)
    return manifests


def fold_live(entries: Iterable[ManifestEntry]) -> dict[str, ManifestEntry]:
    """The live files of a sequence of entries, by path: every ADD not cancelled by a DELETE
    of the same file (path and deletion vector, ``DataFileMeta.key``), each once (set
    semantics: a repeated ADD is one file). A path is re-added only with a new deletion vector
    (whose file name is new), so keys are never re-added and the fold does not depend on
    order; at most one key of a path is live."""
    added: dict[tuple[str, str | None], ManifestEntry] = {}
    deleted: set[tuple[str, str | None]] = set()
    for entry in entries:
        if entry.kind == FileKind.ADD:
            added[entry.file.key] = entry
        else:
            deleted.add(entry.file.key)
    for key in deleted:
        added.pop(key, None)
    return {key[0]: entry for key, entry in added.items()}


def _fold_keep_deletes(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """Cancel ADD/DELETE pairs; keep unmatched DELETEs (their ADD lives in another manifest)."""
    added: dict[tuple[str, str | None], ManifestEntry] = {}
    deletes: dict[tuple[str, str | None], ManifestEntry] = {}
    for entry in entries:
        if entry.kind == FileKind.ADD:
            added[entry.file.key] = entry
        else:
            deletes[entry.file.key] = entry
    cancelled = added.keys() & deletes.keys()
    kept = [entry for key, entry in added.items() if key not in cancelled]
    kept.extend(entry for key, entry in deletes.items() if key not in cancelled)
    return kept


def _partition_bounds(
    partitions: Iterable[PartitionValues], width: int
) -> tuple[PartitionValues, PartitionValues, tuple[int, ...]]:
    lows: list[StatValue] = [None] * width
    highs: list[StatValue] = [None] * width
    nulls = [0] * width
    for values in partitions:
        for i, value in enumerate(values):
            if value is None:
                nulls[i] += 1
                continue
            low, high = lows[i], highs[i]
            if low is None or _lt(value, low):
                lows[i] = value
            if high is None or _lt(high, value):
                highs[i] = value
    return tuple(lows), tuple(highs), tuple(nulls)


def _lt(a: StatValue, b: StatValue) -> bool:
    try:
        return bool(a < b)  # type: ignore[operator]
    except TypeError:
        return str(a) < str(b)


class ManifestStore:
    """Reads and writes the manifests of one table. Decoded files are cached process-wide
    (``metadata_cache``): a new handle of a table reads only manifests no handle has read."""

    def __init__(self, storage: Storage, *, target_size: int) -> None:
        self._storage = storage
        self._target_size = target_size
        self._root = storage.uri("")

    def _key(self, name: str) -> tuple[str, str]:
        return (self._root, name)

    # ---- manifests --------------------------------------------------------------------------

    def write_manifests(self, entries: Sequence[ManifestEntry]) -> list[ManifestFileMeta]:
        """Write entries as one or more manifests, each rolled once it reaches the target
        size (so every one but the last is at least the target: no merge candidate)."""
        if not entries:
            return []
        written = []
        batch: list[ManifestEntry] = []
        encoded = 0
        for entry in entries:
            batch.append(entry)
            # Exact sizes, not an estimate: a manifest rolled here must reach the target, or
            # it stays a merge candidate, and merging such manifests only re-rolls them into
            # as many again (every commit would rewrite them all).
            encoded += codec.packed_size(entry)
            if encoded >= self._target_size:
                written.append(self._write_manifest(batch))
                batch, encoded = [], 0
        if batch:
            written.append(self._write_manifest(batch))
        return written

    def _write_manifest(self, entries: list[ManifestEntry]) -> ManifestFileMeta:
        name = f"manifest-{uuid.uuid4().hex}"
        data = codec.encode(Manifest(entries), codec.Kind.MANIFEST)
        self._storage.create(layout.manifest_path(name), data)
        _MANIFESTS.put(self._key(name), entries, len(entries))
        width = len(entries[0].partition)
        low, high, nulls = _partition_bounds((e.partition for e in entries), width)
        return ManifestFileMeta(
            file_name=name,
            file_size=len(data),
            num_added=sum(1 for e in entries if e.kind == FileKind.ADD),
            num_deleted=sum(1 for e in entries if e.kind == FileKind.DELETE),
            schema_id=max(e.file.schema_id for e in entries),
            min_bucket=min(e.bucket for e in entries),
            max_bucket=max(e.bucket for e in entries),
            partition_min=low,
            partition_max=high,
            partition_null_counts=nulls,
            min_seq=min(e.file.min_seq for e in entries),
            max_seq=max(e.file.max_seq for e in entries),
        )

    def read_manifest(self, name: str, *, cache: bool = True) -> list[ManifestEntry]:
        """The entries of manifest ``name`` (CorruptMetadataError for a name or a data file
        path outside the table, see ``commit.validation``). ``cache=False``: not remembered
        (a pass over every manifest of a long history, such as orphan removal's, would
        otherwise fill the process-wide cache with all of them)."""
        return self._read_cached(
            _MANIFESTS, name, lambda data, uri: _decode_manifest(data, uri).entries, cache
        )

    def _read_cached(
        self,
        cache: MetadataCache[list[_T]],
        name: str,
        decode: Callable[[bytes, str], list[_T]],
        remember: bool = True,
    ) -> list[_T]:
        """The decoded metadata file ``name`` (immutable): from the process-wide ``cache``, or
        read, decoded and (with ``remember``) remembered there."""
        key = self._key(name)
        cached = cache.get(key)
        if cached is not None:
            return cached
        problem = metadata_name_problem(name)
        if problem is not None:
            raise CorruptMetadataError(
                f"a metadata file of {self._root} names {name!r} in manifest/, refused "
                f"({problem}): the metadata is damaged",
                path=str(name),
            )
        path = layout.manifest_path(name)
        decoded = decode(self._storage.read(path), self._storage.uri(path))
        if remember:
            cache.put(key, decoded, len(decoded))
        return decoded

    # ---- manifest lists ---------------------------------------------------------------------

    def write_list(self, manifests: Sequence[ManifestFileMeta]) -> str:
        name = f"manifest-list-{uuid.uuid4().hex}"
        data = codec.encode(ManifestList(list(manifests)), codec.Kind.MANIFEST_LIST)
        self._storage.create(layout.manifest_path(name), data)
        _LISTS.put(self._key(name), list(manifests), len(manifests))
        return name

    def read_list(self, name: str, *, cache: bool = True) -> list[ManifestFileMeta]:
        return self._read_cached(_LISTS, name, _decode_list, cache)

    def all_manifests(self, snapshot: Snapshot, *, cache: bool = True) -> list[ManifestFileMeta]:
        """Base then delta manifests of a snapshot: together, all of its files. A manifest in
        both lists is damage (CorruptMetadataError naming the delta list)."""
        base = self.read_list(snapshot.base_manifest_list, cache=cache)
        delta = self.read_list(snapshot.delta_manifest_list, cache=cache)
        if base and delta:
            names = {m.file_name for m in base}
            twice = next((m.file_name for m in delta if m.file_name in names), None)
            if twice is not None:
                uri = self._storage.uri(layout.manifest_path(snapshot.delta_manifest_list))
                raise CorruptMetadataError(
                    f"metadata file {uri} lists manifest {twice!r}, which the base list of "
                    f"snapshot {snapshot.id} lists too: the metadata is damaged",
                    path=uri,
                )
        return base + delta

    # ---- reading entries --------------------------------------------------------------------

    def entries(
        self,
        manifests: Iterable[ManifestFileMeta],
        manifest_filter: ManifestFilter | None = None,
        *,
        cache: bool = True,
    ) -> list[ManifestEntry]:
        """All entries of the manifests that pass ``manifest_filter``, in list order."""
        collected: list[ManifestEntry] = []
        for manifest in manifests:
            if manifest_filter is None or manifest_filter(manifest):
                collected.extend(self.read_manifest(manifest.file_name, cache=cache))
        return collected

    def live_files(
        self,
        snapshot: Snapshot,
        manifest_filter: ManifestFilter | None = None,
        entry_filter: EntryFilter | None = None,
        *,
        cache: bool = True,
    ) -> list[ManifestEntry]:
        """The ADD entries live in ``snapshot`` (optionally pruned), in manifest order."""
        manifests = [
            m
            for m in self.all_manifests(snapshot, cache=cache)
            if manifest_filter is None or manifest_filter(m)
        ]
        read = self.entries(manifests, cache=cache)
        if any(m.num_deleted for m in manifests):
            entries: Iterable[ManifestEntry] = fold_live(read).values()
        else:  # add-only manifests (the usual case): nothing to cancel, a path counts once
            entries = {e.file.path: e for e in read}.values()
        if entry_filter is None:
            return list(entries)
        return [entry for entry in entries if entry_filter(entry)]

    def delta_entries(self, snapshot: Snapshot, *, cache: bool = True) -> list[ManifestEntry]:
        """The entries this snapshot itself added or deleted."""
        return self.entries(self.read_list(snapshot.delta_manifest_list, cache=cache), cache=cache)

    # ---- merging ----------------------------------------------------------------------------

    def merge(
        self, manifests: Sequence[ManifestFileMeta], choice: MergeChoice
    ) -> tuple[list[ManifestFileMeta], list[str]]:
        """Execute a merge: the new manifest list, and the names of the manifests it wrote
        (to delete if the commit fails)."""
        chosen = set(choice.indices)
        merged_entries = self.entries(manifests[i] for i in sorted(chosen))
        folded = (
            list(fold_live(merged_entries).values())
            if choice.full
            else _fold_keep_deletes(merged_entries)
        )
        written = self.write_manifests(folded)
        result: list[ManifestFileMeta] = []
        inserted = False
        for index, manifest in enumerate(manifests):
            if index in chosen:
                if not inserted:
                    result.extend(written)
                    inserted = True
                continue
            result.append(manifest)
        return result, [m.file_name for m in written]

    # ---- commit users -----------------------------------------------------------------------

    def write_users(self, records: Sequence[CommitUserRecord]) -> str:
        name = f"commit-users-{uuid.uuid4().hex}"
        data = codec.encode(CommitUsers(list(records)), codec.Kind.COMMIT_USERS)
        self._storage.create(layout.manifest_path(name), data)
        _USERS.put(self._key(name), list(records), len(records))
        return name

    def read_users(self, name: str | None) -> list[CommitUserRecord]:
        if name is None:
            return []
        return self._read_cached(
            _USERS,
            name,
            lambda data, uri: codec.decode(data, CommitUsers, codec.Kind.COMMIT_USERS, uri).records,
        )
