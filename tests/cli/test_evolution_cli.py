"""alter, schema, tag, and the evolution parts of info, scan and rollback, run in-process
through ``main`` and checked through the Python API."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.cli.ddl import (
    ColumnDefinition,
    ColumnMove,
    DdlError,
    parse_column,
    parse_move,
    parse_schema,
)

from .conftest import Result, run_process

Cli = Callable[..., Result]

SCHEMA = pa.schema(
    [
        ("day", pa.date32()),
        pa.field("user_id", pa.int64(), nullable=False),
        ("action", pa.string()),
        ("amount", pa.float64()),
        ("clicks", pa.int32()),
        ("legacy", pa.string()),
        ("payload", pa.struct([("a", pa.int32())])),
    ]
)
DAY = dt.date(2024, 5, 1)


def rows(count: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "day": pa.array([DAY] * count, pa.date32()),
            "user_id": ids,
            "action": [f"a{i}" for i in ids],
            "amount": [i * 1.5 for i in ids],
            "clicks": pa.array(ids, pa.int32()),
            "legacy": [f"l{i}" for i in ids],
            "payload": [{"a": i} for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def uri(tmp_path: Path) -> str:
    """A partitioned, bucketed table with two snapshots of 2 rows each (schema 0)."""
    location = str(tmp_path / "events")
    table = at.create_table(
        location, SCHEMA, partition_by=["day"], options={"bucket": 2, "bucket-key": "user_id"}
    )
    table.append(rows(2))
    table.append(rows(2, start=2))
    return location


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    return result


def failed(result: Result, code: int) -> str:
    """The one error line of a failed command."""
    assert result.code == code, (result.out, result.err)
    assert result.err.count("\n") == 1 and result.err.startswith("error: "), result.err
    return result.err


def by_id(table: at.Table) -> list[dict[str, object]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: int(str(r["user_id"])))


# ---- alter --------------------------------------------------------------------------------------


def test_alter_lands_every_change_as_one_schema_version(cli: Cli, uri: str) -> None:
    result = ok(
        cli(
            "alter",
            uri,
            "--add-column",
            "country string after action",
            "--rename",
            "amount=amount_eur",
            "--drop",
            "legacy",
            "--widen",
            "clicks=int64",
            "--add-column",
            "payload.b string",
            "--set",
            "target-file-size=64mb",
        )
    )
    table = at.open_table(uri)
    assert table.schema_id == 1
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == 3 and latest.kind == at.CommitKind.ALTER
    assert [s.kind for s in table.snapshots()].count(at.CommitKind.ALTER) == 1
    assert table.schema == pa.schema(
        [
            ("day", pa.date32()),
            pa.field("user_id", pa.int64(), nullable=False),
            ("action", pa.string()),
            ("country", pa.string()),
            ("amount_eur", pa.float64()),
            ("clicks", pa.int64()),
            ("payload", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ]
    )
    assert table.options["target-file-size"] == "64mb"
    assert by_id(table)[1] == {
        "day": DAY,
        "user_id": 1,
        "action": "a1",
        "country": None,
        "amount_eur": 1.5,
        "clicks": 1,
        "payload": {"a": 1, "b": None},
    }
    assert result.out.splitlines() == [
        f"altered {uri}: schema 0 -> 1 (snapshot 3, ALTER)",
        "  added column country string after action",
        "  renamed column amount to amount_eur",
        "  dropped column legacy",
        "  widened column clicks from int32 to int64",
        "  added column payload.b string",
        "  set option target-file-size=64mb",
        "  schema: day date32[day], user_id int64 not null, action string, country string, "
        "amount_eur double, clicks int64, payload struct<a int32, b string>",
    ]
    # Old files are read by field id: the renamed column keeps its values, a new one is null.
    assert table.scan(filter=[("amount_eur", ">", 4.0)]).count() == 1


def test_a_refused_change_lands_none_of_the_others(cli: Cli, uri: str) -> None:
    before = at.open_table(uri)
    schema, schema_id, snapshots = before.schema, before.schema_id, len(before.snapshots())
    err = failed(
        cli(
            "alter",
            uri,
            "--add-column",
            "country string",
            "--drop",
            "day",
            "--set",
            "write-only=true",
        ),
        1,
    )
    assert err == "error: alter: cannot drop 'day': it is a partition column; nothing was changed\n"
    after = at.open_table(uri)
    assert (after.schema, after.schema_id, len(after.snapshots())) == (
        schema,
        schema_id,
        snapshots,
    )
    assert "country" not in after.schema.names
    assert after.schemas().keys() == {0}


def test_changes_apply_in_command_line_order(cli: Cli, uri: str) -> None:
    # The column is added after 'action' while it still has that name, then renamed.
    ok(cli("alter", uri, "--add-column", "country string after action", "--rename", "action=act"))
    assert at.open_table(uri).schema.names[:4] == ["day", "user_id", "act", "country"]
    # The other way round 'action' no longer exists when the column is placed.
    err = failed(cli("alter", uri, "--rename", "act=what", "--move", "country after act"), 1)
    assert "'act'" in err and "nothing was changed" in err
    assert at.open_table(uri).schema.names[:4] == ["day", "user_id", "act", "country"]


def test_alter_errors_name_the_column(cli: Cli, uri: str) -> None:
    cases = {
        ("--drop", "nope"): "error: alter: column 'nope' does not exist (the table has day, ",
        ("--rename", "nope=x"): "error: alter: column 'nope' does not exist",
        ("--widen", "clicks=int16"): "error: alter: cannot change 'clicks' from int32 to int16: "
        "only widening is allowed",
        ("--widen", "day=date64"): "error: alter: cannot change the type of 'day': it is a "
        "partition column",
        ("--widen", "user_id=decimal(30, 0)"): "error: alter: cannot change the type of "
        "'user_id': it is a bucket-key column",
        ("--rename", "day=d"): "error: alter: cannot rename 'day': it is a partition column",
        ("--rename", "amount=action"): "error: alter: cannot rename 'amount' to 'action': that "
        "name is taken",
        ("--add-column", "action string"): "error: alter: cannot add column 'action': it "
        "already exists",
        ("--add-column", "x string after nope"): "error: alter: cannot place 'x' next to 'nope'",
        ("--add-column", "payload.nope.x string"): "error: alter: column 'payload.nope' does "
        "not exist",
        ("--move", "nope first"): "error: alter: column 'nope' does not exist",
        ("--nullable", "nope"): "error: alter: column 'nope' does not exist",
        ("--doc", "nope=text"): "error: alter: column 'nope' does not exist",
        ("--set", "bucket=4"): "error: alter: option 'bucket' defines the table's layout",
        ("--set", "buckets=4"): "error: alter: unknown option 'buckets'; did you mean 'bucket'?",
        ("--unset", "nope"): "error: alter: unknown option 'nope'",
    }
    for args, start in cases.items():
        err = failed(cli("alter", uri, *args), 1)
        assert err.startswith(start), (args, err)
        assert err.endswith("; nothing was changed\n"), (args, err)
    table = at.open_table(uri)
    assert table.schema == SCHEMA and table.schema_id == 0


def test_a_required_column_needs_an_empty_table(cli: Cli, uri: str, tmp_path: Path) -> None:
    err = failed(cli("alter", uri, "--add-column", "z string not null"), 1)
    assert err.startswith("error: alter: cannot add required column 'z': the table holds")
    assert err.rstrip().endswith("nothing was changed")
    table = at.open_table(uri)
    assert table.schema == SCHEMA and table.schema_id == 0
    assert list(table.schemas()) == [0]  # no schema version was written
    empty = str(tmp_path / "empty")
    at.create_table(empty, SCHEMA)
    ok(cli("alter", empty, "--add-column", "z string not null first"))
    field = at.open_table(empty).schema.field(0)
    assert (field.name, field.type, field.nullable) == ("z", pa.string(), False)


def test_command_line_mistakes_exit_2(cli: Cli, uri: str) -> None:
    typo = failed(cli("alter", uri, "--widen", "clicks=int1"), 2)
    assert typo.startswith("error: --widen column 'clicks': unknown type 'int1' at position 1")
    assert "did you mean 'int16'?" in typo
    bad = failed(cli("alter", uri, "--add-column", "country strng"), 2)
    assert bad.startswith("error: --add-column 'country strng': unknown type 'strng' at position 9")
    trailing = failed(cli("alter", uri, "--add-column", "country string last"), 2)
    assert "expected 'not null', 'first', 'after COLUMN' or the end, found 'last'" in trailing
    assert "found end of input" in failed(cli("alter", uri, "--add-column", "x int after"), 2)
    assert "expects COLUMN=TYPE" in failed(cli("alter", uri, "--widen", "clicks"), 2)
    assert "expects COLUMN=NEW" in failed(cli("alter", uri, "--rename", "amount"), 2)
    assert "the new name is empty" in failed(cli("alter", uri, "--rename", "amount="), 2)
    assert "expects COLUMN=TEXT" in failed(cli("alter", uri, "--doc", "amount"), 2)
    assert "expected a column name" in failed(cli("alter", uri, "--drop", " "), 2)
    assert "expects KEY=VALUE" in failed(cli("alter", uri, "--set", "target-file-size"), 2)
    assert "expected an option key" in failed(cli("alter", uri, "--unset", ""), 2)
    move = failed(cli("alter", uri, "--move", "amount last"), 2)
    assert "expected 'first', 'after COLUMN' or 'before COLUMN', found 'last'" in move
    nothing = failed(cli("alter", uri), 2)
    assert nothing.startswith("error: alter: nothing to change (give one or more of --add-column")
    assert failed(cli("alter", uri, "--frobnicate", "x"), 2).startswith("error: appendtable")
    assert at.open_table(uri).schema_id == 0


def test_nested_fields_and_quoted_names(cli: Cli, uri: str) -> None:
    ok(cli("alter", uri, "--add-column", "payload.b string first", "--rename", "payload.a=x"))
    assert at.open_table(uri).schema.field("payload").type == pa.struct(
        [("b", pa.string()), ("x", pa.int32())]
    )
    ok(cli("alter", uri, "--drop", "payload.b", "--add-column", "`odd.name` int64 after action"))
    table = at.open_table(uri)
    assert table.schema.field("payload").type == pa.struct([("x", pa.int32())])
    assert table.schema.names[3] == "odd.name"  # quoted: one top-level name, not a path
    ok(cli("alter", uri, "--rename", "`odd.name`=plain", "--widen", "payload.x=int64"))
    table = at.open_table(uri)
    assert table.schema.names[3] == "plain"
    assert table.schema.field("payload").type == pa.struct([("x", pa.int64())])
    assert [r["payload"] for r in by_id(table)] == [{"x": i} for i in range(4)]
    # Quoted parts of a dotted path are taken whole, in every flag.
    ok(cli("alter", uri, "--add-column", "payload.`y z` string", "--move", "payload.`y z` first"))
    ok(cli("alter", uri, "--rename", "payload.`y z`=`w.v`", "--widen", "`payload`.x=int64"))
    assert at.open_table(uri).schema.field("payload").type == pa.struct(
        [("w.v", pa.string()), ("x", pa.int64())]
    )
    ok(cli("alter", uri, "--drop", "payload.`w.v`"))
    assert at.open_table(uri).schema.field("payload").type == pa.struct([("x", pa.int64())])
    bad = failed(cli("alter", uri, "--drop", "payload.`x"), 2)
    assert "unterminated quoted name" in bad


def test_a_name_with_both_kinds_of_quotes_is_shown_and_taken_back(cli: Cli, tmp_path: Path) -> None:
    """``schema`` and ``info`` failed (exit 2) on a table with a column named ``we`ird"name``
    (found by a docs-only hunt): the DDL quotes it with backticks, each doubled, and every
    command takes that spelling back."""
    name = 'we`ird"name'
    schema = pa.schema([("id", pa.int64()), (name, pa.int32())])
    table = at.create_table(str(tmp_path / "t"), schema)
    table.append(pa.table({"id": [1, 2], name: pa.array([5, 6], pa.int32())}))
    shown = ok(cli("schema", table.uri)).out.strip()
    assert '`we``ird"name` int32' in shown
    assert parse_schema(shown) == schema
    assert '`we``ird"name` int32' in ok(cli("info", table.uri)).out
    ok(cli("schema", table.uri, "--history"))
    copy = str(tmp_path / "copy")
    ok(cli("create", copy, "--schema", shown))
    assert at.open_table(copy).schema == schema
    found = ok(cli("scan", table.uri, "--filter", '`we``ird"name` = 6', "--format", "jsonl"))
    assert [json.loads(line)["id"] for line in found.out.splitlines()] == [2]
    ok(cli("alter", table.uri, "--rename", '`we``ird"name`=plain'))
    assert at.open_table(table.uri).schema.names == ["id", "plain"]


