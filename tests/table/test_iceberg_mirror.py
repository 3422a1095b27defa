"""The Iceberg mirror (option ``metadata.iceberg.storage``), checked with an independent
reader: pyiceberg reads the same rows as ``table.scan()`` for the latest and older retained
snapshots, prunes with its own planner, and keeps agreeing through compaction, overwrite,
rollback, schema changes and expiration; a mirror never references a missing file."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

import appendtable as at
from appendtable.commit.iceberg_mirror import IcebergMirror
from appendtable.metadata.avro import read_container

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

FOREVER = 2**62
SCHEMA = pa.schema(
    [
        pa.field("day", pa.date32()),
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("action", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("score", pa.float32()),
        pa.field("ts", pa.timestamp("ms", tz="UTC")),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int32())),
        pa.field("point", pa.struct([("x", pa.int16()), ("y", pa.float64())])),
    ]
)
MIRROR = {"metadata.iceberg.storage": "table-location"}


def _rows(start: int, count: int, day: dt.date) -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {
            "day": pa.array([day] * count, pa.date32()),
            "user_id": pa.array([i % 9 for i in ids], pa.int64()),
            "action": [f"a{i}" for i in ids],
            "amount": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
            "score": pa.array([None if i % 5 == 0 else i * 0.5 for i in ids], pa.float32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i) for i in ids],
                pa.timestamp("ms", tz="UTC"),
            ),
            "tags": [[f"t{i}", "x"] for i in ids],
            "attrs": pa.array([[("k", i)] for i in ids], pa.map_(pa.string(), pa.int32())),
            "point": [{"x": i, "y": i / 2} for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(tmp_path: Path) -> at.Table:
    return at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        partition_by=["day"],
        options={"bucket": 2, "bucket-key": "user_id", "write-only": True, **MIRROR},
    )


def _iceberg(table: at.Table) -> StaticTable:
    location = table.iceberg_metadata_location()
    assert location is not None
    return StaticTable.from_metadata(location)


def _normal(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows comparable across readers: maps as sorted pairs, timestamps as UTC instants."""

    def value(v: Any) -> Any:
        if isinstance(v, dict):
            return tuple(sorted((k, value(x)) for k, x in v.items()))
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.UTC)
        return v

    return sorted((tuple((k, value(v)) for k, v in sorted(r.items())) for r in rows), key=repr)


def _agree(table: at.Table, snapshot_id: int | None = None) -> None:
    """pyiceberg and the table read the same columns and rows for a snapshot."""
    theirs = _iceberg(table).scan(snapshot_id=snapshot_id).to_arrow()
    ours = table.scan(snapshot_id=snapshot_id).to_arrow()
    assert theirs.column_names == ours.column_names
    assert theirs.num_rows == ours.num_rows
    assert _normal(theirs.to_pylist()) == _normal(ours.to_pylist())


def _no_dangling_reference(table: at.Table) -> None:
    """Every metadata file of the mirror references only files that exist."""
    root = Path(table.uri)
    for metadata_file in sorted((root / "metadata").glob("v*.metadata.json")):
        metadata = json.loads(metadata_file.read_text())
        for snapshot in metadata["snapshots"]:
            manifest_list = Path(snapshot["manifest-list"])
            assert manifest_list.exists(), (metadata_file.name, manifest_list)
            _, lists = read_container(manifest_list.read_bytes())
            for entry in lists:
                manifest = Path(entry["manifest_path"])
                assert manifest.exists(), (metadata_file.name, manifest)
                _, files = read_container(manifest.read_bytes())
                for record in files:
                    assert Path(record["data_file"]["file_path"]).exists()


