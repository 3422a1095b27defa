"""Bloom-filter file indexes (Parquet's own filters, described in the manifest): files are
skipped, rows never; filters are probed in the manifest or in the data file; options are
validated and follow schema changes."""

from __future__ import annotations

import decimal
import logging
import math
import os
import random
from pathlib import Path

import fsspec
import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

import appendtable as at
from appendtable.planning.parquet_bloom import bitset_of, plain_encodings, sbbf_may_contain, xxh64
from tests.helpers import strategies

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("n", pa.int32()),
        ("x", pa.float64()),
        ("amount", pa.decimal128(10, 2)),
        ("p", pa.int32()),
    ]
)
INDEXED = {"file-index.bloom-filter.columns": "id,n,x,amount", "write-only": True}


def _files(scan: at.Scan) -> list[at.DataFileMeta]:
    return [file for split in scan.plan() for file in split.files]


def _batch(rng: random.Random, rows: int, part: int) -> pa.Table:
    """Rows whose statistics cover the whole value range: only an index can skip the file."""
    ids = [f"user-{rng.randrange(10_000):05d}" for _ in range(rows - 2)] + ["user-00000", "user-~"]
    numbers = [rng.randrange(-1000, 1000) for _ in range(rows - 2)] + [-1000, 1000]
    return pa.table(
        {
            "id": ids,
            "n": pa.array(numbers, pa.int32()),
            "x": [float(v) / 4 for v in numbers],
            "amount": pa.array([decimal.Decimal(v) / 100 for v in numbers], pa.decimal128(10, 2)),
            "p": pa.array([part] * rows, pa.int32()),
        },
        schema=SCHEMA,
    )


def _expected(rows: pa.Table, column: str, values: list[object]) -> list[dict[str, object]]:
    mask = pc.is_in(rows[column], value_set=pa.array(values, rows.schema.field(column).type))
    return sorted(rows.filter(mask).to_pylist(), key=repr)


def test_point_lookups_skip_files_and_return_every_row(uri: str) -> None:
    table = at.create_table(uri, SCHEMA, options=INDEXED)
    rng = random.Random(7)
    batches = [_batch(rng, 200, 0) for _ in range(30)]
    for batch in batches:
        table.append(batch)
    rows = pa.concat_tables(batches)
    present = rows["id"][17].as_py()
    scan = table.scan(filter=[("id", "=", present)])
    assert sorted(scan.to_arrow().to_pylist(), key=repr) == _expected(rows, "id", [present])
    holding = sum(1 for b in batches if present in b["id"].to_pylist())
    assert holding <= len(_files(scan)) <= holding + 3  # 1 % false positives of 30 files
    assert len(_files(table.scan())) == 30  # statistics alone skip nothing here
    # absent values: about 1 % of the files each (false positives), expected 15 of 1,500
    absent = sum(len(_files(table.scan(filter=[("id", "=", f"user-x{i}")]))) for i in range(50))
    assert absent <= 45
    # every indexed type, = and in, and OR of clauses
    for column, values in (
        ("n", [rows["n"][5].as_py(), 5000]),
        ("x", [rows["x"][9].as_py()]),
        ("amount", [rows["amount"][11].as_py()]),
    ):
        got = table.scan(filter=[(column, "in", values)]).to_arrow().to_pylist()
        assert sorted(got, key=repr) == _expected(rows, column, values)
    either = table.scan(filter=[[("id", "=", present)], [("n", "=", 4321)]])
    assert sorted(either.to_arrow().to_pylist(), key=repr) == _expected(rows, "id", [present])


def test_signed_zero_nan_and_nulls(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.float32()), ("s", pa.string())])
    indexed = at.create_table(
        str(tmp_path / "i"),
        schema,
        options={"file-index.bloom-filter.columns": "x,s", "write-only": True},
    )
    plain = at.create_table(str(tmp_path / "p"), schema, options={"write-only": True})
    for table in (indexed, plain):
        table.append(pa.table({"x": pa.array([-0.0, 1.5], pa.float32()), "s": ["a", None]}))
        table.append(pa.table({"x": pa.array([math.nan, None], pa.float32()), "s": [None, None]}))
    assert indexed.scan(filter=[("x", "=", 0.0)]).to_arrow()["x"].to_pylist() == [-0.0]
    assert len(_files(indexed.scan(filter=[("x", "=", -0.0)]))) == 1
    for row_filter in (
        [("x", "=", 0.0)],
        [("x", "=", -0.0)],
        [("x", "=", 1.5)],
        [("x", "in", [math.nan])],
        [("x", "=", math.nan)],
        [("s", "=", "a")],
        [("s", "in", ["a", "b"])],
        [("s", "is null")],
    ):
        got = repr(indexed.scan(filter=row_filter).to_arrow().to_pylist())
        assert got == repr(plain.scan(filter=row_filter).to_arrow().to_pylist()), row_filter