def test_nullable_doc_move_set_unset(cli: Cli, uri: str) -> None:
    result = ok(
        cli(
            "alter",
            uri,
            "--nullable",
            "user_id",
            "--move",
            "legacy first",
            "--move",
            "clicks before action",
            "--move",
            "day after amount",
            "--doc",
            "amount=in euros",
            "--set",
            "target-file-size=64mb",
            "--set",
            "snapshot.num-retained.min=20",
        )
    )
    assert result.out.splitlines()[1:8] == [
        "  made column user_id nullable",
        "  moved column legacy first",
        "  moved column clicks before action",
        "  moved column day after amount",
        "  set the doc of column amount",
        "  set option target-file-size=64mb",
        "  set option snapshot.num-retained.min=20",
    ]
    table = at.open_table(uri)
    assert table.schema.names == [
        "legacy",
        "user_id",
        "clicks",
        "action",
        "amount",
        "day",
        "payload",
    ]
    assert table.schema.field("user_id").nullable
    assert table.options == {
        "bucket": "2",
        "bucket-key": "user_id",
        "target-file-size": "64mb",
        "snapshot.num-retained.min": "20",
    }
    # A doc alone is a change too (a new schema version), and removing it another.
    assert "set the doc of column clicks" in ok(cli("alter", uri, "--doc", "clicks=n")).out
    assert at.open_table(uri).schema_id == 2
    assert "removed the doc of column clicks" in ok(cli("alter", uri, "--doc", "clicks=")).out
    assert at.open_table(uri).schema_id == 3
    unset = ok(
        cli("alter", uri, "--unset", "target-file-size", "--unset", "snapshot.num-retained.min")
    )
    assert "  unset option target-file-size" in unset.out.splitlines()
    assert at.open_table(uri).options == {"bucket": "2", "bucket-key": "user_id"}
    assert at.open_table(uri).option("target-file-size") != 64 * 1024**2


