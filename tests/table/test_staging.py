"""Staged writes: Parquet files written outside the table join it through a staging area."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import fsspec
import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

import appendtable as at
from appendtable._state import TableState
from appendtable.datafiles.stats import StatsCollector
from appendtable.planning.bucket import bucket_ids
from appendtable.storage import LocalStorage
from appendtable.table import Table
from tests.helpers.clock import past_every_file_ms
from tests.helpers.data import EVENTS, events, sorted_rows

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")


def _stage(area: at.StagingArea, name: str, data: pa.Table, **write: object) -> None:
    """Write ``data`` as a Parquet file into the area, as another engine would."""
    fs, root = fsspec.core.url_to_fs(area.uri)
    path = f"{root}/{name}"
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as out:
        pq.write_table(data, out, **write)  # type: ignore[arg-type]


def _groups(data: pa.Table, buckets: int) -> list[tuple[int, pa.Table]]:
    """``data`` split by (day, bucket) as the table routes it: (bucket, rows) in input order."""
    ids = bucket_ids([data.column("key")], buckets)
    out = []
    days = data.column("day").to_pylist()
    for day in sorted(set(days)):
        for bucket in range(buckets):
            mask = pa.array([d == day and b == bucket for d, b in zip(days, ids, strict=True)])
            rows = data.filter(mask)
            if rows.num_rows:
                out.append((bucket, rows))
    return out


def _expected_stats(table: at.Table, rows: pa.Table) -> tuple[object, object, object]:
    state = table._state
    collector = StatsCollector(
        state.schema.fields, str(table.option("metadata.stats-mode")), state.options.stats_truncate
    )
    collector.update(rows)
    return collector.result()


def test_adopted_files_join_the_table_in_order_with_exact_statistics(uri: str) -> None:
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 3, "bucket-key": "key"}
    )
    table.append(events(0, 50))
    data = events(1000, 400)
    staged: list[tuple[str, int, pa.Table]] = []
    with table.staging_area() as area:
        for n, (bucket, rows) in enumerate(_groups(data, 3)):
            half = rows.num_rows // 2
            for part, piece in enumerate((rows.slice(0, half), rows.slice(half))):
                name = f"g{n:02d}/part-{part}.parquet"
                _stage(area, name, piece, row_group_size=7)
                staged.append((name, bucket, piece))
        _stage(area, "_temporary/ignored.parquet", data)  # bookkeeping names are not listed
        assert area.files() == [name for name, _, _ in staged]
        messages = area.adopt(area.files(), buckets=[b for _, b, _ in staged])
        assert table.scan().count() == 50  # nothing visible before the commit
        snapshot = table.committer().commit(messages)
    assert snapshot is not None and snapshot.kind == at.CommitKind.APPEND
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(
        pa.concat_tables([events(0, 50), data])
    )
    # each file moved into its (partition, bucket) directory, in the given order, with the
    # statistics the table's own writer would have recorded
    moved = []
    for message in messages:
        pair = []
        for file in sorted(message.new_files, key=lambda f: f.min_seq):
            assert file.path.startswith("day=") and f"/bucket-{message.bucket}/" in file.path
            assert file.max_seq - file.min_seq + 1 == file.row_count
            fs, moved_path = fsspec.core.url_to_fs(f"{table.uri}/{file.path}")
            assert file.file_size == fs.size(moved_path)
            with fsspec.open(f"{table.uri}/{file.path}") as handle:
                rows = pq.read_table(handle)
            assert (file.null_counts, file.min_values, file.max_values) == _expected_stats(
                table, rows
            )
            pair.append(rows.column("seq").to_pylist())
        moved.append(pair)
    halves = [piece.column("seq").to_pylist() for _, _, piece in staged]
    assert sorted(moved) == sorted([halves[i], halves[i + 1]] for i in range(0, len(halves), 2))
    # pruning uses the adopted statistics and buckets
    point = table.scan(filter=[("key", "=", 3), ("seq", ">=", 1000)]).to_arrow()
    assert sorted(point.column("seq").to_pylist()) == sorted(
        r["seq"] for r in data.to_pylist() if r["key"] == 3
    )
    assert len(table.scan(filter=[("key", "=", 3)]).plan()) < len(table.scan().plan())
    # the area is gone, and the streamed order of each bucket is the staged order
    fs, root = fsspec.core.url_to_fs(uri)
    assert not fs.exists(f"{root}/{area.path}")
    reader = table.stream(mode="from-snapshot", snapshot_id=2)
    streamed: list[dict[str, object]] = []
    while (unit := reader.poll()) is not None:
        streamed.extend(r for batch in reader.read(unit) for r in batch.to_pylist())
    buckets = bucket_ids([pa.array([r["key"] for r in streamed], pa.int64())], 3).tolist()
    per_group: dict[tuple[object, int], list[object]] = {}
    for row, bucket in zip(streamed, buckets, strict=True):
        per_group.setdefault((row["day"], bucket), []).append(row["seq"])
    assert sorted(per_group.values()) == sorted(  # type: ignore[type-var]
        halves[i] + halves[i + 1] for i in range(0, len(halves), 2)
    )


SCALAR_TYPES = [
    ("i8", pa.int8(), st.integers(-128, 127)),
    ("i64", pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    ("u64", pa.uint64(), st.integers(0, 2**64 - 1)),
    ("f64", pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    ("s", pa.string(), st.text(max_size=12)),
    ("b", pa.binary(), st.binary(max_size=12)),
    ("d", pa.date32(), st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))),
    ("ts_s", pa.timestamp("s", tz="UTC"), st.integers(-(10**10), 10**10)),
    ("ts_ms", pa.timestamp("ms"), st.integers(-(10**13), 10**13)),
    ("ts_us", pa.timestamp("us", tz="UTC"), st.integers(-(10**16), 10**16)),
    ("ts_ns", pa.timestamp("ns"), st.integers(-(10**18), 10**18)),
    ("t_s", pa.time32("s"), st.integers(0, 86_399)),
    ("t_us", pa.time64("us"), st.integers(0, 86_399_999_999)),
    (
        "dec",
        pa.decimal128(12, 3),
        st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False),
    ),
    ("flag", pa.bool_(), st.booleans()),
]


@st.composite
def _tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(1, 30))
    columns = {}
    for name, dtype, values in SCALAR_TYPES:
        cells = draw(st.lists(st.none() | values, min_size=rows, max_size=rows))
        columns[name] = pa.array(cells, dtype)
    return pa.table(columns)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_tables(), row_group=st.integers(1, 8), mode=st.sampled_from(["full", "truncate(4)"]))
def test_footer_statistics_equal_the_writers_own(
    tmp_path_factory: pytest.TempPathFactory, data: pa.Table, row_group: int, mode: str
) -> None:
    uri = str(tmp_path_factory.mktemp("stats") / "t")
    table = at.create_table(uri, data.schema, options={"metadata.stats-mode": mode})
    with table.staging_area() as area:
        _stage(area, "f.parquet", data, row_group_size=row_group)
        (message,) = area.adopt(["f.parquet"])
    (file,) = message.new_files
    nulls, mins, maxs = _expected_stats(table, data)
    assert file.null_counts == nulls
    for name, low, high, want_low, want_high in zip(
        data.column_names, file.min_values, file.max_values, mins, maxs, strict=True
    ):
        if name == "f64" and (low is None or want_low is None):
            # NaN-only or NaN-mixed floats: unknown is always a safe answer, never a wrong one
            assert (low, high) in ((None, None), (want_low, want_high))
            continue
        assert (name, low, high) == (name, want_low, want_high)
    table.committer().commit([message])
    assert str(table.scan().to_arrow().to_pylist()) == str(data.to_pylist())  # NaN-tolerant


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (lambda t: t.set_column(1, "key", t["key"].cast(pa.int32())), "'key'.*int32"),
        (lambda t: t.drop_columns(["name"]), "lacks column 'name'"),
        (lambda t: t.append_column("extra", t.column("seq")), "'extra'"),
        (lambda t: t.select(["key", "day", "seq", "name"]), "order"),
    ],
    ids=["type", "missing", "extra", "order"],
)
def test_a_file_that_does_not_fit_is_rejected_before_anything_moves(
    uri: str, bad: object, match: str
) -> None:
    table = at.create_table(uri, EVENTS)
    good = events(0, 20)
    with table.staging_area() as area:
        _stage(area, "a.parquet", good)
        _stage(area, "b.parquet", bad(good))  # type: ignore[operator]
        with pytest.raises(at.SchemaMismatchError, match=match):
            area.adopt(["a.parquet", "b.parquet"])
        assert area.files() == ["a.parquet", "b.parquet"]  # nothing moved
        # the good file alone is fine
        table.committer().commit(area.adopt(["a.parquet"]))
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(good)


def test_nulls_partitions_buckets_and_damage_are_checked(uri: str) -> None:
    schema = pa.schema([("day", pa.date32(), False), ("key", pa.int64(), False), ("v", pa.int64())])
    table = at.create_table(
        uri, schema, partition_by=["day"], options={"bucket": 2, "bucket-key": "key"}
    )
    day = dt.date(2024, 5, 1)
    one_day = pa.table({"day": [day, day], "key": [1, 1], "v": [1, None]}, schema=schema)
    nullable = pa.schema([f.with_nullable(True) for f in schema])
    with table.staging_area() as area:
        _stage(area, "nulls.parquet", pa.table({"day": [day], "key": [None], "v": [1]}, nullable))
        _stage(
            area,
            "two-days.parquet",
            pa.table(
                {"day": [day, day + dt.timedelta(days=1)], "key": [1, 1], "v": [1, 2]},
                schema=schema,
            ),
        )
        _stage(area, "good.parquet", one_day)
        fs, root = fsspec.core.url_to_fs(area.uri)
        fs.pipe(f"{root}/junk.parquet", b"PAR1 this is not parquet")
        with pytest.raises(at.SchemaMismatchError, match=r"'key' is not nullable.*1 null") as info:
            area.adopt(["nulls.parquet"], buckets=[0])
        assert info.value.column == "key"
        with pytest.raises(
            at.SchemaMismatchError, match="several values of partition column 'day'"
        ):
            area.adopt(["two-days.parquet"], buckets=[0])
        with pytest.raises(at.CorruptDataFileError, match=r"junk\.parquet") as damaged:
            area.adopt(["junk.parquet"], buckets=[0])
        assert damaged.value.path.endswith("junk.parquet")
        with pytest.raises(at.ObjectNotFoundError, match=r"nowhere\.parquet"):
            area.adopt(["nowhere.parquet"], buckets=[0])
        with pytest.raises(at.InvalidArgumentError, match=r"buckets.*needs the bucket"):
            area.adopt(["good.parquet"])
        with pytest.raises(at.InvalidArgumentError, match=r"buckets.*bucket 2, outside 0\.\.1"):
            area.adopt(["good.parquet"], buckets=[2])
        assert len(area.files()) == 4
        messages = area.adopt(["good.parquet"], buckets=[1])
    assert messages[0].partition == ((day - dt.date(1970, 1, 1)).days,)
    assert messages[0].bucket == 1 and messages[0].new_files[0].null_counts == (0, 0, 1)
    table.committer().commit(messages)
    assert table.scan().to_arrow().equals(one_day)


def test_adopting_into_an_unbucketed_table_refuses_buckets(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    with table.staging_area() as area:
        _stage(area, "a.parquet", events(0, 5))
        with pytest.raises(at.InvalidArgumentError, match=r"buckets.*not bucketed"):
            area.adopt(["a.parquet"], buckets=[3])
        empty = events(0, 0)
        _stage(area, "empty.parquet", empty)
        messages = area.adopt(["a.parquet", "empty.parquet"], buckets=[0, 0])
    assert [f.row_count for m in messages for f in m.new_files] == [5]  # empty files skipped


class _FailingRename(LocalStorage):
    """Local storage whose ``nth`` rename fails (a network error, say)."""

    def __init__(self, root: str, nth: int) -> None:
        super().__init__(root, fsync=False)
        self.left = nth

    def rename(self, source: str, target: str) -> None:
        self.left -= 1
        if self.left == 0:
            raise at.TransientStorageError("injected", path=target, operation="rename")
        super().rename(source, target)


def test_a_failed_move_moves_the_others_back(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS)
    flaky = Table(TableState(_FailingRename(uri, nth=3), table._state.schema))
    with flaky.staging_area() as area:
        names = [f"{n}.parquet" for n in range(5)]
        for n, name in enumerate(names):
            _stage(area, name, events(n * 10, 10))
        with pytest.raises(at.TransientStorageError, match="injected"):
            area.adopt(names)
        assert area.files() == names  # every file back where it was
        assert not list((tmp_path / "t").glob("bucket-*/*.parquet"))
        table.committer().commit(area.adopt(names))  # a retry succeeds
    assert table.scan().count() == 50


def test_abandoned_staging_areas_are_orphans(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 10))
    area = table.staging_area()  # a job that died before adopting (never removed)
    _stage(area, "part-0.parquet", events(10, 10))
    _stage(area, ".part-0.parquet.crc", events(10, 1))
    kept = table.remove_orphan_files(older_than=dt.timedelta(hours=1), dry_run=True)
    assert kept.files == []  # young files are never touched
    listed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=True)
    assert sorted(listed.files) == [
        f"{area.path}/.part-0.parquet.crc",
        f"{area.path}/part-0.parquet",
    ]
    table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert area.files() == [] and table.scan().count() == 10


def test_watermark_column_sets_the_snapshot_watermark(uri: str) -> None:
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    table = at.create_table(
        uri, schema, options={"watermark.column": "ts", "watermark.delay": "10 s"}
    )
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    rows = pa.table(
        {"ts": [base, base + dt.timedelta(minutes=5), None], "v": [1, 2, 3]}, schema=schema
    )
    with table.staging_area() as area:
        _stage(area, "a.parquet", rows)
        _stage(area, "nostats.parquet", rows, write_statistics=False)
        messages = area.adopt(["a.parquet", "nostats.parquet"])
    latest_ms = int((base + dt.timedelta(minutes=5)).timestamp() * 1000)
    assert [m.max_event_time_ms for m in messages] == [latest_ms]
    snapshot = table.committer().commit(messages)
    assert snapshot is not None and snapshot.watermark == latest_ms - 10_000
    files = messages[0].new_files
    assert files[0].min_values[0] is not None and files[1].min_values == (None, None)
