"""Table evolution through the public API: schema changes read by field id, refusals that leave
nothing behind, pruning across versions, time travel in the snapshot's schema, writers and
streams that span a change, option changes, and merge-mode writes."""

from __future__ import annotations

import datetime as dt
import math
import time
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

import appendtable as at
from appendtable.datafiles.arrow_schema import type_spec
from appendtable.metadata.types import FieldSpec, TypeSpec
from appendtable.planning.schema_changes import AddColumn, apply_changes, fields_by_id, is_widening

DAY1, DAY2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
SCHEMA = pa.schema(
    [
        pa.field("day", pa.date32()),
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("action", pa.string()),
        pa.field("clicks", pa.int32()),
        pa.field("amount", pa.float32()),
        pa.field("legacy", pa.string()),
        pa.field("payload", pa.struct([("x", pa.int64()), ("tag", pa.string())])),
    ]
)


def _rows(start: int, count: int, *, day: dt.date = DAY1) -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {
            "day": pa.array([day] * count, pa.date32()),
            "user_id": pa.array([i % 7 for i in ids], pa.int64()),
            "action": [f"a{i}" for i in ids],
            "clicks": pa.array(list(ids), pa.int32()),
            "amount": pa.array([i * 0.5 for i in ids], pa.float32()),
            "legacy": [f"l{i}" for i in ids],
            "payload": [{"x": i, "tag": f"t{i}"} for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(uri: str) -> at.Table:
    return at.create_table(
        uri,
        SCHEMA,
        partition_by=["day"],
        options={"bucket": 2, "bucket-key": "user_id", "write-only": True},
    )


def _by_clicks(table: pa.Table) -> list[dict[str, object]]:
    return table.sort_by("clicks").to_pylist()


def test_every_kind_of_change_reads_old_files_by_field_id(table: at.Table) -> None:
    table.append(_rows(0, 10))
    data_files = table.files().column("path").to_pylist()
    with table.update_schema() as update:
        update.add_column("country", pa.string(), after="action", doc="ISO 3166")
        update.rename_column("amount", "amount_eur")
        update.drop_column("legacy")
        update.update_column("clicks", type=pa.int64())
        update.add_column("payload.score", pa.int32())
        update.rename_column("payload.x", "id")
        update.drop_column("payload.tag")
        update.update_column("user_id", nullable=True)
        update.move_first("action")
    assert table.schema == pa.schema(
        [
            pa.field("action", pa.string()),
            pa.field("day", pa.date32()),
            pa.field("user_id", pa.int64()),
            pa.field("country", pa.string()),
            pa.field("clicks", pa.int64()),
            pa.field("amount_eur", pa.float32()),
            pa.field("payload", pa.struct([("id", pa.int64()), ("score", pa.int32())])),
        ]
    )
    assert table.files().column("path").to_pylist() == data_files  # nothing rewritten
    rows = _by_clicks(table.scan().to_arrow())
    assert rows == [
        {
            "action": f"a{i}",
            "day": DAY1,
            "user_id": i % 7,
            "country": None,
            "clicks": i,
            "amount_eur": i * 0.5,
            "payload": {"id": i, "score": None},
        }
        for i in range(10)
    ]
    # The doc is kept in the schema version (and so in the Arrow field metadata or history).
    history = table.schema_history()
    assert history.column("current").to_pylist() == [False, True]


def test_new_rows_and_old_rows_read_together_in_bucket_order(table: at.Table) -> None:
    table.append(_rows(0, 6))
    with table.update_schema() as update:
        update.add_column("country", pa.string())
        update.rename_column("action", "event")
    new = table.scan().to_arrow().slice(0, 0)
    rows = pa.table(
        {
            "day": pa.array([DAY1] * 4, pa.date32()),
            "user_id": pa.array([0, 1, 2, 3], pa.int64()),
            "event": ["e0", "e1", "e2", "e3"],
            "clicks": pa.array([100, 101, 102, 103], pa.int32()),
            "amount": pa.array([1.0, 2.0, 3.0, 4.0], pa.float32()),
            "legacy": ["x"] * 4,
            "payload": [{"x": 1, "tag": "t"}] * 4,
            "country": ["DE", "FR", None, "IT"],
        }
    ).select(new.column_names)
    table.append(rows)
    result = table.scan().to_arrow()
    assert result.num_rows == 10
    # Per bucket, the old file's rows come before the new file's rows.
    for split in table.scan().plan():
        clicks = [r["clicks"] for b in table.read(split) for r in b.to_pylist()]
        assert clicks == sorted(clicks)
    countries = {r["clicks"]: r["country"] for r in result.to_pylist()}
    assert countries == {**dict.fromkeys(range(6)), 100: "DE", 101: "FR", 102: None, 103: "IT"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda u: u.drop_column("day"), "partition column"),
        (lambda u: u.rename_column("day", "d"), "partition column"),
        (lambda u: u.update_column("day", type=pa.timestamp("us")), "partition column"),
        (lambda u: u.drop_column("user_id"), "bucket-key"),
        (lambda u: u.update_column("user_id", type=pa.float64()), "bucket-key"),
        (lambda u: u.update_column("clicks", type=pa.int16()), "clicks"),
        (lambda u: u.update_column("amount", type=pa.int64()), "amount"),
        (lambda u: u.update_column("action", type=pa.binary()), "action"),
        (lambda u: u.add_column("action", pa.string()), "action"),
        (lambda u: u.add_column("payload.x", pa.string()), "payload.x"),
        (lambda u: u.rename_column("action", "clicks"), "clicks"),
        (lambda u: u.drop_column("nope"), "nope"),
        (lambda u: u.add_column("new", pa.int32(), nullable=False), "required"),
        (lambda u: u.update_column("action", nullable=False), "action"),
        (lambda u: u.add_column("payload.x.deeper", pa.int32()), "payload.x"),
    ],
)
def test_a_refused_change_names_the_column_and_lands_nothing(
    table: at.Table, change: object, message: str
) -> None:
    table.append(_rows(0, 3))
    before = (table.schema_id, table.schema, table.latest_snapshot())
    with pytest.raises(at.InvalidSchemaError, match=message), table.update_schema() as update:
        update.add_column("fine", pa.int64())  # a valid change in the same batch
        change(update)  # type: ignore[operator]
    assert (table.schema_id, table.schema, table.latest_snapshot()) == before
    assert table.scan().count() == 3