def test_a_change_that_changes_nothing_commits_nothing(cli: Cli, uri: str) -> None:
    ok(cli("alter", uri, "--set", "target-file-size=64mb"))
    snapshots = len(at.open_table(uri).snapshots())
    again = ok(cli("alter", uri, "--set", "target-file-size=64mb"))
    assert again.out == "nothing to change: the table is like that already (schema 1)\n"
    same = ok(cli("alter", uri, "--nullable", "action", "--unset", "compaction.min.file-num"))
    assert same.out.startswith("nothing to change")
    assert len(at.open_table(uri).snapshots()) == snapshots


def test_rows_written_after_a_change_read_with_the_old_ones(cli: Cli, uri: str) -> None:
    ok(cli("alter", uri, "--add-column", "country string", "--rename", "amount=eur"))
    table = at.open_table(uri)
    new = pa.table(
        {
            "day": pa.array([DAY], pa.date32()),
            "user_id": [9],
            "action": ["x"],
            "eur": [2.0],
            "clicks": pa.array([1], pa.int32()),
            "legacy": ["y"],
            "payload": pa.array([{"a": 1}], SCHEMA.field("payload").type),
            "country": ["fr"],
        }
    )
    table.append(new)
    result = ok(
        cli(
            "scan",
            uri,
            "--filter",
            "eur >= 2",
            "--columns",
            "user_id,eur,country",
            "--format",
            "jsonl",
        )
    )
    got = sorted((json.loads(line) for line in result.out.splitlines()), key=lambda r: r["user_id"])
    assert got == [
        {"user_id": 2, "eur": 3.0, "country": None},
        {"user_id": 3, "eur": 4.5, "country": None},
        {"user_id": 9, "eur": 2.0, "country": "fr"},
    ]
    assert ok(cli("scan", uri, "--filter", "country = fr", "--count")).out == "1\n"