def test_widened_and_renamed_columns_keep_their_filters(uri: str) -> None:
    table = at.create_table(uri, SCHEMA, options=INDEXED)
    rng = random.Random(3)
    old = _batch(rng, 100, 0)
    table.append(old)
    (old_file,) = _files(table.scan())
    table.update_schema().update_column("n", type=pa.int64()).rename_column("id", "user").commit()
    assert table.options["file-index.bloom-filter.columns"] == "user,n,x,amount"
    new = _batch(rng, 100, 0).rename_columns(["user", "n", "x", "amount", "p"])
    table.append(new.cast(table.schema))
    value = old["n"][3].as_py()
    # The int32 filters of the file written before the widening still find its values: a value
    # only it holds reads it, a value both hold reads both files.
    only_old = sorted(set(old["n"].to_pylist()) - set(new["n"].to_pylist()))
    assert only_old  # 100 of 2000 numbers each: the batches cannot share them all
    for number in (only_old[0], only_old[-1], value):
        paths = {file.path for file in _files(table.scan(filter=[("n", "=", number)]))}
        assert old_file.path in paths, number
    shared = set(old["n"].to_pylist()) & set(new["n"].to_pylist())  # at least -1000 and 1000
    for number in shared:
        assert len(_files(table.scan(filter=[("n", "=", number)]))) == 2, number
    assert table.scan(filter=[("n", "=", value)]).count() == (
        pc.sum(pc.equal(old["n"], value)).as_py() + pc.sum(pc.equal(new["n"], value)).as_py()
    )
    user = old["id"][0].as_py()
    want = pc.sum(pc.equal(old["id"], user)).as_py() + pc.sum(pc.equal(new["user"], user)).as_py()
    assert table.scan(filter=[("user", "=", user)]).count() == want
    table.update_schema().drop_column("x").commit()
    assert table.options["file-index.bloom-filter.columns"] == "user,n,amount"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"file-index.bloom-filter.columns": "nope"}, "'nope'"),
        ({"file-index.bloom-filter.columns": "p"}, "'p' is a partition column"),
        ({"file-index.bloom-filter.columns": "id,id"}, "twice"),
        ({"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.fpp": 1.5}, "fpp"),
        ({"file-index.bloom-filter.columns": "tags"}, "'tags'"),
    ],
)
def test_bad_index_options_name_the_problem(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    schema = SCHEMA.append(pa.field("tags", pa.list_(pa.string())))
    with pytest.raises(at.InvalidOptionError, match=message):
        at.create_table(str(tmp_path / "t"), schema, partition_by=["p"], options=options)
    table = at.create_table(str(tmp_path / "u"), schema, partition_by=["p"])
    with pytest.raises(at.InvalidOptionError, match=message):
        table.set_options(options)


def test_large_filters_are_probed_in_the_data_files(uri: str) -> None:
    """Above the threshold the manifest keeps only where each bitset starts in its file; a
    lookup reads the probed 32-byte blocks from there (local disk and fsspec alike), and
    compaction writes indexed files too."""
    options = {**INDEXED, "file-index.in-manifest-threshold": 0}
    table = at.create_table(uri, SCHEMA, options=options)
    rng = random.Random(5)
    batches = [_batch(rng, 100, 0) for _ in range(6)]
    for batch in batches:
        table.append(batch)
    files = _files(table.scan())
    for file in files:
        assert file.file_index is not None and file.file_index.row_groups == 1
        assert len(file.file_index.blooms) == 4  # id, n, x, amount
        assert all(
            b.bits == b"" and b.offset > 0 and b.num_bytes >= 32 for b in file.file_index.blooms
        )
    rows = pa.concat_tables(batches)
    target = rows["id"][42].as_py()
    want = len(_expected(rows, "id", [target]))
    assert table.scan(filter=[("id", "=", target)]).count() == want
    holding = sum(1 for b in batches if target in b["id"].to_pylist())
    assert len(_files(table.scan(filter=[("id", "=", target)]))) <= holding + 1
    absent = sum(len(_files(table.scan(filter=[("id", "=", f"user-x{i}")]))) for i in range(30))
    assert absent <= 12  # 180 probes at 1 %

    table.set_options({"write-only": False})
    table.compact(full=True)
    table.wait_for_maintenance()
    (compacted,) = _files(table.scan())
    assert compacted.file_index is not None and compacted.file_index.blooms
    assert table.scan(filter=[("id", "=", target)]).count() == want
    skipped = [_files(table.scan(filter=[("id", "=", f"user-x{i}")])) for i in range(30)]
    assert sum(len(files) for files in skipped) <= 3  # the compacted file's filter answers


def test_a_file_whose_filters_cannot_be_read_is_kept(tmp_path: Path, caplog: object) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={**INDEXED, "file-index.in-manifest-threshold": 0})
    rng = random.Random(9)
    table.append(_batch(rng, 50, 0))
    table.append(_batch(rng, 50, 0))
    a, b = _files(table.scan())
    os.remove(os.path.join(uri, a.path))
    assert isinstance(caplog, pytest.LogCaptureFixture)
    with caplog.at_level(logging.WARNING, logger="appendtable.scan"):
        kept = _files(table.scan(filter=[("id", "=", "user-x")]))
    assert [f.path for f in kept] in ([a.path], [a.path, b.path])
    assert f"probing the bloom filters of {a.path} failed" in caplog.text