def test_the_widenings_allowed_and_only_those() -> None:
    def spec(dtype: pa.DataType) -> TypeSpec:
        return type_spec(dtype)

    allowed = [
        (pa.int8(), pa.int16()),
        (pa.int16(), pa.int64()),
        (pa.int32(), pa.int64()),
        (pa.uint8(), pa.uint32()),
        (pa.uint16(), pa.int32()),
        (pa.float32(), pa.float64()),
        (pa.decimal128(10, 2), pa.decimal128(12, 2)),
        (pa.string(), pa.large_string()),
        (pa.binary(), pa.large_binary()),
    ]
    refused = [
        (pa.int64(), pa.int32()),
        (pa.int32(), pa.float64()),
        (pa.uint32(), pa.int32()),
        (pa.decimal128(10, 2), pa.decimal128(12, 3)),
        (pa.decimal128(10, 2), pa.decimal128(9, 2)),
        (pa.date32(), pa.timestamp("us")),
        (pa.string(), pa.binary()),
        (pa.float64(), pa.float32()),
    ]
    for old, new in allowed:
        assert is_widening(spec(old), spec(new)), (old, new)
    for old, new in refused:
        assert not is_widening(spec(old), spec(new)), (old, new)


def test_renaming_a_bucket_key_column_updates_the_option(table: at.Table) -> None:
    table.append(_rows(0, 14))
    with table.update_schema() as update:
        update.rename_column("user_id", "uid")
    assert table.option("bucket-key") == ("uid",)
    assert at.open_table(table.uri).bucket_key == ["uid"]
    # Bucket pruning still finds every row of a key, in old and new files.
    table.append(
        _rows(100, 7).rename_columns(["day", "uid", *SCHEMA.names[2:]])  # type: ignore[list-item]
    )
    for key in range(7):
        found = table.scan(filter=[("uid", "=", key)]).to_arrow()
        assert found.num_rows == 3  # twice in the old file(s), once in the new


def test_adding_a_required_column_is_allowed_only_while_empty(table: at.Table) -> None:
    with table.update_schema() as update:
        update.add_column("must", pa.int64(), nullable=False)
    assert not table.schema.field("must").nullable
    with pytest.raises(at.SchemaMismatchError, match="must"):
        table.append(_rows(0, 2))  # the data lacks a required column
    assert table.latest_snapshot().kind == at.CommitKind.ALTER  # type: ignore[union-attr]


