"""Arguments of the wrong type or form get one clear error naming the argument, and the forms a
user naturally writes (a datetime for an instant, one column name as a string, a Polars frame)
work."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset
import pytest

import appendtable as at

SCHEMA = pa.schema([("user_id", pa.int64()), ("day", pa.string()), ("v", pa.float64())])
ONE_ROW = pa.table({"user_id": [1], "day": ["a"], "v": [1.0]}, schema=SCHEMA)


@pytest.fixture
def table(tmp_path: Path) -> at.Table:
    created = at.create_table(str(tmp_path / "t"), SCHEMA, partition_by="day")
    created.append(pa.table({"user_id": [1, 2], "day": ["a", "b"], "v": [0.5, 1.5]}))
    created.append(pa.table({"user_id": [3], "day": ["a"], "v": [2.5]}))
    return created


@pytest.mark.parametrize("value", ["1", 1.0, True, None.__class__, [1]])
def test_a_snapshot_id_of_the_wrong_type_is_refused_naming_it(table: at.Table, value: Any) -> None:
    with pytest.raises(at.InvalidArgumentError, match="snapshot_id must be an integer") as info:
        table.scan(snapshot_id=value)
    assert isinstance(info.value, TypeError)  # and an AppendTableError
    with pytest.raises(at.InvalidArgumentError):
        table.snapshot(value)
    with pytest.raises(at.InvalidArgumentError):
        table.rollback_to(value)


@pytest.mark.parametrize("value", [0, -1, 3, 10**12])
def test_an_id_never_assigned_is_no_such_snapshot_not_expired(table: at.Table, value: int) -> None:
    with pytest.raises(at.SnapshotNotFoundError, match="no such snapshot") as info:
        table.scan(snapshot_id=value)
    assert not isinstance(info.value, at.SnapshotExpiredError)


@pytest.mark.parametrize("value", [0, -1])
def test_a_stream_from_an_id_below_one_is_no_such_snapshot(table: at.Table, value: int) -> None:
    """A user's stream from snapshot 0 was told the snapshot "has expired" on a table that had
    expired nothing (as a read option it is an invalid option value)."""
    with pytest.raises(at.SnapshotNotFoundError, match="ids start at 1") as info:
        table.stream(mode="from-snapshot", snapshot_id=value)
    assert not isinstance(info.value, at.SnapshotExpiredError)
    with pytest.raises(at.InvalidOptionError, match=r"'scan\.snapshot-id'"):
        table.stream(options={"scan.mode": "from-snapshot", "scan.snapshot-id": value})


@pytest.mark.parametrize(
    ("buckets", "says"),
    [([], "names no bucket"), (["1"], "integers"), ([1.0], "integers"), ([True], "integers"),
     ("01", "list of bucket numbers"), (3, "list of bucket numbers"), ([4], "not a bucket")],
)  # fmt: skip
def test_stream_buckets_must_name_buckets_of_the_table(
    tmp_path: Path, buckets: Any, says: str
) -> None:
    """``buckets=[]`` read nothing and its consumer committed past every row it never
    delivered; ``"1"``, ``1.0`` and ``True`` were read as bucket 1."""
    table = at.create_table(str(tmp_path / "b"), SCHEMA, options={"bucket": 4, "bucket-key": "v"})
    table.append(ONE_ROW)
    with pytest.raises(at.InvalidArgumentError, match=says):
        table.stream(buckets=buckets, consumer_id="c")
    assert table.consumers() == {}
    assert table.stream(buckets=(0, 1, 2, 3)).poll() is not None


def test_instants_take_datetimes(table: at.Table) -> None:
    first, second = table.snapshots()
    as_datetime = dt.datetime.fromtimestamp(first.time_ms / 1000, tz=dt.UTC)
    assert table.scan(timestamp_ms=as_datetime).snapshot == first
    naive = as_datetime.replace(tzinfo=None)  # taken as UTC
    assert table.scan(timestamp_ms=naive).snapshot == first
    assert table.scan(timestamp_ms=second.time_ms).snapshot == second
    mark = dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)
    snapshot = table.append(pa.table({"user_id": [9], "day": ["c"], "v": [0.0]}), watermark=mark)
    assert snapshot is not None and snapshot.watermark == int(mark.timestamp() * 1000)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda t: t.scan(timestamp_ms="yesterday"), "timestamp_ms"),
        (lambda t: t.stream(timestamp_ms=1.5), "timestamp_ms"),
        (lambda t: t.append(ONE_ROW, watermark="x"), "watermark"),
        (lambda t: t.committer().commit([], watermark=[1]), "watermark"),
        (lambda t: t.remove_orphan_files(older_than="1 day"), "older_than must be a timedelta"),
        (lambda t: t.purge(older_than=2.5), "older_than must be a timedelta"),
        (lambda t: t.expire_snapshots(older_than_ms=2.5), "older_than_ms"),
        (lambda t: t.stream(bounded_watermark="end"), "bounded_watermark"),
        (lambda t: t.scan(columns=[1]), "columns"),
        (lambda t: t.scan(snapshot_id=1, timestamp_ms=1), "not both"),
        (lambda t: t.committer("u").commit([], identifier=-1), "identifier"),
        (lambda t: t.expire_snapshots(retain_min=0), "retain_min"),
        (lambda t: t.expire_snapshots(retain_min=5, retain_max=2), "retain_max"),
        (lambda t: t.stream(buckets=[0]), "buckets"),
        (lambda t: t.sort_compact(["v"], strategy="peano"), "strategy"),
        (lambda t: t.sort_compact(["nope"]), "by"),
        (lambda t: at.bucket_ids([pa.array([1])], 0), "num_buckets"),
        (lambda t: at.StreamPosition.from_json("{}"), "text"),
    ],
)  # fmt: skip
def test_wrong_types_give_one_line_errors_naming_the_argument(
    table: at.Table, call: Any, name: str
) -> None:
    before = len(table.snapshots())
    with pytest.raises(at.InvalidArgumentError, match=name) as info:
        call(table)
    assert "\n" not in str(info.value)
    assert len(table.snapshots()) == before


@pytest.mark.parametrize("value", [None, 0, "", [], "false", 1])
@pytest.mark.parametrize("method", ["remove_orphan_files", "expire_snapshots", "purge", "delete"])
def test_dry_run_is_true_or_false_only(table: at.Table, method: str, value: Any) -> None:
    """``remove_orphan_files(dry_run=None)`` deleted (found by a docs-only hunt): a caller
    passing an unset flag through got the destructive run. Every maintenance call's dry_run
    takes True or False only, checked before anything is read or deleted."""
    stray = Path(table.uri) / "day=a" / "bucket-0" / "data-left-by-a-crash-0.parquet"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"0" * 10)
    calls = {
        "remove_orphan_files": lambda: table.remove_orphan_files(
            older_than=dt.timedelta(0), dry_run=value
        ),
        "expire_snapshots": lambda: table.expire_snapshots(retain_min=1, dry_run=value),
        "purge": lambda: table.purge(older_than=dt.timedelta(0), dry_run=value),
        "delete": lambda: table.delete([("user_id", "=", 1)], dry_run=value),
    }
    before = [s.id for s in table.snapshots()]
    with pytest.raises(at.InvalidArgumentError, match="dry_run must be True or False"):
        calls[method]()
    assert stray.exists() and [s.id for s in table.snapshots()] == before


def test_one_name_where_a_list_is_expected_is_one_name(tmp_path: Path, table: at.Table) -> None:
    assert table.partition_by == ["day"]  # not ["d", "a", "y"]
    assert table.scan(columns="user_id").to_arrow().column_names == ["user_id"]
    unbucketed = at.create_table(str(tmp_path / "u"), SCHEMA)
    unbucketed.append(pa.table({"user_id": [2, 1], "day": ["a", "a"], "v": [0.0, 1.0]}))
    unbucketed.append(pa.table({"user_id": [0], "day": ["a"], "v": [0.0]}))
    assert unbucketed.sort_compact("user_id") is not None
    assert unbucketed.scan().to_arrow().column("user_id").to_pylist() == [0, 1, 2]


class _ArrowStream:
    """A minimal Arrow PyCapsule producer that, like a Polars frame, is also iterable."""

    def __init__(self, data: pa.Table) -> None:
        self._data = data

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._data.__arrow_c_stream__(requested_schema)

    def __iter__(self) -> Any:
        return iter(self._data.column_names)


def test_any_arrow_pycapsule_producer_is_appended(table: at.Table) -> None:
    rows = pa.table({"user_id": [7], "day": ["z"], "v": [7.5]})
    assert table.append(_ArrowStream(rows)) is not None
    assert table.scan(filter=[("user_id", "=", 7)]).to_arrow().to_pylist() == rows.to_pylist()


def test_polars_frames_are_appended(table: at.Table) -> None:
    polars = pytest.importorskip("polars")  # a dev dependency: installed by make test
    frame = polars.DataFrame({"user_id": [5, 6], "day": ["p", "q"], "v": [1.0, None]})
    assert table.append(frame) is not None
    got = table.scan(filter=[("user_id", ">=", 5)]).to_arrow().sort_by("user_id").to_pylist()
    assert got == [{"user_id": 5, "day": "p", "v": 1.0}, {"user_id": 6, "day": "q", "v": None}]


def test_a_partition_value_too_long_for_a_directory_is_refused_before_writing(
    table: at.Table,
) -> None:
    files = set(Path(table.uri).rglob("*.parquet"))
    rows = pa.table({"user_id": [1, 2], "day": ["a", "é" * 200], "v": [0.0, 0.0]})
    with pytest.raises(at.SchemaMismatchError, match="'day' is too long") as info:
        table.append(rows)
    assert info.value.column == "day"
    assert set(Path(table.uri).rglob("*.parquet")) == files  # nothing written, nothing to clean


def test_locations_that_cannot_hold_a_table_say_why(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a table")
    with pytest.raises(at.TableNotFoundError, match="it is a file"):
        at.open_table(str(a_file))
    with pytest.raises(at.StorageError, match="is a file, not a directory"):
        at.create_table(str(a_file / "table"), SCHEMA)
    with pytest.raises(at.InvalidOptionError, match="unknown storage protocol 'nosuch'"):
        at.create_table("nosuch://bucket/table", SCHEMA)
    with pytest.raises(at.InvalidOptionError, match="must not be empty"):
        at.create_table("", SCHEMA)


def test_files_give_absolute_uris_of_exactly_the_snapshots_files(table: at.Table) -> None:
    """What another engine should read instead of globbing the directory."""
    table.compact(full=True)  # leaves the replaced small files on disk (time travel)
    uris = table.files()["uri"].to_pylist()
    on_disk = [str(p) for p in Path(table.uri).rglob("*.parquet")]
    assert len(on_disk) > len(uris)  # a glob would read rows twice
    assert all(Path(uri).is_absolute() and uri in on_disk for uri in uris)
    read = pa.dataset.dataset(uris, schema=table.schema).to_table()
    assert read.num_rows == table.scan().count() == 3


@pytest.mark.parametrize("value", [0, -1, "2", 1.5, True])
@pytest.mark.parametrize("how", ["compact", "sort_compact", "execute"])
def test_a_thread_count_that_is_not_positive_is_refused_naming_it(
    table: at.Table, value: Any, how: str
) -> None:
    """Found by a docs-only hunt: compact(parallelism=0) ran (on one thread), and with nothing
    to compact any value passed; refused before anything is planned or written."""
    before = table.files()
    calls = {
        "compact": lambda: table.compact(full=True, parallelism=value),
        "sort_compact": lambda: table.sort_compact(["v"], parallelism=value),
        "execute": lambda: table.compactor().execute(
            table.compactor().plan(full=True).tasks, parallelism=value
        ),
    }
    with pytest.raises(at.InvalidArgumentError, match="parallelism must be a positive number"):
        calls[how]()
    assert table.files() == before and [s.id for s in table.snapshots()] == [1, 2]
    assert table.compact(full=True, parallelism=2) is not None  # a count is taken
