"""End-to-end writes and reads through the public API, on local disk and memory://."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import appendtable as at
from appendtable.metadata import layout
from tests.helpers.data import EVENTS, events, sorted_rows


def test_create_open_and_describe(uri: str) -> None:
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 4, "bucket-key": "key"}
    )
    assert table.schema == EVENTS
    assert table.partition_by == ["day"]
    assert table.options == {"bucket": "4", "bucket-key": "key"}
    assert table.latest_snapshot() is None
    assert table.scan().to_arrow().num_rows == 0
    assert table.scan().to_arrow().schema == EVENTS

    reopened = at.open_table(uri)
    assert reopened.schema == EVENTS
    assert reopened.partition_by == ["day"]
    assert reopened.bucket == 4 and reopened.bucket_key == ["key"]


def test_create_twice_raises(uri: str) -> None:
    at.create_table(uri, EVENTS)
    with pytest.raises(at.TableExistsError, match="already exists"):
        at.create_table(uri, EVENTS)


def test_open_missing_raises(tmp_path: object) -> None:
    with pytest.raises(at.TableNotFoundError, match="no table at"):
        at.open_table(str(tmp_path) + "/nothing-here")


def test_append_round_trip_in_every_input_form(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    data = events(0, 400)
    parts = [
        data.slice(0, 100),  # pyarrow Table
        data.slice(100, 100).to_batches()[0],  # RecordBatch
        iter(data.slice(200, 100).to_batches(max_chunksize=30)),  # iterable of batches
        data.slice(300, 100).to_pandas(),  # pandas DataFrame
    ]
    for i, part in enumerate(parts, start=1):
        snapshot = table.append(part)
        assert snapshot is not None
        assert snapshot.id == i and snapshot.kind == at.CommitKind.APPEND
        assert snapshot.total_record_count == 100 * i
    result = table.scan().to_arrow()
    assert result.schema == EVENTS
    assert sorted_rows(result) == sorted_rows(data)


def test_empty_append_makes_no_snapshot(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    assert table.append(EVENTS.empty_table()) is None
    assert table.append([]) is None
    assert table.latest_snapshot() is None


def test_partition_columns_come_back_with_their_types(uri: str) -> None:
    schema = pa.schema(
        [
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("region", pa.string()),
            ("flag", pa.bool_()),
            ("amount", pa.decimal128(10, 2)),
            ("n", pa.int16()),
            ("v", pa.int64()),
        ]
    )
    table = at.create_table(uri, schema, partition_by=["d", "ts", "region", "flag", "amount", "n"])
    rows = pa.table(
        {
            "d": pa.array([dt.date(2024, 2, 29), None, dt.date(1999, 12, 31)], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, 12, 30, tzinfo=dt.UTC), None, None],
                pa.timestamp("us", tz="UTC"),
            ),
            "region": pa.array(["eu/west=1", "", None]),
            "flag": pa.array([True, False, None]),
            "amount": pa.array(
                [decimal.Decimal("12.50"), None, decimal.Decimal("-0.01")], pa.decimal128(10, 2)
            ),
            "n": pa.array([1, -2, None], pa.int16()),
            "v": pa.array([10, 20, 30], pa.int64()),
        }
    )
    table.append(rows)
    result = table.scan().to_arrow()
    assert result.schema == schema
    assert sorted_rows(result, "v") == sorted_rows(rows, "v")
    splits = table.scan().plan()
    by_value = {split.partition["n"]: split.partition for split in splits}
    assert by_value[1]["region"] == "eu/west=1"
    assert by_value[1]["d"] == dt.date(2024, 2, 29)
    assert by_value[1]["amount"] == decimal.Decimal("12.50")
    assert by_value[-2]["region"] == ""  # empty and null stay distinct values
    assert by_value[None]["region"] is None
    files = table.files()
    paths = files.column("path").to_pylist()
    assert any("region=eu%2Fwest%3D1" in p for p in paths)
    # '' shares null's directory, but has a partition text of its own (system tables)
    assert any("region=__DEFAULT_PARTITION__" in p and "n=-2" in p for p in paths)
    texts = files.column("partition").to_pylist()
    assert any("region=/" in t and "n=-2" in t for t in texts)
    assert any("region=__DEFAULT_PARTITION__" in t and "n=__DEFAULT" in t for t in texts)


def _codecs(location: str, paths: list[str]) -> dict[str, set[str]]:
    """Each data file's codecs (of every column chunk), by path."""
    found: dict[str, set[str]] = {}
    for path in paths:
        metadata = pq.ParquetFile(os.path.join(location, path)).metadata
        found[path] = {
            metadata.row_group(g).column(c).compression
            for g in range(metadata.num_row_groups)
            for c in range(metadata.num_columns)
        }
    return found