def test_filters_prune_by_field_id_across_versions(table: at.Table) -> None:
    table.append(_rows(0, 10))  # clicks 0..9 under the old name
    with table.update_schema() as update:
        update.rename_column("clicks", "hits")
        update.add_column("country", pa.string())
    new = _rows(50, 10).rename_columns([*SCHEMA.names[:3], "hits", *SCHEMA.names[4:]])
    table.append(new.append_column("country", pa.array(["DE"] * 10)))
    old_files = set(table.files(1).column("path").to_pylist())

    def files_of(filter: object) -> set[str]:
        return {f.path for s in table.scan(filter=filter).plan() for f in s.files}

    # A filter on the renamed column uses the old files' statistics (by id).
    assert files_of([("hits", "<", 5)]) == old_files
    assert table.scan(filter=[("hits", "<", 5)]).count() == 5
    assert not files_of([("hits", ">", 40)]) & old_files
    # A filter on the added column: old files hold only nulls.
    assert not files_of([("country", "=", "DE")]) & old_files
    assert table.scan(filter=[("country", "=", "DE")]).count() == 10
    assert files_of([("country", "is null")]) == old_files
    assert table.scan(filter=[("country", "is null")]).count() == 10
    assert table.scan(filter=[("country", "is not null")]).count() == 10


def test_time_travel_returns_the_schema_the_snapshot_had(table: at.Table) -> None:
    first = table.append(_rows(0, 4))
    assert first is not None
    time.sleep(0.01)  # time travel by timestamp needs the change in a later millisecond
    with table.update_schema() as update:
        update.rename_column("action", "event")
        update.drop_column("legacy")
        update.update_column("amount", type=pa.float64())
    table.append(
        _rows(10, 2)
        .drop_columns(["legacy"])
        .rename_columns(["day", "user_id", "event", "clicks", "amount", "payload"])
    )
    old = table.scan(snapshot_id=first.id)
    assert old.output_schema == SCHEMA
    assert _by_clicks(old.to_arrow()) == _by_clicks(_rows(0, 4))
    assert table.scan(timestamp_ms=first.time_ms).output_schema == SCHEMA
    # Splits carry their schema: an engine reading them gets the same columns.
    batches = [b for s in old.plan() for b in table.read(s)]
    assert all(b.schema.names == SCHEMA.names for b in batches)
    # Filters and projections use the snapshot's names.
    assert table.scan(snapshot_id=first.id, filter=[("legacy", "=", "l1")]).count() == 1
    with pytest.raises(at.InvalidFilterError, match="legacy"):
        table.scan(filter=[("legacy", "=", "l1")])
    assert table.scan().to_arrow().schema.field("amount").type == pa.float64()


def test_a_writer_prepared_under_an_older_schema_still_commits(table: at.Table) -> None:
    writer = table.writer()
    writer.write(_rows(0, 5))
    messages = writer.prepare_commit()
    with table.update_schema() as update:
        update.add_column("country", pa.string())
        update.rename_column("action", "event")
    table.committer().commit(messages)
    rows = _by_clicks(table.scan().to_arrow())
    assert [r["event"] for r in rows] == [f"a{i}" for i in range(5)]
    assert all(r["country"] is None for r in rows)
    schema_ids = {f.schema_id for s in table.scan().plan() for f in s.files}
    assert schema_ids == {0}  # the files keep the schema they were written with


def test_a_writer_prepared_before_a_required_column_cannot_commit(uri: str) -> None:
    table = at.create_table(uri, pa.schema([("a", pa.int64())]))
    writer = table.writer()
    writer.write(pa.table({"a": [1]}))
    messages = writer.prepare_commit()
    with table.update_schema() as update:
        update.add_column("b", pa.int64(), nullable=False)
    with pytest.raises(at.SchemaMismatchError, match="'b'"):
        table.committer().commit(messages)
    assert table.scan().count() == 0


def test_compaction_merges_files_of_several_versions_in_order(table: at.Table) -> None:
    table.append(_rows(0, 7))
    with table.update_schema() as update:
        update.update_column("clicks", type=pa.int64())
        update.add_column("country", pa.string())
    table.append(
        _rows(7, 7)
        .cast(SCHEMA.set(3, pa.field("clicks", pa.int64())))
        .append_column("country", pa.array(["X"] * 7))
    )
    with table.update_schema() as update:
        update.drop_column("legacy")
    table.append(
        _rows(14, 7)
        .cast(SCHEMA.set(3, pa.field("clicks", pa.int64())))
        .drop_columns(["legacy"])
        .append_column("country", pa.array(["Y"] * 7))
    )
    before = table.scan().to_arrow()
    assert table.compact(full=True) is not None
    files = [f for s in table.scan().plan() for f in s.files]
    assert {f.schema_id for f in files} == {table.schema_id}
    for split in table.scan().plan():
        clicks = [r["clicks"] for b in table.read(split) for r in b.to_pylist()]
        assert clicks == sorted(clicks)  # write order within each bucket survives
    assert _by_clicks(table.scan().to_arrow()) == _by_clicks(before)