# ---- schema -------------------------------------------------------------------------------------


def test_schema_prints_the_ddl_that_create_takes_back(cli: Cli, uri: str, tmp_path: Path) -> None:
    ok(cli("alter", uri, "--add-column", "payload.`b c` list<string>", "--set", "write-only=true"))
    out = ok(cli("schema", uri)).out
    assert out.splitlines() == [
        f"-- schema 1 of {uri}",
        "-- partitioned by: day",
        "-- options: bucket=2, bucket-key=user_id, write-only=true",
        "day date32[day],",
        "user_id int64 not null,",
        "action string,",
        "amount double,",
        "clicks int32,",
        "legacy string,",
        "payload struct<a int32, `b c` list<string>>",
    ]
    copy = str(tmp_path / "copy")
    ok(cli("create", copy, "--schema", out, "--partition-by", "day"))
    assert at.open_table(copy).schema == at.open_table(uri).schema
    assert parse_schema(out) == at.open_table(uri).schema


def test_schema_round_trips_odd_names(cli: Cli, tmp_path: Path) -> None:
    odd = str(tmp_path / "odd")
    ddl = '`my col` int64 not null, "not" string, "a`b" struct<`x y`: int32>, `--x` date32'
    ok(cli("create", odd, "--schema", ddl))
    printed = ok(cli("schema", odd)).out
    again = str(tmp_path / "again")
    ok(cli("create", again, "--schema", printed))
    assert at.open_table(again).schema == at.open_table(odd).schema
    assert at.open_table(odd).schema.names[-1] == "--x"  # quoted: not a comment


