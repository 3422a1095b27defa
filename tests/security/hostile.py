"""Hostile tables, made with the project's own encoders: metadata naming paths outside the table
(``..``, absolute, other schemes), links to outside directories, cycles, duplicates and huge
values, next to canary files outside the table that every operation must leave byte-identical.

``Place`` is one temporary directory: ``t/`` (the table) and, outside it, ``outside/`` (canaries:
a real Parquet file of the table's schema, so that reading it would succeed, and a text file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pyarrow.parquet as pq

import appendtable as at
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.commit.snapshots import flush_hints
from appendtable.metadata import codec
from appendtable.metadata.models import Manifest, ManifestList, Snapshot, TableSchema
from tests.helpers.data import EVENTS, events

__all__ = ["CASES", "Place", "deadline", "make_base", "tree"]

FUTURE = 10**15
OPTIONS = {
    "write-only": True,
    "bucket": 2,
    "bucket-key": "key",
    "metadata.iceberg.storage": "table-location",
}


@dataclass(frozen=True)
class Place:
    """A table ``root`` and the ``outside`` directory of canaries beside it."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "t"

    @property
    def outside(self) -> Path:
        return self.base / "outside"

    @property
    def victim(self) -> Path:
        return self.outside / "victims" / "v1.parquet"

    def outside_tree(self) -> dict[str, str]:
        """Every file and link of the place except the table, with a hash of its bytes."""
        return {k: v for k, v in tree(self.base).items() if not k.startswith("t/")}


def tree(root: Path) -> dict[str, str]:
    flush_hints()
    found = {}
    for directory, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(directory, name)
            relative = str(path.relative_to(root))
            if path.is_symlink():
                found[relative] = "-> " + os.readlink(path)
            elif path.is_file():
                found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[relative] = "dir"
    return found


def make_base(base: Path) -> Place:
    """A partitioned, bucketed table with the Iceberg mirror, four appends, a compaction and a
    tag, and the canaries outside it."""
    place = Place(base)
    table = at.create_table(str(place.root), EVENTS, partition_by=["day"], options=OPTIONS)
    for i in range(4):
        table.append(events(i * 10, 10))
    table.create_tag("t2", 2)
    table.compact(full=True)
    table.append(events(40, 10))
    table.close()
    place.victim.parent.mkdir(parents=True)
    pq.write_table(events(1000, 5), place.victim)  # would read as rows of the table
    (place.outside / "victims" / "v1.txt").write_text("canary")
    (place.outside / "linked").mkdir()
    flush_hints()
    return place


# ---- rewriting metadata with the project's encoders ----------------------------------------


def _read(path: Path, type_: type, kind: codec.Kind) -> object:
    return codec.decode(path.read_bytes(), type_, kind, str(path))


def _write(path: Path, obj: msgspec.Struct, kind: codec.Kind) -> None:
    path.write_bytes(codec.encode(obj, kind))
    clear_metadata_caches()


def latest(place: Place) -> int:
    return max(
        int(n.split("-")[1])
        for n in os.listdir(place.root / "snapshot")
        if n.startswith("snapshot-")
    )


def _snapshot(place: Place, snapshot_id: int | None = None) -> tuple[Path, Snapshot]:
    path = place.root / "snapshot" / f"snapshot-{snapshot_id or latest(place)}"
    return path, _read(path, Snapshot, codec.Kind.SNAPSHOT)  # type: ignore[return-value]


def edit_snapshot(place: Place, snapshot_id: int | None = None, **changes: object) -> None:
    path, snapshot = _snapshot(place, snapshot_id)
    _write(path, msgspec.structs.replace(snapshot, **changes), codec.Kind.SNAPSHOT)


def _delta_manifest(place: Place) -> tuple[Path, Manifest]:
    _, snapshot = _snapshot(place)
    listing = _read(
        place.root / "manifest" / snapshot.delta_manifest_list,
        ManifestList,
        codec.Kind.MANIFEST_LIST,
    )
    name = listing.manifests[0].file_name  # type: ignore[attr-defined]
    path = place.root / "manifest" / name
    return path, _read(path, Manifest, codec.Kind.MANIFEST)  # type: ignore[return-value]


