"""The commands, run in-process through ``main`` (and checked through the Python API)."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import appendtable as at
from appendtable.cli import commands
from appendtable.metadata import options as registry

from .conftest import Result

DDL = "day date, user_id int64 not null, action string, amount decimal(10,2)"
SCHEMA = pa.schema(
    [
        ("day", pa.date32()),
        pa.field("user_id", pa.int64(), nullable=False),
        ("action", pa.string()),
        ("amount", pa.decimal128(10, 2)),
    ]
)
CSV = """day,user_id,action,amount
2024-05-01,7,view,0.00
2024-05-01,8,buy,12.50
2024-05-02,7,buy,3.00
"""
JSONL = """{"day": "2024-05-02", "user_id": 9, "action": "view", "amount": "1.25"}
{"day": "2024-05-03", "user_id": 10}
"""


def rows(table: at.Table, **scan: Any) -> list[dict[str, object]]:
    return sorted(table.scan(**scan).to_arrow().to_pylist(), key=lambda r: (r["user_id"], r["day"]))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a.csv").write_text(CSV)
    (tmp_path / "b.jsonl").write_text(JSONL)
    parquet = tmp_path / "c.parquet"
    pq.write_table(
        pa.table(
            {
                "day": pa.array([dt.date(2024, 5, 4)], pa.date32()),
                "user_id": [11],
                "action": ["buy"],
                "amount": pa.array([decimal.Decimal("5.00")], pa.decimal128(10, 2)),
            }
        ),
        parquet,
    )
    return {"csv": tmp_path / "a.csv", "jsonl": tmp_path / "b.jsonl", "parquet": parquet}


@pytest.fixture
def loaded(cli: Any, tmp_path: Path, files: dict[str, Path]) -> str:
    """A bucketed, partitioned table with three snapshots (csv, jsonl, parquet)."""
    uri = str(tmp_path / "events")
    options = ["--option", "bucket=2", "--option", "bucket-key=user_id"]
    assert cli("create", uri, "--schema", DDL, "--partition-by", "day", *options).code == 0
    result = cli("append", uri, str(files["csv"]), str(files["jsonl"]), str(files["parquet"]))
    assert result.code == 0, result.err
    return uri


def test_create_and_append_every_format(loaded: str) -> None:
    table = at.open_table(loaded)
    assert table.schema == SCHEMA
    assert table.partition_by == ["day"]
    assert table.bucket == 2
    assert [s.id for s in table.snapshots()] == [1, 2, 3]  # one snapshot per file
    assert rows(table) == [
        {
            "day": dt.date(2024, 5, 1),
            "user_id": 7,
            "action": "view",
            "amount": decimal.Decimal("0.00"),
        },
        {
            "day": dt.date(2024, 5, 2),
            "user_id": 7,
            "action": "buy",
            "amount": decimal.Decimal("3.00"),
        },
        {
            "day": dt.date(2024, 5, 1),
            "user_id": 8,
            "action": "buy",
            "amount": decimal.Decimal("12.50"),
        },
        {
            "day": dt.date(2024, 5, 2),
            "user_id": 9,
            "action": "view",
            "amount": decimal.Decimal("1.25"),
        },
        {"day": dt.date(2024, 5, 3), "user_id": 10, "action": None, "amount": None},
        {
            "day": dt.date(2024, 5, 4),
            "user_id": 11,
            "action": "buy",
            "amount": decimal.Decimal("5.00"),
        },
    ]


def test_append_reports_each_commit(cli: Any, tmp_path: Path, files: dict[str, Path]) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", DDL)
    result = cli("append", uri, str(files["csv"]), str(files["jsonl"]))
    assert result.out.splitlines() == [
        f"{files['csv']}: 3 rows -> snapshot 1 (table: 3 rows, 1 file)",
        f"{files['jsonl']}: 2 rows -> snapshot 2 (table: 5 rows, 2 files)",
    ]
    # stderr is not a terminal here: one final progress line per file, no redraws
    assert "\r" not in result.err
    assert f"[1/2] {files['csv']}  3 rows  " in result.err
    assert cli("append", uri, "--quiet", str(files["csv"])).err == ""


def test_one_commit(cli: Any, tmp_path: Path, files: dict[str, Path]) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema-from", str(files["parquet"]))
    result = cli("append", uri, "--one-commit", *(str(p) for p in files.values()))
    assert result.code == 0, result.err
    assert result.out == "3 files: 6 rows -> snapshot 1 (table: 6 rows, 1 file)\n"
    assert len(at.open_table(uri).snapshots()) == 1


def test_schema_from_parquet(cli: Any, tmp_path: Path, files: dict[str, Path]) -> None:
    uri = str(tmp_path / "t")
    result = cli("create", uri, "--schema-from", str(files["parquet"]), "--partition-by", "day")
    assert result.code == 0
    assert "schema: day date32[day], user_id int64, action string, amount decimal(10, 2)" in (
        result.out
    )
    assert at.open_table(uri).schema == pq.read_schema(files["parquet"]).remove_metadata()


def test_a_failing_file_leaves_earlier_commits_and_nothing_of_itself(
    cli: Any, tmp_path: Path, files: dict[str, Path]
) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", DDL)
    bad = tmp_path / "bad.csv"
    bad.write_text("day,user_id,action,amount\n2024-05-01,1,x,1.00\n2024-05-01,oops,y,2.00\n")
    result = cli("append", uri, str(files["csv"]), str(bad))
    assert result.code == 1
    assert result.err.splitlines()[-1].startswith(f"error: {bad}: ")
    assert "oops" in result.err.splitlines()[-1]
    table = at.open_table(uri)
    assert table.scan().count() == 3  # the first file landed, nothing of the bad one
    assert len(list((tmp_path / "t").rglob("*.parquet"))) == 1  # its files were removed


def test_one_commit_is_all_or_nothing(cli: Any, tmp_path: Path, files: dict[str, Path]) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", DDL)
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"day": "2024-05-01", "user_id": 1, "colour": "red"}\n')
    result = cli("append", uri, "--one-commit", str(files["csv"]), str(extra))
    assert result.code == 1
    assert "colour" in result.err and str(extra) in result.err
    assert at.open_table(uri).latest_snapshot() is None


def test_missing_input_fails_before_anything_is_committed(
    cli: Any, tmp_path: Path, files: dict[str, Path]
) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", DDL)
    result = cli("append", uri, str(files["csv"]), str(tmp_path / "nope.csv"))
    assert result.code == 1
    assert result.err == f"error: {tmp_path / 'nope.csv'}: No such file or directory\n"
    assert at.open_table(uri).latest_snapshot() is None
    unknown = cli("append", uri, str(tmp_path / "x.txt"))
    assert unknown.code == 2
    assert "cannot tell the format of" in unknown.err and "give --format" in unknown.err


def test_input_columns_must_fit(cli: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", DDL)
    no_key = tmp_path / "no_key.csv"
    no_key.write_text("day,action\n2024-05-01,x\n")  # user_id is not null
    result = cli("append", uri, str(no_key))
    assert result.code == 1
    assert result.err.startswith(f"error: {no_key}: ") and "user_id" in result.err
    partial = tmp_path / "partial.csv"
    partial.write_text("user_id\n5\n")  # nullable columns may be left out
    assert cli("append", uri, str(partial)).code == 0
    assert at.open_table(uri).scan().to_arrow().to_pylist() == [
        {"day": None, "user_id": 5, "action": None, "amount": None}
    ]


def test_info(cli: Any, loaded: str) -> None:
    result = cli("info", loaded)
    assert result.code == 0
    out = result.out
    assert f"table            {loaded}\n" in out
    assert "layout           2 buckets, bucket key user_id\n" in out
    assert "latest snapshot  3 (APPEND at " in out and "6 rows, 6 files" in out
    assert "snapshots        3 retained (1..3)\n" in out
    assert "small files      6 (100%) below 179.2 MiB\n" in out
    assert "  user_id int64 not null,\n" in out
    assert "day=2024-05-01       0      1      1     1" in out  # partition, bucket, files, ...
    limited = cli("info", loaded, "--max-groups", "1").out
    assert "... 4 more (--max-groups)" in limited


def test_info_prints_a_schema_that_create_takes_back(cli: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "odd")
    ddl = '`my col` int64 not null, "not" string, "a`b" struct<`x y`: int32>, d date32'
    assert cli("create", uri, "--schema", ddl).code == 0
    out = cli("info", uri).out
    printed = out.split("schema (as --schema takes it):\n", 1)[1].split("\n\n", 1)[0]
    again = str(tmp_path / "again")
    assert cli("create", again, "--schema", printed).code == 0, printed
    assert at.open_table(again).schema == at.open_table(uri).schema


def test_small_file_threshold_uses_the_effective_options(tmp_path: Any) -> None:
    plain = at.create_table(str(tmp_path / "a"), pa.schema([("v", pa.int64())]))
    assert commands.small_file_threshold(plain) == int(
        registry.TARGET_FILE_SIZE.default * registry.COMPACTION_SMALL_FILE_RATIO.default
    )
    tuned = at.create_table(
        str(tmp_path / "b"),
        pa.schema([("v", pa.int64())]),
        options={"target-file-size": "10 MB", "compaction.small-file-ratio": "0.5"},
    )
    assert commands.small_file_threshold(tuned) == 5 * 1024**2


def test_snapshots_and_files(cli: Any, loaded: str) -> None:
    snapshots = list(csv.DictReader(io.StringIO(cli("snapshots", loaded, "--format", "csv").out)))
    assert [(s["id"], s["kind"], s["total_rows"], s["delta_rows"]) for s in snapshots] == [
        ("1", "APPEND", "3", "3"),
        ("2", "APPEND", "5", "2"),
        ("3", "APPEND", "6", "1"),
    ]
    files = [
        json.loads(line) for line in cli("files", loaded, "--format", "jsonl").out.splitlines()
    ]
    assert len(files) == 6
    assert sum(f["rows"] for f in files) == 6
    old = cli("files", loaded, "--snapshot", "1", "--format", "csv").out.splitlines()
    assert len(old) == 1 + 3
    table = cli("snapshots", loaded).out.splitlines()
    assert table[0].split()[:3] == ["id", "kind", "time"]
    assert table[-1] == "(3 rows)"


def test_head(cli: Any, loaded: str) -> None:
    out = cli("head", loaded, "-n", "2", "--format", "jsonl").out.splitlines()
    assert len(out) == 2
    everything = cli("head", loaded, "-n", "100", "--columns", "user_id", "--format", "csv").out
    assert sorted(everything.split()[1:]) == ["10", "11", "7", "7", "8", "9"]


def test_scan(cli: Any, loaded: str) -> None:
    def scan(*args: str) -> list[dict[str, object]]:
        result = cli("scan", loaded, "--format", "jsonl", *args)
        assert result.code == 0, result.err
        return [json.loads(line) for line in result.out.splitlines()]

    assert {r["user_id"] for r in scan("--filter", "user_id in (7, 9)")} == {7, 9}
    assert scan("--filter", "day >= 2024-05-03", "--columns", "user_id,day") == [
        {"user_id": 10, "day": "2024-05-03"},
        {"user_id": 11, "day": "2024-05-04"},
    ]
    assert scan("--filter", "action is null") == [
        {"day": "2024-05-03", "user_id": 10, "action": None, "amount": None}
    ]
    assert [r["amount"] for r in scan("--filter", "amount > 4.99")] == ["12.50", "5.00"]
    assert [r["action"] for r in scan("--filter", "action = 'buy'", "--filter", "user_id = 7")] == [
        "buy"
    ]
    assert len(scan("--snapshot", "1")) == 3
    assert len(scan("--limit", "4")) == 4
    assert cli("scan", loaded, "--count").out == "6\n"
    assert cli("scan", loaded, "--count", "--filter", "day = 2024-05-01").out == "2\n"


def test_scan_errors(cli: Any, loaded: str) -> None:
    bad_value = cli("scan", loaded, "--filter", "user_id = seven")
    assert (bad_value.code, bad_value.err) == (
        2,
        "error: value 'seven' is not a valid int64 (column 'user_id')\n",
    )
    unknown = cli("scan", loaded, "--columns", "nope")
    assert unknown.code == 1
    assert unknown.err.startswith("error: unknown column 'nope' in the projection")
    missing = cli("scan", loaded, "--snapshot", "99")
    assert missing.code == 1 and missing.err.startswith("error: ")
    assert cli("scan", loaded, "--format", "xml").code == 2  # argparse


def test_compact(cli: Any, tmp_path: Path, files: dict[str, Path]) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", DDL, "--partition-by", "day", "--option", "write-only=true")
    for _ in range(3):
        cli("append", uri, "-q", str(files["csv"]))
    before = at.open_table(uri)
    expected = rows(before)
    assert before.files().num_rows == 6
    only = cli("compact", uri, "--full", "--partition", "day=2024-05-02")
    assert only.code == 0, only.err
    assert re.fullmatch(
        r"snapshot 4 \(COMPACT\): 1/1 tasks: 3 files \(\d\.\d KiB\) -> 1 file "
        r"\(\d\.\d KiB\); the table has 4 data files\n",
        only.out,
    )
    assert only.err.startswith("compact  1/1 tasks: 3 files")  # the final progress line
    result = cli("compact", uri, "--full")
    assert result.code == 0
    table = at.open_table(uri)
    assert table.files().num_rows == 2
    assert rows(table) == expected
    assert cli("compact", uri, "--full").out == "nothing to compact\n"
    bad = cli("compact", uri, "--partition", "user_id=1")
    assert bad.code == 2 and "'user_id' is not a partition key" in bad.err


def test_sort_compact(cli: Any, tmp_path: Path, files: dict[str, Path]) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", DDL, "--option", "write-only=true")
    cli("append", uri, "-q", str(files["csv"]), str(files["jsonl"]))
    result = cli("compact", uri, "--sort-by", "user_id,amount", "--strategy", "zorder", "-q")
    assert result.code == 0, result.err
    assert result.err == ""
    latest = at.open_table(uri).latest_snapshot()
    assert latest is not None and latest.kind == at.CommitKind.COMPACT
    bad = cli("compact", uri, "--strategy", "hilbert")
    assert bad.code == 2 and "--strategy applies to a sort compaction" in bad.err


def test_expire(cli: Any, loaded: str) -> None:
    dry = cli("expire", loaded, "--retain-min", "1", "--older-than", "0s", "--dry-run")
    assert dry.code == 0
    assert dry.out.splitlines()[0] == "would expire snapshots: 1..2"
    assert dry.out.splitlines()[-1] == "dry run: nothing was deleted"
    assert [s.id for s in at.open_table(loaded).snapshots()] == [1, 2, 3]
    done = cli("expire", loaded, "--retain-min", "1", "--older-than", "0s")
    assert done.out.splitlines()[0] == "expired snapshots: 1..2"
    assert "earliest retained snapshot: 3" in done.out
    assert [s.id for s in at.open_table(loaded).snapshots()] == [3]
    assert at.open_table(loaded).scan().count() == 6
    bad = cli("expire", loaded, "--retain-min", "5", "--retain-max", "2")
    assert bad.code == 2 and "--retain-max must not be smaller" in bad.err
    table_default = cli("expire", loaded, "--retain-max", "2")  # below the table's min of 10
    assert table_default.code == 2 and table_default.err.startswith("error: expire: ")
    assert cli("expire", loaded, "--older-than", "soon").code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("expire", "--older-than", "-1h"), "--older-than: not a duration: '-1h'"),
        (("remove-orphans", "--older-than", "-5m"), "--older-than: not a duration: '-5m'"),
        (("compact", "--parallelism", "0"), "--parallelism must be at least 1"),
        (("compact", "--parallelism", "-2"), "--parallelism must be at least 1"),
        (("scan", "--limit", "-1"), "--limit must not be negative"),
        (("head", "-n", "-3"), "-n must not be negative"),
    ],
)
def test_a_negative_or_zero_value_gets_the_options_own_message(
    cli: Any, loaded: str, args: tuple[str, ...], message: str
) -> None:
    """Found by a docs-only hunt: ``--older-than -1h`` got argparse's "expected one
    argument" (a value starting with a dash read as an option), and ``--parallelism 0`` was
    accepted."""
    command, *rest = args
    result = cli(command, loaded, *rest)
    assert result.code == 2, result.err
    assert message in result.err and "expected one argument" not in result.err, result.err


def test_remove_orphans_is_a_dry_run_unless_forced(cli: Any, loaded: str) -> None:
    orphan = Path(loaded) / "day=2024-05-01" / "bucket-0" / "data-orphan.parquet"
    orphan.write_bytes(b"x" * 10)
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))
    dry = cli("remove-orphans", loaded)
    assert dry.code == 0
    assert dry.out.splitlines() == [
        "day=2024-05-01/bucket-0/data-orphan.parquet",
        "dry run: 1 orphan file (10 B) older than 1d would be deleted; nothing was deleted "
        "(use --force to delete)",
    ]
    assert orphan.exists()
    young = cli("remove-orphans", loaded, "--older-than", "4d", "--force")
    assert "deleted 0 orphan files" in young.out and orphan.exists()
    forced = cli("remove-orphans", loaded, "--force")
    assert forced.out.splitlines()[-1] == "deleted 1 orphan file (10 B) older than 1d"
    assert not orphan.exists()
    assert at.open_table(loaded).scan().count() == 6


def test_rollback(cli: Any, loaded: str) -> None:
    table = at.open_table(loaded)
    first = rows(table, snapshot_id=1)
    result = cli("rollback", loaded, "1")
    assert (
        result.out
        == "rolled back to snapshot 1: new snapshot 4 (OVERWRITE) holds 3 rows in 3 files, "
        "schema 0 (kept)\n"
    )
    assert rows(at.open_table(loaded)) == first
    missing = cli("rollback", loaded, "42")
    assert missing.code == 1 and missing.err.startswith("error: ") and "42" in missing.err


def test_errors_are_one_line(cli: Any, tmp_path: Path) -> None:
    missing = cli("info", str(tmp_path / "none"))
    assert missing.code == 1
    assert missing.err == f"error: no table at {tmp_path / 'none'} (no schema/ files)\n"
    ddl = cli("create", str(tmp_path / "t"), "--schema", "id int64, name strng")
    assert ddl.code == 2
    assert ddl.err.startswith("error: --schema: unknown type 'strng' at position 16")
    assert not (tmp_path / "t").exists()
    option = cli("create", str(tmp_path / "t"), "--schema", "id int64", "--option", "buckets=4")
    assert option.code == 1
    assert option.err == "error: unknown option 'buckets'; did you mean 'bucket'?\n"
    cli("create", str(tmp_path / "t"), "--schema", "id int64")
    exists = cli("create", str(tmp_path / "t"), "--schema", "id int64")
    assert exists.code == 1 and exists.err.startswith("error: a table already exists at ")
    usage = cli("create", str(tmp_path / "u"))  # neither --schema nor --schema-from
    assert usage.code == 2 and "one of the arguments --schema --schema-from is required" in (
        usage.err
    )
    for wrong in (
        [],
        ["scan"],
        ["scan", str(tmp_path / "t"), "--bogus"],
        ["scan", str(tmp_path / "t"), "--limit", "many"],
        ["frobnicate", str(tmp_path / "t")],
        ["tail", str(tmp_path / "t"), "--from", "yesterday"],
    ):
        result = cli(*wrong)
        assert result.code == 2, wrong
        assert result.err.count("\n") == 1 and result.err.startswith("error: appendtable"), wrong
        assert "usage:" not in result.err and "--help" in result.err


def test_debug_adds_the_traceback(cli: Any, tmp_path: Path) -> None:
    plain = cli("info", str(tmp_path / "none"))
    assert "Traceback" not in plain.err
    debug = cli("info", str(tmp_path / "none"), "--debug")
    assert "Traceback (most recent call last)" in debug.err
    assert "TableNotFoundError" in debug.err
    assert debug.err.splitlines()[-1].startswith("error: no table at")
    before = cli("--debug", "info", str(tmp_path / "none"))
    assert "Traceback" in before.err


def test_storage_options_reach_the_table(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[object] = []
    real = at.open_table

    def spy(uri: str, *, storage_options: Any = None) -> at.Table:
        seen.append(storage_options)
        return real(uri)

    cli("create", str(tmp_path / "t"), "--schema", "id int64")
    monkeypatch.setattr(at, "open_table", spy)
    result = cli(
        "--storage-option", "anon=true", "info", str(tmp_path / "t"), "--storage-option", "n=3"
    )
    assert result.code == 0
    assert seen == [{"anon": True, "n": 3}]


def test_memory_urls_are_refused_with_the_reason(cli: Any) -> None:
    """Every command is a new process, in which a memory:// table would not exist."""
    for command in (["create", "memory://cli/t", "--schema", "id int64"], ["info", "memory://t"]):
        result = cli(*command)
        assert result.code == 2
        assert "lives only as long as the process" in result.err
        assert result.err.count("\n") == 1