def test_pyiceberg_reads_what_the_table_holds_through_every_kind_of_change(
    table: at.Table,
) -> None:
    day1, day2, day3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
    first = table.append(_rows(0, 20, day1))
    table.append(_rows(20, 20, day2))
    assert first is not None
    _agree(table)
    _agree(table, snapshot_id=first.id)
    table.compact(full=True)
    _agree(table)
    table.overwrite(_rows(100, 5, day2), partitions=[{"day": day2}])
    _agree(table)
    with table.update_schema() as update:
        update.rename_column("action", "event")
        update.add_column("country", pa.string())
        update.update_column("score", type=pa.float64())
        update.drop_column("tags")
    renamed = (
        _rows(200, 6, day3)
        .drop_columns(["tags"])
        .rename_columns(["day", "user_id", "event", "amount", "score", "ts", "attrs", "point"])
    )
    renamed = renamed.set_column(4, "score", renamed.column("score").cast(pa.float64()))
    table.append(renamed.append_column("country", pa.array(["DE"] * 6)))
    _agree(table)
    _agree(table, snapshot_id=first.id)  # the old schema, old names
    assert _iceberg(table).scan(snapshot_id=first.id).to_arrow().column_names == SCHEMA.names
    rolled = table.rollback_to(first.id)
    _agree(table)
    assert _iceberg(table).metadata.current_snapshot_id == rolled.id
    assert [s.snapshot_id for s in _iceberg(table).metadata.snapshots] == [
        s.id for s in table.snapshots()
    ]
    _no_dangling_reference(table)


def test_pyiceberg_prunes_partitions_and_files_with_its_own_planner(table: at.Table) -> None:
    for index, day in enumerate([dt.date(2024, 1, d) for d in (1, 2, 3)]):
        table.append(_rows(index * 30, 30, day))
    iceberg = _iceberg(table)
    all_files = list(iceberg.scan().plan_files())
    assert len(all_files) == len(table.files())
    one_day = list(iceberg.scan(row_filter="day = '2024-01-02'").plan_files())
    assert 0 < len(one_day) < len(all_files)
    assert all("day=2024-01-02" in task.file.file_path for task in one_day)
    # Statistics: user_id ranges per bucket file, so an impossible value prunes everything.
    assert list(iceberg.scan(row_filter="user_id > 100").plan_files()) == []
    assert list(iceberg.scan(row_filter="action = 'zzz'").plan_files()) == []
    rows = iceberg.scan(row_filter="action = 'a31'").to_arrow()
    assert rows.column("action").to_pylist() == ["a31"]
    assert (
        iceberg.scan(row_filter="score is null").to_arrow().num_rows
        == table.scan(filter=[("score", "is null")]).count()
    )


def test_expiration_drops_snapshots_from_the_mirror_before_their_files(table: at.Table) -> None:
    day = dt.date(2024, 1, 1)
    for i in range(4):
        table.append(_rows(i * 10, 10, day))
    table.compact(full=True)
    table.append(_rows(100, 3, day))
    result = table.expire_snapshots(retain_min=2, retain_max=2, older_than_ms=FOREVER)
    assert result.deleted_data_files
    retained = [s.id for s in table.snapshots()]
    assert [s.snapshot_id for s in _iceberg(table).metadata.snapshots] == retained
    _no_dangling_reference(table)
    _agree(table)
    _agree(table, snapshot_id=retained[0])
    # Only the newest metadata version is left, and nothing unreferenced lingers.
    names = sorted(p.name for p in (Path(table.uri) / "metadata").iterdir())
    assert [n for n in names if n.endswith(".metadata.json")] == [
        Path(table.iceberg_metadata_location() or "").name
    ]
    orphans = table.remove_orphan_files(older_than=dt.timedelta(0))
    assert not [f for f in orphans.files if f.startswith("metadata/")]


@pytest.mark.parametrize(
    ("failure", "traced"),
    [
        (ValueError("injected mirror failure"), True),  # a bug: logged with its traceback
        (at.CommitConflictError("the Iceberg mirror kept changing"), False),  # a race
    ],
)
def test_a_failing_mirror_never_fails_the_commit_and_the_next_one_completes_it(
    table: at.Table,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
    traced: bool,
) -> None:
    day = dt.date(2024, 1, 1)
    table.append(_rows(0, 5, day))

    def broken(self: IcebergMirror, max_snapshots: int = 100, *, rebuild: bool = False) -> None:
        raise failure

    with monkeypatch.context() as patch:
        patch.setattr(IcebergMirror, "publish", broken)
        landed = table.append(_rows(5, 5, day))
        assert landed is not None and table.scan().count() == 10
        assert _iceberg(table).metadata.current_snapshot_id == landed.id - 1  # behind
    (record,) = [r for r in caplog.records if "publishing its Iceberg mirror" in r.message]
    assert str(failure) in record.getMessage()
    assert bool(record.exc_info) is traced
    after = table.append(_rows(10, 5, day))
    assert after is not None
    assert _iceberg(table).metadata.current_snapshot_id == after.id
    _agree(table)