def test_a_stream_keeps_its_start_schema_and_a_new_one_sees_the_change(table: at.Table) -> None:
    table.append(_rows(0, 3))
    early = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="early")
    assert early.poll() is not None
    early.commit()
    with table.update_schema() as update:
        update.rename_column("action", "event")
        update.add_column("country", pa.string())
        update.drop_column("legacy")
    table.append(
        _rows(3, 3)
        .drop_columns(["legacy"])
        .rename_columns(["day", "user_id", "event", "clicks", "amount", "payload"])
        .append_column("country", pa.array(["DE"] * 3))
    )
    rows = [r for b in early.batches(timeout=0) for r in b.to_pylist()]
    assert sorted(r["clicks"] for r in rows) == [3, 4, 5]
    assert all(set(r) == set(SCHEMA.names) for r in rows)  # the start schema
    assert {r["action"] for r in rows} == {"a3", "a4", "a5"}  # renamed: mapped by id
    assert {r["legacy"] for r in rows} == {None}  # dropped later: null
    # A consumer restarted after the change resumes exactly where it was, in the new schema.
    resumed = table.stream(consumer_id="early")
    again = [r for b in resumed.batches(timeout=0) for r in b.to_pylist()]
    assert sorted(r["clicks"] for r in again) == [3, 4, 5]
    assert {r["country"] for r in again} == {"DE"}
    late = table.stream(mode="from-snapshot", snapshot_id=1)
    all_rows = [r for b in late.batches(timeout=0) for r in b.to_pylist()]
    assert sorted(r["clicks"] for r in all_rows) == list(range(6))
    assert sorted((r["clicks"], r["country"]) for r in all_rows)[:3] == [
        (0, None),
        (1, None),
        (2, None),
    ]


def test_alter_snapshots_carry_no_rows(table: at.Table) -> None:
    table.append(_rows(0, 2))
    snapshot = table.set_options({"target-file-size": "32mb"})
    assert snapshot is not None and snapshot.kind == at.CommitKind.ALTER
    assert snapshot.delta_record_count == 0 and snapshot.total_record_count == 2
    assert table.set_options({"target-file-size": "32mb"}) is None  # nothing changed
    assert table.history().column("kind").to_pylist() == ["APPEND", "ALTER"]


def test_option_changes_are_validated_and_layout_options_refused(table: at.Table) -> None:
    with pytest.raises(at.InvalidOptionError, match="bucket"):
        table.set_options({"bucket": 4})
    with pytest.raises(at.InvalidOptionError, match="bucket-key"):
        table.set_options({"bucket-key": "action"})
    with pytest.raises(at.InvalidOptionError, match=r"partition.default-name"):
        table.set_options({"partition.default-name": "x"})
    with pytest.raises(at.InvalidOptionError, match=r"metadata.stats-mode"):
        table.set_options({"metadata.stats-mode": "full"})
    with pytest.raises(at.InvalidOptionError, match="target-file-size"):
        table.set_options({"target-file-size": "lots"})
    with pytest.raises(at.InvalidOptionError, match="did you mean"):
        table.set_options({"target-file-sise": "1mb"})
    with pytest.raises(at.InvalidSchemaError, match="watermark column"):
        table.set_options({"watermark.column": "action"})
    assert table.latest_snapshot() is None and table.schema_id == 0
    table.set_options({"watermark.column": "clicks", "snapshot.num-retained.min": 3})
    assert table.option("snapshot.num-retained.min") == 3
    table.unset_options(["snapshot.num-retained.min"])
    assert table.option("snapshot.num-retained.min") == 10
    assert "watermark.column" in table.options


def test_option_changes_take_effect_on_the_next_commit_of_every_handle(uri: str) -> None:
    writer_handle = at.create_table(uri, pa.schema([("a", pa.int64())]))
    admin = at.open_table(uri)
    for i in range(3):
        writer_handle.append(pa.table({"a": [i]}))
    assert writer_handle.latest_snapshot().kind == at.CommitKind.APPEND  # type: ignore[union-attr]
    # Turn on aggressive compaction through another handle: the writer's next commit compacts.
    admin.set_options({"compaction.min.file-num": 2, "write-only": False})
    writer_handle.append(pa.table({"a": [3]}))
    assert writer_handle.wait_for_maintenance(timeout=60)
    kinds = writer_handle.history().column("kind").to_pylist()
    assert kinds[-1] == "COMPACT", kinds
    admin.set_options({"write-only": True})
    writer_handle.append(pa.table({"a": [4]}))
    assert writer_handle.history().column("kind").to_pylist()[-1] == "APPEND"
    assert sorted(writer_handle.scan().to_arrow().column("a").to_pylist()) == [0, 1, 2, 3, 4]


