"""Writes ``format-v2-evolved``: a table of format version 2 (field ids, schema changes, tags),
kept as a golden fixture that every later release must read. Run once per format version;
the output is checked in and never regenerated (``python tests/golden/make_format_v2.py``)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa

import appendtable as at

HERE = Path(__file__).resolve().parent
NAME = "format-v2-evolved"


def _rows(start: int, count: int, day: dt.date) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "day": pa.array([day] * count, pa.date32()),
            "user_id": pa.array([i % 17 for i in ids], pa.int64()),
            "action": pa.array([f"a{i % 5}" for i in ids], pa.string()),
            "amount": pa.array([i * 0.5 for i in ids], pa.float32()),
            "payload": pa.array([{"x": i, "tag": f"t{i}"} for i in ids]),
        }
    )


def main() -> None:
    target = HERE / NAME
    if target.exists():
        shutil.rmtree(target)
    schema = pa.schema(
        [
            pa.field("day", pa.date32()),
            pa.field("user_id", pa.int64(), nullable=False),
            pa.field("action", pa.string()),
            pa.field("amount", pa.float32()),
            pa.field("payload", pa.struct([("x", pa.int64()), ("tag", pa.string())])),
        ]
    )
    table = at.create_table(
        str(target),
        schema,
        partition_by=["day"],
        options={"bucket": 2, "bucket-key": "user_id", "write-only": True},
    )
    day1, day2 = dt.date(2026, 2, 1), dt.date(2026, 2, 2)
    table.append(_rows(0, 30, day1))  # 1
    table.append(_rows(30, 30, day2))  # 2
    table.create_tag("before-evolution")
    with table.update_schema() as update:  # 3
        update.rename_column("action", "event")
        update.update_column("amount", type=pa.float64())
        update.add_column("country", pa.string(), after="event", doc="ISO 3166")
        update.add_column("payload.score", pa.int32())
        update.drop_column("payload.tag")
    more = _rows(60, 30, day1).rename_columns(["day", "user_id", "event", "amount", "payload"])
    more = more.set_column(
        4, "payload", pa.array([{"x": i, "score": i % 3} for i in range(60, 90)])
    )
    table.append(more.append_column("country", pa.array(["DE"] * 30)))  # 4
    table.compact(full=True)  # 5
    table.set_options({"target-file-size": "64mb"})  # 6
    reader = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="golden-reader")
    reader.poll()
    reader.commit()
    table.create_tag("release-1")
    latest = table.latest_snapshot()
    assert latest is not None
    rows = table.scan().to_arrow()
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    facts = {
        "written_by": f"appendtable {at.__version__} (git {git})",
        "snapshots": [s.id for s in table.snapshots()],
        "rows": rows.num_rows,
        "bucketed": True,
        "latest_kind": latest.kind.value,
        "rows_at_snapshot_3": table.scan(snapshot_id=3).count(),
        "sum_user_id": sum(rows.column("user_id").to_pylist()),
        "consumers": table.consumers(),
        "tags": table.tags(),
        "columns": rows.column_names,
        "columns_at_tag_before_evolution": table.scan(tag="before-evolution").output_schema.names,
        "schema_id": table.schema_id,
    }
    (HERE / f"{NAME}.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main()