def test_the_mirror_can_be_turned_on_and_off(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["day"])
    table.append(_rows(0, 4, dt.date(2024, 1, 1)))
    assert table.iceberg_metadata_location() is None
    with pytest.raises(at.InvalidOptionError, match=r"metadata\.iceberg\.storage"):
        table.publish_iceberg()
    snapshot = table.set_options(MIRROR)  # mirrored at once, by the ALTER snapshot's commit
    assert snapshot is not None
    assert _iceberg(table).metadata.current_snapshot_id == snapshot.id
    _agree(table)
    table.unset_options(["metadata.iceberg.storage"])
    assert table.iceberg_metadata_location() is None
    orphans = table.remove_orphan_files(older_than=dt.timedelta(seconds=-1), dry_run=False)
    assert any(f.startswith("metadata/") for f in orphans.files)  # off: the mirror is stale


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        (pa.field("h", pa.float16()), "float16"),
        (pa.field("u", pa.uint64()), "uint64"),
        (pa.field("n", pa.timestamp("ns")), "nanosecond"),
        (pa.field("d", pa.duration("s")), "duration"),
        (pa.field("nested", pa.list_(pa.uint64())), "uint64"),
    ],
)
def test_types_without_an_iceberg_type_are_refused_naming_the_column(
    tmp_path: Path, field: pa.Field, reason: str
) -> None:
    schema = pa.schema([("a", pa.int64()), field])
    with pytest.raises(at.InvalidSchemaError, match=f"'{field.name}'.*{reason}"):
        at.create_table(str(tmp_path / "t"), schema, options=MIRROR)
    table = at.create_table(str(tmp_path / "u"), schema)
    with pytest.raises(at.InvalidSchemaError, match=f"'{field.name}'"):
        table.set_options(MIRROR)
    with pytest.raises(at.InvalidSchemaError, match="'late'"):
        ok = at.create_table(str(tmp_path / "v"), pa.schema([("a", pa.int64())]), options=MIRROR)
        with ok.update_schema() as update:
            update.add_column("late", pa.uint64())


@pytest.mark.parametrize(
    ("fields", "column", "full_name"),
    [
        ([("page", pa.struct([("url", pa.string())])), ("page.url", pa.string())], "page.url",
         "page.url"),
        ([("tags.element", pa.int64()), ("tags", pa.list_(pa.int64()))], "tags", "tags.element"),
        ([("m", pa.map_(pa.string(), pa.int64())), ("m.value", pa.int64())], "m.value",
         "m.value"),
        ([("a", pa.struct([("b.c", pa.int64()), ("b", pa.struct([("c", pa.int64())]))]))], "a",
         "a.b.c"),
    ],
)  # fmt: skip
def test_two_fields_of_one_full_iceberg_name_are_refused_naming_the_column(
    tmp_path: Path, fields: list[tuple[str, pa.DataType]], column: str, full_name: str
) -> None:
    """Iceberg readers refuse a schema whose fields' dotted full names clash (found by a
    docs-only hunt with python.md's own dotted-name example): pyiceberg failed with "multiple
    fields for name page.url". The mirror refuses such a schema as it refuses a type."""
    schema = pa.schema([("id", pa.int64()), *fields])
    with pytest.raises(at.InvalidSchemaError, match=re.escape(f"field '{full_name}'")) as raised:
        at.create_table(str(tmp_path / "t"), schema, options=MIRROR)
    assert raised.value.column == column
    table = at.create_table(str(tmp_path / "u"), schema)  # without the mirror: allowed
    with pytest.raises(at.InvalidSchemaError, match="cannot be mirrored"):
        table.set_options(MIRROR)