def edit_first_entry_path(place: Place, path_of: Callable[[Place], str]) -> None:
    path, manifest = _delta_manifest(place)
    entries = list(manifest.entries)
    entry = entries[0]
    entries[0] = msgspec.structs.replace(
        entry, file=msgspec.structs.replace(entry.file, path=path_of(place))
    )
    _write(path, Manifest(entries), codec.Kind.MANIFEST)


def repeat_entries(place: Place, times: int) -> None:
    path, manifest = _delta_manifest(place)
    _write(path, Manifest(list(manifest.entries) * times), codec.Kind.MANIFEST)


def edit_delta_list(place: Place, edit: Callable[[list[object]], list[object]]) -> None:
    _, snapshot = _snapshot(place)
    path = place.root / "manifest" / snapshot.delta_manifest_list
    listing = _read(path, ManifestList, codec.Kind.MANIFEST_LIST)
    _write(path, ManifestList(edit(list(listing.manifests))), codec.Kind.MANIFEST_LIST)  # type: ignore[attr-defined,arg-type]


def rename_listed_manifest(place: Place, name: str) -> None:
    edit_delta_list(place, lambda ms: [msgspec.structs.replace(ms[0], file_name=name), *ms[1:]])  # type: ignore[type-var]


def edit_schema_options(place: Place, **options: str) -> None:
    path = place.root / "schema" / "schema-0"
    schema = _read(path, TableSchema, codec.Kind.SCHEMA)
    _write(
        path,
        msgspec.structs.replace(schema, options={**schema.options, **options}),
        codec.Kind.SCHEMA,
    )  # type: ignore[attr-defined]


def link_partition(place: Place) -> None:
    """A partition directory replaced by a link to an outside copy of it."""
    partition = sorted(n for n in os.listdir(place.root) if n.startswith("day="))[0]
    shutil.copytree(place.root / partition, place.outside / "linked" / partition)
    shutil.rmtree(place.root / partition)
    os.symlink(place.outside / "linked" / partition, place.root / partition)


def link_snapshot_dir(place: Place) -> None:
    shutil.copytree(place.root / "snapshot", place.outside / "linked" / "snapshot")
    shutil.rmtree(place.root / "snapshot")
    os.symlink(place.outside / "linked" / "snapshot", place.root / "snapshot")


def link_staging(place: Place) -> None:
    (place.root / "_staging").mkdir(exist_ok=True)
    os.symlink(place.outside / "victims", place.root / "_staging" / "abandoned")


def mirror_outside(place: Place) -> None:
    """The oldest Iceberg version names outside files (by ``..`` and absolutely)."""
    path = place.root / "metadata" / "v1.metadata.json"
    metadata = json.loads(path.read_text())
    first = metadata["snapshots"][0]
    metadata["snapshots"] = [
        {**first, "manifest-list": f"{place.root}/metadata/../../outside/victims/v1.txt"},
        {**first, "snapshot-id": 77, "manifest-list": str(place.victim)},
    ]
    path.write_text(json.dumps(metadata))


def nested_and_user_files(place: Place) -> None:
    inner = at.create_table(str(place.base / "inner-made"), EVENTS)
    inner.append(events(0, 3))
    inner.close()
    shutil.move(str(place.base / "inner-made"), str(place.root / "day=2099-01-01"))
    (place.root / "README.md").write_text("the user's notes")
    (place.root / "manifest" / "notes.txt").write_text("mine")


