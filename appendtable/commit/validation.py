"""Checks of decoded metadata that a checksum cannot make: what a file names must stay inside
the table, and the chains it links must go back in ids. A file that fails raises
``CorruptMetadataError`` naming it, before anything it names is opened or deleted.

* Data file paths (manifest entries): contained (``storage.containment``), ending in
  ``.parquet`` and outside the table's metadata directories, so that no manifest can make
  maintenance delete a snapshot, schema, manifest or a user's file as if it were a data file.
* Metadata file names (manifest lists, manifests, commit users records): one plain name in
  ``manifest/``; deletion vector files and delete records: ``index/dv-<uuid>.puffin`` and
  ``index/delete-<uuid>``.
* A manifest list names each manifest once, and a snapshot's base and delta lists share none
  (the fold of entries is by path, so a repeated manifest would only repeat work; it is
  refused as damage rather than trusted).
* A snapshot's parent, last rollback and previous rollback are older than it, so every walk
  along them ends.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from appendtable.commit.changes import ROLLBACK_PROPERTY, ROLLBACK_SEQUENCE_PROPERTY
from appendtable.errors import CorruptMetadataError
from appendtable.metadata import layout
from appendtable.metadata.models import ManifestEntry, ManifestFileMeta, Snapshot
from appendtable.storage.containment import path_problem

__all__ = [
    "PREVIOUS_ROLLBACK",
    "check_entries",
    "check_manifest_list",
    "check_snapshot",
    "data_path_problem",
    "metadata_name_problem",
]

PREVIOUS_ROLLBACK = "previous-rollback"
#: Directories of the table's own metadata: never a data file's first component.
RESERVED_DIRS = frozenset(
    {
        layout.SCHEMA_DIR,
        layout.SNAPSHOT_DIR,
        layout.MANIFEST_DIR,
        layout.CONSUMER_DIR,
        layout.TAG_DIR,
        layout.WATERMARK_DIR,
        layout.ICEBERG_DIR,
        layout.INDEX_DIR,
    }
)
_METADATA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}\Z")
_VECTOR_PATH = re.compile(rf"^{layout.INDEX_DIR}/dv-[0-9a-f]{{32}}\.puffin\Z")
_RECORD_PATH = re.compile(rf"^{layout.INDEX_DIR}/delete-[0-9a-f]{{32}}\Z")


def data_path_problem(path: object) -> str | None:
    """Why ``path`` cannot be a data file of the table, or None."""
    problem = path_problem(path)
    if problem is not None:
        return problem
    assert isinstance(path, str)
    if not path.endswith(".parquet"):
        return "not a Parquet file name"
    if path.split("/", 1)[0] in RESERVED_DIRS:
        return "inside the table's metadata directories"
    return None


def metadata_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a file name in ``manifest/``, or None."""
    if not isinstance(name, str) or not _METADATA_NAME.match(name):
        return "not a plain file name"
    return None


def _corrupt(uri: str, what: str, value: object, problem: str) -> CorruptMetadataError:
    shown = repr(value)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    return CorruptMetadataError(
        f"metadata file {uri} names {what} {shown}, refused ({problem}): the file is damaged or "
        "was not written by appendtable, and nothing it names is opened or deleted",
        path=uri,
    )


def _plainly_contained(paths: list[str]) -> bool:
    """True if every path is surely a data file path, False if some may not be: each distinct
    directory is checked by the rule, and the file names all at once (in C: a manifest holds
    up to hundreds of thousands of them, in a few directories)."""
    directories: set[str] = set()
    names: list[str] = []
    for path in paths:
        directory, _, name = path.rpartition("/")
        directories.add(directory)
        names.append(name)
    if any(not d or data_path_problem(f"{d}/x.parquet") is not None for d in directories):
        return False
    joined = "\n" + "\n".join(names) + "\n"
    return (
        joined.count("\n") == len(names) + 1  # no newline inside a name
        and joined.count(".parquet\n") == len(names)
        and "\x00" not in joined
        and "\\" not in joined
        and ":" not in joined
    )


def check_entries(entries: Sequence[ManifestEntry], uri: str) -> None:
    """Every data file path of a manifest's entries is one the table may hold, and every
    deletion vector is in a vector file of ``index/``."""
    for entry in entries:
        vector = entry.file.deletion
        if vector is not None and not (
            isinstance(vector.path, str) and _VECTOR_PATH.match(vector.path)
        ):
            raise _corrupt(uri, "deletion vector file", vector.path, "not a vector file name")
    if _plainly_contained([e.file.path for e in entries]):
        return
    for entry in entries:
        path = entry.file.path
        problem = data_path_problem(path)
        if problem is not None:
            raise _corrupt(uri, "data file", path, problem)


def check_manifest_list(manifests: Iterable[ManifestFileMeta], uri: str) -> None:
    """Plain names, each once."""
    seen: set[str] = set()
    for manifest in manifests:
        name = manifest.file_name
        problem = metadata_name_problem(name)
        if problem is not None:
            raise _corrupt(uri, "manifest", name, problem)
        if name in seen:
            raise _corrupt(uri, "manifest", name, "listed twice")
        seen.add(name)


def check_snapshot(snapshot: Snapshot, uri: str) -> None:
    """The metadata names of a snapshot, and links that go back in ids."""
    for what, name in (
        ("manifest list", snapshot.base_manifest_list),
        ("manifest list", snapshot.delta_manifest_list),
        ("commit users record", snapshot.commit_users),
    ):
        if name is None and what == "commit users record":
            continue
        problem = metadata_name_problem(name)
        if problem is not None:
            raise _corrupt(uri, what, name, problem)
    record = snapshot.delete_record
    if record is not None and not (isinstance(record, str) and _RECORD_PATH.match(record)):
        raise _corrupt(uri, "delete record", record, "not a delete record name")
    if snapshot.id < 1:
        raise _corrupt(uri, "snapshot id", snapshot.id, "ids start at 1")
    if snapshot.parent_id is not None and not 0 < snapshot.parent_id < snapshot.id:
        raise _corrupt(uri, "parent snapshot", snapshot.parent_id, "not older than it")
    rollback = snapshot.last_rollback
    if rollback is not None and not 0 < rollback <= snapshot.id:
        raise _corrupt(uri, "last rollback", rollback, "not at or before it")
    previous = snapshot.properties.get(PREVIOUS_ROLLBACK)
    if previous is not None and (not previous.isdigit() or not 0 < int(previous) < snapshot.id):
        raise _corrupt(uri, "previous rollback", previous, "not an older snapshot id")
    target = snapshot.properties.get(ROLLBACK_PROPERTY)
    if target is not None and (not target.isdigit() or not 0 < int(target) < snapshot.id):
        raise _corrupt(uri, "rollback target", target, "not an older snapshot id")
    sequence = snapshot.properties.get(ROLLBACK_SEQUENCE_PROPERTY)
    if sequence is not None and (not sequence.isdigit() or int(sequence) > snapshot.next_sequence):
        raise _corrupt(uri, "rollback sequence", sequence, "not a sequence number of the table")
