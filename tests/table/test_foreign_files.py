"""Files in the forms other engines write (Spark's NOT NULL columns and metadata, INT96
timestamps, decimals stored as integers, list elements named ``element``) join a table, and
every later step (reads, streams, filters, compaction, sort compaction) handles them and writes
the table's own schema. The Spark tests run the same against files Spark itself wrote."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import appendtable as at
from appendtable.datafiles.reading import stored_schema
from appendtable.planning.bucket import bucket_ids

UTC = dt.UTC

#: A table as Python users declare it: every column nullable. (No wall-clock timestamp:
#: pyarrow writes every timestamp as INT96 when asked, Spark only instants; the Spark tests
#: cover Spark's own mix.)
TABLE = pa.schema(
    [
        ("id", pa.int64()),
        ("d5", pa.decimal128(5, 2)),
        ("d15", pa.decimal128(15, 3)),
        ("d30", pa.decimal128(30, 4)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("tags", pa.list_(pa.int64())),
        ("attrs", pa.map_(pa.string(), pa.int64())),
        ("point", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("s", pa.string()),
        ("b", pa.binary()),
    ]
)


def _strict(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with every nested field NOT NULL and list elements named as Spark names them."""
    if pa.types.is_struct(dtype):
        return pa.struct(
            [pa.field(f.name, _strict(f.type), nullable=False) for f in dtype]  # type: ignore[attr-defined]
        )
    if pa.types.is_list(dtype):
        return pa.list_(pa.field("element", _strict(dtype.value_type), nullable=False))
    if pa.types.is_map(dtype):
        return pa.map_(
            pa.field("key", dtype.key_type, nullable=False),
            pa.field("value", _strict(dtype.item_type), nullable=False),
        )
    return dtype


#: What Spark's DataFrame of the same rows looks like: every column NOT NULL, its metadata.
SPARK_LIKE = pa.schema(
    [pa.field(f.name, _strict(f.type), nullable=False) for f in TABLE],
    metadata={
        "org.apache.spark.version": "4.3.0",
        "org.apache.spark.sql.parquet.row.metadata": json.dumps({"type": "struct"}),
    },
)


def _rows(start: int, count: int) -> list[dict[str, object]]:
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    return [
        {
            "id": i,
            "d5": decimal.Decimal(i % 1000) / 100,
            "d15": decimal.Decimal(i) / 1000,
            "d30": decimal.Decimal(i) * 10**20 / 10**4,
            "ts": base + dt.timedelta(seconds=i, microseconds=i % 997),
            "day": dt.date(2024, 1, 1) + dt.timedelta(days=i % 3),
            "tags": [i, i + 1],
            "attrs": [("k", i)],
            "point": {"x": i, "y": f"p{i}"},
            "s": f"s{i}",
            "b": i.to_bytes(4, "big"),
        }
        for i in range(start, start + count)
    ]


# The forms a file may take, each as pyarrow.parquet.write_table arguments.
FORMS: dict[str, dict[str, object]] = {
    "spark-micros": {},
    "spark-int96": {"use_deprecated_int96_timestamps": True},
    "decimals-as-integers": {"store_decimal_as_integer": True},
    "int96-and-integer-decimals": {
        "use_deprecated_int96_timestamps": True,
        "store_decimal_as_integer": True,
    },
}


