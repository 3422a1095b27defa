"""Bloom-filter file indexes: files are skipped, rows never; sidecars live and die with their
data files; options are validated and follow schema changes."""

from __future__ import annotations

import decimal
import logging
import math
import os
import random
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings

import appendtable as at
from appendtable.commit.discard import referenced_files
from appendtable.metadata import layout
from appendtable.planning.file_index import BloomBuilder, bloom_may_contain, value_hashes
from tests.helpers.clock import past_every_file_ms

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
    table.update_schema().update_column("n", type=pa.int64()).rename_column("id", "user").commit()
    assert table.options["file-index.bloom-filter.columns"] == "user,n,x,amount"
    new = _batch(rng, 100, 0).rename_columns(["user", "n", "x", "amount", "p"])
    table.append(new.cast(table.schema))
    value = old["n"][3].as_py()
    files = _files(table.scan(filter=[("n", "=", value)]))
    assert old["n"][3].as_py() not in new["n"].to_pylist() or len(files) == 2
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
        ({"file-index.bloom-filter.columns": "p"}, "partition column 'p'"),
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


def test_sidecars_live_and_die_with_their_data_files(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    options = {**INDEXED, "file-index.in-manifest-threshold": 0, "snapshot.num-retained.min": 1}
    table = at.create_table(uri, SCHEMA, options=options)
    rng = random.Random(5)
    batches = [_batch(rng, 100, 0) for _ in range(6)]
    for batch in batches:
        table.append(batch)
    files = _files(table.scan())
    for file in files:
        assert file.file_index is not None and file.file_index.sidecar_size > 0
        assert all(bloom.bits == b"" for bloom in file.file_index.blooms)
        assert os.path.exists(os.path.join(uri, layout.index_path(file.path)))
    rows = pa.concat_tables(batches)
    target = rows["id"][42].as_py()
    assert table.scan(filter=[("id", "=", target)]).count() == len(_expected(rows, "id", [target]))
    assert len(_files(table.scan(filter=[("id", "=", "user-x")]))) == 0

    # orphan removal keeps every referenced sidecar and reclaims a stray one
    stray = os.path.join(uri, "bucket-0", "data-stray-0.parquet.index")
    Path(stray).write_bytes(b"x")
    table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert not os.path.exists(stray)
    assert all(os.path.exists(os.path.join(uri, layout.index_path(f.path))) for f in files)

    # the discard gate keeps the sidecar of a landed file
    paths = [files[0].path, layout.index_path(files[0].path)]
    state = table._state
    assert referenced_files(state.snapshots, state.manifests, paths) == set(paths)

    # compaction writes new files with sidecars; expiring the old ones deletes theirs
    table.set_options({"write-only": False})
    table.compact(full=True)
    table.wait_for_maintenance()
    table.expire_snapshots(retain_min=1, retain_max=1)
    compacted = _files(table.scan())
    assert len(compacted) < len(files)
    on_disk = {str(p.relative_to(uri)) for p in Path(uri).rglob("*.index")}
    assert on_disk == {layout.index_path(f.path) for f in compacted}
    assert table.scan(filter=[("id", "=", target)]).count() == len(_expected(rows, "id", [target]))


def test_a_lost_or_damaged_sidecar_keeps_its_file(tmp_path: Path, caplog: object) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={**INDEXED, "file-index.in-manifest-threshold": 0})
    rng = random.Random(9)
    first, second = _batch(rng, 50, 0), _batch(rng, 50, 0)
    table.append(first)
    table.append(second)
    a, b = _files(table.scan())
    os.remove(os.path.join(uri, layout.index_path(a.path)))
    Path(uri, layout.index_path(b.path)).write_bytes(b"garbage")
    assert isinstance(caplog, pytest.LogCaptureFixture)
    with caplog.at_level(logging.WARNING, logger="appendtable.scan"):
        assert len(_files(table.scan(filter=[("id", "=", "user-x")]))) == 2
    assert "reading the index of" in caplog.text
    value = first["id"][0].as_py()
    want = len(_expected(pa.concat_tables([first, second]), "id", [value]))
    assert table.scan(filter=[("id", "=", value)]).count() == want


def test_staged_writes_move_sidecars(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={**INDEXED, "file-index.in-manifest-threshold": 0})
    batch = _batch(random.Random(1), 80, 0)
    with table.staging_area() as area:
        with area.writer() as writer:
            writer.write(batch)
            messages = area.adopt_written(writer.prepare_commit())
        table.committer().commit(messages)
    (file,) = _files(table.scan())
    assert os.path.exists(os.path.join(uri, layout.index_path(file.path)))
    assert not list(Path(uri, "_staging").rglob("*.index"))
    value = batch["id"][5].as_py()
    assert table.scan(filter=[("id", "=", value)]).count() == len(_expected(batch, "id", [value]))


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
    for column, literals in (("k", probes), ("s", [f"s{v}" for v in probes])):
        got = table.scan(filter=[(column, "in", literals)]).to_arrow()
        want = rows.filter(pc.is_in(rows[column], value_set=pa.array(literals)))
        assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr)


@pytest.mark.parametrize(
    ("rows", "distinct"),
    [(20_000, 20_000), (20_000, 300), (200_000, 200_000), (200_000, 1_000)],
)
def test_filters_are_sized_for_the_distinct_values(rows: int, distinct: int) -> None:
    """Exact distinct counts up to 65,536 values, linear counting beyond: either way the filter
    has about the optimal size for the distinct values and about the configured rate."""
    builder = BloomBuilder(field_id=1, hash_type="int64", fpp=0.01, items=0)
    builder.update(pa.array(np.arange(rows, dtype=np.int64) % distinct))
    bloom = builder.result()
    optimal = -distinct * math.log(0.01) / math.log(2) ** 2
    assert 0.9 * optimal <= bloom.num_bits <= 1.1 * optimal + 64
    absent = value_hashes(pa.array(np.arange(10**9, 10**9 + 5_000, dtype=np.int64)))
    hits = sum(bloom_may_contain(bloom, bloom.bits, absent[i : i + 1]) for i in range(5_000))
    assert hits / 5_000 < 0.02
    present = value_hashes(pa.array(np.arange(0, distinct, max(1, distinct // 2000))))
    for i in range(len(present)):
        assert bloom_may_contain(bloom, bloom.bits, present[i : i + 1])