def test_merge_mode_adds_new_columns_and_fills_missing_ones(table: at.Table) -> None:
    table.append(_rows(0, 2))
    extra = _rows(2, 2).drop_columns(["legacy"]).append_column("country", pa.array(["DE", "FR"]))
    with pytest.raises(at.SchemaMismatchError, match="country"):
        table.append(extra)
    assert table.scan().count() == 2 and table.schema_id == 0
    table.append(extra, schema_mode="merge")
    assert table.schema.names == [*SCHEMA.names, "country"]
    rows = _by_clicks(table.scan().to_arrow())
    assert [(r["legacy"], r["country"]) for r in rows] == [
        ("l0", None),
        ("l1", None),
        (None, "DE"),
        (None, "FR"),
    ]
    # Nested: a new struct field in the data is added to the struct.
    nested = _rows(4, 1).set_column(6, "payload", pa.array([{"x": 4, "tag": "t", "z": 1.5}]))
    table.append(nested, schema_mode="merge")
    assert table.schema.field("payload").type == pa.struct(
        [("x", pa.int64()), ("tag", pa.string()), ("z", pa.float64())]
    )
    assert table.scan(filter=[("clicks", "=", 4)]).to_arrow().column("payload").to_pylist() == [
        {"x": 4, "tag": "t", "z": 1.5}
    ]
    # Merge never changes types: a required column missing from the data is still refused.
    with pytest.raises(at.SchemaMismatchError, match="user_id"):
        table.append(_rows(5, 1).drop_columns(["user_id"]), schema_mode="merge")
    with pytest.raises(at.InvalidArgumentError, match="schema_mode"):
        table.append(extra, schema_mode="loose")


def test_the_field_ids_of_a_schema_are_unique_and_never_reused(table: at.Table) -> None:
    seen: set[int] = set()
    for _ in range(3):
        with table.update_schema() as update:
            update.add_column("tmp", pa.int64())
        with table.update_schema() as update:
            update.drop_column("tmp")
    state = table._state
    for schema_id in state.schemas.list_ids():
        ids = list(fields_by_id(state.schemas.get(schema_id).fields))
        assert len(ids) == len(set(ids))
    added = [fields_by_id(state.schemas.get(i).fields) for i in state.schemas.list_ids()[1::2]]
    tmp_ids = [next(k for k, f in fields.items() if f.name == "tmp") for fields in added]
    assert len(set(tmp_ids)) == 3
    seen.update(tmp_ids)
    assert min(seen) > max(fields_by_id(state.schemas.get(0).fields))


def test_a_schema_file_that_lost_its_race_is_never_current(table: at.Table) -> None:
    """A schema version written but never named by a snapshot (a crash between the two steps)
    is ignored: the table opens with the last committed schema, and the next change skips its
    id and its field ids."""
    table.append(_rows(0, 1))
    state = table._state
    orphan = apply_changes(
        state.schema,
        [AddColumn(parent=(), field=FieldSpec(name="ghost", type=TypeSpec(kind="int64")))],
        new_id=1,
        first_free_field_id=100,
        time_ms=0,
    ).schema
    assert state.schemas.publish(orphan)
    reopened = at.open_table(table.uri)
    assert "ghost" not in reopened.schema.names and reopened.schema_id == 0
    with reopened.update_schema() as update:
        update.add_column("real", pa.int64())
    assert reopened.schema_id == 2 and "ghost" not in reopened.schema.names
    real = reopened._state.schema.fields[-1]
    assert real.name == "real" and real.id is not None and real.id > 100


def test_empty_update_and_double_commit(table: at.Table) -> None:
    with table.update_schema() as update:
        pass
    assert update.snapshot is None and table.latest_snapshot() is None
    update = table.update_schema().add_column("x", pa.int8())
    assert update.commit() is not None
    with pytest.raises(at.InvalidArgumentError, match="already committed"):
        update.commit()
    with pytest.raises(at.InvalidArgumentError, match=r"pyarrow.DataType"):
        table.update_schema().add_column("y", "int8")  # type: ignore[arg-type]


def test_a_reopened_table_sees_the_latest_schema(table: at.Table, tmp_path: Path) -> None:
    other = at.open_table(table.uri)
    with table.update_schema() as update:
        update.add_column("country", pa.string())
    assert "country" in other.schema.names  # every access reads the latest
    other.append(_rows(0, 1).append_column("country", pa.array(["DE"])))
    assert table.scan().to_arrow().column("country").to_pylist() == ["DE"]