def test_data_files_are_parquet_holding_all_columns(tmp_path: object) -> None:
    location = str(tmp_path) + "/t"
    table = at.create_table(location, EVENTS, partition_by=["day"])
    table.append(events(0, 1000))
    for path in table.files().column("path").to_pylist():
        metadata = pq.ParquetFile(os.path.join(location, path)).metadata
        assert metadata.schema.to_arrow_schema().names == EVENTS.names
        assert metadata.row_group(0).column(1).statistics is not None
        assert path.startswith("day=2024-01-0") and "/bucket-0/data-" in path


@pytest.mark.parametrize("codec", ["zstd", "gzip", "none"])
def test_small_files_use_the_small_file_codec_and_compaction_the_tables(
    tmp_path: object, codec: str
) -> None:
    """Files written whole from less Arrow data than ``file.compression.small-file-size`` use
    ``file.compression.small-file`` (snappy by default); larger ones, files that roll, and
    compaction's output of the small ones use ``file.compression``."""
    location = str(tmp_path) + "/t"
    table = at.create_table(
        location, EVENTS, options={"file.compression": codec, "write-only": "true"}
    )
    small = events(0, 200)
    assert small.nbytes < 256 * 1024
    first = table.append(small)
    large = events(200, 60_000)
    assert large.nbytes > 256 * 1024
    second = table.append(large)
    upper = codec.upper() if codec != "none" else "UNCOMPRESSED"
    small_paths = table.files(first.id).column("path").to_pylist()
    large_paths = sorted(set(table.files(second.id).column("path").to_pylist()) - set(small_paths))
    assert set().union(*_codecs(location, small_paths).values()) == {"SNAPPY"}
    assert set().union(*_codecs(location, large_paths).values()) == {upper}
    for start in range(60_200, 62_200, 200):
        table.append(events(start, 200))
    table.compact(full=True)
    (compacted,) = table.files().column("path").to_pylist()
    assert _codecs(location, [compacted])[compacted] == {upper}
    expected = pa.concat_tables(
        [small, large, *(events(s, 200) for s in range(60_200, 62_200, 200))]
    )
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(expected)


def test_a_compaction_output_still_small_keeps_the_small_file_codec(tmp_path: object) -> None:
    """Compaction's outputs follow the rule of every file: merged into one still below the
    size, small files stay with the small-file codec (docs/format.md, section 7)."""
    location = str(tmp_path) + "/t"
    table = at.create_table(location, EVENTS, options={"write-only": "true"})
    appended = [events(start, 100) for start in range(0, 600, 100)]
    for piece in appended:
        table.append(piece)
    table.compact(full=True)
    (path,) = table.files().column("path").to_pylist()
    assert _codecs(location, [path])[path] == {"SNAPPY"}
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(pa.concat_tables(appended))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"file.compression.small-file-size": "0"}, {"ZSTD"}),
        ({"file.compression.small-file": "zstd"}, {"ZSTD"}),
        ({"file.compression.small-file": "none"}, {"UNCOMPRESSED"}),
        ({"file.compression.small-file-size": "1 kb"}, {"ZSTD"}),
        ({"file.compression.small-file-size": "1 mb", "file.compression": "gzip"}, {"SNAPPY"}),
    ],
)
def test_small_file_options(tmp_path: object, options: dict[str, str], expected: set[str]) -> None:
    location = str(tmp_path) + "/t"
    table = at.create_table(location, EVENTS, options={**options, "write-only": "true"})
    table.append(events(0, 200))
    (path,) = table.files().column("path").to_pylist()
    assert _codecs(location, [path])[path] == expected
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(events(0, 200))