def test_staged_writes_keep_their_indexes(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={**INDEXED, "file-index.in-manifest-threshold": 0})
    batch = _batch(random.Random(1), 80, 0)
    with table.staging_area() as area:
        with area.writer() as writer:
            writer.write(batch)
            messages = area.adopt_written(writer.prepare_commit())
        table.committer().commit(messages)
    (file,) = _files(table.scan())
    assert file.file_index is not None and file.file_index.blooms
    value = batch["id"][5].as_py()
    assert table.scan(filter=[("id", "=", value)]).count() == len(_expected(batch, "id", [value]))
    absent = [_files(table.scan(filter=[("id", "=", f"user-x{i}")])) for i in range(30)]
    assert sum(len(files) for files in absent) <= 3  # the staged file's filter answers


def _stage(area: at.StagingArea, name: str, data: pa.Table, **write: object) -> None:
    """Write ``data`` as a Parquet file into the area, as another engine would."""
    fs, root = fsspec.core.url_to_fs(area.uri)
    fs.makedirs(root, exist_ok=True)
    with fs.open(f"{root}/{name}", "wb") as out:
        pq.write_table(data, out, **write)  # type: ignore[arg-type]


def test_adopted_files_keep_the_bloom_filters_another_engine_wrote(uri: str) -> None:
    """Another engine's Parquet bloom filters are described when they hash the column as the
    table does; a decimal stored as INT64 (Spark's way) or a file without filters is simply
    not skipped by them."""
    table = at.create_table(uri, SCHEMA, options=INDEXED)
    rng = random.Random(13)
    first, second, third = (_batch(rng, 300, 0) for _ in range(3))
    blooms = {name: {"ndv": 300, "fpp": 0.01} for name in ("id", "n", "amount")}
    with table.staging_area() as area:
        _stage(area, "a.parquet", first, bloom_filter_options=blooms, row_group_size=100)
        _stage(
            area,
            "b.parquet",
            second,
            bloom_filter_options=blooms,
            store_decimal_as_integer=True,
        )
        _stage(area, "c.parquet", third)
        table.committer().commit(area.adopt(["a.parquet", "b.parquet", "c.parquet"]))
    a, b, c = sorted(_files(table.scan()), key=lambda f: f.min_seq)
    assert a.file_index is not None and a.file_index.row_groups == 3
    assert {bloom.field_id for bloom in a.file_index.blooms} == {1, 2, 4}
    assert b.file_index is not None
    assert {bloom.field_id for bloom in b.file_index.blooms} == {1, 2}  # not the INT64 decimal
    assert c.file_index is None
    rows = pa.concat_tables([first, second, third])
    for column, index in (("id", 7), ("n", 8), ("amount", 9)):
        value = first[column][index].as_py()
        got = table.scan(filter=[(column, "=", value)]).to_arrow().to_pylist()
        assert sorted(got, key=repr) == _expected(rows, column, [value])
    skipped = _files(table.scan(filter=[("id", "=", "user-x")]))
    assert c in skipped and len(skipped) <= 2