def test_a_staging_area_keeps_the_schema_it_was_made_with(table: at.Table) -> None:
    with table.staging_area() as area:
        writer = area.writer()
        writer.write(_rows(0, 4))
        written = writer.prepare_commit()
        with table.update_schema() as update:  # lands while the staged write is in flight
            update.rename_column("action", "event")
            update.add_column("country", pa.string())
        messages = area.adopt_written(written)
        assert {m.schema_id for m in messages} == {0}
        table.committer().commit(messages)
    rows = _by_clicks(table.scan().to_arrow())
    assert [r["event"] for r in rows] == [f"a{i}" for i in range(4)]
    assert area.view.schema.id == 0 and table.schema_id == 1


def test_changes_inside_lists_and_maps_read_old_rows_by_id(uri: str) -> None:
    item = pa.struct([("a", pa.int32()), ("b", pa.string())])
    value = pa.struct([("x", pa.int64()), ("y", pa.string())])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("items", pa.list_(item)),
            ("attrs", pa.map_(pa.string(), value)),
            ("fixed", pa.list_(pa.int16(), 2)),
        ]
    )
    table = at.create_table(uri, schema)
    old = pa.table(
        {
            "id": [1, 2, 3],
            "items": [[{"a": 1, "b": "p"}, {"a": 2, "b": "q"}], None, []],
            "attrs": [[("k", {"x": 10, "y": "u"})], [("m", None)], None],
            "fixed": [[1, 2], None, [3, 4]],
        },
        schema=schema,
    )
    table.append(old)
    with table.update_schema() as update:
        update.add_column("items.element.c", pa.float64())
        update.rename_column("items.element.a", "alpha")
        update.update_column("items.element.alpha", type=pa.int64())
        update.drop_column("items.element.b")
        update.rename_column("attrs.value.x", "ex")
        update.drop_column("attrs.value.y")
        update.add_column("attrs.value.z", pa.bool_())
        update.update_column("fixed.element", type=pa.int64())
    new_item = pa.struct([("alpha", pa.int64()), ("c", pa.float64())])
    new_value = pa.struct([("ex", pa.int64()), ("z", pa.bool_())])
    assert table.schema == pa.schema(
        [
            ("id", pa.int64()),
            ("items", pa.list_(new_item)),
            ("attrs", pa.map_(pa.string(), new_value)),
            ("fixed", pa.list_(pa.int64(), 2)),
        ]
    )
    rows = table.scan().to_arrow().sort_by("id").to_pylist()
    assert rows == [
        {
            "id": 1,
            "items": [{"alpha": 1, "c": None}, {"alpha": 2, "c": None}],
            "attrs": [("k", {"ex": 10, "z": None})],
            "fixed": [1, 2],
        },
        {"id": 2, "items": None, "attrs": [("m", None)], "fixed": None},
        {"id": 3, "items": [], "attrs": None, "fixed": [3, 4]},
    ]
    # Sliced reads (a later batch of a file) convert the same way.
    batches = [b for s in table.scan().plan() for b in table.read(s, columns=["items"])]
    assert sum(b.num_rows for b in batches) == 3


def test_a_refused_required_column_writes_no_schema_version(table: at.Table) -> None:
    table.append(_rows(0, 1))
    with pytest.raises(at.SchemaChangeError, match=r"'must'.*1 row,") as info:
        table.update_schema().add_column("must", pa.int64(), nullable=False).commit()
    assert info.value.column == "must"
    assert list(table.schemas()) == [0]


def test_docs_show_in_the_schema_history(table: at.Table) -> None:
    with table.update_schema() as update:
        update.update_column("action", doc="what the user did")
    columns = table.schema_history()["columns"][-1].as_py()
    assert 'action string (doc: "what the user did")' in columns


def test_a_top_level_name_cannot_hide_a_struct_field_path(table: at.Table) -> None:
    with pytest.raises(at.SchemaChangeError, match="payload"):
        table.update_schema().rename_column("action", "payload.x").commit()
    with pytest.raises(at.SchemaChangeError, match="payload"):
        table.update_schema().add_column(("payload.tag",), pa.string()).commit()


def test_a_stream_older_than_a_widening_names_the_column_values_do_not_fit(
    table: at.Table,
) -> None:
    table.append(_rows(0, 2))
    reader = table.stream(mode="latest")
    with table.update_schema() as update:
        update.update_column("clicks", type=pa.int64())
    wide = _rows(5, 1).cast(SCHEMA.set(3, pa.field("clicks", pa.int64())))
    landed = table.append(wide.set_column(3, "clicks", pa.array([2**40], pa.int64())))
    assert landed is not None
    with pytest.raises(at.SchemaMismatchError, match=r"'clicks'.*reopen the stream") as info:
        list(reader.batches(timeout=0))
    assert info.value.column == "clicks"
    again = table.stream(mode="from-snapshot", snapshot_id=landed.id)
    assert [r["clicks"] for b in again.batches(timeout=0) for r in b.to_pylist()] == [2**40]


