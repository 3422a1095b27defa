"""Tables written by earlier releases stay readable and writable: ``tests/golden/`` holds tables
as a given format version wrote them, with the facts recorded when they were written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from tests.golden.make_format_v3 import expected_rows

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TABLES = sorted(p.stem for p in GOLDEN.glob("*.json"))


@pytest.fixture(params=TABLES)
def golden(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[at.Table, dict[str, object]]:
    """A copy of a golden table (tests may write to it) and its recorded facts."""
    name = str(request.param)
    copy = tmp_path / name
    shutil.copytree(GOLDEN / name, copy)
    facts = json.loads((GOLDEN / f"{name}.json").read_text())
    return at.open_table(str(copy)), facts


def test_a_golden_table_reads_as_it_was_written(golden: tuple[at.Table, dict[str, object]]) -> None:
    table, facts = golden
    assert [s.id for s in table.snapshots()] == facts["snapshots"]
    latest = table.latest_snapshot()
    assert latest is not None and latest.kind.value == facts["latest_kind"]
    rows = table.scan().to_arrow()
    assert rows.num_rows == facts["rows"]
    assert pc.sum(rows.column("user_id")).as_py() == facts["sum_user_id"]
    assert table.scan(snapshot_id=3).count() == facts["rows_at_snapshot_3"]
    assert (table.bucket > 0) == facts["bucketed"]
    assert table.consumers() == facts["consumers"]
    streamed = sum(
        b.num_rows for b in table.stream(mode="from-snapshot", snapshot_id=1).batches(timeout=0)
    )
    assert streamed == facts["rows"]


def test_a_golden_table_takes_new_writes_and_compacts(
    golden: tuple[at.Table, dict[str, object]],
) -> None:
    table, facts = golden
    before = table.scan().to_arrow()
    extra = before.slice(0, 10)
    assert table.append(extra) is not None
    files_before = len(table.files())
    compacted = table.compact(full=True)  # the appended files join a bucket's older ones
    assert compacted is not None and compacted.kind is at.CommitKind.COMPACT
    assert len(table.files()) < files_before
    after = table.scan().to_arrow()
    assert after.num_rows == int(facts["rows"]) + 10  # type: ignore[call-overload]
    key = before.column_names  # every column: ties cannot reorder
    expected = pa.concat_tables([before, extra]).sort_by([(k, "ascending") for k in key])
    assert after.sort_by([(k, "ascending") for k in key]).to_pylist() == expected.to_pylist()


def test_a_golden_table_resumes_its_saved_consumer(
    golden: tuple[at.Table, dict[str, object]],
) -> None:
    table, facts = golden
    consumers = facts["consumers"]
    assert isinstance(consumers, dict)
    for consumer, next_snapshot in consumers.items():
        expected = sum(
            s.delta_record_count
            for s in table.snapshots()
            if s.id >= next_snapshot and s.kind == at.CommitKind.APPEND
        )
        # rows deleted after the consumer's position are not delivered (format version 3)
        expected = dict(facts.get("consumer_rows", {})).get(consumer, expected)  # type: ignore[call-overload]
        reader = table.stream(consumer_id=consumer)
        assert reader.position.next_snapshot == next_snapshot
        assert sum(b.num_rows for b in reader.batches(timeout=0)) == expected


def test_a_golden_table_evolves_in_place_without_rewriting_data(
    golden: tuple[at.Table, dict[str, object]],
) -> None:
    table, facts = golden
    before = table.scan().to_arrow()
    data_files = sorted(str(p) for p in Path(table.uri).rglob("*.parquet"))
    old_schema_ids = set(table.schemas())
    renamed = next(n for n in before.column_names if n not in table.partition_by + table.bucket_key)
    with table.update_schema() as update:
        update.add_column("note", pa.string(), doc="added by a later release")
        update.rename_column(renamed, f"{renamed}_v2")
    latest = table.latest_snapshot()
    assert latest is not None and latest.kind == at.CommitKind.ALTER
    assert latest.format_version == facts.get("format_version", 2)
    assert set(table.schemas()) - old_schema_ids == {table.schema_id}
    # No data file was touched: the change is metadata only.
    assert sorted(str(p) for p in Path(table.uri).rglob("*.parquet")) == data_files
    after = table.scan().to_arrow()
    assert after.column(f"{renamed}_v2").to_pylist() == before.column(renamed).to_pylist()
    assert after.column("note").null_count == after.num_rows == facts["rows"]
    # The snapshots before the change still read with their own schema.
    assert table.scan(snapshot_id=latest.id - 1).to_arrow().equals(before)
    # New rows of the new schema join, and compaction merges both versions in order.
    extra = after.slice(0, 5).set_column(
        after.column_names.index("note"), "note", pa.array(["n"] * 5)
    )
    table.append(extra)
    table.compact(full=True)
    final = table.scan().to_arrow()
    keys = [(k, "ascending") for k in after.column_names if k != "payload"]
    expected = pa.concat_tables([after, extra]).sort_by(keys)
    assert final.sort_by(keys).to_pylist() == expected.to_pylist()
    reopened = at.open_table(table.uri)
    assert reopened.schema == table.schema


def test_a_golden_table_keeps_a_tag_through_expiration(
    golden: tuple[at.Table, dict[str, object]],
) -> None:
    table, facts = golden
    for name, snapshot_id in dict(facts.get("tags", {})).items():  # type: ignore[call-overload]
        assert table.tags()[name] == snapshot_id
        assert table.scan(tag=name).count() == table.scan(snapshot_id=snapshot_id).count()
    first = table.snapshots()[0]
    rows_then = table.scan(snapshot_id=first.id).to_arrow()
    table.create_tag("golden-first", first.id)
    latest = table.latest_snapshot()
    # tagging upgrades a v1 table to 2 (a table with deletes is at 3)
    assert latest is not None and latest.format_version == facts.get("format_version", 2)
    table.compact(full=True)
    for consumer in table.consumers():
        table.delete_consumer(consumer)  # consumers would hold the snapshots
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)
    assert [s.id for s in table.snapshots()] == [table.latest_snapshot().id]  # type: ignore[union-attr]
    assert table.scan(tag="golden-first").to_arrow().equals(rows_then)
    reopened = at.open_table(table.uri)
    assert reopened.scan(tag="golden-first").to_arrow().equals(rows_then)
    assert reopened.scan().count() == facts["rows"]


def test_the_v2_golden_table_reads_every_schema_version() -> None:
    facts = json.loads((GOLDEN / "format-v2-evolved.json").read_text())
    table = at.open_table(str(GOLDEN / "format-v2-evolved"))
    assert table.schema_id == facts["schema_id"]
    assert table.schema.names == facts["columns"]
    old = table.scan(tag="before-evolution")
    assert old.output_schema.names == facts["columns_at_tag_before_evolution"]
    assert old.output_schema.field("amount").type == pa.float32()
    assert table.schema.field("amount").type == pa.float64()
    now = table.scan().to_arrow()
    then = old.to_arrow()
    assert then.num_rows == 60 and now.num_rows == facts["rows"]
    # Renamed column: the old rows keep their values under the new name.
    by_key = {(r["user_id"], r["amount"]): r for r in now.to_pylist()}
    for row in then.to_pylist():
        current = by_key[(row["user_id"], row["amount"])]
        assert current["event"] == row["action"]
        assert current["country"] is None
        assert current["payload"] == {"x": row["payload"]["x"], "score": None}


def test_the_v3_golden_table_reads_every_snapshot_without_its_deleted_rows() -> None:
    """Deletion vectors and copy-on-write deletes of format version 3, read by every path:
    each snapshot (time travel) holds exactly the rows the oracle computes from what was
    appended and deleted; the tag before the deletes holds them all."""
    table = at.open_table(str(GOLDEN / "format-v3-deletes"))
    key = [("day", "ascending"), ("amount", "ascending")]
    for snapshot in table.snapshots():
        expected = expected_rows(snapshot.id).sort_by(key)
        scan = table.scan(snapshot_id=snapshot.id)
        assert scan.to_arrow().sort_by(key).equals(expected)
        assert scan.count() == expected.num_rows
        assert pa.table(scan).sort_by(key).equals(expected)
        assert scan.to_dataset().to_table().sort_by(key).equals(expected)
        filtered = table.scan(snapshot_id=snapshot.id, filter=[("user_id", "in", [3, 4])])
        assert filtered.count() == pc.sum(pc.is_in(expected["user_id"], pa.array([3, 4]))).as_py()
    assert table.scan(tag="before-deletes").count() == expected_rows(2).num_rows
    latest = table.latest_snapshot()
    assert latest is not None and latest.format_version == 3
    assert latest.kind == at.CommitKind.DELETE
    streamed = pa.Table.from_batches(
        list(table.stream(mode="from-snapshot", snapshot_id=1).batches(timeout=0))
    )
    assert streamed.sort_by(key).equals(expected_rows(latest.id).sort_by(key))
