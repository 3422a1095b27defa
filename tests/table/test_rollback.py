"""Rollback restores data and nothing else: the current schema and options stay (unless the
caller asks for the snapshot's schema with ``restore_schema=True``), restored files are read by
field id under the current schema, files that lack a column the current schema requires are
refused, and the Iceberg mirror never goes on describing rows the table no longer has."""

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

MIRROR = {"metadata.iceberg.storage": "table-location"}
PAYLOAD = pa.struct([("x", pa.int16()), ("y", pa.string())])
SCHEMA = pa.schema(
    [
        ("id", pa.int32()),
        ("name", pa.string()),
        ("gone", pa.string()),
        ("payload", PAYLOAD),
    ]
)


def _rows(start: int, count: int) -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "name": [f"n{i}" for i in ids],
            "gone": [f"g{i}" for i in ids],
            "payload": pa.array(
                [None if i % 4 == 3 else {"x": i % 7, "y": f"y{i}"} for i in ids], PAYLOAD
            ),
        },
        schema=SCHEMA,
    )


def _by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def _iceberg_rows(location: str) -> list[dict[str, Any]]:
    return _by_id(StaticTable.from_metadata(location).scan().to_arrow().to_pylist())


def _newest_metadata(table: at.Table) -> str:
    """The newest mirror metadata file on disk (whether or not the mirror is still on)."""
    versions = sorted(
        (Path(table.uri) / "metadata").glob("v*.metadata.json"),
        key=lambda p: int(p.name[1:].split(".")[0]),
    )
    return str(versions[-1])


