"""An overwrite of given partitions writes only into them: rows of any other partition are
refused (SchemaMismatchError naming the partition) before anything is written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.commit.changes import CommitRequest

SCHEMA = pa.schema([("day", pa.date32()), ("region", pa.string()), ("v", pa.int64())])
D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)


def _rows(*rows: tuple[dt.date, str, int]) -> pa.Table:
    return pa.table(
        {"day": [r[0] for r in rows], "region": [r[1] for r in rows], "v": [r[2] for r in rows]},
        schema=SCHEMA,
    )


@pytest.fixture
def table(tmp_path: Path) -> at.Table:
    created = at.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["day", "region"])
    created.append(_rows((D1, "eu", 1), (D2, "eu", 2), (D1, "us", 3)))
    return created


def _data_files(table: at.Table) -> set[Path]:
    return set(Path(table.uri).rglob("*.parquet"))


@pytest.mark.parametrize(
    ("specs", "rows", "named"),
    [
        ([{"day": D1}], [(D2, "eu", 9)], "day=2024-01-02/region=eu"),  # the reported case
        ([{"day": D1}], [(D1, "eu", 8), (D2, "eu", 9)], "day=2024-01-02/region=eu"),
        ([{"day": D1, "region": "eu"}], [(D1, "us", 9)], "day=2024-01-01/region=us"),
        ([{"day": D1, "region": "eu"}, {"day": D2}], [(D1, "us", 9)], "day=2024-01-01/region=us"),
    ],
)
def test_rows_outside_the_overwritten_partitions_are_refused_before_writing(
    table: at.Table,
    specs: list[dict[str, object]],
    rows: list[tuple[dt.date, str, int]],
    named: str,
) -> None:
    before, files = table.scan().to_arrow(), _data_files(table)
    with pytest.raises(at.SchemaMismatchError, match=f"partition {named} are outside") as info:
        table.overwrite(_rows(*rows), partitions=specs)
    assert info.value.column == "day"
    assert table.scan().to_arrow().equals(before)
    assert _data_files(table) == files  # nothing was written


def test_rows_inside_the_partitions_replace_only_them(table: at.Table) -> None:
    table.overwrite(_rows((D1, "eu", 7), (D1, "eu", 8)), partitions=[{"day": D1, "region": "eu"}])
    got = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: (r["day"], r["region"], r["v"]))
    assert [(r["day"], r["region"], r["v"]) for r in got] == [
        (D1, "eu", 7),
        (D1, "eu", 8),
        (D1, "us", 3),
        (D2, "eu", 2),
    ]


def test_the_two_phase_overwrite_and_the_commit_protocol_refuse_them_too(table: at.Table) -> None:
    with table.writer() as writer:
        writer.write(_rows((D2, "eu", 9)))
        messages = writer.prepare_commit()
    with pytest.raises(at.SchemaMismatchError, match="day=2024-01-02/region=eu"):
        table.committer().overwrite(messages, partitions=[{"day": D1}])
    state = table._state
    request = CommitRequest(
        kind=at.CommitKind.OVERWRITE,
        commit_user="direct",
        messages=tuple(messages),
        overwrite=state.partition_scope([{"day": D1}]),
    )
    with pytest.raises(at.SchemaMismatchError, match="outside the partitions"):
        state.committer().commit(request)
    assert table.scan().count() == 3


@pytest.mark.parametrize("nothing", [[], [{}], [{"day": D1}, {}]], ids=["[]", "[{}]", "[.., {}]"])
def test_an_empty_list_of_partitions_is_refused_not_read_as_every_row(
    table: at.Table, nothing: list[dict[str, object]]
) -> None:
    """``overwrite(data, partitions=[])`` replaced the whole table (found by a docs-only
    hunt): a job computing the partitions it rewrites, and finding none, wiped the table.
    So did an empty spec ``{}`` (found by the next hunt): it names no partition column."""
    before, files = table.scan().to_arrow(), _data_files(table)
    with table.writer() as writer:
        writer.write(_rows((D2, "eu", 9)))
        messages = writer.prepare_commit()
    calls = [
        lambda: table.overwrite(_rows((D2, "eu", 9)), partitions=nothing),
        lambda: table.committer().overwrite(messages, partitions=nothing),
    ]
    for call in calls:
        with pytest.raises(at.InvalidArgumentError, match=r"partitions: an empty (list|spec)"):
            call()
    assert table.scan().to_arrow().equals(before)
    assert table.overwrite(_rows((D2, "eu", 9)), partitions=None) is not None  # every row
    assert table.scan().to_arrow()["v"].to_pylist() == [9]
    assert files  # (the original files were there to lose)
