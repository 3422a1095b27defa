"""Console and notebook representations, and ``Table.history()``."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable import display
from appendtable.cli.output import TextTable, display_width

SCHEMA = pa.schema([("day", pa.date32()), ("user_id", pa.int64()), ("name", pa.string())])
DAY = dt.date(2024, 5, 1)


def rows(start: int, count: int) -> pa.Table:
    return pa.table(
        {
            "day": pa.array([DAY] * count, pa.date32()),
            "user_id": list(range(start, start + count)),
            "name": [f"<b>{i}</b>" for i in range(start, start + count)],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(tmp_path: Path) -> at.Table:
    return at.create_table(
        str(tmp_path / "t<&>"),
        SCHEMA,
        partition_by=["day"],
        options={"bucket": 2, "bucket-key": "user_id", "write-only": True},
    )


def test_table_repr_and_html(table: at.Table) -> None:
    assert repr(table) == (
        f"Table({table.uri!r}, 3 columns, partition_by=['day'], 2 buckets on user_id, empty)"
    )
    table.append(rows(0, 4), watermark=1_714_557_600_000)
    text = repr(table)
    assert text.endswith("2 buckets on user_id, snapshot 1 APPEND, 4 rows, 2 files)")
    page = table._repr_html_()
    assert "t&lt;&amp;&gt;" in page and "t<&>" not in page  # the URI is escaped
    for expected in ("user_id", "int64", "bucket key", "partition key", "write-only"):
        assert expected in page
    assert "1 APPEND at " in page and "4 rows, 2 files" in page
    assert "watermark 2024-05-01 10:00:00.000 UTC" in page


def test_table_repr_never_raises(table: at.Table) -> None:
    table.append(rows(0, 1))
    snapshot_file = next((Path(table.uri) / "snapshot").glob("snapshot-1"))
    snapshot_file.write_bytes(b"garbage")
    reopened = at.open_table(table.uri)
    assert "unavailable (CorruptMetadataError" in repr(reopened)
    assert "unavailable (CorruptMetadataError" in reopened._repr_html_()


def test_snapshot_repr(table: at.Table) -> None:
    snapshot = table.append(rows(0, 3), watermark=0)
    assert snapshot is not None
    text = repr(snapshot)
    assert re.fullmatch(
        r"Snapshot\(id=1, kind=APPEND, time=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC, "
        r"rows=3 \(\+3\), files=2, watermark=1970-01-01 00:00:00\.000 UTC\)",
        text,
    )
    page = snapshot._repr_html_()
    assert "<strong>Snapshot 1</strong>" in page and "3 (+3)" in page
    assert snapshot.commit_user in page


def test_scan_repr_before_and_after_planning(table: at.Table) -> None:
    table.append(rows(0, 6))
    scan = table.scan(columns=["name"], filter=[("day", "=", DAY), ("name", "!=", "a")])
    assert (
        repr(scan) == "Scan(snapshot=1, columns=['name'], filter=day = 2024-05-01 AND name != 'a')"
    )
    assert "not planned yet" in scan._repr_html_()
    scan.plan()
    assert repr(scan).endswith(", planned: 2 splits, 2 files, 6 rows)")
    page = scan._repr_html_()
    assert "2 splits, 2 files, 6 rows" in page
    assert "day=2024-05-01" in page
    either = table.scan(filter=[[("user_id", "<", 1)], [("name", "is null")]])
    assert "filter=(user_id < 1) OR (name is null)" in repr(either)
    empty = at.create_table(table.uri + "-empty", SCHEMA).scan()
    assert repr(empty) == "Scan(snapshot=None, columns=None, filter=none)"
    assert "empty table" in empty._repr_html_()


def test_split_and_stream_unit_reprs_are_short(table: at.Table) -> None:
    for start in range(0, 40, 4):
        table.append(rows(start, 4))
    split = table.scan().plan()[0]
    assert repr(split) == (
        f"Split(snapshot=10, partition=day=2024-05-01, bucket={split.bucket}, "
        f"files={len(split.files)}, rows={split.row_count:,}, bytes={split.file_size:,})"
    )
    assert "day=2024-05-01" in split._repr_html_()
    reader = table.stream(mode="from-snapshot-full", snapshot_id=10)
    unit = reader.poll()
    assert unit is not None
    text = repr(unit)
    assert text == (
        f"StreamUnit(snapshot=10 APPEND, full, {len(unit.splits)} splits, "
        f"{unit.file_count} files, 40 rows)"
    )
    assert "data-" not in text  # no file listing
    assert len(text) < 120
    page = unit._repr_html_()
    assert "full read" in page and '{"snapshot":11,"full":false}' in page.replace("&quot;", '"')


def test_maintenance_results(table: at.Table) -> None:
    for start in range(0, 12, 4):
        table.append(rows(start, 4))
    plan = table.compactor().plan(full=True)
    assert re.fullmatch(r"CompactionPlan\(snapshot=3, 2 tasks, 6 files, \d+\.\d KiB\)", repr(plan))
    assert "ordered merge" in plan._repr_html_()
    assert "files=3" in repr(plan.tasks[0]) and "merge" in repr(plan.tasks[0])
    progress: list[at.CompactionProgress] = []
    table.compact(full=True, progress=progress.append)
    assert re.fullmatch(
        r"2/2 tasks: 6 files \(.+\) read, 2 files \(.+\) written", str(progress[-1])
    )
    assert repr(progress[-1]).startswith("CompactionProgress(tasks_done=2")  # unchanged
    dry = table.expire_snapshots(retain_min=1, older_than_ms=2**62, dry_run=True)
    assert repr(dry) == (
        f"ExpireResult(would expire snapshots 1..3, {len(dry.deleted_data_files)} data files, "
        f"{len(dry.deleted_metadata_files)} metadata files, 0 consumers; earliest=4)"
    )
    page = dry._repr_html_()
    assert "dry run" in page and "<details>" in page
    orphan = Path(table.uri) / "day=2024-05-01" / "bucket-0" / "data-orphan.parquet"
    orphan.write_bytes(b"12345")
    (orphan.parent / "<notes>.txt").write_text("a user's file")
    orphans = table.remove_orphan_files(older_than=dt.timedelta(seconds=-60), dry_run=True)
    assert repr(orphans) == "OrphanResult(would delete 1 file, 5 B, 1 path not the table's)"
    assert "&lt;notes&gt;.txt" in orphans._repr_html_()


def test_long_lists_are_cut_in_html() -> None:
    result = at.ExpireResult(deleted_data_files=[f"f{i}" for i in range(25)])
    page = result._repr_html_()
    assert "<code>f19</code>" in page and "<code>f20</code>" not in page
    assert "… 5 more" in page


def test_history(table: at.Table) -> None:
    table.append(rows(0, 3), watermark=1_000)
    table.append(rows(3, 2))
    table.compact(full=True)
    history = table.history()
    assert history.schema == pa.schema(
        [
            ("id", pa.int64()),
            ("kind", pa.string()),
            ("time", pa.timestamp("ms", tz="UTC")),
            ("commit_user", pa.string()),
            ("identifier", pa.int64()),
            ("total_rows", pa.int64()),
            ("delta_rows", pa.int64()),
            ("files", pa.int64()),
            ("watermark", pa.timestamp("ms", tz="UTC")),
        ]
    )
    assert history["id"].to_pylist() == [1, 2, 3]
    assert history["kind"].to_pylist() == ["APPEND", "APPEND", "COMPACT"]
    assert history["total_rows"].to_pylist() == [3, 5, 5]
    assert history["delta_rows"].to_pylist() == [3, 2, 0]
    assert history["watermark"].to_pylist()[0] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    times = history["time"].to_pylist()
    assert times == sorted(times)


def test_history_plots(table: at.Table) -> None:
    pytest.importorskip("pandas")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    table.append(rows(0, 3))
    table.append(rows(3, 3))
    frame = table.history().to_pandas()
    axes = frame.plot(x="time", y="total_rows")
    assert list(axes.get_lines()[0].get_ydata()) == [3, 6]


def test_format_helpers() -> None:
    assert display.format_bytes(0) == "0 B"
    assert display.format_bytes(1536) == "1.5 KiB"
    assert display.format_bytes(3 * 1024**4) == "3.0 TiB"
    assert display.format_ms(0) == "1970-01-01 00:00:00.000 UTC"
    assert display.format_ms(2**62) == str(2**62)  # out of range: the number itself
    assert display.format_ms(None) == "-"


def test_reprs_stay_small_for_wide_tables_and_long_filters(tmp_path: Path) -> None:
    wide = pa.schema([(f"column_{i:04d}", pa.int64()) for i in range(1000)])
    table = at.create_table(str(tmp_path / "wide"), wide)
    html_card = table._repr_html_()
    assert len(html_card) < 20_000  # 352 KB before
    assert "950 more columns" in html_card
    assert len(repr(table)) < 300
    values = list(range(5000))
    scan = table.scan(filter=[("column_0001", "in", values), ("column_0002", "=", 1)])
    text = repr(scan)
    assert len(text) < 600 and "4,990 more" in text
    strings = at.create_table(str(tmp_path / "s"), pa.schema([("s", pa.string())]))
    long_value = "x" * 10_000
    assert len(repr(strings.scan(filter=[("s", "=", long_value)]))) < 300
    assert len(strings.scan(filter=[("s", "=", long_value)])._repr_html_()) < 2_000


def test_text_tables_align_wide_characters() -> None:
    out = io.StringIO()
    writer = TextTable(out, pa.schema([("name", pa.string()), ("n", pa.int64())]))
    writer.write(pa.table({"name": ["日本語", "abc", "école", "🙂"], "n": [1, 22, 333, 4]}))
    writer.close()
    lines = out.getvalue().splitlines()
    rows = lines[2:6]
    assert len({display_width(line) for line in rows}) == 1  # the numbers end in one column
    assert lines[2].startswith("日本語   ")  # 6 columns wide, padded like "école "
    assert lines[-1] == "(4 rows)"