def test_rollback_keeps_the_options_set_after_the_target(tmp_path: Path) -> None:
    """Retention raised and the mirror turned on after the tag survive a rollback to it, and
    the mirror follows the rollback at once."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(_rows(0, 5))
    table.create_tag("before")
    tagged = table.scan().to_arrow().to_pylist()
    table.set_options({"snapshot.num-retained.min": 500, **MIRROR})
    table.append(_rows(5, 3))
    rolled = table.rollback_to(tag="before")
    assert table.option("snapshot.num-retained.min") == 500
    assert table.option("metadata.iceberg.storage") == "table-location"
    assert table.options == {"snapshot.num-retained.min": "500", **MIRROR}
    location = table.iceberg_metadata_location()
    assert location is not None
    assert StaticTable.from_metadata(location).metadata.current_snapshot_id == rolled.id
    assert _iceberg_rows(location) == _by_id(tagged)
    after = table.append(_rows(100, 2))
    assert after is not None
    expected = _by_id(tagged + _rows(100, 2).to_pylist())
    assert _by_id(table.scan().to_arrow().to_pylist()) == expected
    location = table.iceberg_metadata_location()
    assert location is not None
    assert StaticTable.from_metadata(location).metadata.current_snapshot_id == after.id
    assert _iceberg_rows(location) == expected


def test_restored_files_are_read_by_field_id_under_the_current_schema(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=MIRROR)
    original = _rows(0, 12)
    table.append(original.slice(0, 6))
    table.append(original.slice(6))
    table.create_tag("v1")
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.update_column("id", type=pa.int64())
        update.drop_column("gone")
        update.add_column("country", pa.string())
        update.add_column("payload.z", pa.float64())
        update.rename_column("payload.y", "w")
    schema = table.schema
    schema_id = table.schema_id
    later = pa.table(
        {
            "id": pa.array([100], pa.int64()),
            "label": ["late"],
            "payload": [{"x": 1, "w": "late", "z": 0.5}],
            "country": ["DE"],
        }
    ).select(schema.names)
    table.append(later.cast(schema))
    table.rollback_to(tag="v1")
    assert table.schema == schema and table.schema_id == schema_id
    # The tag's rows as the current schema names them, built from the data written.
    expected = _by_id(
        [
            {
                "id": row["id"],
                "label": row["name"],
                "payload": None
                if row["payload"] is None
                else {"x": row["payload"]["x"], "w": row["payload"]["y"], "z": None},
                "country": None,
            }
            for row in original.to_pylist()
        ]
    )
    ours = table.scan().to_arrow()
    assert ours.schema == schema
    assert _by_id(ours.to_pylist()) == expected
    # Filters name the current columns and prune with the restored files' statistics.
    assert table.scan(filter=[("label", "=", "n7")]).to_arrow().column("id").to_pylist() == [7]
    assert table.scan(filter=[("id", ">", 99)]).plan() == []
    location = table.iceberg_metadata_location()
    assert location is not None
    theirs = StaticTable.from_metadata(location).scan().to_arrow()
    assert theirs.column_names == schema.names
    assert _by_id(theirs.to_pylist()) == expected
    # Compaction rewrites the restored files in the current schema, rows unchanged.
    table.compact(full=True)
    assert _by_id(table.scan().to_arrow().to_pylist()) == expected


def test_files_lacking_a_now_required_column_are_refused(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(_rows(0, 4))
    table.create_tag("full")
    table.overwrite(SCHEMA.empty_table())  # empty: a required column may be added
    with table.update_schema() as update:
        update.add_column("must", pa.int32(), nullable=False)
    table.append(_rows(10, 2).append_column("must", pa.array([1, 2], pa.int32())))
    latest = table.latest_snapshot()
    assert latest is not None
    before = table.scan().to_arrow()
    with pytest.raises(at.SchemaMismatchError, match=r"'must'.*restore_schema=True") as raised:
        table.rollback_to(tag="full")
    assert raised.value.column == "must"
    latest_after = table.latest_snapshot()
    assert latest_after is not None and latest_after.id == latest.id  # nothing committed
    assert table.scan().to_arrow().equals(before)
    # Taking the snapshot's schema again is the explicit way back.
    table.rollback_to(tag="full", restore_schema=True)
    assert table.schema == SCHEMA
    assert _by_id(table.scan().to_arrow().to_pylist()) == _by_id(_rows(0, 4).to_pylist())


def test_a_required_struct_field_added_later_is_refused_too(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(_rows(0, 4))
    first = table.latest_snapshot()
    assert first is not None
    table.overwrite(SCHEMA.empty_table())
    with table.update_schema() as update:
        update.add_column("payload.need", pa.int8(), nullable=False)
    with pytest.raises(at.SchemaMismatchError, match=r"'payload\.need'"):
        table.rollback_to(first.id)


def test_restore_schema_brings_back_the_columns_and_options_of_the_target(
    tmp_path: Path,
) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options={"target-file-size": "64mb"})
    first = table.append(_rows(0, 3))
    assert first is not None
    table.set_options({"target-file-size": "256mb"})
    with table.update_schema() as update:
        update.add_column("extra", pa.float64())
    table.rollback_to(first.id, restore_schema=True)
    assert table.schema == SCHEMA
    assert table.schema_id == first.schema_id
    assert table.options == {"target-file-size": "64mb"}
    assert table.scan().to_arrow().equals(table.scan(snapshot_id=first.id).to_arrow())
    with pytest.raises(at.InvalidArgumentError, match="restore_schema"):
        table.rollback_to(first.id, restore_schema="yes")  # type: ignore[arg-type]


def test_a_rollback_that_turns_the_mirror_off_leaves_it_on_the_rolled_back_rows(
    tmp_path: Path,
) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    first = table.append(_rows(0, 3))
    assert first is not None
    table.set_options(MIRROR)
    table.append(_rows(3, 4))
    assert len(_iceberg_rows(_newest_metadata(table))) == 7
    rolled = table.rollback_to(first.id, restore_schema=True)
    assert table.iceberg_metadata_location() is None  # the snapshot's options: mirror off
    newest = _newest_metadata(table)
    assert json.loads(Path(newest).read_text())["current-snapshot-id"] == rolled.id
    assert _iceberg_rows(newest) == _by_id(_rows(0, 3).to_pylist())


def test_rollback_to_a_snapshot_of_the_current_schema_changes_nothing_else(
    tmp_path: Path,
) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=MIRROR)
    first = table.append(_rows(0, 3))
    table.append(_rows(3, 3))
    assert first is not None
    rolled = table.rollback_to(first.id)
    assert rolled.schema_id == first.schema_id
    assert rolled.properties["rollback-to"] == str(first.id)
    location = table.iceberg_metadata_location()
    assert location is not None
    assert _iceberg_rows(location) == _by_id(_rows(0, 3).to_pylist())


def test_expiring_a_rollback_keeps_the_files_it_restored(tmp_path: Path) -> None:
    """Files deleted by a compaction and brought back by a rollback, both expired together,
    are still live in the snapshot expiration keeps (found by the rollback model test)."""
    table = at.create_table(
        str(tmp_path / "t"), SCHEMA, options={"write-only": True, "compaction.min.file-num": 2}
    )
    first = table.append(_rows(0, 2))
    second = table.append(_rows(2, 2))
    assert first is not None and second is not None
    assert table.compact(full=True) is not None  # first's and second's files are deleted
    table.rollback_to(first.id)  # restores first's file
    table.rollback_to(second.id)  # and both again
    table.append(_rows(10, 1))
    result = table.expire_snapshots(retain_min=1, older_than_ms=2**62)
    assert len(result.expired_snapshots) == 5
    expected = _by_id(_rows(0, 4).to_pylist() + _rows(10, 1).to_pylist())
    assert _by_id(table.scan().to_arrow().to_pylist()) == expected
    assert not table.remove_orphan_files(older_than=dt.timedelta(0)).files


def _no_missing_mirror_file(location: str) -> None:
    for snapshot in StaticTable.from_metadata(location).metadata.snapshots:
        _, lists = read_container(Path(snapshot.manifest_list).read_bytes())
        for entry in lists:
            assert Path(entry["manifest_path"]).exists(), entry["manifest_path"]


@pytest.mark.parametrize("turn_off", ["unset_options", "rollback"])
def test_a_mirror_turned_on_again_trusts_nothing_written_before(
    tmp_path: Path, turn_off: str
) -> None:
    """While the mirror is off, orphan removal deletes its files (here: some of them, as a
    removal by age would): turned on again, it is written anew, never referencing a file
    that is gone (found by the rollback model test)."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    first = table.append(_rows(0, 2))
    assert first is not None
    table.set_options(MIRROR)
    table.append(_rows(2, 2))
    if turn_off == "rollback":
        table.rollback_to(first.id, restore_schema=True)  # the snapshot's options: off
    else:
        table.unset_options(["metadata.iceberg.storage"])
    assert table.iceberg_metadata_location() is None
    for manifest in (Path(table.uri) / "metadata").glob("*-m0.avro"):
        manifest.unlink()
    table.set_options(MIRROR)
    location = table.iceberg_metadata_location()
    assert location is not None
    _no_missing_mirror_file(location)
    assert _iceberg_rows(location) == _by_id(table.scan().to_arrow().to_pylist())
    # and after orphan removal deleted the whole mirror, in this same process
    table.unset_options(["metadata.iceberg.storage"])
    table.remove_orphan_files(older_than=dt.timedelta(seconds=-1), dry_run=False)
    assert not list((Path(table.uri) / "metadata").glob("*.avro"))
    table.set_options(MIRROR)
    location = table.iceberg_metadata_location()
    assert location is not None
    _no_missing_mirror_file(location)
    assert _iceberg_rows(location) == _by_id(table.scan().to_arrow().to_pylist())
