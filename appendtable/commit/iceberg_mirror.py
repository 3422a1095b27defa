"""Writing the Iceberg mirror: Iceberg v2 metadata beside the table's own, under ``metadata/``,
referencing the table's Parquet files (no data is copied).

What is written, after the table's own snapshot is published:

* one Avro manifest per manifest of ours that holds live files of a retained snapshot, with
  those files; named by a hash of (our manifest, the files of it no longer live, the schema
  version the statistics are encoded for), so it is written once and shared by every snapshot
  that has the same content, and rewritten only when a compaction or overwrite removes some of
  its files (our manifests are merged by our own policy, so their number stays bounded);
* one manifest list per snapshot (``snap-<id>-<hash>.avro``);
* ``v<N>.metadata.json`` (created only if absent: concurrent mirror writers never overwrite
  each other) listing every retained snapshot with the table's own ids, and the snapshot of
  every tag (even once it left the table's log: a tag keeps its manifests and data files) with
  the tag as a ref of type ``tag``, then ``version-hint.text`` = N.

A mirror write never changes the table: it can fail, or lose a race, at any point and be done
again (``publish``). Files are written before anything references them, so a reader of the
mirror never meets a reference to a missing mirror file. Data files are protected by the
expiration order (see ``commit.expire``): the mirror is republished without the expired
snapshots before their data files are deleted.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from appendtable.commit.manifests import ManifestStore
from appendtable.commit.schemas import SchemaStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.commit.tags import TagStore
from appendtable.errors import (
    CommitConflictError,
    CorruptMetadataError,
    ObjectNotFoundError,
    SnapshotNotFoundError,
)
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.avro import read_container, read_header, write_container
from appendtable.metadata.models import (
    DeletionVectorRef,
    FileKind,
    ManifestEntry,
    PartitionValues,
    Snapshot,
    TableSchema,
)
from appendtable.metadata.types import TypeSpec
from appendtable.planning import iceberg_metadata
from appendtable.planning.schema_changes import stats_positions
from appendtable.storage import Storage
from appendtable.storage.containment import path_problem

__all__ = ["MAIN_BRANCH", "IcebergMirror"]

_ADDED, _EXISTING = 1, 0
_ATTEMPTS = 20
#: The Iceberg branch of the latest snapshot: a tag of this name has no ref of its own.
MAIN_BRANCH = "main"


@dataclass(frozen=True)
class _ManifestInfo:
    path: str
    length: int
    added_snapshot_id: int
    status: int
    files: int
    rows: int
    partitions: list[Any]
    #: the deletion vectors of its files: (data file path, partition, vector)
    vectors: tuple[tuple[str, PartitionValues, DeletionVectorRef], ...] = ()


@dataclass(frozen=True)
class _Build:
    snapshot: Snapshot
    schema: TableSchema
    partition_types: list[TypeSpec]
    #: a repair: every file is written again where missing or damaged (else what is found
    #: under a file's name is trusted: names are hashes of the content)
    rebuild: bool = False


@dataclass(frozen=True)
class _ListState:
    """What a snapshot's manifest list was made of: per manifest of ours, its files no
    longer live and the mirror manifest of the rest (None: nothing live)."""

    schema_id: int
    manifests: dict[str, tuple[frozenset[str], _ManifestInfo | None]]


@dataclass(frozen=True)
class _Listed:
    """A snapshot's manifest list as written for a mirror version."""

    uri: str
    #: whether it lists deletion vectors (a v3 delete manifest)
    with_deletes: bool
    #: the mirror files it references (itself included) that its parent's list in the
    #: version it follows does not: a prune that read an older version may delete them
    unverified: frozenset[str]


def _puffin_path(data_uri: str, ref: DeletionVectorRef) -> str:
    """The mirror's Puffin file holding a copy of ``ref``, the vector of ``data_uri``."""
    name = hashlib.sha256(f"{data_uri}\n{ref.path}@{ref.offset}".encode()).hexdigest()[:32]
    return f"{layout.ICEBERG_DIR}/dv-{name}.puffin"


def _identity(entry: ManifestEntry) -> str:
    """A live file's identity in the mirror: its path, and its deletion vector if any (a
    delete re-adds a path with a new vector; for a file without one, the path alone, so the
    names of manifests written before deletes existed stay the same)."""
    ref = entry.file.deletion
    return entry.file.path if ref is None else f"{entry.file.path}#{ref.path}@{ref.offset}"