def test_the_mirror_carries_field_ids_partition_spec_and_name_mapping(table: at.Table) -> None:
    table.append(_rows(0, 3, dt.date(2024, 1, 1)))
    with table.update_schema() as update:
        update.rename_column("action", "event")
    metadata = _iceberg(table).metadata
    schema = metadata.schema()
    assert [f.field_id for f in schema.fields] == [f.id for f in table._state.schema.fields]
    assert schema.find_field("event").field_id == 3
    spec = metadata.spec()
    assert [(f.name, str(f.transform), f.source_id) for f in spec.fields] == [
        ("day", "identity", 1)
    ]
    mapping = json.loads(metadata.properties["schema.name-mapping.default"])
    assert {"field-id": 3, "names": ["action", "event"]} in mapping


@pytest.mark.s3
def test_pyiceberg_reads_the_mirror_on_s3(seaweedfs: Any) -> None:
    uri = seaweedfs.uri(f"iceberg-{dt.datetime.now().timestamp():.0f}")
    table = at.create_table(
        uri,
        SCHEMA,
        partition_by=["day"],
        options={"bucket": 2, "bucket-key": "user_id", **MIRROR},
        storage_options=seaweedfs.storage_options,
    )
    first = table.append(_rows(0, 10, dt.date(2024, 1, 1)))
    table.append(_rows(10, 10, dt.date(2024, 1, 2)))
    table.append(_rows(20, 10, dt.date(2024, 1, 2)))
    table.append(_rows(30, 10, dt.date(2024, 1, 2)))
    with table.update_schema() as update:
        update.rename_column("action", "event")
    table.expire_snapshots(retain_min=3, retain_max=3, older_than_ms=FOREVER)
    location = table.iceberg_metadata_location()
    assert location is not None and location.startswith("s3://")
    iceberg = StaticTable.from_metadata(
        location,
        properties={
            "s3.endpoint": seaweedfs.endpoint_url,
            "s3.access-key-id": seaweedfs.key,
            "s3.secret-access-key": seaweedfs.secret,
            "s3.region": seaweedfs.region,
        },
    )
    theirs = iceberg.scan().to_arrow()
    ours = table.scan().to_arrow()
    assert _normal(theirs.to_pylist()) == _normal(ours.to_pylist())
    assert [s.snapshot_id for s in iceberg.metadata.snapshots] == [s.id for s in table.snapshots()]
    assert first is not None and first.id not in [s.snapshot_id for s in iceberg.metadata.snapshots]
    day = list(iceberg.scan(row_filter="day = '2024-01-02'").plan_files())
    assert day and all("day=2024-01-02" in t.file.file_path for t in day)


def test_new_data_files_carry_parquet_field_ids(tmp_path: Path) -> None:
    """A dropped and re-added name means two field ids; files carry their ids, so pyiceberg
    reads each file's 'x' as the right column (a name mapping alone could not tell)."""
    schema = pa.schema([("k", pa.int64()), ("x", pa.string())])
    table = at.create_table(str(tmp_path / "t"), schema, options=MIRROR)
    table.append(pa.table({"k": [1], "x": ["old"]}, schema=schema))
    with table.update_schema() as update:
        update.drop_column("x")
    with table.update_schema() as update:
        update.add_column("x", pa.string())
    table.append(pa.table({"k": [2], "x": ["new"]}, schema=schema))
    for path in table.files().column("uri").to_pylist():
        ids = [f.metadata[b"PARQUET:field_id"] for f in pq.read_schema(path)]
        assert ids[0] == b"1"
    ours = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["k"])
    assert ours == [{"k": 1, "x": None}, {"k": 2, "x": "new"}]
    theirs = sorted(_iceberg(table).scan().to_arrow().to_pylist(), key=lambda r: r["k"])
    assert theirs == ours


def _iceberg_files(location: str, snapshot_id: int | None = None) -> list[str]:
    scan = StaticTable.from_metadata(location).scan(snapshot_id=snapshot_id)
    return sorted(task.file.file_path for task in scan.plan_files())