def test_schema_round_trips_in_real_processes(uri: str, tmp_path: Path) -> None:
    printed = run_process("schema", uri)
    assert printed.code == 0, printed.err
    copy = str(tmp_path / "copy")
    created = run_process("create", copy, "--schema", printed.out)
    assert created.code == 0, created.err
    assert at.open_table(copy).schema == SCHEMA


def test_schema_formats_and_history(cli: Cli, uri: str) -> None:
    ok(cli("alter", uri, "--drop", "legacy", "--set", "write-only=true"))
    ok(cli("alter", uri, "--rename", "amount=eur"))
    current = json.loads(ok(cli("schema", uri, "--format", "jsonl")).out)
    table = at.open_table(uri)
    assert current["schema_id"] == table.schema_id == 2
    assert current["current"] is True
    assert parse_schema(current["columns"]) == table.schema
    assert current["options"] == "bucket=2, bucket-key=user_id, write-only=true"
    history = [
        json.loads(line)
        for line in ok(cli("schema", uri, "--history", "--format", "jsonl")).out.splitlines()
    ]
    assert [(h["schema_id"], h["current"]) for h in history] == [(0, False), (1, False), (2, True)]
    for entry in history:
        assert parse_schema(entry["columns"]) == table.schemas()[entry["schema_id"]]
    assert history[0]["options"] == "bucket=2, bucket-key=user_id"
    # (compared as times: the text has as many fractional digits as needed, none on a second)
    times = [dt.datetime.fromisoformat(h["time"]) for h in history]
    assert times == sorted(times), times
    listed = list(
        csv.DictReader(io.StringIO(ok(cli("schema", uri, "--history", "--format", "csv")).out))
    )
    assert [r["schema_id"] for r in listed] == ["0", "1", "2"]
    assert listed[2]["current"] == "true" and "eur double" in listed[2]["columns"]
    text = ok(cli("schema", uri, "--history")).out.splitlines()
    assert text[0].startswith("schema 0  20") and not text[0].endswith("(current)")
    assert text[1] == "  columns  " + history[0]["columns"]
    assert text[2] == "  options  bucket=2, bucket-key=user_id"
    assert text[6].startswith("schema 2  ") and text[6].endswith("  (current)")
    assert text[-1] == "(3 schema versions)"
    # A rollback keeps the current schema; with --restore-schema an older one is current again.
    ok(cli("rollback", uri, "2"))
    assert ok(cli("schema", uri)).out.startswith(f"-- schema 2 of {uri}\n")
    restored = ok(cli("rollback", uri, "2", "--restore-schema"))
    assert restored.out.endswith(", schema 0 (restored)\n")
    assert ok(cli("schema", uri)).out.startswith(f"-- schema 0 of {uri}\n")
    again = [
        json.loads(line)
        for line in ok(cli("schema", uri, "--history", "--format", "jsonl")).out.splitlines()
    ]
    assert [h["current"] for h in again] == [True, False, False]


def test_schema_of_a_missing_table(cli: Cli, tmp_path: Path) -> None:
    err = failed(cli("schema", str(tmp_path / "none")), 1)
    assert err == f"error: no table at {tmp_path / 'none'} (no schema/ files)\n"


# ---- tag ----------------------------------------------------------------------------------------


