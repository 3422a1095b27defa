"""The Arrow hand-off of a scan to other engines: ``to_arrow_reader()`` and the PyCapsule stream,
``to_dataset()``, ``to_polars()`` and ``to_duckdb()``. Every hand-off returns exactly the rows of
``scan.to_arrow()``: partitioned and bucketed tables, time travel, after compaction, across
schema changes, with the engines' own filters and projections pushed onto the dataset; the
stream keeps the scan's order and reads lazily.

The tests run on local disk and on memory:// (the ``uri`` fixture): datasets reach memory://
files through pyarrow's bridge to fsspec, and DuckDB and Polars scan them through it. Only the
test that deletes files to prove that a partition filter skips them uses local disk alone."""

from __future__ import annotations

import datetime as dt
import decimal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import appendtable as at
from appendtable import scan as scan_module
from appendtable.handoff import bridged_filesystem

DAYS = [dt.date(2024, 5, 1), dt.date(2024, 5, 2), dt.date(2024, 5, 3)]
SCHEMA = pa.schema(
    [
        pa.field("day", pa.date32()),
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("action", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("seq", pa.int32()),
    ]
)

Rows = list[dict[str, Any]]


def _batch(start: int, count: int, day: dt.date) -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {
            "day": pa.array([day] * count, pa.date32()),
            "user_id": pa.array([i % 5 for i in ids], pa.int64()),
            "action": [("buy", "view", None)[i % 3] for i in ids],
            "amount": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
            "seq": pa.array(list(ids), pa.int32()),
        },
        schema=SCHEMA,
    )


def _fill(table: at.Table, appends: int = 3, rows: int = 12) -> None:
    """``appends`` commits, each with rows of every day (a file per partition and bucket)."""
    start = 0
    for _ in range(appends):
        table.append(
            pa.concat_tables([_batch(start + d * rows, rows, day) for d, day in enumerate(DAYS)])
        )
        start += rows * len(DAYS)


@pytest.fixture
def table(uri: str) -> at.Table:
    created = at.create_table(
        uri,
        SCHEMA,
        partition_by=["day"],
        options={"bucket": 3, "bucket-key": "user_id", "write-only": True},
    )
    _fill(created)
    return created


def rows(data: Any) -> Rows:
    """Any Arrow-shaped result (a table, a reader, a Polars frame, a DuckDB relation or any
    PyCapsule stream) as a sorted list of rows."""
    if isinstance(data, pl.DataFrame):
        data = data.to_arrow()
    elif isinstance(data, ds.Dataset):
        data = data.to_table()
    elif isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    elif not isinstance(data, pa.Table):
        data = pa.table(data)
    return sorted(data.to_pylist(), key=repr)


def stream_handoffs(scan: at.Scan) -> dict[str, Callable[[], Any]]:
    """Every hand-off that applies the scan's own columns and filter."""
    connection = duckdb.connect()
    return {
        "to_arrow_reader": scan.to_arrow_reader,
        "pa.table(scan)": lambda: pa.table(scan),
        "RecordBatchReader.from_stream": lambda: pa.RecordBatchReader.from_stream(scan),
        "polars.DataFrame(scan)": lambda: pl.DataFrame(scan),
        "to_polars": scan.to_polars,
        "duckdb(scan)": lambda: _duckdb_reads(connection, scan),
        "to_duckdb": lambda: scan.to_duckdb(connection),
    }


def _duckdb_reads(connection: duckdb.DuckDBPyConnection, scan: at.Scan) -> Any:
    """DuckDB's SQL on a scan in a local variable (its replacement scan finds it by name)."""
    return connection.sql("SELECT * FROM scan")


def dataset_handoffs(scan: at.Scan) -> dict[str, Callable[[], Any]]:
    """Every reader of ``scan.to_dataset()``."""
    connection = duckdb.connect()
    handoffs = {
        "dataset.to_table": lambda: scan.to_dataset().to_table(),
        "duckdb(dataset)": lambda: connection.from_arrow(scan.to_dataset()),
        "polars.scan_pyarrow_dataset": lambda: pl.scan_pyarrow_dataset(scan.to_dataset()).collect(),
    }
    if bridged_filesystem(scan._state.storage):
        # DuckDB 2 deadlocks scanning a dataset on a Python file system (docs/python.md):
        # there the docs say to hand it the scan, which stream_handoffs covers
        del handoffs["duckdb(dataset)"]
    return handoffs