def _float_stream_then_widened(uri: str) -> tuple[at.Table, at.Stream]:
    """A float32 table, a stream started on it, then the column widened to float64."""
    table = at.create_table(uri, pa.schema([("id", pa.int64()), ("c", pa.float32())]))
    table.append(pa.table({"id": [0], "c": pa.array([1.5], pa.float32())}))
    reader = table.stream(mode="latest")
    with table.update_schema() as update:
        update.update_column("c", type=pa.float64())
    return table, reader


def test_a_stream_older_than_a_float_widening_delivers_the_values_its_type_holds(
    uri: str,
) -> None:
    table, reader = _float_stream_then_widened(uri)
    exact = [1.5, -0.0, math.inf, -math.inf, None, 2.0**-149, 3.4028234663852886e38, math.nan]
    table.append(pa.table({"id": range(len(exact)), "c": pa.array(exact, pa.float64())}))
    batches = list(reader.batches(timeout=0))
    assert {b.schema.field("c").type for b in batches} == {pa.float32()}  # its start type
    got = [r["c"] for b in batches for r in b.to_pylist()]
    assert got[:-1] == exact[:-1] and math.copysign(1, got[1]) == -1 and math.isnan(got[-1])


@pytest.mark.parametrize("value", [0.1, 1e300, -1e300, 2.0**-150, 3.4028235677973366e38])
def test_a_stream_older_than_a_float_widening_never_delivers_a_value_altered(
    uri: str, value: float
) -> None:
    """Arrow's cast to float32 rounds 0.1 and turns 1e300 into inf without a word: the
    stream refuses them, naming the column, and a stream opened since reads them exactly."""
    table, reader = _float_stream_then_widened(uri)
    landed = table.append(pa.table({"id": [1], "c": [value]}))
    assert landed is not None
    position = reader.position
    for _ in range(2):  # the same reader, again: it never moves past the unit it cannot hold
        with pytest.raises(at.SchemaMismatchError, match=r"'c'.*reopen the stream") as info:
            list(reader.batches(timeout=0))
        assert info.value.column == "c" and repr(value) in str(info.value)
        assert reader.position == position
    again = table.stream(mode="from-snapshot", snapshot_id=landed.id)
    assert [r["c"] for b in again.batches(timeout=0) for r in b.to_pylist()] == [value]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.floats(width=64) | st.floats(width=32) | st.none(), max_size=6))
def test_a_narrower_stream_delivers_a_float_exactly_or_refuses_it(
    tmp_path_factory: pytest.TempPathFactory, values: list[float | None]
) -> None:
    """Over the whole float64 domain (float32 values, subnormals, NaN, infinities, -0.0), a
    float32 stream over a widened column delivers a batch when numpy says float32 holds every
    value exactly (bit for bit, NaN as NaN) and refuses it otherwise."""
    uri = str(tmp_path_factory.mktemp("floats") / "t")
    table, reader = _float_stream_then_widened(uri)
    table.append(pa.table({"id": range(len(values)), "c": pa.array(values, pa.float64())}))
    wide = np.array([v for v in values if v is not None], dtype=np.float64)
    with np.errstate(over="ignore"):
        narrow = wide.astype(np.float32).astype(np.float64)
    held = bool(np.all((narrow == wide) | (np.isnan(narrow) & np.isnan(wide))))
    if not held:
        with pytest.raises(at.SchemaMismatchError, match="'c'"):
            list(reader.batches(timeout=0))
        return
    got = pa.concat_arrays(
        [b["c"] for b in reader.batches(timeout=0)] or [pa.array([], pa.float32())]
    )
    assert got.type == pa.float32() and got.null_count == values.count(None)
    delivered = got.drop_null().to_numpy(zero_copy_only=False).astype(np.float64)
    assert np.array_equal(delivered, wide, equal_nan=True)
    assert np.array_equal(np.signbit(delivered), np.signbit(wide))


