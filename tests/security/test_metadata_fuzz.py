"""Fuzzing the metadata files: bytes flipped, truncated or extended anywhere, and decoded
fields replaced (re-encoded with a valid checksum) by hostile values. Every operation must
answer within a time bound with either an appendtable error or the table's true rows; nothing
outside the table may change, and no file the table's true state needs may be deleted by a
read or a dry run.

The default run is short; ``APPENDTABLE_FUZZ_EXAMPLES=2000`` runs more (under the heavy lock).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import appendtable as at
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.metadata import codec
from appendtable.metadata.models import Manifest, ManifestList, Snapshot, Tag
from tests.security.hostile import FUTURE, Place, deadline, make_base, tree

EXAMPLES = int(os.environ.get("APPENDTABLE_FUZZ_EXAMPLES", "12"))
BOUND_S = 30

HOSTILE_STRINGS = [
    "../outside/victims/v1.parquet",
    "../../outside/victims/v1.txt",
    "/etc/passwd",
    "s3://bucket/key.parquet",
    "file:///tmp/x.parquet",
    "a/../../../x.parquet",
    "",
    ".",
    "..",
    "x\x00y.parquet",
    "schema/schema-0",
    "snapshot/LATEST",
    "README.md",
    "a" * 5000,
    "C:\\x.parquet",
]
HOSTILE_INTS = [0, -1, 1, 2, 3, 2**31, 2**62, -(2**62)]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Place:
    return make_base(tmp_path_factory.mktemp("fuzz-base"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One place for every example: the mirror's files are named after the table's location,
    so a new location per example would change the files (their sizes and order) that
    Hypothesis replays its draws against."""
    return tmp_path_factory.mktemp("fuzz") / "work"


def _metadata_files(root: Path) -> list[Path]:
    found = []
    for directory in ("snapshot", "manifest", "tag", "schema", "metadata"):
        for name in sorted(os.listdir(root / directory)):
            if name not in ("LATEST", "EARLIEST", "version-hint.text"):
                found.append(root / directory / name)
    return found


def _mutate_bytes(data: bytes, draw: st.DataObject) -> bytes:
    how = draw.draw(st.sampled_from(["flip", "truncate", "extend", "zero"]))
    if not data:
        return b"x"
    at_ = draw.draw(st.integers(0, len(data) - 1))
    if how == "flip":
        bit = 1 << draw.draw(st.integers(0, 7))
        return data[:at_] + bytes([data[at_] ^ bit]) + data[at_ + 1 :]
    if how == "truncate":
        return data[:at_]
    if how == "extend":
        return data + draw.draw(st.binary(min_size=1, max_size=16))
    return data[:at_] + b"\x00" * min(8, len(data) - at_) + data[at_ + 8 :]


_FIELD_KIND = {"snapshot": (Snapshot, codec.Kind.SNAPSHOT), "tag": (Tag, codec.Kind.TAG)}


def _hostile_value(current: object, draw: st.DataObject) -> object:
    if isinstance(current, str):
        return draw.draw(st.sampled_from(HOSTILE_STRINGS) | st.text(max_size=20))
    if isinstance(current, bool):
        return not current
    if isinstance(current, int) or current is None:
        return draw.draw(st.sampled_from(HOSTILE_INTS) | st.none())
    if isinstance(current, dict):
        key = draw.draw(
            st.sampled_from(["previous-rollback", "rollback-to", "rollback-sequence", "x"])
        )
        return {**current, key: draw.draw(st.sampled_from([str(i) for i in HOSTILE_INTS] + ["z"]))}
    return current


def _mutate_struct(path: Path, draw: st.DataObject) -> bool:
    """Replace one decoded field of a snapshot, tag, manifest list or manifest by a hostile
    value and re-encode it (a valid checksum). False when the file is of another kind (or
    already damaged by an earlier mutation)."""
    try:
        return _replace_field(path, draw)
    except at.CorruptMetadataError:
        return False