def assert_same_rows(scan: at.Scan, *, dataset: bool = True) -> Rows:
    expected = rows(scan.to_arrow())
    handoffs = stream_handoffs(scan)
    if dataset:
        handoffs |= dataset_handoffs(scan)
    for name, handoff in handoffs.items():
        assert rows(handoff()) == expected, name
    return expected


# ----------------------------------------------------------------------------------------------
# The same rows, whatever the hand-off


def test_every_handoff_gives_the_scans_rows(table: at.Table) -> None:
    scan = table.scan()
    assert len(assert_same_rows(scan)) == 108
    assert pa.schema(scan) == scan.output_schema == table.schema
    assert scan.to_arrow_reader().schema == table.schema
    assert scan.to_dataset().schema == table.schema


@pytest.mark.parametrize(
    ("columns", "filter"),
    [
        (["seq", "amount"], None),
        (None, [("user_id", "=", 3)]),
        (["seq"], [("user_id", "in", [1, 2]), ("action", "is not null")]),
        (["action", "seq"], [[("day", "=", DAYS[1])], [("amount", ">=", 20)]]),
    ],
)
def test_the_streams_apply_the_scans_columns_and_filter(
    table: at.Table, columns: list[str] | None, filter: Any
) -> None:
    scan = table.scan(columns=columns, filter=filter)
    expected = assert_same_rows(scan, dataset=False)
    assert 0 < len(expected) <= 108
    assert scan.to_duckdb().columns == scan.output_schema.names
    assert scan.to_polars().columns == scan.output_schema.names


def test_to_dataset_takes_the_columns_and_a_filter_on_partition_keys(table: at.Table) -> None:
    scan = table.scan(columns=["seq", "day"], filter=[("day", ">=", DAYS[1])])
    dataset = scan.to_dataset()
    assert dataset.schema == scan.output_schema
    assert len(assert_same_rows(scan)) == 72
    # only the files of the matching partitions
    assert {str(f.partition_expression) for f in dataset.get_fragments()} == {
        str(pc.field("day") == pa.scalar(day, pa.date32())) for day in DAYS[1:]
    }


def test_to_dataset_refuses_a_row_filter_it_cannot_carry(table: at.Table) -> None:
    scan = table.scan(filter=[("day", "=", DAYS[0]), ("user_id", "=", 3)])
    with pytest.raises(at.InvalidFilterError, match=r"user_id.*filter in the engine"):
        scan.to_dataset()
    assert rows(scan.to_duckdb()) == rows(scan.to_arrow())  # to_duckdb applies it


def test_time_travel_hands_off_the_old_snapshot(table: at.Table) -> None:
    first = table.snapshots()[0]
    scan = table.scan(snapshot_id=first.id)
    table.append(_batch(1000, 9, DAYS[0]))
    assert len(assert_same_rows(scan)) == 36
    old_files = set(table.files(first.id)["path"].to_pylist())
    assert _dataset_paths(scan.to_dataset()) == old_files
    assert len(assert_same_rows(table.scan())) == 117


def _dataset_paths(dataset: ds.Dataset) -> set[str]:
    """The data files of a dataset, relative to the table."""
    return {f.path[f.path.index("/day=") + 1 :] for f in dataset.get_fragments()}


def test_to_dataset_sees_only_the_compacted_files(table: at.Table) -> None:
    before = table.scan()
    expected = rows(before.to_arrow())
    replaced = set(table.files()["path"].to_pylist())
    assert table.compact(full=True) is not None
    after = table.scan()
    live = set(table.files()["path"].to_pylist())
    assert live.isdisjoint(replaced) and len(live) < len(replaced)
    assert _dataset_paths(after.to_dataset()) == live
    assert assert_same_rows(after) == expected  # no row twice
    # a scan pinned before the compaction keeps its own files (until they expire)
    assert _dataset_paths(before.to_dataset()) == replaced
    assert assert_same_rows(before) == expected


# ----------------------------------------------------------------------------------------------
# Schema evolution: every path returns the snapshot's schema