def test_tags(cli: Cli, uri: str) -> None:
    assert ok(cli("tag", uri)).out == "tag  snapshot_id\n---  -----------\n(0 rows)\n"
    created = ok(cli("tag", uri, "create", "v1"))
    assert created.out.startswith("created tag v1 on snapshot 2 (APPEND at ")
    assert created.out.endswith("), 4 rows, 3 files\n")
    ok(cli("tag", uri, "create", "first", "--snapshot", "1"))
    assert at.open_table(uri).tags() == {"first": 1, "v1": 2}
    listed = [
        json.loads(line)
        for line in ok(cli("tag", uri, "list", "--format", "jsonl")).out.splitlines()
    ]
    assert listed == [{"tag": "first", "snapshot_id": 1}, {"tag": "v1", "snapshot_id": 2}]
    text = ok(cli("tag", uri)).out.splitlines()
    assert text[2].split() == ["first", "1"] and text[-1] == "(2 rows)"
    taken = failed(cli("tag", uri, "create", "v1", "--snapshot", "1"), 1)
    assert taken == "error: tag 'v1' already exists (on snapshot 2); delete it first to move it\n"
    assert failed(cli("tag", uri, "create", "v9", "--snapshot", "99"), 1).startswith(
        "error: no such snapshot: 99"
    )
    assert ok(cli("tag", uri, "delete", "v1")).out == "deleted tag v1\n"
    assert at.open_table(uri).tags() == {"first": 1}
    missing = failed(cli("tag", uri, "delete", "v1"), 1)
    assert missing == "error: no tag named 'v1' (tags: first)\n"


def test_tag_command_line_mistakes(cli: Cli, uri: str) -> None:
    assert "invalid tag name 'bad name'" in failed(cli("tag", uri, "create", "bad name"), 2)
    assert "give the tag's NAME" in failed(cli("tag", uri, "create"), 2)
    assert "give the tag's NAME" in failed(cli("tag", uri, "delete"), 2)
    assert "unexpected 'v1'" in failed(cli("tag", uri, "list", "v1"), 2)
    assert "--snapshot applies to" in failed(cli("tag", uri, "--snapshot", "1"), 2)
    assert "--snapshot applies to" in failed(cli("tag", uri, "delete", "x", "--snapshot", "1"), 2)
    assert failed(cli("tag", uri, "move", "v1"), 2).startswith("error: appendtable tag: ")
    assert at.open_table(uri).tags() == {}


def test_tag_of_an_empty_table(cli: Cli, tmp_path: Path) -> None:
    empty = str(tmp_path / "empty")
    at.create_table(empty, SCHEMA)
    assert "no snapshot to tag yet" in failed(cli("tag", empty, "create", "v1"), 1)


def test_scan_and_rollback_by_tag_across_schema_changes(cli: Cli, uri: str) -> None:
    ok(cli("tag", uri, "create", "before"))
    ok(cli("alter", uri, "--rename", "amount=eur", "--drop", "legacy"))
    at.open_table(uri).append(
        rows(1, start=10)
        .rename_columns([*SCHEMA.names[:3], "eur", *SCHEMA.names[4:]])
        .drop_columns(["legacy"])
    )
    # The tag reads the snapshot in its own schema: the filter takes the old column name.
    tagged = ok(cli("scan", uri, "--tag", "before", "--filter", "amount > 2", "--format", "jsonl"))
    got = [json.loads(line) for line in tagged.out.splitlines()]
    assert sorted(r["user_id"] for r in got) == [2, 3]
    assert all(r["legacy"] is not None for r in got)
    assert (
        ok(cli("scan", uri, "--snapshot", "1", "--filter", "amount >= 0", "--count")).out == "2\n"
    )
    assert ok(cli("scan", uri, "--filter", "eur > 2", "--count")).out == "3\n"
    assert "unknown column 'amount'" in failed(cli("scan", uri, "--filter", "amount > 2"), 2)
    assert "not allowed with argument" in failed(
        cli("scan", uri, "--tag", "before", "--snapshot", "1"), 2
    )
    assert (
        failed(cli("scan", uri, "--tag", "nope"), 1)
        == "error: no tag named 'nope' (tags: before)\n"
    )
    # rollback --tag: the rows of the tagged snapshot again, read under the current schema.
    current = at.open_table(uri).schema
    result = ok(cli("rollback", uri, "--tag", "before"))
    assert result.out == (
        "rolled back to tag before (snapshot 2): new snapshot 5 (OVERWRITE) holds 4 rows in "
        "3 files, schema 1 (kept)\n"
    )
    table = at.open_table(uri)
    assert table.schema == current
    renamed = [
        {("eur" if k == "amount" else k): v for k, v in row.items() if k != "legacy"}
        for row in rows(4).to_pylist()
    ]
    assert by_id(table) == sorted(renamed, key=lambda r: int(str(r["user_id"])))
    assert ok(cli("scan", uri, "--filter", "eur > 2", "--count")).out == "2\n"
    # --restore-schema: the schema of the tagged snapshot too.
    result = ok(cli("rollback", uri, "--tag", "before", "--restore-schema"))
    assert result.out.endswith("holds 4 rows in 3 files, schema 0 (restored)\n")
    table = at.open_table(uri)
    assert table.schema == SCHEMA
    assert by_id(table) == sorted(rows(4).to_pylist(), key=lambda r: int(str(r["user_id"])))
    assert "exactly one" in failed(cli("rollback", uri), 2)
    assert "exactly one" in failed(cli("rollback", uri, "1", "--tag", "before"), 2)
    assert "no tag named 'gone'" in failed(cli("rollback", uri, "--tag", "gone"), 1)