@pytest.mark.parametrize("mode", [{"bucket": "-1"}, {"bucket": "2", "bucket-key": "key"}])
def test_files_roll_at_target_file_size(tmp_path: object, mode: dict[str, str]) -> None:
    location = str(tmp_path) + "/t"
    options = {"target-file-size": "64 KB", "write.parallelism": "1", **mode}
    table = at.create_table(location, EVENTS, options=options)
    data = events(0, 60_000, days=1)
    table.append(data)
    files = table.files()
    for bucket in set(files.column("bucket").to_pylist()):
        sizes = [r["bytes"] for r in files.to_pylist() if r["bucket"] == bucket]
        assert len(sizes) >= 2
        # every file of a bucket but the last reached the target; none overshoots much
        assert all(size >= 64 * 1024 for size in sizes[:-1])
        assert max(sizes) < 64 * 1024 * 1.5
    assert sum(files.column("rows").to_pylist()) == 60_000
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(data)


def test_scalable_mode_encodes_in_parallel_lanes(tmp_path: object) -> None:
    location = str(tmp_path) + "/t"
    options = {"target-file-size": "64 KB", "write.parallelism": "3"}
    table = at.create_table(location, EVENTS, options=options)
    data = events(0, 60_000, days=1)
    table.append(data)
    sizes = table.files().column("bytes").to_pylist()
    # each of the (at most three) lanes leaves at most one file short of the target
    assert sum(1 for size in sizes if size < 64 * 1024) <= 3
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(data)


def test_statistics_are_recorded_in_manifests(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 500))
    table.append(events(500, 500))
    splits = table.scan().plan()
    files = [f for s in splits for f in s.files]
    seq_index = EVENTS.names.index("seq")
    ranges = sorted((f.min_values[seq_index], f.max_values[seq_index]) for f in files)
    assert ranges == [(0, 499), (500, 999)]
    assert all(f.null_counts[seq_index] == 0 for f in files)


def test_projection_reads_only_the_asked_columns(uri: str) -> None:
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    table.append(events(0, 300))
    result = table.scan(columns=["seq", "name"]).to_arrow()
    assert result.column_names == ["seq", "name"]
    assert sorted(result.column("seq").to_pylist()) == list(range(300))
    batches = list(table.scan(columns=["key"]).to_batches())
    assert all(b.schema.names == ["key"] for b in batches)
    with pytest.raises(at.InvalidFilterError, match="unknown column 'nope'"):
        table.scan(columns=["nope"])


def test_time_travel_by_id_and_timestamp(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    first = table.append(events(0, 10))
    second = table.append(events(10, 10))
    assert first is not None and second is not None
    assert table.scan(snapshot_id=1).count() == 10
    assert table.scan(snapshot_id=2).count() == 20
    assert table.scan(timestamp_ms=first.time_ms).count() == 10
    assert table.scan(timestamp_ms=second.time_ms + 1000).count() == 20
    with pytest.raises(at.SnapshotNotFoundError, match="no such snapshot: 7"):
        table.scan(snapshot_id=7)
    with pytest.raises(at.SnapshotNotFoundError, match="at or before"):
        table.scan(timestamp_ms=first.time_ms - 10_000)
    assert [s.id for s in table.snapshots()] == [1, 2]
    assert table.snapshot(2).parent_id == 1


def test_a_snapshot_lost_from_the_middle_of_the_log_is_named(tmp_path: Path) -> None:
    """Found by a docs-only hunt (a storage that lost acknowledged objects): the error said
    "no such snapshot: 2 (snapshots 1..3 exist)", which contradicts itself."""
    table = at.create_table(str(tmp_path / "t"), EVENTS)
    for i in range(3):
        table.append(events(i, 1))
    lost = tmp_path / "t" / layout.snapshot_path(2)
    lost.unlink()
    with pytest.raises(at.SnapshotNotFoundError) as raised:
        at.open_table(str(tmp_path / "t")).scan(snapshot_id=2)
    message = str(raised.value)
    assert "snapshot 2 is missing though snapshots 1..3 were listed" in message
    assert "lost by the storage" in message and str(lost) in message


def test_scan_is_pinned_to_its_snapshot(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 10))
    scan = table.scan()
    table.append(events(10, 10))
    assert scan.to_arrow().num_rows == 10
    assert scan.count() == 10
    assert table.scan().count() == 20