def test_added_and_widened_columns_stay_a_plain_file_dataset(table: at.Table) -> None:
    with table.update_schema() as update:
        update.add_column("country", pa.string(), after="action")
        update.update_column("seq", type=pa.int64())
        update.update_column("amount", type=pa.decimal128(12, 2))
    table.append(
        pa.table(
            {
                "day": pa.array([DAYS[2]] * 2, pa.date32()),
                "user_id": [1, 2],
                "action": ["buy", "buy"],
                "country": ["DE", None],
                "amount": pa.array([decimal.Decimal("1.5")] * 2, pa.decimal128(12, 2)),
                "seq": pa.array([5000, 5001], pa.int64()),
            }
        )
    )
    scan = table.scan()
    dataset = scan.to_dataset()
    assert isinstance(dataset, ds.FileSystemDataset)  # read by name, cast by the dataset
    assert dataset.schema == table.schema
    expected = assert_same_rows(scan)
    assert len(expected) == 110
    assert [r["country"] for r in expected].count("DE") == 1


def test_renamed_dropped_and_readded_columns_are_read_by_field_id(table: at.Table) -> None:
    old = table.scan()
    with table.update_schema() as update:
        update.rename_column("amount", "amount_eur")
        update.drop_column("action")
    with table.update_schema() as update:
        update.add_column("action", pa.string())  # a new column under the dropped one's name
    table.append(
        pa.table(
            {
                "day": pa.array([DAYS[0]], pa.date32()),
                "user_id": [4],
                "amount_eur": pa.array([decimal.Decimal("2")], pa.decimal128(10, 2)),
                "seq": pa.array([9000], pa.int32()),
                "action": ["new"],
            }
        )
    )
    scan = table.scan()
    assert scan.output_schema.names == ["day", "user_id", "amount_eur", "seq", "action"]
    expected = assert_same_rows(scan)
    assert [r["action"] for r in expected if r["action"] is not None] == ["new"]
    assert sum(r["amount_eur"] is not None for r in expected) == 109
    # old files cannot be read by name: read by field id into the in-memory part
    assert isinstance(scan.to_dataset(), ds.UnionDataset)
    # ... unless the columns asked for read by name in them
    by_name = table.scan(columns=["day", "seq"])
    assert isinstance(by_name.to_dataset(), ds.FileSystemDataset)
    assert_same_rows(by_name)
    # time travel keeps the old schema, and its files read by name
    then = table.scan(snapshot_id=old.snapshot.id)  # type: ignore[union-attr]
    assert then.output_schema == SCHEMA
    assert isinstance(then.to_dataset(), ds.FileSystemDataset)
    assert assert_same_rows(then) == rows(old.to_arrow())


def test_a_changed_struct_is_read_by_field_id(uri: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("payload", pa.struct([("x", pa.int64())]))])
    table = at.create_table(uri, schema)
    table.append(pa.table({"id": [1, 2], "payload": [{"x": 10}, None]}, schema=schema))
    with table.update_schema() as update:
        update.rename_column("payload.x", "y")
        update.add_column("payload.z", pa.string())
    table.append(pa.table({"id": [3], "payload": [{"y": 30, "z": "c"}]}))
    scan = table.scan()
    assert isinstance(scan.to_dataset(), ds.UnionDataset)
    assert assert_same_rows(scan) == [
        {"id": 1, "payload": {"y": 10, "z": None}},
        {"id": 2, "payload": None},
        {"id": 3, "payload": {"y": 30, "z": "c"}},
    ]


# ----------------------------------------------------------------------------------------------
# Engines push their own filters and projections onto the dataset


@pytest.mark.parametrize(
    ("sql", "polars_filter", "columns", "filter"),
    [
        ("user_id = 3", pl.col("user_id") == 3, ["seq", "action"], [("user_id", "=", 3)]),
        (
            "day = DATE '2024-05-02' AND action = 'buy'",
            (pl.col("day") == DAYS[1]) & (pl.col("action") == "buy"),
            ["user_id", "seq"],
            [("day", "=", DAYS[1]), ("action", "=", "buy")],
        ),
        (
            "amount > 20 OR action IS NULL",
            (pl.col("amount") > 20) | pl.col("action").is_null(),
            ["day", "amount", "seq"],
            [[("amount", ">", 20)], [("action", "is null")]],
        ),
        (
            "day <> DATE '2024-05-01' AND user_id IN (0, 4)",
            (pl.col("day") != DAYS[0]) & pl.col("user_id").is_in([0, 4]),
            ["seq"],
            [("day", "!=", DAYS[0]), ("user_id", "in", [0, 4])],
        ),
    ],
)
def test_engine_filters_on_the_dataset_match_the_scans_filter(
    table: at.Table, sql: str, polars_filter: pl.Expr, columns: list[str], filter: Any
) -> None:
    expected = rows(table.scan(columns=columns, filter=filter).to_arrow())
    assert expected
    dataset = table.scan().to_dataset()
    select = ", ".join(columns)
    connection = duckdb.connect()
    assert rows(connection.sql(f"SELECT {select} FROM dataset WHERE {sql}")) == expected
    lazy = pl.scan_pyarrow_dataset(dataset).filter(polars_filter).select(columns)
    assert rows(lazy.collect()) == expected


