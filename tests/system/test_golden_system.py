"""The golden tables (written by earlier releases, tests/golden/) read through every system
table, which agree with the facts recorded when they were written and with each other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

import appendtable as at
from tests.system.model import assert_aggregates_of, read_system

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TABLES = sorted(p.stem for p in GOLDEN.glob("*.json"))


@pytest.fixture(params=TABLES)
def golden(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[at.Table, dict[str, object]]:
    name = str(request.param)
    copy = tmp_path / name
    shutil.copytree(GOLDEN / name, copy)  # reading must not write, but never risk the original
    return at.open_table(str(copy)), json.loads((GOLDEN / f"{name}.json").read_text())


def test_every_system_table_reads_a_golden_table(
    golden: tuple[at.Table, dict[str, object]],
) -> None:
    table, facts = golden
    snapshots = read_system(table, "snapshots")
    assert snapshots["snapshot_id"].to_pylist() == facts["snapshots"]
    assert snapshots["commit_kind"].to_pylist()[-1] == facts["latest_kind"]
    assert snapshots["total_record_count"].to_pylist()[-1] == facts["rows"]
    consumers = read_system(table, "consumers")
    assert (
        dict(
            zip(
                *consumers.select(["consumer_id", "next_snapshot_id"]).to_pydict().values(),
                strict=True,
            )
        )
        == facts["consumers"]
    )
    tags = read_system(table, "tags")
    assert dict(
        zip(tags["tag_name"].to_pylist(), tags["snapshot_id"].to_pylist(), strict=True)
    ) == facts.get("tags", {})
    schemas = read_system(table, "schemas")
    current = schemas.filter(schemas["current"])
    assert current["schema_id"].to_pylist() == [facts.get("schema_id", 0)]
    columns = [f["name"] for f in json.loads(current["fields"][0].as_py())]
    assert columns == facts.get("columns", table.schema.names)
    options = read_system(table, "options")
    assert (
        dict(zip(options["key"].to_pylist(), options["value"].to_pylist(), strict=True))
        == table.options
    )
    for when in ({}, {"snapshot_id": 3}, *({"tag": t} for t in facts.get("tags", {}))):  # type: ignore[attr-defined]
        files = read_system(table, "files", **when)
        rows = table.scan(**when).count()  # type: ignore[arg-type]
        assert pc.sum(files["record_count"]).as_py() == rows
        if when == {"snapshot_id": 3}:
            assert rows == facts["rows_at_snapshot_3"]
        for row in files.to_pylist():
            assert list(dict(row["null_value_counts"])) == table.scan(**when).output_schema.names  # type: ignore[arg-type]
        manifests = read_system(table, "manifests", **when)
        added = pc.sum(manifests["num_added_files"]).as_py()
        deleted = pc.sum(manifests["num_deleted_files"]).as_py() or 0
        assert added - deleted == files.num_rows
        partitions = read_system(table, "partitions", **when)
        buckets = read_system(table, "buckets", **when)
        assert_aggregates_of(files, partitions, buckets)
        assert set(partitions["total_buckets"].to_pylist()) == {table.bucket}
    listing = table.files()
    assert listing["path"].to_pylist() == read_system(table, "files")["file_path"].to_pylist()