def test_a_struct_field_of_the_same_name_is_not_mistaken_for_the_column(tmp_path: Path) -> None:
    schema = pa.schema(
        [("meta", pa.struct([("id", pa.string()), ("n", pa.int64())])), ("id", pa.string())]
    )
    table = at.create_table(
        str(tmp_path / "t"),
        schema,
        options={"file-index.bloom-filter.columns": "id", "write-only": True},
    )
    for i in range(5):
        table.append(
            pa.table(
                {
                    "meta": [{"id": f"inner-{i}-{j}", "n": j} for j in range(50)],
                    "id": [f"outer-{i}-{j}" for j in range(50)],
                },
                schema=schema,
            )
        )
    assert table.scan(filter=[("id", "=", "outer-3-7")]).count() == 1
    assert len(_files(table.scan(filter=[("id", "=", "outer-3-7")]))) <= 2
    assert table.scan(filter=[("id", "=", "inner-3-7")]).count() == 0


def test_streams_skip_units_files_by_index(uri: str) -> None:
    table = at.create_table(uri, SCHEMA, options=INDEXED)
    rng = random.Random(11)
    batches = [_batch(rng, 100, 0) for _ in range(8)]
    for batch in batches:
        table.append(batch)
    value = batches[3]["id"][0].as_py()
    stream = table.stream(mode="from-snapshot", snapshot_id=1, filter=[("id", "=", value)])
    units = []
    while (unit := stream.poll()) is not None:
        units.append(unit)
    holding = sum(1 for b in batches if value in b["id"].to_pylist())
    assert holding <= sum(unit.file_count for unit in units) <= holding + 2
    stream = table.stream(mode="from-snapshot", snapshot_id=1, filter=[("id", "=", value)])
    got = pa.Table.from_batches(list(stream.batches(timeout=0)))
    want = _expected(pa.concat_tables(batches), "id", [value])
    assert sorted(got.to_pylist(), key=repr) == want


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=st.lists(
        st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=40),
        min_size=1,
        max_size=8,
    ),
    probes=st.lists(st.integers(-60, 60), min_size=1, max_size=3),
    threshold=st.sampled_from([0, 64, 100_000]),
    items=st.sampled_from([0, 1, 1000]),
)
def test_index_never_drops_a_matching_row(
    tmp_path_factory: pytest.TempPathFactory,
    data: list[list[int | None]],
    probes: list[int],
    threshold: int,
    items: int,
) -> None:
    schema = pa.schema([("k", pa.int16()), ("s", pa.string())])
    uri = str(tmp_path_factory.mktemp("t") / "t")
    table = at.create_table(
        uri,
        schema,
        options={
            "file-index.bloom-filter.columns": "k,s",
            "file-index.in-manifest-threshold": threshold,
            "file-index.bloom-filter.items": items,
            "write-only": True,
        },
    )
    for values in data:
        strings = [None if v is None else f"s{v}" for v in values]
        table.append(pa.table({"k": pa.array(values, pa.int16()), "s": strings}, schema=schema))
    rows = table.scan().to_arrow()
    files = [file for split in table.scan().plan() for file in split.files]
    for file in files:  # where the bitsets live follows the threshold
        assert file.file_index is not None
        copied = {bool(bloom.bits) for bloom in file.file_index.blooms}
        total = sum(bloom.num_bytes for bloom in file.file_index.blooms)
        assert copied == {total <= threshold}
    for column, literals in (("k", probes), ("s", [f"s{v}" for v in probes])):
        got = table.scan(filter=[(column, "in", literals)]).to_arrow()
        want = rows.filter(pc.is_in(rows[column], value_set=pa.array(literals)))
        assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr)


