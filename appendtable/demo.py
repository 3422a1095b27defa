"""The demo pipeline behind ``make demo``: a partitioned, bucketed table on local disk.

Run ``python -m appendtable.demo [directory]``. Without a directory a temporary one is used and
removed afterwards.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

import appendtable as at

SCHEMA = pa.schema(
    [
        ("day", pa.date32()),
        ("user_id", pa.int64()),
        ("event_time", pa.timestamp("ms", tz="UTC")),
        ("action", pa.string()),
        ("amount", pa.float64()),
    ]
)
ACTIONS = np.array(["view", "click", "cart", "buy"])


def _batch(rng: np.random.Generator, day: dt.date, rows: int, start_ms: int) -> pa.Table:
    offsets = np.sort(rng.integers(0, 3_600_000, rows))
    return pa.table(
        {
            "day": pa.array([day] * rows, pa.date32()),
            "user_id": pa.array(rng.integers(0, 5_000, rows)),
            "event_time": pa.array(start_ms + offsets, pa.timestamp("ms", tz="UTC")),
            "action": pa.array(ACTIONS[rng.integers(0, len(ACTIONS), rows)]),
            "amount": pa.array(np.round(rng.exponential(20.0, rows), 2)),
        },
        schema=SCHEMA,
    )


@contextmanager
def _timed(label: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    print(f"  {label}: {(time.perf_counter() - start) * 1000:.1f} ms")


def _human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def run(location: str) -> None:
    print(f"appendtable {at.__version__} demo: table at {location}\n")
    table = at.create_table(
        location,
        SCHEMA,
        partition_by=["day"],
        options={
            "bucket": 4,
            "bucket-key": "user_id",
            "watermark.column": "event_time",
            "watermark.delay": "5 min",
        },
    )
    print("1. created a table partitioned by day, 4 buckets on user_id (an ordered queue each)")

    rng = np.random.default_rng(42)
    tail = table.stream(mode="latest", consumer_id="demo-tail")
    print("   a consumer 'demo-tail' is tailing it (like a Kafka consumer)")
    print("2. appending 6 batches (two days, three hours each), one snapshot per batch")
    first_day = dt.date(2026, 11, 20)
    written = 0
    for hour in range(6):
        day = first_day + dt.timedelta(days=hour // 3)
        start_ms = int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp() * 1000)
        batch = _batch(rng, day, 50_000, start_ms + (hour % 3) * 3_600_000)
        with _timed(f"snapshot {hour + 1}: {batch.num_rows:,} rows into {day}"):
            snapshot = table.append(batch)
        written += batch.num_rows
        assert snapshot is not None

    latest = table.latest_snapshot()
    assert latest is not None
    watermark = dt.datetime.fromtimestamp((latest.watermark or 0) / 1000, tz=dt.UTC)
    print(
        f"\n3. history: {len(table.snapshots())} snapshots, latest id {latest.id}, "
        f"{latest.total_record_count:,} rows, watermark {watermark:%Y-%m-%d %H:%M}"
    )
    files = table.files()
    total_bytes = sum(files.column("bytes").to_pylist())
    print(f"   {files.num_rows} data files, {_human(total_bytes)} on disk")
    for row in (
        files.group_by(["partition"])
        .aggregate([("path", "count"), ("rows", "sum"), ("bytes", "sum")])
        .to_pylist()
    ):
        print(
            f"   {row['partition']}: {row['path_count']} files, {row['rows_sum']:,} rows, "
            f"{_human(row['bytes_sum'])}"
        )

    print("\n4. reading back")
    with _timed("full scan"):
        full = table.scan().to_arrow()
    assert full.num_rows == written
    user = int(full.column("user_id")[0].as_py())
    point = table.scan(filter=[("user_id", "=", user)])
    planned = sum(len(split.files) for split in point.plan())
    with _timed(f"point query user_id = {user} (reads {planned} of {files.num_rows} files)"):
        rows = point.to_arrow()
    times = rows.column("event_time").to_pylist()
    print(f"   {rows.num_rows} events for user {user}, in write order: {times == sorted(times)}")
    buys = table.scan(
        columns=["user_id", "amount"],
        filter=[("day", "=", first_day), ("action", "=", "buy"), ("amount", ">", 100.0)],
    )
    with _timed("filtered scan: big purchases on the first day"):
        big = buys.to_arrow()
    print(f"   {big.num_rows} purchases over 100 on {first_day}")
    print(f"\n5. time travel: snapshot 2 held {table.scan(snapshot_id=2).count():,} rows")

    print("\n6. the tailing consumer catches up, unit by unit, each bucket in write order")
    tailed = 0
    while (unit := tail.poll()) is not None:
        rows = sum(batch.num_rows for batch in tail.read(unit))
        tailed += rows
        print(f"   snapshot {unit.snapshot_id}: {rows:,} rows in {len(unit.splits)} ordered splits")
    tail.commit()
    print(f"   {tailed:,} rows delivered; progress saved: {table.consumers()}")
    print("\ndone.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", nargs="?", help="where to create the table")
    args = parser.parse_args()
    if args.directory:
        run(args.directory)
        return
    workdir = tempfile.mkdtemp(prefix="appendtable-demo-")
    try:
        run(f"{workdir}/events")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