class IcebergMirror:
    """Publishes and prunes the Iceberg mirror of one table. Thread-safe."""

    def __init__(
        self,
        storage: Storage,
        snapshots: SnapshotStore,
        manifests: ManifestStore,
        schemas: SchemaStore,
    ) -> None:
        self._storage = storage
        #: The table's location. Mirror files hold absolute URIs, so it is part of every
        #: mirror file's name: a moved or copied table writes its own instead of reusing them.
        self._root = storage.uri("").rstrip("/")
        self._snapshots = snapshots
        self._manifests = manifests
        self._schemas = schemas
        self._known: dict[str, _ManifestInfo] = {}
        self._lineages: dict[int, list[TableSchema]] = {}
        self._states: OrderedDict[int, _ListState] = OrderedDict()
        self._mappings: dict[int, str] = {}
        self._lock = threading.Lock()

    # ---- reading the current mirror -------------------------------------------------------

    def current_version(self) -> int | None:
        """The newest metadata version (from the hint, checked against the directory)."""
        try:
            hinted = int(self._storage.read(layout.ICEBERG_VERSION_HINT).decode().strip())
        except (ObjectNotFoundError, ValueError):
            hinted = 0
        version = hinted
        while self._storage.exists(layout.iceberg_metadata_path(version + 1)):
            version += 1
        if version == 0:
            listed = [
                self._version_of(name) for name in self._storage.listnames(layout.ICEBERG_DIR)
            ]
            version = max((v for v in listed if v is not None), default=0)
        return version or None

    @staticmethod
    def _version_of(name: str) -> int | None:
        base = name.rsplit("/", 1)[-1]
        if base.startswith("v") and base.endswith(".metadata.json"):
            digits = base[1 : -len(".metadata.json")]
            return int(digits) if digits.isdigit() else None
        return None

    def location(self) -> str | None:
        """The URI of the newest ``metadata.json``, or None before the first publish."""
        version = self.current_version()
        return None if version is None else self._storage.uri(layout.iceberg_metadata_path(version))

    def current_location(self) -> str | None:
        """The URI of the newest ``metadata.json`` if it describes the table as it is now:
        None before the first publish, and while the newest version predates a time the
        mirror was off (its files may be gone; the next publish writes the mirror anew)."""
        for _ in range(_ATTEMPTS):
            version = self.current_version()
            latest = self._snapshots.latest()
            if version is None or latest is None:
                return None
            try:
                current = self._read_metadata(version)
            except ObjectNotFoundError:
                continue  # pruned meanwhile: a newer one is there
            if self._restarted(current, latest):
                return None
            return self._storage.uri(layout.iceberg_metadata_path(version))
        raise CommitConflictError("the Iceberg mirror kept changing under this read; retry")

    def _read_metadata(self, version: int) -> dict[str, Any]:
        path = layout.iceberg_metadata_path(version)
        data = self._storage.read(path)
        try:
            parsed = json.loads(data)
        except ValueError as exc:
            uri = self._storage.uri(path)
            raise CorruptMetadataError(f"cannot decode {uri}: {exc}", path=uri) from exc
        if not isinstance(parsed, dict):
            uri = self._storage.uri(path)
            raise CorruptMetadataError(f"{uri} is not a JSON object", path=uri)
        return parsed

    # ---- publishing -------------------------------------------------------------------------

    def publish(self, max_snapshots: int = 100, *, rebuild: bool = False) -> str | None:
        """Mirror the newest ``max_snapshots`` retained snapshots (the latest as current) and
        the snapshot of every tag (a ref of type tag), unless the newest mirror already does;
        returns the location of the metadata file that does. None for a table without
        snapshots. Costs a constant number of reads and writes per new snapshot, whatever the
        history (plus one small read per tag): snapshots already mirrored are copied from the
        current metadata. ``rebuild``: write a new version from the table's own metadata
        alone, re-creating any mirror file that is missing (a repair)."""
        for _ in range(_ATTEMPTS):
            latest = self._snapshots.latest()
            if latest is None:
                return None
            version = self.current_version()
            try:
                current = self._read_metadata(version) if version is not None else None
            except ObjectNotFoundError:
                continue  # pruned meanwhile: a newer version is there
            # Read after the version: a tag deleted meanwhile is either seen gone here, or
            # listed by a version older than the one an expiration writes before freeing its
            # files (see ``commit.expire``).
            tags = self._tags()
            earliest = self._snapshots.earliest_id() or 1
            first = max(earliest, latest.id - max(1, max_snapshots) + 1)
            retained = list(range(first, latest.id + 1))
            listed = sorted(set(retained) | {s.id for s in tags.values()})
            refs = iceberg_metadata.refs(latest.id, {name: s.id for name, s in tags.items()})
            if not rebuild and self._restarted(current, latest):
                rebuild = True
            if rebuild:
                with self._lock:
                    self._known.clear()
                    self._states.clear()
            elif current is not None:
                mirrored = [s["snapshot-id"] for s in current.get("snapshots", [])]
                if current.get("current-snapshot-id", -1) > latest.id or (
                    mirrored == listed and current.get("refs") == refs
                ):
                    return self.location()
            try:
                metadata, new_files = self._metadata(
                    latest,
                    retained,
                    {s.id: s for s in tags.values()},
                    refs,
                    None if rebuild else current,
                    rebuild=rebuild,
                )
            except (SnapshotNotFoundError, ObjectNotFoundError):
                if (self._snapshots.earliest_id() or 1) == earliest:
                    raise  # nothing expired meanwhile: damage
                continue  # an expiration went on meanwhile: list what is retained now
            target = layout.iceberg_metadata_path((version or 0) + 1)
            body = json.dumps(metadata, sort_keys=True).encode()  # C encoder: no indent
            if not self._storage.put_if_absent(target, body):
                continue
            self._storage.write_hint(layout.ICEBERG_VERSION_HINT, str((version or 0) + 1).encode())
            if all(self._storage.exists(path) for path in sorted(new_files)):
                return self._storage.uri(target)
            rebuild = True  # a prune deleted a file this version reuses: write them again
        raise CommitConflictError("the Iceberg mirror kept changing under this publish; retry")

    def _restarted(self, current: dict[str, Any] | None, latest: Snapshot) -> bool:
        """Whether the mirror starts again after being off (none there, or its newest version
        is that of another location, or describes a snapshot from which on the table had it
        off for a while): orphan removal
        may have deleted any of its files meanwhile, so nothing written before is trusted."""
        if current is None or current.get("location") != self._root:
            return True  # none, or that of the table's earlier location (moved or copied)
        described = int(current.get("current-snapshot-id", latest.id))
        for snapshot_id in range(described, latest.id + 1):
            try:
                snapshot = latest if snapshot_id == latest.id else self._snapshots.get(snapshot_id)
            except (ObjectNotFoundError, SnapshotNotFoundError):
                return True  # expired: what the mirror was then is unknown
            schema = self._schemas.get(snapshot.schema_id)
            if opt.Options(schema.options).get(opt.ICEBERG_STORAGE) == "disabled":
                return True
        return False

    def _tags(self) -> dict[str, Snapshot]:
        """The snapshot of every tag that can be an Iceberg ref (not one named ``main``)."""
        return {
            name: tag.snapshot
            for name, tag in sorted(TagStore(self._storage).all().items())
            if name != MAIN_BRANCH
        }

    def _metadata(
        self,
        latest: Snapshot,
        retained: list[int],
        tagged: dict[int, Snapshot],
        refs: dict[str, dict[str, Any]],
        current: dict[str, Any] | None,
        *,
        rebuild: bool,
    ) -> tuple[dict[str, Any], set[str]]:
        """The table metadata listing the ``retained`` snapshots (the log of ``main``) and
        the ``tagged`` ones (by id: a tag's copy of its snapshot, which may have expired),
        and the mirror files its snapshots not in ``current`` reference, less those their
        parents there reference: what a concurrent prune may have deleted (see ``prune``)."""
        known = {s["snapshot-id"]: s for s in (current or {}).get("snapshots", [])}
        in_log = set(retained)
        listed = in_log | set(tagged)
        entries = []
        log = []
        new_files: set[str] = set()
        # Version 3 once a snapshot has deletion vectors (they are v3 delete files); a table's
        # version never goes down.
        version3 = (current or {}).get("format-version") == 3
        for snapshot_id in sorted(listed):
            entry = known.get(snapshot_id)
            if entry is None:
                snapshot = tagged.get(snapshot_id) if snapshot_id not in in_log else None
                if snapshot is None:
                    snapshot = self._snapshots.get(snapshot_id)
                made = self._listed(snapshot, parents_listed=set(known), rebuild=rebuild)
                version3 = version3 or made.with_deletes
                new_files |= made.unverified
                entry = iceberg_metadata.snapshot_entry(snapshot, made.uri, parent_retained=True)
            entry = dict(entry)
            if entry.get("parent-snapshot-id") not in listed:
                entry.pop("parent-snapshot-id", None)
            entries.append(entry)
            if snapshot_id in in_log:
                log.append({"timestamp-ms": entry["timestamp-ms"], "snapshot-id": snapshot_id})
        schema_ids = sorted({e["schema-id"] for e in entries} | {latest.schema_id})
        schemas = [self._schemas.get(i) for i in schema_ids]
        every = self._lineage(latest.schema_id)
        current_schema = self._schemas.get(latest.schema_id)
        spec = iceberg_metadata.partition_spec(current_schema)
        return {
            "format-version": 3 if version3 else 2,
            "table-uuid": self._table_uuid(),
            "location": self._root,
            "last-sequence-number": latest.id,
            "last-updated-ms": int(time.time() * 1000),
            "last-column-id": max(s.highest_field_id for s in every),
            "current-schema-id": latest.schema_id,
            "schemas": [iceberg_metadata.iceberg_schema(s) for s in schemas],
            "default-spec-id": 0,
            "partition-specs": [spec],
            "last-partition-id": iceberg_metadata.PARTITION_FIELD_BASE + len(spec["fields"]) - 1,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {
                "schema.name-mapping.default": self._name_mapping(latest.schema_id, every),
                "appendtable.bucket": current_schema.options.get("bucket", "-1"),
            },
            "current-snapshot-id": latest.id,
            "refs": refs,
            "snapshots": entries,
            "snapshot-log": log,
            # Older versions are pruned when snapshots expire: no log of them to follow.
            "metadata-log": [],
        }, new_files

    def _lineage(self, schema_id: int) -> list[TableSchema]:
        """Every schema version up to ``schema_id`` (cached per current schema: the listing
        is done once per schema change)."""
        with self._lock:
            cached = self._lineages.get(schema_id)
        if cached is None:
            ids = [i for i in self._schemas.list_ids() if i <= schema_id]
            cached = [self._schemas.get(i) for i in ids]
            with self._lock:
                self._lineages[schema_id] = cached
        return cached

    def _name_mapping(self, schema_id: int, lineage: list[TableSchema]) -> str:
        with self._lock:
            cached = self._mappings.get(schema_id)
        if cached is None:
            cached = json.dumps(iceberg_metadata.name_mapping(lineage))
            with self._lock:
                self._mappings[schema_id] = cached
        return cached

    def _table_uuid(self) -> str:
        first = self._schemas.get(0)
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"appendtable:{first.time_ms}:{first.fields}"))

    def _listed(
        self, snapshot: Snapshot, *, parents_listed: set[int], rebuild: bool = False
    ) -> _Listed:
        """The snapshot's manifest list (written if absent); ``parents_listed``: the snapshots
        the mirror version this one follows lists; ``rebuild``: every file it references is
        written if absent (else a delete manifest found is trusted to have its Puffin files)."""
        schema = self._schemas.get(snapshot.schema_id)
        types = {f.name: f.type for f in schema.fields}
        partition_types = [types[k] for k in schema.partition_keys]
        build = _Build(snapshot, schema, partition_types, rebuild)
        with self._lock:
            parent = self._states.get(snapshot.parent_id) if snapshot.parent_id else None
        # What the parent's list in the version this one follows references: a prune that
        # read that version or a later one keeps it (see ``prune``).
        parent_infos = (
            [info for _, info in parent.manifests.values() if info is not None]
            if parent is not None and snapshot.parent_id in parents_listed
            else []
        )
        inherited = {info.path for info in parent_infos}
        inherited_vectors = {(p, r.path, r.offset) for i in parent_infos for p, _, r in i.vectors}
        state = None
        if parent is not None and parent.schema_id == schema.id:
            state = self._incremental(build, parent)
        if state is None:
            state = self._from_live_files(build)
        with self._lock:
            self._states[snapshot.id] = state
            while len(self._states) > 8:
                self._states.popitem(last=False)
        infos = [info for _, info in state.manifests.values() if info is not None]
        records = [
            {
                "manifest_path": self._storage.uri(info.path),
                "manifest_length": info.length,
                "partition_spec_id": 0,
                "content": 0,
                "sequence_number": 0,
                "min_sequence_number": 0,
                "added_snapshot_id": info.added_snapshot_id,
                "added_files_count": info.files if info.status == _ADDED else 0,
                "existing_files_count": info.files if info.status == _EXISTING else 0,
                "deleted_files_count": 0,
                "added_rows_count": info.rows if info.status == _ADDED else 0,
                "existing_rows_count": info.rows if info.status == _EXISTING else 0,
                "deleted_rows_count": 0,
                "partitions": info.partitions or None,
                "key_metadata": None,
            }
            for info in infos
        ]
        vectors = [vector for info in infos for vector in info.vectors]
        deletes = self._delete_manifest(build, vectors) if vectors else None
        if deletes is not None:
            records.append(
                {
                    "manifest_path": self._storage.uri(deletes.path),
                    "manifest_length": deletes.length,
                    "partition_spec_id": 0,
                    "content": 1,
                    "sequence_number": 0,
                    "min_sequence_number": 0,
                    "added_snapshot_id": deletes.added_snapshot_id,
                    "added_files_count": deletes.files,
                    "existing_files_count": 0,
                    "deleted_files_count": 0,
                    "added_rows_count": deletes.rows,
                    "existing_rows_count": 0,
                    "deleted_rows_count": 0,
                    "partitions": deletes.partitions or None,
                    "key_metadata": None,
                }
            )
            infos = [*infos, deletes]
        digest = hashlib.sha256(
            "\n".join([self._root, *(i.path for i in infos)]).encode()
        ).hexdigest()[:16]
        path = f"{layout.ICEBERG_DIR}/snap-{snapshot.id}-{digest}.avro"
        body = write_container(
            iceberg_metadata.MANIFEST_LIST_SCHEMA,
            records,
            metadata={
                "snapshot-id": str(snapshot.id),
                "parent-snapshot-id": str(snapshot.parent_id or "null"),
                "sequence-number": str(snapshot.id),
                "format-version": "3" if deletes is not None else "2",
            },
        )
        # in a rebuild, a damaged list (not Avro) is replaced: its name fixes its content
        if not self._storage.put_if_absent(path, body) and rebuild and not self._readable(path):
            self._storage.delete(path)
            self._storage.put_if_absent(path, body)
        puffins = {
            _puffin_path(self._storage.uri(p), ref)
            for p, _, ref in vectors
            if (p, ref.path, ref.offset) not in inherited_vectors
        }
        return _Listed(
            uri=self._storage.uri(path),
            with_deletes=deletes is not None,
            unverified=frozenset({path, *(i.path for i in infos), *puffins} - inherited),
        )

    def _readable(self, path: str) -> bool:
        """Whether the mirror file at ``path`` is an Avro container (not damaged)."""
        try:
            read_header(self._storage.read(path), self._storage.uri(path))
        except CorruptMetadataError:
            return False
        return True

    def _delete_manifest(
        self,
        build: _Build,
        vectors: list[tuple[str, PartitionValues, DeletionVectorRef]],
    ) -> _ManifestInfo:
        """The v3 delete manifest of a snapshot's deletion vectors: one entry per data file
        with a vector, referencing a Puffin file of the mirror holding a copy of the vector's
        blob (Iceberg readers match a blob by its ``referenced-data-file``, which must be the
        data file's URI: the table's own vectors name it relative to the table, so that the
        table can move). Named by a hash of the vectors, so it is written once per set.
        In a rebuild its Puffin files are written again where missing, also when the manifest
        is there (the Puffin files' content is fixed by the vectors, so their sizes and offsets
        in the manifest stay right)."""
        vectors = sorted(vectors, key=lambda v: (v[0], v[2].path, v[2].offset))
        if build.rebuild:
            for data_path, _, ref in vectors:
                data_uri = self._storage.uri(data_path)
                if not self._storage.exists(_puffin_path(data_uri, ref)):
                    self._puffin_copy(data_uri, ref)
        key = hashlib.sha256(
            "\n".join(
                [
                    self._root,
                    str(build.schema.id),
                    *(f"{p}#{r.path}@{r.offset}" for p, _, r in vectors),
                ]
            ).encode()
        ).hexdigest()[:32]
        path = f"{layout.ICEBERG_DIR}/{key}-d0.avro"
        return self._cached_manifest(
            build,
            path,
            lambda: self._write_delete_manifest(path, build, vectors),
            lambda length, added: _ManifestInfo(
                path=path,
                length=length,
                added_snapshot_id=added,
                status=_ADDED,
                files=len(vectors),
                rows=sum(ref.cardinality for _, _, ref in vectors),
                partitions=iceberg_metadata.partition_summary(
                    [p for _, p, _ in vectors], build.partition_types
                ),
            ),
        )

    def _cached_manifest(
        self,
        build: _Build,
        path: str,
        write: Callable[[], bytes],
        describe: Callable[[int, int], _ManifestInfo],
    ) -> _ManifestInfo:
        """The description of the mirror manifest at ``path`` (its names are hashes of what it
        holds, so whatever is there holds the same entries): remembered, else read from the
        store, else written by ``write``; ``describe(length, added_snapshot_id)`` makes it.
        In a rebuild, a damaged file (not Avro) is replaced."""
        with self._lock:
            known = self._known.get(path)
        if known is not None:
            return known
        uri = self._storage.uri(path)
        try:
            data = self._storage.read(path)
            header = read_header(data, uri)
        except ObjectNotFoundError:
            data = write()
            header = read_header(data, uri)
        except CorruptMetadataError:
            if not build.rebuild:
                raise
            self._storage.delete(path)
            data = write()
            header = read_header(data, uri)
        info = describe(len(data), int(header.get("appendtable.snapshot-id", b"0")))
        with self._lock:
            self._known[path] = info
        return info

    def _write_delete_manifest(
        self,
        path: str,
        build: _Build,
        vectors: list[tuple[str, PartitionValues, DeletionVectorRef]],
    ) -> bytes:
        records = []
        for data_path, partition, ref in vectors:
            data_uri = self._storage.uri(data_path)
            puffin, size, offset = self._puffin_copy(data_uri, ref)
            records.append(
                iceberg_metadata.deletion_vector_record(
                    snapshot_id=build.snapshot.id,
                    puffin_uri=self._storage.uri(puffin),
                    puffin_size=size,
                    blob_offset=offset,
                    blob_length=ref.length,
                    data_uri=data_uri,
                    cardinality=ref.cardinality,
                    partition=partition,
                    schema=build.schema,
                    partition_types=build.partition_types,
                )
            )
        spec = iceberg_metadata.partition_spec(build.schema)
        body = write_container(
            iceberg_metadata.manifest_schema(build.schema, build.partition_types, deletes=True),
            records,
            metadata={
                "schema": json.dumps(iceberg_metadata.iceberg_schema(build.schema)),
                "schema-id": str(build.schema.id),
                "partition-spec": json.dumps(spec["fields"]),
                "partition-spec-id": "0",
                "format-version": "3",
                "content": "deletes",
                "appendtable.snapshot-id": str(build.snapshot.id),
            },
        )
        if not self._storage.put_if_absent(path, body):
            return self._storage.read(path)
        return body

    def _puffin_copy(self, data_uri: str, ref: DeletionVectorRef) -> tuple[str, int, int]:
        """The mirror's Puffin file holding the vector ``ref`` of the data file ``data_uri``
        (written if absent): its path, size, and the blob's offset in it."""
        blob = self._storage.read_range(ref.path, ref.offset, ref.length)
        body, offset = iceberg_metadata.puffin_file(
            blob, data_uri=data_uri, cardinality=ref.cardinality
        )
        path = _puffin_path(data_uri, ref)
        self._storage.put_if_absent(path, body)
        return path, len(body), offset

    def _from_live_files(self, build: _Build) -> _ListState:
        """Each manifest's live files, from the snapshot's whole live set (a first
        publish, a rollback, a merge of our manifests, or a schema change)."""
        live = {_identity(e) for e in self._manifests.live_files(build.snapshot)}
        assigned: set[str] = set()
        manifests: dict[str, tuple[frozenset[str], _ManifestInfo | None]] = {}
        for meta in self._manifests.all_manifests(build.snapshot):
            entries = self._manifests.read_manifest(meta.file_name)
            adds = [
                e
                for e in entries
                if e.kind == FileKind.ADD and _identity(e) in live and _identity(e) not in assigned
            ]
            assigned.update(_identity(e) for e in adds)
            gone = frozenset(
                _identity(e) for e in entries if e.kind == FileKind.ADD and _identity(e) not in live
            )
            info = self._manifest(build, meta.file_name, adds, gone) if adds else None
            manifests[meta.file_name] = (gone, info)
        return _ListState(build.schema.id, manifests)

    def _incremental(self, build: _Build, parent: _ListState) -> _ListState | None:
        """The parent's manifests, changed only where this snapshot deleted files, plus its
        own new ones and the merges of ours it wrote: work proportional to the change, not to
        the table. A merged manifest holds files of the parent's manifests, so those the
        parent no longer had live (its ``gone`` sets) or this snapshot deleted are not live.
        None for a rollback (it re-adds files the parent had removed): the live set decides."""
        snapshot = build.snapshot
        if snapshot.last_rollback == snapshot.id:
            return None
        delta_names = {m.file_name for m in self._manifests.read_list(snapshot.delta_manifest_list)}
        deleted = {
            _identity(e)
            for e in self._manifests.delta_entries(snapshot)
            if e.kind == FileKind.DELETE
        }
        manifests: dict[str, tuple[frozenset[str], _ManifestInfo | None]] = {}
        removed: frozenset[str] | None = None
        for meta in self._manifests.all_manifests(snapshot):
            name = meta.file_name
            known = parent.manifests.get(name)
            if known is not None:
                gone, info = known
                if deleted and info is not None:
                    adds = self._adds(name)
                    newly = {_identity(e) for e in adds if _identity(e) in deleted}
                    if newly:
                        gone = gone | newly
                        remaining = [e for e in adds if _identity(e) not in gone]
                        info = self._manifest(build, name, remaining, gone) if remaining else None
                manifests[name] = (gone, info)
            elif name in delta_names:
                adds = [e for e in self._adds(name) if _identity(e) not in deleted]
                info = self._manifest(build, name, adds, frozenset()) if adds else None
                manifests[name] = (frozenset(), info)
            else:  # a merge of the parent's manifests
                if removed is None:
                    removed = frozenset().union(*(g for g, _ in parent.manifests.values()))
                    removed |= deleted
                adds = self._adds(name)
                gone = frozenset(_identity(e) for e in adds if _identity(e) in removed)
                remaining = [e for e in adds if _identity(e) not in gone]
                info = self._manifest(build, name, remaining, gone) if remaining else None
                manifests[name] = (gone, info)
        return _ListState(build.schema.id, manifests)

    def _adds(self, name: str) -> list[ManifestEntry]:
        return [e for e in self._manifests.read_manifest(name) if e.kind == FileKind.ADD]

    def _manifest(
        self,
        build: _Build,
        source: str,
        adds: list[ManifestEntry],
        gone: frozenset[str],
    ) -> _ManifestInfo:
        snapshot, schema, partition_types = build.snapshot, build.schema, build.partition_types
        key = hashlib.sha256(
            "\n".join([self._root, source, str(schema.id), *sorted(gone)]).encode()
        ).hexdigest()[:32]
        path = f"{layout.ICEBERG_DIR}/{key}-m0.avro"
        return self._cached_manifest(
            build,
            path,
            lambda: self._write_manifest(path, snapshot, schema, partition_types, adds, bool(gone)),
            lambda length, added: _ManifestInfo(
                path=path,
                length=length,
                added_snapshot_id=added,
                status=_EXISTING if gone else _ADDED,
                files=len(adds),
                rows=sum(e.file.row_count for e in adds),
                partitions=iceberg_metadata.partition_summary(
                    [e.partition for e in adds], partition_types
                ),
                vectors=tuple(
                    (e.file.path, e.partition, e.file.deletion)
                    for e in adds
                    if e.file.deletion is not None
                ),
            ),
        )

    def _write_manifest(
        self,
        path: str,
        snapshot: Snapshot,
        schema: TableSchema,
        partition_types: list[TypeSpec],
        adds: list[ManifestEntry],
        rewritten: bool,
    ) -> bytes:
        layouts: dict[int, dict[str, int | None]] = {}
        records = []
        for entry in adds:
            positions = layouts.get(entry.file.schema_id)
            if positions is None:
                file_schema = self._schemas.get(entry.file.schema_id)
                positions = layouts[entry.file.schema_id] = stats_positions(
                    file_schema.fields, schema.fields
                )
            records.append(
                iceberg_metadata.data_file_record(
                    status=_EXISTING if rewritten else _ADDED,
                    snapshot_id=snapshot.id,
                    uri=self._storage.uri(entry.file.path),
                    file=entry.file,
                    partition=entry.partition,
                    schema=schema,
                    partition_types=partition_types,
                    stats_positions=positions,
                )
            )
        spec = iceberg_metadata.partition_spec(schema)
        body = write_container(
            iceberg_metadata.manifest_schema(schema, partition_types),
            records,
            metadata={
                "schema": json.dumps(iceberg_metadata.iceberg_schema(schema)),
                "schema-id": str(schema.id),
                "partition-spec": json.dumps(spec["fields"]),
                "partition-spec-id": "0",
                "format-version": "2",
                "content": "data",
                "appendtable.snapshot-id": str(snapshot.id),
            },
        )
        if not self._storage.put_if_absent(path, body):
            return self._storage.read(path)  # written meanwhile, by another mirror writer
        return body

    # ---- pruning ----------------------------------------------------------------------------

    def referenced(self) -> set[str] | None:
        """Paths (relative to the table) the newest mirror uses, or None without a mirror."""
        for _ in range(_ATTEMPTS):
            version = self.current_version()
            if version is None:
                return None
            try:
                return self._referenced_by(version)
            except ObjectNotFoundError:
                continue  # pruned meanwhile (by another prune): a newer version is there
        raise CommitConflictError("the Iceberg mirror kept changing under this read; retry")

    def _referenced_by(self, version: int, only: set[int] | None = None) -> set[str]:
        """The mirror files version ``version`` uses (with ``only``: the files of those
        snapshot ids), each a path under ``metadata/`` (CorruptMetadataError naming the
        metadata file for any other: it is never read or deleted)."""
        metadata = self._read_metadata(version)
        source = self._storage.uri(layout.iceberg_metadata_path(version))
        # A wrong root only makes every path fail the check below (refused, never deleted).
        root = self._storage.uri("").rstrip("/") + "/"  # pragma: no mutate
        found = {layout.iceberg_metadata_path(version)} if only is None else set()
        for snapshot in _snapshot_entries(metadata, source):
            if only is not None and snapshot.get("snapshot-id") not in only:
                continue
            list_uri = snapshot.get("manifest-list")
            list_path = _mirror_path(list_uri, root, source)
            found.add(list_path)
            try:
                data = self._storage.read(list_path)
            except ObjectNotFoundError:
                continue
            _, records = read_container(data, self._storage.uri(list_path))
            for record in records:
                manifest = _mirror_path(
                    record.get("manifest_path"), root, self._storage.uri(list_path)
                )
                found.add(manifest)
                if record.get("content") == 1:
                    found.update(self._delete_files(manifest, root))
        return found

    def _delete_files(self, manifest: str, root: str) -> set[str]:
        """The mirror's Puffin files a delete manifest references."""
        try:
            data = self._storage.read(manifest)
        except ObjectNotFoundError:
            return set()
        uri = self._storage.uri(manifest)
        _, records = read_container(data, uri)
        found = set()
        for record in records:
            data_file = record.get("data_file")
            path = data_file.get("file_path") if isinstance(data_file, dict) else None
            found.add(_mirror_path(path, root, uri))
        return found

    def files_in_use(self, *, except_snapshots: frozenset[int] = frozenset()) -> set[str]:
        """Every mirror file a metadata version so far uses, less those of the current
        version's snapshots ``except_snapshots`` (appendtable ids): what republishing the
        mirror with only those snapshots kept lets ``prune`` delete."""
        version = self.current_version()
        found: set[str] = set()
        if version is None:
            return found
        for listed in (self._version_of(n) for n in self._storage.listnames(layout.ICEBERG_DIR)):
            if listed is None or listed > version:
                continue
            try:
                found |= self._referenced_by(listed)
            except (ObjectNotFoundError, CorruptMetadataError):
                continue  # pruned meanwhile, or not this table's: prune leaves it too
        if except_snapshots:
            found -= self._referenced_by(version, only=set(except_snapshots))
        return found

    def prune(self, max_snapshots: int) -> list[str]:
        """Delete older metadata versions and the mirror files only they use (they list
        snapshots that expired, whose data files are about to be deleted). Files no version
        uses (a mirror write in flight, or one that crashed) are left to orphan removal, which
        waits until they are old. Returns what it deleted.

        A mirror writer may publish, meanwhile, a version reusing a file this deletes (mirror
        files are named by their content, and writers remember what they wrote). Whichever
        comes first, that version is written again with the file (``publish`` with
        ``rebuild``, keeping ``max_snapshots``): published before this prune reads the
        current version again, after its deletions, the prune sees it; published after, its
        writer finds the file gone when it checks, after publishing, the files its new
        snapshots reference."""
        version = self.current_version()
        if version is None:
            return []
        try:
            keep = self._referenced_by(version)
        except ObjectNotFoundError:
            return []  # pruned meanwhile: another prune is doing this work
        deleted: set[str] = set()
        listed = (self._version_of(name) for name in self._storage.listnames(layout.ICEBERG_DIR))
        # (the current version itself would delete nothing: "<=" is an equivalent mutant)
        older_versions = [v for v in listed if v is not None and v < version]  # pragma: no mutate
        for older in sorted(older_versions):
            try:
                used = self._referenced_by(older)
            except ObjectNotFoundError:
                continue
            except CorruptMetadataError:
                # it names files that are not this table's mirror files (a moved table, or a
                # hostile file): none of them is touched, only the version file itself goes
                used = {layout.iceberg_metadata_path(older)}
            # each once: a file a writer wrote again meanwhile is not deleted a second time
            for path in sorted(used - keep - deleted):
                try:
                    self._storage.delete(path)
                except ObjectNotFoundError:
                    pass
                deleted.add(path)
        # Forgotten, so that this handle writes them again if a rollback brings one back (a
        # delete manifest is named by its vectors); remembered, the check after publishing
        # would find it gone and rebuild: slower, not wrong (an equivalent mutant).
        with self._lock:
            for path in deleted:
                self._known.pop(path, None)  # pragma: no mutate
        self.rewrite_if_used(deleted, since=version, max_snapshots=max_snapshots)
        return sorted(deleted)

    def rewrite_if_used(self, deleted: set[str], *, since: int, max_snapshots: int) -> None:
        """After deleting the mirror files ``deleted``: if a version published after version
        ``since`` uses one of them (a writer wrote it again, or reused it, meanwhile), write
        the next version anew, re-creating them (``publish`` with ``rebuild``)."""
        if deleted and deleted & self._used_after(since):
            self.publish(max_snapshots, rebuild=True)

    def _used_after(self, version: int) -> set[str]:
        """The mirror files the versions published after ``version`` use."""
        used: set[str] = set()
        newest = self.current_version() or version
        for newer in range(version + 1, newest + 1):
            try:
                used |= self._referenced_by(newer)
            except (ObjectNotFoundError, CorruptMetadataError):
                continue  # pruned meanwhile by another prune, or not this table's
        return used


def _snapshot_entries(metadata: object, source: str) -> list[dict[str, Any]]:
    snapshots = metadata.get("snapshots", []) if isinstance(metadata, dict) else None
    if not isinstance(snapshots, list) or not all(isinstance(s, dict) for s in snapshots):
        raise CorruptMetadataError(f"{source} has no list of snapshots", path=source)
    return snapshots


def _mirror_path(uri: object, root: str, source: str) -> str:
    """The path under ``metadata/`` of a mirror file named (as a URI) in ``source``."""
    text = uri if isinstance(uri, str) else ""
    relative = text[len(root) :] if text.startswith(root) else None
    if (
        relative is None
        or path_problem(relative) is not None
        or not relative.startswith(f"{layout.ICEBERG_DIR}/")
    ):
        raise CorruptMetadataError(
            f"Iceberg metadata file {source} names {str(uri)[:200]!r}, which is not a mirror "
            f"file of this table (under {root}{layout.ICEBERG_DIR}/); it is neither read nor "
            "deleted",
            path=source,
        )
    return relative