def test_random_operations_keep_the_mirror_exact(tmp_path: Path) -> None:
    """Appends, compactions, overwrites and expirations in a random order: after each one the
    mirror holds exactly the live files (built incrementally from the previous snapshot's
    manifests), and a mirror rebuilt from scratch by a fresh handle agrees."""
    import random

    rng = random.Random(7)
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        partition_by=["day"],
        options={
            "bucket": 2,
            "bucket-key": "user_id",
            "compaction.min.file-num": 2,
            "snapshot.num-retained.min": 3,
            "snapshot.time-retained": "1 ms",
            "manifest.merge-min-count": 2,  # our manifests merge often: the mirror follows
            # expirations after every commit prune older mirror versions: inline, so that none
            # is pruned between reading the location and opening it
            "commit.maintenance": "inline",
            **MIRROR,
        },
    )
    days = [dt.date(2024, 1, d) for d in (1, 2, 3)]
    start = 0
    for _ in range(60):
        op = rng.choice(
            ["append", "append", "append", "compact", "overwrite", "expire", "rollback"]
        )
        if op == "append":
            table.append(_rows(start, rng.randint(1, 6), rng.choice(days)))
            start += 10
        elif op == "compact":
            table.compact(full=True)
        elif op == "overwrite":
            day = rng.choice(days)
            table.overwrite(_rows(start, 2, day), partitions=[{"day": day}])
            start += 10
        elif op == "rollback":
            retained = [s.id for s in table.snapshots()]
            table.rollback_to(rng.choice(retained))
        else:
            table.expire_snapshots()
        location = table.iceberg_metadata_location()
        assert location is not None
        ours = sorted(table.files().column("uri").to_pylist())
        assert _iceberg_files(location) == ours, op
    _agree(table)
    _no_dangling_reference(table)
    # A fresh handle (no cache) builds the newest list from the live files: same files.
    latest = table.latest_snapshot()
    assert latest is not None
    fresh = IcebergMirror(
        table._state.storage, table._state.snapshots, table._state.manifests, table._state.schemas
    )
    for snapshot in table.snapshots():
        rebuilt = fresh._listed(snapshot, parents_listed=set()).uri
        _, lists = read_container(Path(rebuilt).read_bytes())
        files = []
        for entry in lists:
            _, manifest = read_container(Path(entry["manifest_path"]).read_bytes())
            files.extend(r["data_file"]["file_path"] for r in manifest)
        expected = sorted(table.files(snapshot.id).column("uri").to_pylist())
        assert sorted(files) == expected


def test_partition_values_of_every_kind_read_and_prune_in_pyiceberg(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("i8", pa.int8()),
            ("flag", pa.bool_()),
            ("name", pa.string()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("price", pa.decimal128(9, 3)),
            ("v", pa.int64()),
        ]
    )
    keys = ["i8", "flag", "name", "at", "price"]
    table = at.create_table(str(tmp_path / "t"), schema, partition_by=keys, options=MIRROR)
    moment = dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)
    data = pa.table(
        {
            "i8": pa.array([-3, 4, None], pa.int8()),
            "flag": [True, False, None],
            "name": ["a b/c", "é", None],
            "at": pa.array([moment, moment + dt.timedelta(days=1), None], schema.field("at").type),
            "price": pa.array(
                [decimal.Decimal("-1.500"), decimal.Decimal("2.250"), None], pa.decimal128(9, 3)
            ),
            "v": [1, 2, 3],
        },
        schema=schema,
    )
    table.append(data)
    iceberg = _iceberg(table)
    assert _normal(iceberg.scan().to_arrow().to_pylist()) == _normal(
        table.scan().to_arrow().to_pylist()
    )
    for row_filter, expected in [
        ("i8 = -3", [1]),
        ("flag = false", [2]),
        ("name = 'a b/c'", [1]),
        ("price = -1.500", [1]),
        ("price > 0.000", [2]),
        ("i8 is null", [3]),
    ]:
        tasks = list(iceberg.scan(row_filter=row_filter).plan_files())
        assert len(tasks) == len(expected), row_filter
        got = iceberg.scan(row_filter=row_filter).to_arrow().column("v").to_pylist()
        assert sorted(got) == expected, row_filter


def test_a_damaged_mirror_is_rebuilt_by_a_repair(table: at.Table) -> None:
    for i in range(3):
        table.append(_rows(i * 10, 5, dt.date(2024, 1, 1)))
    metadata_dir = Path(table.uri) / "metadata"
    for manifest in metadata_dir.glob("*-m0.avro"):
        manifest.unlink()  # lost mirror files: the newest metadata now dangles
    fresh = at.open_table(table.uri)
    location = fresh.publish_iceberg(rebuild=True)
    assert location is not None and location == fresh.iceberg_metadata_location()
    _no_dangling_reference_in(Path(location))
    _agree(fresh)