def _column_values(n: int) -> pa.Table:
    rng = np.random.default_rng(0)
    numbers = rng.integers(-(2**40), 2**40, size=n)
    return pa.table(
        {
            "s": pa.array([f"user-{v}-{'x' * (v % 40)}" for v in numbers.tolist()]),
            "i8": pa.array((numbers % 100).astype(np.int8)),
            "i32": pa.array((numbers % 2**31).astype(np.int32)),
            "u32": pa.array((numbers % 2**32).astype(np.uint32)),
            "i64": pa.array(numbers),
            "u64": pa.array(numbers.astype(np.uint64)),
            "f32": pa.array((numbers / 7).astype(np.float32)),
            "f64": pa.array(numbers / 7),
            "d": pa.array(
                [decimal.Decimal(v % 10**9) / 100 for v in numbers.tolist()], pa.decimal128(12, 2)
            ),
            "d38": pa.array(
                [decimal.Decimal(v) * 10**20 for v in numbers.tolist()], pa.decimal128(38, 0)
            ),
            "date": pa.array((numbers % 40_000).astype(np.int32), pa.date32()),
            "date64": pa.array((numbers % 40_000) * 86_400_000, pa.date64()),
            "ts_s": pa.array(numbers % 2**33, pa.timestamp("s")),
            "ts_us": pa.array(numbers, pa.timestamp("us", tz="UTC")),
            "ts_ns": pa.array(numbers, pa.timestamp("ns")),
            "t_s": pa.array((numbers % 86_400).astype(np.int32), pa.time32("s")),
            "t_us": pa.array(numbers % 86_400_000_000, pa.time64("us")),
            "b": pa.array([v.to_bytes(8, "little", signed=True) for v in numbers.tolist()]),
            "fsb": pa.array(
                [v.to_bytes(6, "little", signed=True)[:3] for v in numbers.tolist()], pa.binary(3)
            ),
            "dict": pa.array([f"c{v % 50}" for v in numbers.tolist()]).dictionary_encode(),
        }
    )


def test_parquet_bloom_filters_are_probed_exactly_as_written(tmp_path: Path) -> None:
    """Every value pyarrow's C++ writer put in a filter is found by our XXH64 of its PLAIN
    encoding, for every supported type; absent values hit at about the configured rate."""
    data = _column_values(4000)
    path = str(tmp_path / "f.parquet")
    pq.write_table(
        data,
        path,
        bloom_filter_options={name: {"ndv": 4000, "fpp": 0.01} for name in data.column_names},
    )
    raw = Path(path).read_bytes()
    metadata = pq.read_metadata(path)
    absent = _column_values(2000).slice(1000)  # other draws: almost surely absent
    for position, name in enumerate(data.column_names):
        column = metadata.row_group(0).column(position)
        offset, length = column.bloom_filter_offset, column.bloom_filter_length
        num_bytes = bitset_of(raw[offset : offset + 64], length)
        assert num_bytes is not None, name
        bits = raw[offset + length - num_bytes : offset + length]
        data_type = data.schema.field(name).type
        for value in data[name].to_pylist()[::9]:
            encodings = plain_encodings(value, data_type)
            assert encodings, (name, value)
            assert sbbf_may_contain(bits, [xxh64(e) for e in encodings]), (name, value)
        if name in ("i8", "dict"):
            continue  # few distinct values: the "absent" draws are present
        present = set(data[name].to_pylist())
        others = [v for v in absent[name].to_pylist() if v not in present]
        hits = sum(
            sbbf_may_contain(bits, [xxh64(e) for e in plain_encodings(v, data_type) or []])
            for v in others
        )
        assert hits <= 0.03 * len(others) + 3, (name, hits, len(others))


def test_xxh64_reference_values() -> None:
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    long = bytes(range(256)) * 3  # the 32-byte stripes, then 8-, 4- and 1-byte tails
    assert xxh64(long) == xxh64(long[:-1] + long[-1:])
    assert len({xxh64(long[:n]) for n in range(len(long))}) == len(long)


def test_long_decimals_are_found_by_their_index(tmp_path: Path) -> None:
    """Literals of 29 to 38 digits were hashed after rounding to Python's default 28-digit
    context, so the index skipped the files holding them."""
    schema = pa.schema([("d", pa.decimal128(38, 0)), ("e", pa.decimal128(38, 10))])
    d_values = [
        decimal.Decimal("1234567890123456789012345678901"),
        decimal.Decimal("-99999999999999999999999999999999999999"),
        decimal.Decimal("99999999999999999999999999999999999998"),
    ]
    e_values = [
        decimal.Decimal("1234567890123456789012345.0123456789"),
        decimal.Decimal("-9999999999999999999999999999.9999999999"),
        decimal.Decimal("0.0000000001"),
    ]
    data = pa.table({"d": d_values, "e": e_values}, schema=schema)
    options = {"file-index.bloom-filter.columns": "d,e", "write-only": True}
    for threshold in (0, 100_000):  # probed in the data file, and in the manifest
        table = at.create_table(
            str(tmp_path / f"t{threshold}"),
            schema,
            options={**options, "file-index.in-manifest-threshold": threshold},
        )
        table.append(data)
        for column, literals in (("d", d_values), ("e", e_values)):
            for literal in literals:
                for form in (literal, str(literal)):
                    assert table.scan(filter=[(column, "=", form)]).count() == 1, (column, form)
                    assert table.scan(filter=[(column, "in", [form])]).count() == 1
        assert table.scan(filter=[("d", "=", int(d_values[0]))]).count() == 1