def test_a_partition_filter_skips_other_partitions_files_unopened(tmp_path: Any) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["day"])
    _fill(table, appends=1)
    dataset = table.scan().to_dataset()
    for path in table.files()["path"].to_pylist():
        if not path.startswith("day=2024-05-02/"):
            (tmp_path / "t" / path).unlink()  # reading these would fail
    expected = rows(_batch(12, 12, DAYS[1]).select(["seq"]))
    connection = duckdb.connect()
    assert rows(connection.sql("SELECT seq FROM dataset WHERE day = DATE '2024-05-02'")) == expected
    lazy = pl.scan_pyarrow_dataset(dataset).filter(pl.col("day") == DAYS[1]).select("seq")
    assert rows(lazy.collect()) == expected
    assert rows(dataset.to_table(columns=["seq"], filter=pc.field("day") == DAYS[1])) == expected


def test_partition_values_of_every_type_are_exact(uri: str) -> None:
    schema = pa.schema(
        [
            ("tier", pa.int16()),
            ("region", pa.string()),
            ("hour", pa.timestamp("ms", tz="UTC")),
            ("price", pa.decimal128(8, 3)),
            ("flag", pa.bool_()),
            ("day", pa.date64()),
            ("clock", pa.time32("s")),
            ("v", pa.int64()),
        ]
    )
    table = at.create_table(uri, schema, partition_by=schema.names[:-1])
    hour = dt.datetime(2024, 5, 1, 13, tzinfo=dt.UTC)
    table.append(
        pa.table(
            {
                "tier": pa.array([1, -2, None, 1], pa.int16()),
                "region": ["eu", "u s/=%", "eu", None],
                "hour": pa.array(
                    [hour, hour, None, hour + dt.timedelta(seconds=1)], pa.timestamp("ms", tz="UTC")
                ),
                "price": pa.array(
                    [decimal.Decimal("1.250"), None, decimal.Decimal("-3"), decimal.Decimal("0")],
                    pa.decimal128(8, 3),
                ),
                "flag": [True, False, None, True],
                "day": pa.array(
                    [dt.date(2024, 5, 1), None, dt.date(1969, 12, 31), dt.date(2024, 5, 1)],
                    pa.date64(),
                ),
                "clock": pa.array(
                    [dt.time(13), dt.time(0), None, dt.time(23, 59, 59)], pa.time32("s")
                ),
                "v": [1, 2, 3, 4],
            },
            schema=schema,
        )
    )
    scan = table.scan()
    dataset = scan.to_dataset()
    connection = duckdb.connect()
    expected = rows(scan.to_arrow())
    assert rows(dataset) == expected
    assert rows(connection.from_arrow(dataset).to_arrow_table()) == expected
    assert len(list(dataset.get_fragments())) == 4
    for fragment in dataset.get_fragments():  # every key's value: none was left out
        assert all(key in str(fragment.partition_expression) for key in schema.names[:-1])
    for key in schema.names[:-1]:
        for value in table.scan().to_arrow().column(key).to_pylist():
            if value is None:
                where, filter = f"{key} IS NULL", [(key, "is null")]
                expression = pc.field(key).is_null()
            else:
                where, filter = f"{key} = ?", [(key, "=", value)]
                expression = pc.field(key) == pa.scalar(value, schema.field(key).type)
            expected = rows(table.scan(columns=["v"], filter=filter).to_arrow())
            params = [] if value is None else [value]
            relation = connection.sql(f"SELECT v FROM dataset WHERE {where}", params=params)
            assert rows(relation) == expected, (key, value)
            assert rows(dataset.to_table(columns=["v"], filter=expression)) == expected