def _replace_field(path: Path, draw: st.DataObject) -> bool:
    directory = path.parent.name
    data = path.read_bytes()
    if directory in ("snapshot", "tag"):
        type_, kind = _FIELD_KIND[directory]
        obj = codec.decode(data, type_, kind, str(path))
        snapshot = obj.snapshot if isinstance(obj, Tag) else obj
        assert isinstance(snapshot, Snapshot)
        field = draw.draw(
            st.sampled_from(
                [
                    "base_manifest_list",
                    "delta_manifest_list",
                    "commit_users",
                    "parent_id",
                    "last_rollback",
                    "properties",
                    "id",
                ]
            )
        )
        changed = msgspec.structs.replace(
            snapshot, **{field: _hostile_value(getattr(snapshot, field), draw)}
        )
        out = msgspec.structs.replace(obj, snapshot=changed) if isinstance(obj, Tag) else changed
    elif path.name.startswith("manifest-list-"):
        obj = codec.decode(data, ManifestList, codec.Kind.MANIFEST_LIST, str(path))
        metas = list(obj.manifests)
        if not metas:
            return False
        index = draw.draw(st.integers(0, len(metas) - 1))
        if draw.draw(st.booleans()):
            metas.append(metas[index])  # a manifest listed twice
        else:
            name = draw.draw(st.sampled_from(HOSTILE_STRINGS))
            metas[index] = msgspec.structs.replace(metas[index], file_name=name)
        kind, out = codec.Kind.MANIFEST_LIST, ManifestList(metas)
    elif path.name.startswith("manifest-"):
        obj = codec.decode(data, Manifest, codec.Kind.MANIFEST, str(path))
        entries = list(obj.entries)
        index = draw.draw(st.integers(0, len(entries) - 1))
        if draw.draw(st.booleans()):
            entries.extend([entries[index]] * draw.draw(st.integers(1, 50)))  # set semantics
        else:
            entry = entries[index]
            hostile = draw.draw(st.sampled_from(HOSTILE_STRINGS))
            file = msgspec.structs.replace(entry.file, path=hostile)
            entries[index] = msgspec.structs.replace(entry, file=file)
        kind, out = codec.Kind.MANIFEST, Manifest(entries)
    else:
        return False
    path.write_bytes(codec.encode(out, kind))
    return True


def _rows(table: at.Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("seq").to_pylist())


def _bounded(operation: Callable[[], object]) -> object:
    clear_metadata_caches()
    with deadline(BOUND_S):
        try:
            return operation()
        except at.AppendTableError as exc:
            return exc


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_metadata_gives_an_error_or_the_true_answer(
    base: Place, scratch: Path, data: st.DataObject
) -> None:
    work = scratch
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base.base, work, symlinks=True)
    place = Place(work)
    # the mirror names the base's location: rebuild it here first
    at.open_table(str(place.root)).publish_iceberg(rebuild=True)
    truth = _rows(at.open_table(str(place.root)))
    files = _metadata_files(place.root)
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from(files))
        if data.draw(st.booleans()) or not _mutate_struct(target, data):
            target.write_bytes(_mutate_bytes(target.read_bytes(), data))
    clear_metadata_caches()
    outside = place.outside_tree()
    inside = tree(place.root)
    uri = str(place.root)

    for answer in (
        _bounded(lambda: _rows(at.open_table(uri))),
        _bounded(lambda: at.open_table(uri).scan().count()),
    ):
        assert isinstance(answer, at.AppendTableError) or answer in (truth, len(truth)), answer
    _bounded(
        lambda: at.open_table(uri).expire_snapshots(
            retain_min=1, older_than_ms=FUTURE, dry_run=True
        )
    )
    _bounded(lambda: at.open_table(uri).remove_orphan_files(older_than=FUTURE, dry_run=True))
    assert tree(place.root) == inside  # reads and dry runs changed nothing
    for operation in (
        lambda: at.open_table(uri).compact(full=True),
        lambda: at.open_table(uri).expire_snapshots(retain_min=1, older_than_ms=FUTURE),
        lambda: at.open_table(uri).remove_orphan_files(older_than=FUTURE, dry_run=False),
        lambda: at.open_table(uri).rollback_to(1),
    ):
        _bounded(operation)
        assert place.outside_tree() == outside
    shutil.rmtree(work)