@st.composite
def _lookups(draw: st.DrawFn) -> tuple[pa.DataType, list[pa.Array], list[object], int]:
    dtype = draw(st.one_of(st.sampled_from(strategies.BLOOM_TYPES), strategies.decimal_types()))
    batches = draw(
        st.lists(
            strategies.arrays(dtype, min_size=1, max_size=15, python=True), min_size=1, max_size=4
        )
    )
    present = [v for b in batches for v in b.to_pylist() if v is not None]
    drawn = strategies.python_values(dtype)
    literal = st.one_of(drawn, st.sampled_from(present)) if present else drawn
    literals = draw(st.lists(literal, min_size=1, max_size=3))
    return dtype, batches, literals, draw(st.sampled_from([0, 100_000]))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(case=_lookups())
def test_index_finds_every_value_of_every_type(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[pa.DataType, list[pa.Array], list[object], int],
) -> None:
    """Whole-domain values of every indexable type (full-precision decimals, extreme integers,
    subnormal and signed-zero floats, NaN, long and non-ASCII strings, the ends of each
    timestamp unit): ``=`` and ``in`` find what pyarrow compute finds, however the index is
    probed."""
    dtype, batches, literals, threshold = case
    schema = pa.schema([("k", pa.int64()), ("c", dtype)])
    table = at.create_table(
        str(tmp_path_factory.mktemp("t") / "t"),
        schema,
        options={
            "file-index.bloom-filter.columns": "c",
            "file-index.in-manifest-threshold": threshold,
            "write-only": True,
        },
    )
    start, parts = 0, []
    for batch in batches:
        keys = pa.array(range(start, start + len(batch)), pa.int64())
        parts.append(pa.table({"k": keys, "c": batch}, schema=schema))
        table.append(parts[-1])
        start += len(batch)
    data = pa.concat_tables(parts)
    column = data.column("c")

    # floats compare in float64, as the filter semantics say: a literal float32 cannot hold
    # exactly (0.1) equals no float32 value, it is not rounded to one first
    exact = pa.float64() if pa.types.is_floating(dtype) else dtype
    compared = column.cast(exact)

    def matching(values: list[object]) -> list[int]:
        found = pa.array([False] * len(data))
        for value in values:  # SQL's =: NaN equals nothing, -0.0 equals 0.0
            equal = pc.fill_null(pc.equal(compared, pa.scalar(value, exact)), False)
            found = pc.or_(found, equal)
        return sorted(data.filter(found).column("k").to_pylist())

    for literal in literals:
        got = table.scan(filter=[("c", "=", literal)]).to_arrow().column("k").to_pylist()
        assert sorted(got) == matching([literal]), (dtype, literal)
    got = table.scan(filter=[("c", "in", literals)]).to_arrow().column("k").to_pylist()
    assert sorted(got) == matching(literals), (dtype, literals)


def test_a_float32_literal_it_cannot_hold_matches_nothing(tmp_path: Path) -> None:
    """The example the whole-domain test once drew (its oracle rounded the literal first)."""
    table = at.create_table(
        str(tmp_path / "t"),
        pa.schema([("c", pa.float32())]),
        options={"file-index.bloom-filter.columns": "c"},
    )
    table.append(pa.table({"c": pa.array([0.1, 0.5], pa.float32())}))
    assert table.scan(filter=[("c", "=", 0.1)]).count() == 0  # float32(0.1) != 0.1
    held = float(np.float32(0.1))
    assert table.scan(filter=[("c", "=", held)]).count() == 1
    assert table.scan(filter=[("c", "in", [0.1, 0.5])]).count() == 1
