"""The check every maintenance test ends with: nothing a retained snapshot, a tag or a rollback
references is gone.

The in-process metadata caches hide deleted manifests (a handle that read a manifest keeps its
decoded copy), so the check clears them and opens the table in a fresh handle; it then reads
every manifest list, manifest and commit-users file of every retained snapshot, tag and deleted
tag awaiting release, and every data file they hold, comparing each file's rows with its
metadata, and scans every retained snapshot and tag. With an Iceberg mirror, every file its
newest version references (manifest lists, manifests, delete manifests, Puffin files) exists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import appendtable as at
from appendtable.after_commit.worker import wait_for_idle
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.commit.snapshots import flush_hints
from appendtable.commit.tags import TagStore
from appendtable.metadata import layout
from appendtable.metadata.avro import read_container
from appendtable.metadata.models import DataFileMeta, Snapshot
from appendtable.storage import Storage

__all__ = ["assert_mirror_intact", "assert_table_intact", "table_roots"]


def assert_table_intact(uri: str, *, storage_options: Mapping[str, Any] | None = None) -> int:
    """Fail unless every file a retained snapshot, tag or released tag references exists and
    reads. Returns the number of data files checked. Waits first for the process's background
    maintenance: a round still running would expire snapshots the check has listed."""
    assert wait_for_idle(timeout=120), "background maintenance did not finish"
    flush_hints()
    clear_metadata_caches()
    table = at.open_table(uri, storage_options=storage_options)
    state = table._state
    storage = state.storage
    retained = [state.snapshots.get(i) for i in state.snapshots.list_ids()]
    tag_store = TagStore(storage)
    tags = tag_store.all()
    held: list[Snapshot] = [*retained, *(t.snapshot for t in tags.values())]
    held.extend(t.snapshot for t in tag_store.released().values())
    files: dict[str, DataFileMeta] = {}
    for snapshot in held:
        names = [snapshot.base_manifest_list, snapshot.delta_manifest_list]
        if snapshot.commit_users is not None:
            names.append(snapshot.commit_users)
        for name in names:
            assert storage.exists(layout.manifest_path(name)), (
                f"snapshot {snapshot.id} names {name}, which is gone"
            )
        for manifest in state.manifests.all_manifests(snapshot):
            assert storage.exists(layout.manifest_path(manifest.file_name)), (
                f"snapshot {snapshot.id} uses manifest {manifest.file_name}, which is gone"
            )
        for entry in state.manifests.live_files(snapshot):
            files[entry.file.path] = entry.file
    for path, meta in sorted(files.items()):
        assert storage.exists(path), f"data file {path} is referenced but gone"
        rows = pq.read_table(pa.BufferReader(storage.read(path))).num_rows
        assert rows == meta.row_count, f"{path}: {rows} rows, metadata says {meta.row_count}"
    for snapshot in retained:
        scan = table.scan(snapshot_id=snapshot.id)
        assert scan.to_arrow().num_rows == scan.count() == snapshot.total_record_count
    for name, tag in tags.items():
        assert table.scan(tag=name).to_arrow().num_rows == tag.snapshot.total_record_count
    assert_mirror_intact(storage)
    return len(files)


def assert_mirror_intact(storage: Storage) -> None:
    """Fail unless every file the newest version of the table's Iceberg mirror references
    exists (nothing to check without a mirror)."""
    versions = [
        int(name.rsplit("/", 1)[-1][1 : -len(".metadata.json")])
        for name in storage.listnames(layout.ICEBERG_DIR)
        if name.rsplit("/", 1)[-1].startswith("v") and name.endswith(".metadata.json")
    ]
    if not versions:
        return
    root = storage.uri("").rstrip("/") + "/"
    newest = layout.iceberg_metadata_path(max(versions))

    def existing(uri: str, named_by: str) -> bytes:
        assert uri.startswith(root), (named_by, uri)
        path = uri[len(root) :]
        assert storage.exists(path), f"{named_by} names {path}, which is gone"
        return storage.read(path)

    for snapshot in json.loads(storage.read(newest))["snapshots"]:
        _, manifests = read_container(existing(snapshot["manifest-list"], newest))
        for manifest in manifests:
            path = manifest["manifest_path"]
            _, entries = read_container(existing(path, snapshot["manifest-list"]))
            if manifest["content"] == 1:  # deletes: each names its Puffin file
                for entry in entries:
                    existing(entry["data_file"]["file_path"], path)


def table_roots(directory: Path) -> Iterator[Path]:
    """Every table below ``directory`` (a directory holding ``schema/schema-0``)."""
    for current, dirs, _files in os.walk(directory):
        if os.path.exists(os.path.join(current, layout.SCHEMA_DIR, "schema-0")):
            dirs[:] = []
            yield Path(current)