def test_standard_input(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", "id int64, name string")
    feeds = {
        "csv": b"id,name\n1,a\n2,b\n",
        "jsonl": b'{"id": 3, "name": "c"}\n',
        "parquet": _parquet_bytes(pa.table({"id": [4], "name": ["d"]})),
    }
    for fmt, data in feeds.items():
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
        result = cli("append", uri, "-", "--format", fmt, "-q")
        assert result.code == 0, result.err
        assert result.out.startswith("-: ")
    assert sorted(at.open_table(uri).scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    missing = cli("append", uri, "-")
    assert missing.code == 2 and "needs --format" in missing.err


def _parquet_bytes(data: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink)
    return bytes(sink.getvalue())


def test_or_in_filters(cli: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    cli("create", uri, "--schema", "id int64, name string")
    table = at.open_table(uri)
    table.append(pa.table({"id": [1, 2, 3, 4], "name": ["a", "b and c", "c", "or"]}))

    def ids(*filters: str) -> list[int]:
        args = [x for f in filters for x in ("--filter", f)]
        result = cli("scan", uri, *args, "--format", "jsonl")
        assert result.code == 0, result.err
        return sorted(json.loads(line)["id"] for line in result.out.splitlines())

    assert ids("id = 1 or name = 'b and c'") == [1, 2]
    assert ids("id = 1 OR id = 3", "id >= 2") == [3]  # several options: all hold
    assert ids("name in ('or', 'x') or id = 3 and name = 'c'") == [3, 4]  # and binds tighter
    assert ids("id = 4 or id = 1", "name = 'or' or id < 2") == [1, 4]
    broken = cli("scan", uri, "--filter", "id = 1 or")
    assert broken.code == 2 and "needs a condition on each side" in broken.err
    empty = cli("scan", uri, "--filter", " ")  # said "'or' needs a condition on each side"
    assert empty.code == 2 and "--filter is empty" in empty.err


def test_consumers_and_delete_consumer(cli: Any, queue: tuple[str, at.Table]) -> None:
    uri, table = queue
    assert "(0 rows)" in cli("consumers", uri).out
    table.stream(consumer_id="billing").commit(table.stream().checkpoint())
    listed = json.loads(cli("consumers", uri, "--format", "jsonl").out)
    expected = at.open_table(uri).consumers()["billing"]
    assert (listed["consumer"], listed["kind"], listed["bucket"]) == ("billing", "consumer", None)
    # the position of a reader that read nothing yet: snapshot 2 in full
    assert (listed["next_snapshot"], listed["rows_behind"]) == (expected, table.scan().count())
    assert listed["status"] == "behind"
    assert cli("delete-consumer", uri, "billing").out == "deleted consumer billing\n"
    assert at.open_table(uri).consumers() == {}
    again = cli("delete-consumer", uri, "billing")
    assert again.code == 1 and "has no consumer 'billing'" in again.err


def _bucket_counts(table: at.Table) -> dict[int, int]:
    """Rows per bucket, from the bucket hash of the rows (not from the group code)."""
    data = table.scan().to_arrow()
    buckets = at.bucket_ids([data["user_id"]], 2).tolist()
    return {b: buckets.count(b) for b in (0, 1)}


def test_consumers_shows_the_lag_of_each_member_and_bucket(
    cli: Any, queue: tuple[str, at.Table]
) -> None:
    uri, table = queue
    options = {"consumer.group.lease-time": "10 min"}  # no lease runs out on a slow host
    a = table.stream(group="billing", member="a", options=options)
    b = table.stream(group="billing", member="b", options=options)
    a.heartbeat()  # follows b's join: one bucket each
    assert {frozenset(a.assignment), frozenset(b.assignment)} == {frozenset({0}), frozenset({1})}
    unit = b.poll()
    assert unit is not None
    b.commit()  # b is caught up; a has read nothing yet

    def lag(*args: str) -> dict[int, dict[str, Any]]:
        result = cli("consumers", uri, "--group", "billing", "--format", "jsonl", *args)
        assert result.code == 0, result.err
        rows = [json.loads(line) for line in result.out.splitlines()]
        return {row["bucket"]: row for row in rows}

    counts = _bucket_counts(table)
    (mine,) = a.assignment
    (theirs,) = b.assignment
    rows = lag()
    assert sorted(rows) == [0, 1]
    assert (rows[mine]["member"], rows[theirs]["member"]) == ("a", "b")
    assert rows[mine]["rows_behind"] == counts[mine] and rows[mine]["status"] == "behind"
    assert rows[mine]["snapshots_behind"] == 1  # the group started at snapshot 2, in full
    assert rows[theirs]["rows_behind"] == 0 and rows[theirs]["status"] == "caught-up"
    waiting = time.time() - table.latest_snapshot().time_ms / 1000  # since snapshot 2 landed
    assert 0 < rows[mine]["seconds_behind"] <= waiting + 0.01
    assert lag("--stalled-after", "0s")[mine]["status"] == "stalled"
    a.close()
    b.close()
    assert {row["status"] for row in lag().values()} == {"unassigned"}
    text = cli("consumers", uri).out
    assert "billing" in text and "unassigned" in text
    missing = cli("consumers", uri, "--group", "nobody")
    assert missing.code == 1 and "has no consumer group 'nobody'" in missing.err


def test_consumers_shows_members_whose_lease_ran_out_as_expired(
    cli: Any, queue: tuple[str, at.Table]
) -> None:
    uri, table = queue
    options = {"consumer.group.lease-time": "100 ms"}
    a = table.stream(group="billing", member="a", options=options)
    b = table.stream(group="billing", member="b", options=options)
    time.sleep(0.3)  # neither member renews its lease: both are dead or hung, as far as it shows
    result = cli("consumers", uri, "--group", "billing", "--format", "jsonl")
    assert result.code == 0, result.err
    rows = [json.loads(line) for line in result.out.splitlines()]
    assert sorted(row["bucket"] for row in rows) == [0, 1]
    assert {row["status"] for row in rows} == {"expired"}
    a.close()
    b.close()


def test_tail_joins_a_consumer_group(cli: Any, queue: tuple[str, at.Table]) -> None:
    uri, table = queue
    common = ("--format", "jsonl", "--idle-exit", "0.2", "--poll", "10ms", "--group", "g")

    def seqs(*args: str) -> list[int]:
        result = cli("tail", uri, *common, *args)
        assert result.code == 0, result.err
        return [json.loads(line)["seq"] for line in result.out.splitlines()]

    assert sorted(seqs("--member", "t1")) == list(range(16))
    assert seqs("--member", "t1") == []  # committed per bucket after each printed unit
    table.append(pa.table({"user_id": [1, 2], "seq": [16, 17]}))
    assert sorted(seqs()) == [16, 17]  # a fresh member name: the same group's progress
    lag = table.consumer_lag(group="g")
    assert lag["rows_behind"].to_pylist() == [0, 0]
    assert cli("tail", uri, *common, "--buckets", "0").code == 2
    assert cli("tail", uri, "--member", "t1").code == 2
    assert cli("tail", uri, *common, "--consumer-id", "c").code == 2


@pytest.mark.parametrize("reader", ["consumer", "group"])
def test_tail_commits_past_snapshots_without_rows(
    cli: Any, queue: tuple[str, at.Table], reader: str
) -> None:
    """Found by a docs-only hunt: ``tail --consumer-id c --idle-exit`` committed only after
    printed units, so a drained consumer stayed before trailing compactions, deletes and
    schema changes and held back expiration and purge (queue.md says a drained, committed
    consumer blocks neither)."""
    uri, table = queue
    who = ("--consumer-id", "c") if reader == "consumer" else ("--group", "g")
    common = ("--format", "jsonl", "--idle-exit", "0.2", "--poll", "10ms", *who)
    assert cli("tail", uri, *common).code == 0
    table.compact(full=True)
    table.delete([("seq", "=", 3)])
    with table.update_schema() as update:
        update.add_column("note", pa.string())
    latest = table.latest_snapshot()
    assert latest is not None and [s.kind for s in table.snapshots()][-3:] == [
        at.CommitKind.COMPACT,
        at.CommitKind.DELETE,
        at.CommitKind.ALTER,
    ]
    result = cli("tail", uri, *common)
    assert result.code == 0 and result.out == "", result.err
    if reader == "consumer":
        assert table.consumers() == {"c": latest.id + 1}
    else:
        assert set(table.consumer_lag(group="g")["snapshots_behind"].to_pylist()) == {0}
    expired = table.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1000)
    assert expired.expired_snapshots[-1] == latest.id - 1  # nothing held back


def test_result_type_is_used() -> None:
    assert Result(0, "", "").code == 0


@pytest.fixture
def queue(tmp_path: Path) -> tuple[str, at.Table]:
    uri = str(tmp_path / "queue")
    schema = pa.schema([("user_id", pa.int64()), ("seq", pa.int64())])
    table = at.create_table(uri, schema, options={"bucket": 2, "bucket-key": "user_id"})
    for start in (0, 8):
        seq = list(range(start, start + 8))
        table.append(pa.table({"user_id": [i % 4 for i in seq], "seq": seq}, schema=schema))
    return uri, table


def test_tail_start_positions_and_bucket_subsets(cli: Any, queue: tuple[str, at.Table]) -> None:
    uri, _table = queue
    common = ("--format", "jsonl", "--idle-exit", "0.05", "--poll", "10ms")

    def seqs(*args: str) -> list[int]:
        result = cli("tail", uri, *common, *args)
        assert result.code == 0, result.err
        return [json.loads(line)["seq"] for line in result.out.splitlines()]

    assert sorted(seqs()) == list(range(16))  # latest-full
    assert seqs("--from", "latest") == []
    assert sorted(seqs("--from", "earliest", "--max-units", "1")) == list(range(8))
    assert sorted(seqs("--from", "earliest")) == list(range(16))
    bucket_0 = seqs("--buckets", "0")
    bucket_1 = seqs("--buckets", "1")
    assert bucket_0 and bucket_1
    assert sorted(bucket_0 + bucket_1) == list(range(16))
    assert sorted(seqs("--filter", "user_id = 1", "--columns", "seq")) == [1, 5, 9, 13]
    text = cli("tail", uri, "--idle-exit", "0.05", "--max-units", "1").out.splitlines()
    assert text[0] == "-- snapshot 2 (APPEND, full)"
    assert text[1].split() == ["user_id", "seq"]
    assert text[-1] == "(16 rows)"
    assert len(text) == 4 + 16  # caption, header, rule, rows, count


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_tail_counts_the_rows_it_prints_after_a_delete(
    cli: Any, tmp_path: Path, vectors: str
) -> None:
    """The unit's files still count the rows a later delete removed; tail prints (and
    counts) only the rows delivered."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64())])
    table = at.create_table(uri, schema, options={"deletion-vectors.enabled": vectors})
    appended = pa.table({"id": list(range(10))}, schema=schema)
    table.append(appended)
    table.delete([("id", "<", 7)])
    kept = appended.filter(pc.greater_equal(appended["id"], 7))
    text = cli("tail", uri, "--from", "earliest", "--idle-exit", "0.05").out.splitlines()
    assert text[0] == "-- snapshot 1 (APPEND, full)"
    assert [int(line) for line in text[3:-1]] == kept["id"].to_pylist()
    assert text[-1] == f"({kept.num_rows} rows)"


def test_tail_errors(cli: Any, queue: tuple[str, at.Table]) -> None:
    uri, _table = queue
    bad = cli("tail", uri, "--buckets", "7", "--idle-exit", "0")
    assert bad.code == 1 and bad.err.startswith("error: buckets: 7 is not a bucket")
    assert cli("tail", uri, "--poll", "soon").code == 2
    assert cli("tail", uri, "--max-units", "0").code == 2
    assert cli("tail", uri, "--from", "yesterday").code == 2


def test_tail_on_an_empty_table_waits_for_the_first_snapshot(cli: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "empty")
    cli("create", uri, "--schema", "id int64")
    result = cli("tail", uri, "--from", "earliest", "--idle-exit", "0.05", "--poll", "10ms")
    assert (result.code, result.out) == (0, "")