#: name -> (how the table is damaged, what a scan must raise, or None when a scan may succeed)
CASES: dict[str, tuple[Callable[[Place], None], type[Exception] | None]] = {
    "entry-dotdot": (
        lambda p: edit_first_entry_path(p, lambda q: "../outside/victims/v1.parquet"),
        at.CorruptMetadataError,
    ),
    "entry-dotdot-inside": (
        lambda p: edit_first_entry_path(p, lambda q: "day=x/../../outside/victims/v1.parquet"),
        at.CorruptMetadataError,
    ),
    "entry-absolute": (
        lambda p: edit_first_entry_path(p, lambda q: str(q.victim)),
        at.CorruptMetadataError,
    ),
    "entry-scheme": (
        lambda p: edit_first_entry_path(p, lambda q: f"file://{q.victim}"),
        at.CorruptMetadataError,
    ),
    "entry-s3": (
        lambda p: edit_first_entry_path(p, lambda q: "s3://bucket/victim.parquet"),
        at.CorruptMetadataError,
    ),
    "entry-metadata-dir": (
        lambda p: edit_first_entry_path(p, lambda q: "snapshot/snapshot-1.parquet"),
        at.CorruptMetadataError,
    ),
    "entry-user-file": (
        lambda p: edit_first_entry_path(p, lambda q: "README.md"),
        at.CorruptMetadataError,
    ),
    "entry-nul": (
        lambda p: edit_first_entry_path(p, lambda q: "bucket-0/a\x00.parquet"),
        at.CorruptMetadataError,
    ),
    "entry-huge": (
        lambda p: edit_first_entry_path(p, lambda q: "bucket-0/" + "a" * 100_000 + ".parquet"),
        at.AppendTableError,
    ),
    "manifest-name-dotdot": (
        lambda p: rename_listed_manifest(p, "../../outside/victims/v1.txt"),
        at.CorruptMetadataError,
    ),
    "manifest-name-absolute": (
        lambda p: rename_listed_manifest(p, str(p.outside / "victims" / "v1.txt")),
        at.CorruptMetadataError,
    ),
    "list-name-dotdot": (
        lambda p: edit_snapshot(p, base_manifest_list="../../outside/victims/v1.txt"),
        at.CorruptMetadataError,
    ),
    "users-absolute": (
        lambda p: edit_snapshot(p, commit_users=str(p.outside / "victims" / "v1.txt")),
        at.CorruptMetadataError,
    ),
    "rollback-cycle": (
        lambda p: edit_snapshot(
            p,
            last_rollback=latest(p),
            properties={"previous-rollback": str(latest(p)), "rollback-to": "1"},
        ),
        at.CorruptMetadataError,
    ),
    "rollback-sequence-not-a-number": (
        lambda p: edit_snapshot(p, properties={"rollback-sequence": "../x"}),
        at.CorruptMetadataError,
    ),
    "rollback-sequence-beyond-the-table": (
        lambda p: edit_snapshot(p, properties={"rollback-sequence": str(2**62)}),
        at.CorruptMetadataError,
    ),
    "parent-cycle": (lambda p: edit_snapshot(p, parent_id=latest(p)), at.CorruptMetadataError),
    "parent-huge": (lambda p: edit_snapshot(p, parent_id=2**62), at.CorruptMetadataError),
    "manifest-listed-100k-times": (
        lambda p: edit_delta_list(p, lambda ms: ms * 100_000),
        at.CorruptMetadataError,
    ),
    "entries-repeated": (lambda p: repeat_entries(p, 1000), None),
    "default-name-escape": (
        lambda p: edit_schema_options(
            p, **{"partition.default-name": "../../../../outside/escaped"}
        ),
        None,
    ),
    "linked-partition": (link_partition, at.PathOutsideTableError),
    "linked-snapshot-dir": (link_snapshot_dir, at.PathOutsideTableError),
    "linked-staging": (link_staging, None),
    "mirror-outside": (mirror_outside, None),
    "nested-and-user-files": (nested_and_user_files, None),
}


class Hang(Exception):
    """An operation ran past its time bound."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise ``Hang`` in this (main) thread if the block runs longer than ``seconds``."""

    def expired(_signum: int, _frame: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