def test_info_shows_the_schema_id_and_the_tags(cli: Cli, uri: str) -> None:
    out = ok(cli("info", uri)).out
    assert "schema id        0\n" in out
    assert "tags" not in out
    ok(cli("tag", uri, "create", "v1", "--snapshot", "1"))
    ok(cli("alter", uri, "--add-column", "country string"))
    ok(cli("tag", uri, "create", "v2"))
    out = ok(cli("info", uri)).out
    assert "schema id        1\n" in out
    assert "tags             v1 -> 1, v2 -> 3\n" in out
    assert "  country string\n" in out


# ---- the DDL of alter ---------------------------------------------------------------------------


def test_parse_column() -> None:
    assert parse_column("country string after action") == ColumnDefinition(
        "country", pa.string(), after="action"
    )
    assert parse_column("payload.n decimal(10, 2) not null first") == ColumnDefinition(
        "payload.n", pa.decimal128(10, 2), nullable=False, first=True
    )
    quoted = parse_column('`a.b`: list<int32> after "x y"')
    assert quoted == ColumnDefinition(("a.b",), pa.list_(pa.int32()), after="x y")
    assert quoted.name == "a.b"
    assert parse_column("m map<string, int64>").type == pa.map_(pa.string(), pa.int64())
    for bad, message in {
        "x": "expected a type, found end of input at position 2",
        "x string first after y": "expected the end after 'first', found 'after'",
        "x string after y z": "expected the end after 'after COLUMN', found 'z'",
        "x string not": "expected 'not null', 'first', 'after COLUMN' or the end, found 'not'",
    }.items():
        with pytest.raises(DdlError, match=message):
            parse_column(bad)


def test_parse_move() -> None:
    assert parse_move("a first") == ColumnMove("a", first=True)
    assert parse_move("payload.a after b") == ColumnMove("payload.a", after="b")
    assert parse_move("`x y` before `z`") == ColumnMove(("x y",), before="z")
    with pytest.raises(DdlError, match="expected 'first', 'after COLUMN' or 'before COLUMN'"):
        parse_move("a")
    with pytest.raises(DdlError, match="expected the end after 'first', found 'b'"):
        parse_move("a first b")


def test_ddl_comments() -> None:
    text = "-- a comment\nid int64 not null, -- the key\n-- between\nname string\n--"
    assert parse_schema(text) == pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("name", pa.string())]
    )
    assert parse_schema("`--x` int64, a-b int64").names == ["--x", "a-b"]
    with pytest.raises(DdlError, match="no columns given"):
        parse_schema("-- only a comment")


def test_the_iceberg_command_prints_and_repairs_the_mirror(cli: Cli, uri: str) -> None:
    off = ok(cli("iceberg", uri)).out
    assert "the Iceberg mirror is off" in off
    ok(cli("alter", uri, "--set", "metadata.iceberg.storage=table-location"))
    location = ok(cli("iceberg", uri)).out.strip()
    assert location.endswith(".metadata.json") and Path(location).exists()
    assert location == at.open_table(uri).iceberg_metadata_location()
    repaired = ok(cli("iceberg", uri, "--repair")).out.strip()
    assert repaired.startswith("Iceberg mirror rebuilt: ")
    rebuilt = repaired.split(": ", 1)[1]
    assert rebuilt != location and Path(rebuilt).exists()
    assert rebuilt == at.open_table(uri).iceberg_metadata_location()