def _no_dangling_reference_in(metadata_file: Path) -> None:
    metadata = json.loads(metadata_file.read_text())
    for snapshot in metadata["snapshots"]:
        _, lists = read_container(Path(snapshot["manifest-list"]).read_bytes())
        for entry in lists:
            assert Path(entry["manifest_path"]).exists()


@pytest.mark.parametrize("maintenance", ["inline", "background"])
def test_the_mirror_follows_automatic_compaction(tmp_path: Path, maintenance: str) -> None:
    options = {
        "bucket": 2,
        "bucket-key": "user_id",
        "full-compaction.delta-commits": 2,
        "commit.maintenance": maintenance,
        **MIRROR,
    }
    with at.create_table(str(tmp_path / "t"), SCHEMA, options=options) as table:
        for start in range(0, 40, 10):
            table.append(_rows(start, 10, dt.date(2024, 1, 1)))
    latest = table.latest_snapshot()
    assert latest is not None and latest.kind == at.CommitKind.COMPACT
    assert _iceberg(table).metadata.current_snapshot_id == latest.id
    _agree(table)


@pytest.mark.parametrize("first", ["repair", "commit"])
@pytest.mark.parametrize("how", ["moved", "copied"])
def test_a_moved_or_copied_table_mirrors_its_own_files(
    tmp_path: Path, how: str, first: str
) -> None:
    """Mirror files hold absolute URIs. Found by a docs-only hunt: after a table was moved,
    its mirror kept naming the old location's files (new versions reused the copied manifests,
    and ``--repair`` too), so pyiceberg failed with FileNotFoundError; a copy's mirror silently
    read the original's files. A mirror of another location is now written anew: by a repair
    (mirror file names include the location), or by the next commit alone (the newest
    metadata.json names another location)."""
    source, target = tmp_path / "source", tmp_path / "target"
    table = at.create_table(
        str(source), pa.schema([("id", pa.int64())]), options={**MIRROR, "write-only": True}
    )
    table.append(pa.table({"id": [1, 2, 3]}))
    table.append(pa.table({"id": [4, 5]}))
    table.delete([("id", "=", 2)])
    table.close()
    shutil.copytree(source, target)
    if how == "moved":
        shutil.rmtree(source)
    else:
        original = at.open_table(str(source))
        original.append(pa.table({"id": [100]}))  # the original goes on: its files are its own

    def files_named(location: str) -> set[str]:
        scanned = StaticTable.from_metadata(location).scan().plan_files()
        return {task.file.file_path for task in scanned}

    moved = at.open_table(str(target))
    if first == "repair":
        repaired = moved.publish_iceberg(rebuild=True)  # a repair with nothing new to publish
        assert repaired is not None and repaired.startswith(str(target))
        assert all(path.startswith(str(target)) for path in files_named(repaired))
        assert _ids(StaticTable.from_metadata(repaired)) == [1, 3, 4, 5]
    moved.append(pa.table({"id": [6]}))
    moved.publish_iceberg()
    location = moved.iceberg_metadata_location()
    assert location is not None and location.startswith(str(target))
    mirror = StaticTable.from_metadata(location)
    assert _ids(mirror) == [1, 3, 4, 5, 6]
    for snapshot in moved.snapshots():  # time travel through the mirror, at every snapshot
        expected = sorted(moved.scan(snapshot_id=snapshot.id).to_arrow()["id"].to_pylist())
        assert _ids(mirror, snapshot.id) == expected
        manifest_list = mirror.metadata.snapshot_by_id(snapshot.id)
        assert manifest_list is not None
        assert manifest_list.manifest_list.startswith(str(target))
    assert all(path.startswith(str(target)) for path in files_named(location))


def _ids(mirror: StaticTable, snapshot_id: int | None = None) -> list[int]:
    return sorted(mirror.scan(snapshot_id=snapshot_id).to_arrow()["id"].to_pylist())