# ----------------------------------------------------------------------------------------------
# The stream: the scan's order, lazily


def test_the_reader_keeps_the_read_order(table: at.Table) -> None:
    table.append(_batch(500, 30, DAYS[0]))
    scan = table.scan()
    batches = pa.Table.from_batches(list(scan.to_batches()), schema=scan.output_schema)
    assert scan.to_arrow_reader().read_all().equals(batches)
    assert pa.table(scan).equals(batches)
    assert scan.to_arrow().equals(batches)
    # within each bucket, write order
    for split in scan.plan():
        seqs = [r["seq"] for b in table.read(split) for r in b.to_pylist()]
        assert seqs == sorted(seqs)


def test_creating_the_reader_opens_no_data_file(
    table: at.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    real = scan_module.read_as

    def counting(storage: Any, file: Any, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        opened.append(file.path)
        return real(storage, file, *args, **kwargs)

    monkeypatch.setattr(scan_module, "read_as", counting)
    scan = table.scan()
    reader = scan.to_arrow_reader()
    assert opened == []
    first = reader.read_next_batch()
    assert first.num_rows > 0
    assert opened == [scan.plan()[0].files[0].path]
    rest = sum(b.num_rows for b in reader)
    assert first.num_rows + rest == 108
    assert len(opened) == sum(len(s.files) for s in scan.plan())


def test_the_reader_holds_about_one_batch_in_memory(uri: str) -> None:
    table = at.create_table(
        uri, pa.schema([("k", pa.int64()), ("x", pa.float64())]), options={"write-only": True}
    )
    for part in range(8):  # 8 files of 100,000 rows: 12.8 MB in Arrow, 1.6 MB per row group
        start = part * 100_000
        table.append(
            pa.table(
                {
                    "k": pa.array(range(start, start + 100_000), pa.int64()),
                    "x": pa.array(range(100_000), pa.float64()),
                }
            )
        )
    scan = table.scan()
    baseline = pa.total_allocated_bytes()
    peak = total = 0
    for batch in scan.to_arrow_reader():
        total += batch.nbytes
        peak = max(peak, pa.total_allocated_bytes() - baseline)
        del batch
    assert total >= 800_000 * 16
    assert peak < total / 4, (peak, total)  # about one row group (decoded whole) at a time


def test_the_stream_honours_a_requested_schema(table: at.Table) -> None:
    scan = table.scan(columns=["action", "seq"])
    wanted = pa.schema([("action", pa.large_string()), ("seq", pa.int32())])
    reader = pa.RecordBatchReader.from_stream(scan, schema=wanted)
    assert reader.schema == wanted
    assert rows(reader) == rows(scan.to_arrow())


# ----------------------------------------------------------------------------------------------
# Edges: empty tables, DuckDB connections, missing optional dependencies


def test_an_empty_table_hands_off_no_rows(uri: str) -> None:
    table = at.create_table(uri, SCHEMA, partition_by=["day"])
    scan = table.scan()
    for handoff in (stream_handoffs(scan) | dataset_handoffs(scan)).values():
        assert rows(handoff()) == []
    assert scan.to_arrow_reader().schema == SCHEMA
    assert scan.to_dataset().schema == SCHEMA


def test_to_duckdb_uses_the_given_or_default_connection_and_reruns(table: at.Table) -> None:
    scan = table.scan(columns=["seq"], filter=[("action", "=", "buy")])
    expected = rows(scan.to_arrow())
    connection = duckdb.connect()
    relation = scan.to_duckdb(connection)
    assert rows(relation) == expected
    assert rows(relation) == expected  # a relation runs again: it is not a one-shot stream
    table.append(_batch(700, 6, DAYS[0]))  # the relation stays on the scan's snapshot
    assert rows(relation) == expected
    assert rows(relation.filter("seq < 50")) == [r for r in expected if r["seq"] < 50]
    assert rows(scan.to_duckdb()) == expected  # DuckDB's default connection


def test_a_missing_optional_dependency_names_the_extra(
    table: at.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "polars", None)
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(ImportError, match=r"appendtable\[polars\]"):
        table.scan().to_polars()
    with pytest.raises(ImportError, match=r"appendtable\[duckdb\]"):
        table.scan().to_duckdb()
