"""Tags in the Iceberg mirror: each tag is a ref of type tag, and its snapshot stays in the
mirror (with its manifest list and manifests) after the table expires it, so pyiceberg reads a
tag's rows exactly as ``scan(tag=)`` does; deleting the tag removes the ref and lets the mirror
drop what only the tag held."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import appendtable as at
from appendtable.metadata.avro import read_container

FOREVER = 2**62
SCHEMA = pa.schema(
    [
        ("day", pa.string()),
        ("k", pa.int64()),
        ("v", pa.string()),
        ("p", pa.struct([("x", pa.int32())])),
    ]
)
MIRROR = {"metadata.iceberg.storage": "table-location"}


def _rows(start: int, count: int, day: str = "mon") -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {
            "day": [day] * count,
            "k": pa.array(ids, pa.int64()),
            "v": [f"v{i}" for i in ids],
            "p": [{"x": i} for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(tmp_path: Path) -> at.Table:
    return at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        partition_by=["day"],
        options={"write-only": True, "metadata.iceberg.max-snapshots": 3, **MIRROR},
    )


def _iceberg(table: at.Table) -> StaticTable:
    location = table.iceberg_metadata_location()
    assert location is not None
    return StaticTable.from_metadata(location)


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["k"])


def _tag_refs(iceberg: StaticTable) -> dict[str, int]:
    return {
        name: ref.snapshot_id
        for name, ref in iceberg.metadata.refs.items()
        if str(ref.snapshot_ref_type) == "tag"
    }


def _agree_on_tags(table: at.Table) -> None:
    """Every tag is a ref of the mirror, and pyiceberg reads the same rows through it."""
    iceberg = _iceberg(table)
    assert _tag_refs(iceberg) == table.tags()
    for name, snapshot_id in table.tags().items():
        snapshot = iceberg.snapshot_by_name(name)
        assert snapshot is not None and snapshot.snapshot_id == snapshot_id
        theirs = iceberg.scan(snapshot_id=snapshot_id).to_arrow()
        ours = table.scan(tag=name).to_arrow()
        assert theirs.column_names == ours.column_names
        assert _sorted(theirs.to_pylist()) == _sorted(ours.to_pylist()), name


def _referenced_mirror_files(table: at.Table) -> set[str]:
    """Every file the newest mirror version references (manifest lists, manifests, data)."""
    iceberg = _iceberg(table)
    found: set[str] = set()
    for snapshot in iceberg.metadata.snapshots:
        found.add(snapshot.manifest_list)
        _, lists = read_container(Path(snapshot.manifest_list).read_bytes())
        for entry in lists:
            found.add(entry["manifest_path"])
            _, files = read_container(Path(entry["manifest_path"]).read_bytes())
            found.update(r["data_file"]["file_path"] for r in files)
    return found


def test_tags_are_refs_and_read_the_same_rows(table: at.Table) -> None:
    first = table.append(_rows(0, 4))
    table.append(_rows(4, 3, "tue"))
    assert first is not None
    table.create_tag("first", first.id)
    table.create_tag("latest")  # the mirror follows at once, without another commit
    iceberg = _iceberg(table)
    assert iceberg.metadata.refs["main"].snapshot_id == iceberg.metadata.current_snapshot_id
    assert str(iceberg.metadata.refs["main"].snapshot_ref_type) == "branch"
    _agree_on_tags(table)


def test_a_tag_outlives_expiration_and_the_mirror_window_in_the_mirror(table: at.Table) -> None:
    first = table.append(_rows(0, 4))
    assert first is not None
    table.create_tag("first")
    table.append(_rows(4, 4))
    table.append(_rows(8, 2, "tue"))
    table.create_tag("second")
    assert table.compact(full=True) is not None  # the tagged files are no longer live
    for start in range(10, 60, 10):
        table.append(_rows(start, 2, "wed"))
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=FOREVER)
    assert [s.id for s in table.snapshots()] == [table.latest_snapshot().id]  # type: ignore[union-attr]
    iceberg = _iceberg(table)
    listed = [s.snapshot_id for s in iceberg.metadata.snapshots]
    assert first.id in listed and table.tags()["second"] in listed
    # main's log has only retained snapshots: tags are not history of main
    assert [e.snapshot_id for e in iceberg.metadata.snapshot_log] == [
        s.id for s in table.snapshots()
    ]
    _agree_on_tags(table)
    # Maintenance keeps every mirror file a tag uses, and every file referenced exists.
    assert not [
        f
        for f in table.remove_orphan_files(older_than=dt.timedelta(0)).files
        if f.startswith("metadata/")
    ]
    assert all(Path(f).exists() for f in _referenced_mirror_files(table))
    # A mirror rebuilt from scratch lists the tags too.
    location = table.publish_iceberg(rebuild=True)
    assert location is not None
    _agree_on_tags(table)


def test_deleting_a_tag_drops_its_ref_and_then_what_only_it_held(table: at.Table) -> None:
    table.append(_rows(0, 5))
    table.append(_rows(5, 5))
    table.create_tag("old")
    tagged = table.tags()["old"]
    assert table.compact(full=True) is not None  # the tag alone holds the two files now
    for start in range(10, 40, 10):
        table.append(_rows(start, 2))
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=FOREVER)
    held = _referenced_mirror_files(table)
    old_list = next(
        s.manifest_list for s in _iceberg(table).metadata.snapshots if s.snapshot_id == tagged
    )
    table.delete_tag("old")
    iceberg = _iceberg(table)
    assert "old" not in iceberg.metadata.refs
    assert tagged not in [s.snapshot_id for s in iceberg.metadata.snapshots]
    # The next expiration frees the tag's data files after the mirror stopped listing them,
    # and the mirror drops the files only the tag's snapshot used.
    result = table.expire_snapshots(retain_min=1, older_than_ms=FOREVER)
    assert result.deleted_data_files
    assert not Path(old_list).exists()
    remaining = _referenced_mirror_files(table)
    assert all(Path(f).exists() for f in remaining)
    assert Path(old_list) not in {Path(f) for f in remaining}
    assert held - remaining
    for metadata_file in (Path(table.uri) / "metadata").glob("v*.metadata.json"):
        listed = [s["snapshot-id"] for s in json.loads(metadata_file.read_text())["snapshots"]]
        assert tagged not in listed, metadata_file.name
    assert _sorted(iceberg.scan().to_arrow().to_pylist()) == _sorted(
        table.scan().to_arrow().to_pylist()
    )


def test_a_tag_named_main_is_refused_with_the_mirror_on(table: at.Table, tmp_path: Path) -> None:
    table.append(_rows(0, 1))
    with pytest.raises(at.InvalidArgumentError, match=r"'main'.*Iceberg"):
        table.create_tag("main")
    assert table.tags() == {}
    # Without the mirror it is an ordinary name; turning the mirror on leaves it out of refs.
    plain = at.create_table(str(tmp_path / "plain"), SCHEMA)
    plain.append(_rows(0, 2))
    plain.append(_rows(2, 2))
    plain.create_tag("main", 1)
    plain.create_tag("other", 1)
    plain.set_options(MIRROR)
    iceberg = _iceberg(plain)
    assert iceberg.metadata.refs["main"].snapshot_id == iceberg.metadata.current_snapshot_id
    assert _tag_refs(iceberg) == {"other": 1}


def test_rollback_to_a_tag_keeps_the_refs(table: at.Table) -> None:
    table.append(_rows(0, 3))
    table.create_tag("good")
    table.append(_rows(3, 3))
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=FOREVER)
    rolled = table.rollback_to(tag="good")
    iceberg = _iceberg(table)
    assert iceberg.metadata.current_snapshot_id == rolled.id
    _agree_on_tags(table)
    assert _sorted(iceberg.scan().to_arrow().to_pylist()) == _sorted(_rows(0, 3).to_pylist())