@pytest.mark.parametrize(
    ("column", "altered"), [("s", {"s": [{"f": 0.1}]}), ("m", {"m": [[("a", 1e300)]]})]
)
def test_floats_nested_in_structs_and_maps_are_never_delivered_altered(
    uri: str, column: str, altered: dict[str, object]
) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("s", pa.struct([("f", pa.float32())])),
            ("m", pa.map_(pa.string(), pa.float32())),
        ]
    )
    table = at.create_table(uri, schema)
    table.append(pa.table({"id": [0], "s": [{"f": 1.0}], "m": [[("a", 1.0)]]}, schema=schema))
    reader = table.stream(mode="latest")
    with table.update_schema() as update:
        update.update_column(("s", "f"), type=pa.float64())
        update.update_column(("m", "value"), type=pa.float64())
    wide = table.scan().to_arrow().schema
    exact = pa.table({"id": [1], "s": [{"f": 0.5}], "m": [[("a", -0.0), ("b", None)]]}, schema=wide)
    table.append(exact)
    batches = list(reader.batches(timeout=0))
    assert [r for b in batches for r in b.to_pylist()] == exact.to_pylist()
    assert batches[0].schema == schema  # read in its start types
    table.append(pa.table(exact.to_pydict() | {"id": [2], **altered}, schema=wide))
    with pytest.raises(at.SchemaMismatchError, match=f"'{column}'"):
        list(reader.batches(timeout=0))


def test_rows_of_a_wider_column_after_a_rollback_restoring_the_narrower_schema(uri: str) -> None:
    """After rollback_to(..., restore_schema=True) the current schema is the narrower one
    again: a stream reading the rolled-back rows cannot hold 0.1, and reopening cannot help;
    the error says to widen the column again, after which they are read exactly."""
    table, _ = _float_stream_then_widened(uri)
    first = table.snapshots()[0].id
    landed = table.append(pa.table({"id": [1], "c": [0.1]}))
    assert landed is not None
    table.rollback_to(first, restore_schema=True)
    assert table.schema.field("c").type == pa.float32()
    with pytest.raises(at.SchemaMismatchError, match=r"float32.*widen it again") as info:
        list(table.stream(mode="from-snapshot", snapshot_id=landed.id).batches(timeout=0))
    assert "float32" in str(info.value) and "0.1" in str(info.value)
    with table.update_schema() as update:
        update.update_column("c", type=pa.float64())
    again = table.stream(mode="from-snapshot", snapshot_id=landed.id)
    assert [r["c"] for b in again.batches(timeout=0) for r in b.to_pylist()] == [0.1]


def test_concurrent_merges_adding_the_same_column_all_succeed(uri: str) -> None:
    import threading

    at.create_table(uri, pa.schema([("a", pa.int64())]))
    errors: list[BaseException] = []

    def merge(i: int) -> None:
        try:
            at.open_table(uri).append(pa.table({"a": [i], "extra": [f"e{i}"]}), schema_mode="merge")
        except BaseException as exc:  # collected: the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=merge, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    table = at.open_table(uri)
    assert table.schema.names == ["a", "extra"]
    assert sorted(table.scan().to_arrow().column("extra").to_pylist()) == [
        f"e{i}" for i in range(4)
    ]


def test_merge_fills_missing_nested_fields_and_merge_schema_is_public(table: at.Table) -> None:
    table.append(_rows(0, 1))
    partial = _rows(1, 1).set_column(6, "payload", pa.array([{"x": 7}]))
    table.append(partial, schema_mode="merge")
    rows = _by_clicks(table.scan().to_arrow())
    assert rows[1]["payload"] == {"x": 7, "tag": None}
    assert table.merge_schema(pa.schema([("note", pa.string())])) is not None
    assert table.merge_schema(pa.schema([("note", pa.string())])) is None
    assert table.schema.names[-1] == "note"
    table.check_write_schema(
        pa.schema([("user_id", pa.int64()), ("clicks", pa.int32()), ("new", pa.int8())]),
        schema_mode="merge",
    )
    with pytest.raises(at.SchemaMismatchError, match="user_id"):
        table.check_write_schema(pa.schema([("clicks", pa.int32())]), schema_mode="merge")


def test_a_reopened_staging_area_can_pin_its_creators_schema(table: at.Table) -> None:
    area = table.staging_area()
    with table.update_schema() as update:
        update.add_column("country", pa.string())
    worker = at.open_table(table.uri).staging_area(area.id, schema_id=area.view.schema.id)
    assert worker.view.schema.id == area.view.schema.id == 0
    writer = worker.writer()
    writer.write(_rows(0, 2))  # the creator's columns: no 'country'
    messages = area.adopt_written(writer.prepare_commit())
    table.committer().commit(messages)
    assert table.scan().to_arrow().column("country").to_pylist() == [None, None]
    area.__exit__(None, None, None)


def test_a_stream_can_start_at_the_scan_tag_name_option(table: at.Table) -> None:
    table.append(_rows(0, 2))
    table.create_tag("t")
    table.append(_rows(2, 1))
    reader = table.stream(options={"scan.tag-name": "t"})
    clicks = sorted(r["clicks"] for b in reader.batches(timeout=0) for r in b.to_pylist())
    assert clicks == [0, 1, 2]