def _stage(area: at.StagingArea, name: str, rows: pa.Table, form: dict[str, object]) -> None:
    fs, root = fsspec.core.url_to_fs(area.uri)
    path = f"{root}/{name}"
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as out:
        pq.write_table(rows, out, row_group_size=7, **form)  # type: ignore[arg-type]


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _model(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return sorted(pa.Table.from_pylist(rows, schema=TABLE).to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type, return-value]


def _live_files_are_in_table_schema(table: at.Table, root: Path) -> None:
    expected = stored_schema(table.schema)
    for path in table.files().column("path").to_pylist():
        found = pq.read_schema(root / path)
        assert found.equals(expected, check_metadata=False), path
        assert not any(key.startswith(b"org.apache.spark") for key in found.metadata or {})


@pytest.mark.parametrize("bucketed", [False, True], ids=["scalable", "bucketed"])
def test_files_in_every_accepted_form_are_read_and_compacted_into_the_table_schema(
    tmp_path: Path, bucketed: bool
) -> None:
    options: dict[str, object] = {"write-only": True}
    if bucketed:
        options |= {"bucket": 2, "bucket-key": "id"}
    table = at.create_table(str(tmp_path / "t"), TABLE, options=options)
    written: list[dict[str, object]] = []
    own = _rows(0, 20)
    table.append(pa.Table.from_pylist(own, schema=TABLE))  # the table's own writer
    written += own
    start = 100
    for form_name, form in FORMS.items():
        rows = _rows(start, 30)
        start += 100
        data = pa.Table.from_pylist(rows, schema=SPARK_LIKE)
        with table.staging_area() as area:
            names, buckets = [], []
            if bucketed:
                ids = bucket_ids([data.column("id")], 2).tolist()
                for bucket in (0, 1):
                    mask = pa.array([b == bucket for b in ids])
                    names.append(f"{form_name}-{bucket}.parquet")
                    buckets.append(bucket)
                    _stage(area, names[-1], data.filter(mask), form)
            else:
                names.append(f"{form_name}.parquet")
                _stage(area, names[-1], data, form)
            messages = area.adopt(names, buckets=buckets if bucketed else None)
            table.committer().commit(messages)
        written += rows
    model = _model(written)
    assert table.scan().to_arrow().sort_by("id").to_pylist() == model
    # every read path gives the table's schema exactly, whatever form each file has
    assert table.scan().to_arrow().schema.equals(TABLE, check_metadata=False)
    for split in table.scan().plan():
        for batch in table.read(split):
            assert batch.schema.equals(TABLE, check_metadata=False)
    streamed = table.stream(mode="from-snapshot", snapshot_id=1, bounded_watermark=None)
    batches = list(streamed.batches(timeout=0))
    assert pa.Table.from_batches(batches).sort_by("id").to_pylist() == model
    # filters on the re-encoded columns (INT96 instants, integer decimals) give the right rows
    cut = dt.datetime(2024, 1, 1, 0, 4, tzinfo=UTC)
    by_time = table.scan(filter=[("ts", ">=", cut)]).to_arrow()
    assert _ids(by_time) == [r["id"] for r in model if r["ts"] >= cut]  # type: ignore[operator]
    low = decimal.Decimal("2.5")
    by_decimal = table.scan(filter=[("d5", "<", low)]).to_arrow()
    assert _ids(by_decimal) == [r["id"] for r in model if r["d5"] < low]  # type: ignore[operator]
    # compaction merges files of every form into files of the table's own schema
    before = len(table.files())
    assert table.compact(full=True) is not None
    assert len(table.files()) < before
    assert table.scan().to_arrow().sort_by("id").to_pylist() == model
    _live_files_are_in_table_schema(table, tmp_path / "t")
    if bucketed:  # each bucket still in write order
        for split in table.scan().plan():
            ids = [i for b in table.read(split) for i in b.column("id").to_pylist()]
            assert ids == sorted(ids)
    else:
        assert table.sort_compact(["s"]) is not None
        assert table.scan().to_arrow().sort_by("id").to_pylist() == model
        _live_files_are_in_table_schema(table, tmp_path / "t")


def test_automatic_compaction_after_adopting_strict_files(tmp_path: Path) -> None:
    """The reported failure: files with NOT NULL fields and Spark metadata in a table of
    nullable columns broke the post-commit compaction."""
    table = at.create_table(
        str(tmp_path / "t"), TABLE, options={"compaction.min.file-num": 2, "bucket": -1}
    )
    written = []
    for round_ in range(4):
        rows = _rows(round_ * 10, 10)
        with table.staging_area() as area:
            _stage(area, "part.parquet", pa.Table.from_pylist(rows, schema=SPARK_LIKE), {})
            snapshot = table.committer().commit(area.adopt(["part.parquet"]))
        assert snapshot is not None
        written += rows
    assert table.wait_for_maintenance(timeout=60)
    kinds = [s.kind for s in table.snapshots()]
    assert at.CommitKind.COMPACT in kinds  # the automatic compaction ran, and succeeded
    assert table.scan().to_arrow().sort_by("id").to_pylist() == _model(written)
    _live_files_are_in_table_schema(table, tmp_path / "t")


@pytest.mark.parametrize(
    ("table_type", "file_field", "form", "reason"),
    [
        # a wall-clock INT96 column: INT96 holds instants only
        (pa.timestamp("us"), pa.field("c", pa.timestamp("us")), "int96", "INT96"),
        # an instant column in a file of wall-clock microseconds (isAdjustedToUTC = false)
        (pa.timestamp("us", tz="UTC"), pa.field("c", pa.timestamp("us")), None, "has type"),
        # nested nulls where the table allows none
        (
            pa.list_(pa.field("item", pa.int64(), nullable=False)),
            pa.field("c", pa.list_(pa.int64())),
            None,
            "may hold nulls",
        ),
        (
            pa.struct([pa.field("x", pa.int64())]),
            pa.field("c", pa.struct([pa.field("z", pa.int64())])),
            None,
            "has field 'z'",
        ),
        (pa.int64(), pa.field("c", pa.int32()), None, "has type int32"),
    ],
)
def test_a_file_whose_column_does_not_fit_is_refused_before_anything_moves(
    tmp_path: Path, table_type: pa.DataType, file_field: pa.Field, form: str | None, reason: str
) -> None:
    schema = pa.schema([("id", pa.int64()), pa.field("c", table_type)])
    table = at.create_table(str(tmp_path / "t"), schema)
    value: object
    if pa.types.is_timestamp(file_field.type):
        value = dt.datetime(2024, 1, 1)
    elif pa.types.is_list(file_field.type):
        value = [1]
    elif pa.types.is_struct(file_field.type):
        value = {"z": 1}
    else:
        value = 1
    data = pa.table({"id": [1], "c": pa.array([value], file_field.type)})
    with table.staging_area() as area:
        _stage(area, "f.parquet", data, {"use_deprecated_int96_timestamps": True} if form else {})
        with pytest.raises(at.SchemaMismatchError, match=reason):
            area.adopt(["f.parquet"])
        assert area.files() == ["f.parquet"]  # nothing moved
    assert table.scan().count() == 0


def test_int96_instants_are_read_in_microseconds_across_the_whole_range(tmp_path: Path) -> None:
    """INT96 read as nanoseconds overflows after 2262; Spark writes dates up to 9999."""
    table = at.create_table(
        str(tmp_path / "t"),
        pa.schema([("ts", pa.timestamp("us", tz="UTC"))]),
        options={"write-only": True},
    )
    values = [
        dt.datetime(1, 1, 1, tzinfo=UTC),
        dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ]
    data = pa.table({"ts": pa.array(values, pa.timestamp("us", tz="UTC"))})
    for name in ("a", "b"):
        with table.staging_area() as area:
            _stage(area, f"{name}.parquet", data, {"use_deprecated_int96_timestamps": True})
            table.committer().commit(area.adopt([f"{name}.parquet"]))
    assert table.scan().to_arrow().column("ts").to_pylist() == values * 2
    table.compact(full=True)
    assert len(table.files()) == 1
    assert table.scan().to_arrow().column("ts").to_pylist() == values * 2
