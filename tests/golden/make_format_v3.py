"""Writes ``format-v3-deletes``: a table of format version 3 (rows deleted by deletion
vectors and by copy-on-write), kept as a golden fixture that every later release must read.
Run once per format version; the output is checked in and never regenerated
(``python tests/golden/make_format_v3.py``). ``expected_rows`` gives the rows each snapshot
holds, computed from the appended rows with pyarrow (the tests' oracle)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import appendtable as at

HERE = Path(__file__).resolve().parent
NAME = "format-v3-deletes"
DAY1, DAY2 = dt.date(2026, 3, 1), dt.date(2026, 3, 2)
SCHEMA = pa.schema(
    [
        pa.field("day", pa.date32()),
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("action", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("payload", pa.struct([("x", pa.int64()), ("tag", pa.string())])),
    ]
)


def rows(start: int, count: int, day: dt.date) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "day": pa.array([day] * count, pa.date32()),
            "user_id": pa.array([i % 17 for i in ids], pa.int64()),
            "action": pa.array([f"a{i % 5}" for i in ids], pa.string()),
            "amount": pa.array([i * 0.5 for i in ids], pa.float64()),
            "payload": pa.array([{"x": i, "tag": f"t{i % 4}"} for i in ids]),
        },
        schema=SCHEMA,
    )


def expected_rows(snapshot_id: int) -> pa.Table:
    """The rows of snapshot ``snapshot_id`` of the golden table (see ``main``)."""
    table = rows(0, 40, DAY1)
    if snapshot_id >= 2:
        table = pa.concat_tables([table, rows(40, 40, DAY2)])
    if snapshot_id >= 3:  # DELETE by deletion vectors
        table = table.filter(pc.not_equal(table["user_id"], 3))
    if snapshot_id >= 4:
        table = pa.concat_tables([table, rows(80, 40, DAY1)])
    if snapshot_id >= 5:  # DELETE by deletion vectors, of a struct field, on two files again
        tag = pc.struct_field(table["payload"], "tag")
        table = table.filter(pc.invert(pc.and_(pc.equal(tag, "t2"), pc.less(table["amount"], 30))))
    # 6: ALTER (deletion-vectors.enabled = false)
    if snapshot_id >= 7:  # DELETE by copy-on-write
        table = table.filter(pc.not_equal(table["action"], "a1"))
    return table


def main() -> None:
    target = HERE / NAME
    if target.exists():
        shutil.rmtree(target)
    table = at.create_table(
        str(target),
        SCHEMA,
        partition_by=["day"],
        options={
            "bucket": 2,
            "bucket-key": "user_id",
            "write-only": True,
            "deletion-vectors.enabled": True,
        },
    )
    table.append(rows(0, 40, DAY1))  # 1
    table.append(rows(40, 40, DAY2))  # 2
    table.create_tag("before-deletes")
    reader = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="golden-reader")
    reader.poll()
    reader.commit()  # next: snapshot 2, whose rows the deletes below thin out
    table.delete([("user_id", "=", 3)])  # 3
    table.append(rows(80, 40, DAY1))  # 4
    table.delete([(("payload", "tag"), "=", "t2"), ("amount", "<", 30)])  # 5
    table.set_options({"deletion-vectors.enabled": False})  # 6
    table.delete([("action", "=", "a1")])  # 7
    latest = table.latest_snapshot()
    assert latest is not None and latest.format_version == 3
    got = table.scan().to_arrow()
    for snapshot in table.snapshots():
        want = expected_rows(snapshot.id)
        assert table.scan(snapshot_id=snapshot.id).count() == want.num_rows
    streamed = sum(
        b.num_rows
        for b in at.open_table(str(target)).stream(consumer_id="golden-reader").batches(timeout=0)
    )
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    facts = {
        "written_by": f"appendtable {at.__version__} (git {git})",
        "format_version": 3,
        "snapshots": [s.id for s in table.snapshots()],
        "rows": got.num_rows,
        "bucketed": True,
        "latest_kind": latest.kind.value,
        "rows_at_snapshot_3": table.scan(snapshot_id=3).count(),
        "sum_user_id": sum(got.column("user_id").to_pylist()),
        "consumers": table.consumers(),
        "consumer_rows": {"golden-reader": streamed},
        "tags": table.tags(),
        "columns": got.column_names,
        "schema_id": table.schema_id,
    }
    (HERE / f"{NAME}.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main()