def test_read_split_by_split_for_engines(uri: str) -> None:
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 3, "bucket-key": "key"}
    )
    data = events(0, 2000)
    table.append(data)
    splits = table.scan().plan()
    rows = []
    for split in splits:
        copy = at.Split.from_bytes(split.to_bytes())  # as shipped to a worker
        for batch in table.read(copy, columns=["seq", "key"], filter=[("key", "<", 5)]):
            rows.extend(batch.column("seq").to_pylist())
    expected = [r["seq"] for r in data.to_pylist() if r["key"] < 5]
    assert sorted(rows) == sorted(expected)


def test_files_table_lists_live_files(uri: str) -> None:
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 2, "bucket-key": "key"}
    )
    table.append(events(0, 100))
    files = table.files()
    assert files.column_names == [
        "partition",
        "bucket",
        "path",
        "uri",
        "rows",
        "bytes",
        "min_sequence",
        "max_sequence",
        "created",
        "source",
        "deleted_rows",
        "deletion_vector_uri",
        "deletion_vector_offset",
        "deletion_vector_length",
    ]
    assert sum(files.column("rows").to_pylist()) == 100
    assert set(files.column("deleted_rows").to_pylist()) == {0}  # no deletes: no vectors
    assert files.column("deletion_vector_uri").null_count == files.num_rows
    assert set(files.column("bucket").to_pylist()) <= {0, 1}
    assert set(files.column("source").to_pylist()) == {"APPEND"}


def test_pandas_round_trip(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    frame = events(0, 50).to_pandas()
    table.append(frame)
    back = table.scan().to_pandas().sort_values("seq").reset_index(drop=True)
    pd.testing.assert_frame_equal(back, frame.sort_values("seq").reset_index(drop=True))


def test_types_parquet_stores_differently_read_back_as_the_tables(uri: str) -> None:
    """Parquet has no second-resolution times or date64: files hold milliseconds and date32,
    and every read path (whole scan, split reads, filtered reads, streams) returns the table's
    own types."""
    schema = pa.schema(
        [
            ("ts", pa.timestamp("s", tz="UTC")),
            ("d64", pa.date64()),
            ("t32", pa.time32("s")),
            ("tags", pa.list_(pa.timestamp("s"))),
            ("v", pa.int64()),
        ]
    )
    rows = pa.table(
        {
            "ts": pa.array([1, 2], pa.timestamp("s", tz="UTC")),
            "d64": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)], pa.date64()),
            "t32": pa.array([5, 6], pa.time32("s")),
            "tags": pa.array([[1], [2, 3]], pa.list_(pa.timestamp("s"))),
            "v": [1, 2],
        },
        schema=schema,
    )
    table = at.create_table(uri, schema)
    table.append(rows)
    assert table.scan().to_arrow().equals(rows)
    (split,) = table.scan().plan()
    assert pa.Table.from_batches(list(table.read(split)), schema=schema).equals(rows)
    assert table.scan(filter=[("v", "=", 2)]).to_arrow().equals(rows.slice(1))
    for row_filter, expected in ((None, rows), ([("v", "=", 2)], rows.slice(1))):
        reader = table.stream(mode="from-snapshot", snapshot_id=1, filter=row_filter)
        unit = reader.poll()
        assert unit is not None
        assert pa.Table.from_batches(list(reader.read(unit)), schema=schema).equals(expected)
