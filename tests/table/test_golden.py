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
    assert table.compact(full=True) is not None or table.bucket <= 0
    after = table.scan().to_arrow()
    assert after.num_rows == int(facts["rows"]) + 10  # type: ignore[call-overload]
    key = before.column_names  # every column: ties cannot reorder
    expected = pa.concat_tables([before, extra]).sort_by([(k, "ascending") for k in key])
    assert after.sort_by([(k, "ascending") for k in key]).to_pylist() == expected.to_pylist()
