"""Table.delete in both modes, against an oracle: pyarrow compute over the rows appended.

Every read path is checked after each delete: to_arrow, to_batches, to_pandas, projections,
filters, count (with and without filters), splits read one by one, the Arrow hand-off (the
reader, the C stream, DuckDB, Polars, to_dataset), time travel before the delete, and the
vectors' bytes themselves (decoded here with the Puffin footer and pyroaring, independently of
the library).
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
import zlib
from pathlib import Path

import duckdb
import numpy as np
import polars
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from appendtable.errors import InvalidArgumentError, InvalidFilterError
from tests.helpers.integrity import assert_table_intact

MODES = {"dv": "true", "cow": "false"}
SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("day", pa.string()),
        ("user", pa.int32()),
        ("score", pa.float64()),
        ("name", pa.string()),
        ("payload", pa.struct([("x", pa.int64()), ("tag", pa.string())])),
    ]
)


def rows(start: int, count: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    seq = np.arange(start, start + count, dtype=np.int64)
    score = rng.normal(size=count)
    score[rng.random(count) < 0.05] = np.nan
    names = [f"n{v}" if v % 11 else None for v in rng.integers(0, 60, count)]
    x = rng.integers(-(2**40), 2**40, count)
    return pa.table(
        {
            "seq": seq,
            "day": [f"2024-01-0{1 + v % 3}" for v in rng.integers(0, 3, count)],
            "user": pa.array(rng.integers(-(2**31), 2**31 - 1, count), pa.int32()),
            "score": score,
            "name": pa.array(names, pa.string()),
            "payload": pa.StructArray.from_arrays(
                [pa.array(x), pa.array([f"t{v % 5}" for v in x])], names=["x", "tag"]
            ),
        },
        schema=SCHEMA,
    )


def by_seq(table: pa.Table) -> pa.Table:
    """Sorted by seq, with NaN scores made comparable (NaN equals nothing, itself included):
    a NaN becomes 0 and is flagged in an extra column."""
    table = table.sort_by("seq")
    if "score" not in table.column_names:
        return table
    score = table["score"]
    nan = pc.is_nan(score)
    index = table.column_names.index("score")
    table = table.set_column(index, "score", pc.if_else(nan, 0.0, score))
    return table.append_column("score_is_nan", nan)


def make(tmp_path: Path, mode: str, *, bucketed: bool) -> at.Table:
    options = {"deletion-vectors.enabled": MODES[mode], "target-file-size": "64 KB"}
    if bucketed:
        options |= {"bucket": "3", "bucket-key": "user"}
    return at.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["day"], options=options)


def check_reads(table: at.Table, expected: pa.Table, snapshot_id: int | None = None) -> None:
    """Every read path gives exactly ``expected`` (compared by seq)."""
    model = expected
    expected = by_seq(expected)
    scan = table.scan(snapshot_id=snapshot_id)
    assert by_seq(scan.to_arrow()).equals(expected)
    assert by_seq(pa.Table.from_batches(list(scan.to_batches()), SCHEMA)).equals(expected)
    assert by_seq(model).equals(expected)  # the comparison itself works (NaN)
    assert scan.count() == expected.num_rows
    assert by_seq(scan.to_arrow_reader().read_all()).equals(expected)
    assert by_seq(pa.table(scan)).equals(expected)
    assert sorted(scan.to_pandas()["seq"]) == expected["seq"].to_pylist()
    split_rows = [b for split in scan.plan() for b in table.read(split)]
    assert by_seq(pa.Table.from_batches(split_rows, SCHEMA)).equals(expected)
    assert by_seq(scan.to_dataset().to_table()).equals(expected)
    assert sorted(polars.DataFrame(scan)["seq"].to_list()) == expected["seq"].to_pylist()
    relation = scan.to_duckdb(duckdb.connect())
    assert sorted(r[0] for r in relation.project("seq").fetchall()) == expected["seq"].to_pylist()
    # projections and filters
    projected = table.scan(columns=["seq", "name"], snapshot_id=snapshot_id).to_arrow()
    assert by_seq(projected).equals(expected.select(["seq", "name"]))
    where = [("user", ">", 0), ("name", "is not null")]
    filtered = table.scan(filter=where, snapshot_id=snapshot_id)
    oracle = by_seq(model.filter(pc.and_(pc.greater(model["user"], 0), pc.is_valid(model["name"]))))
    assert by_seq(filtered.to_arrow()).equals(oracle)
    assert filtered.count() == oracle.num_rows
    on_partition = table.scan(filter=[("day", "=", "2024-01-02")], snapshot_id=snapshot_id)
    assert on_partition.count() == (pc.sum(pc.equal(model["day"], "2024-01-02")).as_py() or 0)


def settled(root: Path, snapshot_id: int) -> None:
    """Wait for the hints (LATEST, EARLIEST), which a commit writes in the background after it
    landed: all of them, so that none is written while the test digests the tree."""
    flush_hints()
    hint = root / "snapshot" / "LATEST"
    deadline = time.monotonic() + 10
    while not (hint.exists() and hint.read_text() == str(snapshot_id)):
        assert time.monotonic() < deadline, "the LATEST hint was never written"
        time.sleep(0.01)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


DELETES = [
    # (filter given to delete, oracle mask over the model)
    ([("name", "=", "n7")], lambda t: pc.equal(t["name"], "n7")),
    (
        [[("user", "<", -(2**30))], [("score", ">", 1.5)]],
        lambda t: pc.or_(pc.less(t["user"], -(2**30)), pc.greater(t["score"], 1.5)),
    ),
    (
        [("day", "=", "2024-01-03"), ("seq", "in", list(range(0, 3000, 7)))],
        lambda t: pc.and_(
            pc.equal(t["day"], "2024-01-03"), pc.is_in(t["seq"], pa.array(range(0, 3000, 7)))
        ),
    ),
    (
        [(("payload", "tag"), "=", "t3")],
        lambda t: pc.equal(pc.struct_field(t["payload"], "tag"), "t3"),
    ),
    ([("score", "!=", 0.5)], lambda t: pc.invert(pc.equal(t["score"], 0.5))),
]


@pytest.mark.parametrize("bucketed", [False, True], ids=["unbucketed", "bucketed"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_deletes_match_the_oracle_on_every_read_path(
    tmp_path: Path, mode: str, bucketed: bool
) -> None:
    table = make(tmp_path, mode, bucketed=bucketed)
    model = pa.concat_tables([rows(0, 1500, 1), rows(1500, 1500, 2)])
    table.append(model.slice(0, 1500))
    table.append(model.slice(1500))
    history: list[tuple[int, pa.Table]] = [(table.latest_snapshot().id, model)]
    for index, (where, oracle) in enumerate(DELETES):
        if index == 2:  # appends between deletes
            more = rows(10_000, 400, 10 + index)  # seq values never used before
            table.append(more)
            model = pa.concat_tables([model, more])
        hit = oracle(model).fill_null(False)
        result = table.delete(where)
        assert result.rows == pc.sum(hit).as_py()
        assert result.mode == ("deletion-vectors" if mode == "dv" else "copy-on-write")
        model = model.filter(pc.invert(hit))
        assert result.snapshot is not None and result.snapshot.kind == at.CommitKind.DELETE
        assert result.snapshot.format_version == 3
        assert result.snapshot.total_record_count == model.num_rows
        check_reads(table, model)
        history.append((result.snapshot.id, model))
    for snapshot_id, expected in history:  # time travel: each state as it was
        check_reads(table, expected, snapshot_id)
    # compaction applies the vectors: same rows, no vector left
    table.compact(full=True)
    check_reads(table, model)
    # a reopened handle reads the same
    check_reads(at.open_table(table.uri), model)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_dry_run_changes_nothing_and_tells_what_it_would_do(tmp_path: Path, mode: str) -> None:
    table = make(tmp_path, mode, bucketed=False)
    model = rows(0, 2000, 3)
    table.append(model)
    table.wait_for_maintenance()  # background compaction after the append, if any
    root = tmp_path / "t"
    settled(root, table.latest_snapshot().id)  # type: ignore[union-attr]
    before = tree_digest(root)
    where = [("name", "in", ["n1", "n2"])]
    planned = table.delete(where, dry_run=True)
    assert tree_digest(root) == before
    assert planned.dry_run and planned.snapshot is None
    hits = pc.sum(pc.is_in(model["name"], pa.array(["n1", "n2"]))).as_py()
    assert planned.rows == hits
    done = table.delete(where)
    assert (done.rows, done.files_touched, done.files_removed) == (
        planned.rows,
        planned.files_touched,
        planned.files_removed,
    )
    assert (done.files_rewritten, done.vectors_written) == (
        planned.files_rewritten,
        planned.vectors_written,
    )
    again = table.delete(where, dry_run=True)
    assert again.rows == 0 and again.files_touched == 0


def test_copy_on_write_rewrites_only_touched_files_and_drops_emptied_ones(tmp_path: Path) -> None:
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={"deletion-vectors.enabled": "false", "write-only": "true"},  # one file each
    )
    for n in range(4):
        table.append(rows(n * 100, 100, 20 + n))
    model = table.scan().to_arrow()
    before = {row["path"]: row["rows"] for row in table.files().to_pylist()}
    # every row of the seq < 100 file, plus a few rows of the 200..299 file
    result = table.delete([[("seq", "<", 100)], [("seq", "in", [210, 250])]])
    after = {row["path"]: row["rows"] for row in table.files().to_pylist()}
    untouched = {p for p, _ in before.items() if p in after}
    assert (result.files_removed, result.files_rewritten, result.rows) == (1, 1, 102)
    assert len(before) - len(untouched) == result.files_touched
    assert all(after[p] == before[p] for p in untouched)  # never rewritten
    kept = pc.invert(
        pc.or_(pc.less(model["seq"], 100), pc.is_in(model["seq"], pa.array([210, 250])))
    )
    check_reads(table, model.filter(kept))
    assert not (tmp_path / "t" / "index").exists() or not list(
        (tmp_path / "t" / "index").glob("dv-*")
    )


def _puffin_vectors(path: Path) -> dict[str, list[int]]:
    """The deletion vectors of a Puffin file, decoded from the specification alone."""
    data = path.read_bytes()
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    (size,) = struct.unpack("<I", data[-12:-8])
    footer = json.loads(data[-12 - size : -12])
    assert data[-16 - size : -12 - size] == b"PFA1"
    found: dict[str, list[int]] = {}
    for blob in footer["blobs"]:
        assert blob["type"] == "deletion-vector-v1"
        positions = _blob_positions(data[blob["offset"] : blob["offset"] + blob["length"]])
        assert int(blob["properties"]["cardinality"]) == len(positions)
        found[blob["properties"]["referenced-data-file"]] = positions
    return found


def _blob_positions(raw: bytes) -> list[int]:
    """The positions of one deletion-vector-v1 blob, decoded from the specification alone."""
    (length,) = struct.unpack(">I", raw[:4])
    body = raw[4 : 4 + length]
    assert body[:4] == bytes([0xD1, 0xD3, 0x39, 0x64])
    assert struct.unpack(">I", raw[4 + length :])[0] == zlib.crc32(body)
    (count,) = struct.unpack("<Q", body[4:12])
    positions: list[int] = []
    offset = 12
    for _ in range(count):
        (high,) = struct.unpack("<I", body[offset : offset + 4])
        bitmap = BitMap.deserialize(body[offset + 4 :])
        offset += 4 + len(bitmap.serialize())
        positions.extend((high << 32) | low for low in bitmap)
    assert offset == len(body)
    return positions


def test_vectors_hold_the_deleted_positions_and_a_later_delete_writes_the_union(
    tmp_path: Path,
) -> None:
    table = make(tmp_path, "dv", bucketed=False)
    table.append(rows(0, 3000, 5))
    root = tmp_path / "t"
    table.delete([("name", "=", "n4")])
    first = sorted((root / "index").glob("dv-*.puffin"))
    first_bytes = {p: p.read_bytes() for p in first}
    table.delete([("name", "=", "n5")])
    files = table.files().to_pylist()
    vectors = {}
    for puffin in (root / "index").glob("dv-*.puffin"):
        if puffin not in first_bytes:
            vectors.update(_puffin_vectors(puffin))
    assert {p: p.read_bytes() for p in first} == first_bytes  # immutable
    for file in files:
        raw = pq.read_table(root / file["path"], columns=["name"])["name"]
        expected = np.flatnonzero(pc.is_in(raw, pa.array(["n4", "n5"])).fill_null(False))
        assert vectors.get(file["path"], []) == expected.tolist()
        assert file["rows"] == len(raw) - len(expected)


def test_time_travel_tags_and_reopened_handles_keep_the_rows(tmp_path: Path) -> None:
    table = make(tmp_path, "dv", bucketed=True)
    model = rows(0, 1000, 6)
    table.append(model)
    table.create_tag("before")
    table.delete([("user", ">", 0)])
    assert by_seq(table.scan(tag="before").to_arrow()).equals(by_seq(model))
    assert table.scan(tag="before").count() == 1000
    check_reads(table, model.filter(pc.less_equal(model["user"], 0)))


def test_bad_delete_arguments_are_refused_naming_them(tmp_path: Path) -> None:
    table = make(tmp_path, "dv", bucketed=False)
    table.append(rows(0, 10, 7))
    with pytest.raises(InvalidFilterError, match="needs a filter"):
        table.delete(None)
    with pytest.raises(InvalidFilterError, match="nope"):
        table.delete([("nope", "=", 1)])
    with pytest.raises(InvalidArgumentError, match="dry_run"):
        table.delete([("seq", "=", 1)], dry_run="yes")  # type: ignore[arg-type]
    assert table.scan().count() == 10


def test_deleting_every_row_of_a_file_drops_it_in_both_modes(tmp_path: Path) -> None:
    for mode in MODES:
        table = at.create_table(
            str(tmp_path / mode), SCHEMA, options={"deletion-vectors.enabled": MODES[mode]}
        )
        table.append(rows(0, 50, 8))
        table.append(rows(50, 50, 9))
        result = table.delete([("seq", "<", 50)])
        assert (result.rows, result.files_removed, result.files_touched) == (50, 1, 1)
        assert len(table.files()) == 1
        assert table.scan().to_arrow()["seq"].to_pylist() == list(range(50, 100))


def test_no_match_commits_nothing(tmp_path: Path) -> None:
    table = make(tmp_path, "dv", bucketed=False)
    table.append(rows(0, 100, 11))
    latest = table.latest_snapshot()
    result = table.delete([("seq", ">", 10_000)])
    assert result.rows == 0 and result.snapshot is None
    assert table.latest_snapshot() == latest
    assert latest is not None and latest.format_version == 2  # no delete, no new version


def test_snapshot_counts_and_system_tables_count_live_rows(tmp_path: Path) -> None:
    table = make(tmp_path, "dv", bucketed=False)
    model = rows(0, 2000, 12)
    table.append(model)
    table.delete([("score", "<", 0)])
    left = pc.sum(pc.invert(pc.less(model["score"], 0).fill_null(False))).as_py()
    assert table.latest_snapshot().total_record_count == left  # type: ignore[union-attr]
    assert sum(table.files()["rows"].to_pylist()) == left
    assert sum(table.system_table("files")["record_count"].to_pylist()) == left
    partitions = table.system_table("partitions")
    assert sum(partitions["record_count"].to_pylist()) == left
    assert sum(table.system_table("buckets")["record_count"].to_pylist()) == left


def test_the_file_listings_say_which_files_have_deleted_rows_and_where_the_vector_is(
    tmp_path: Path,
) -> None:
    """``files()`` and the ``files`` system table name each file's deletion vector (the Puffin
    file's uri, the blob's offset and length) and how many rows it deletes, so an engine that
    reads the Parquet files itself can apply the vectors (or refuse the files)."""
    options = {"deletion-vectors.enabled": "true", "write-only": "true"}  # one file per append
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options=options)
    appended = [rows(0, 500, 21), rows(500, 500, 22), rows(1000, 500, 23)]
    for batch in appended:
        table.append(batch)
    table.delete([("seq", "<", 100)])  # the first file only
    table.delete([("name", "=", "n7")])  # every file
    table.delete([("seq", ">=", 1000)])  # the third file whole: dropped
    listing = table.files().to_pylist()
    system = table.system_table("files").to_pylist()
    assert len(listing) == len(system) == 2
    for file, row in zip(listing, system, strict=True):
        assert file["deleted_rows"] == row["deleted_record_count"]
        for name in ("uri", "offset", "length"):
            assert file[f"deletion_vector_{name}"] == row[f"deletion_vector_{name}"]
        raw = pq.read_table(file["uri"], columns=["seq", "name"])  # as another engine reads it
        deleted = pc.or_(pc.less(raw["seq"], 100), pc.equal(raw["name"], "n7").fill_null(False))
        expected = np.flatnonzero(deleted.to_numpy(zero_copy_only=False)).tolist()
        assert file["deleted_rows"] == len(expected) > 0
        assert file["rows"] == raw.num_rows - len(expected)
        with open(file["deletion_vector_uri"], "rb") as puffin:
            puffin.seek(file["deletion_vector_offset"])
            blob = puffin.read(file["deletion_vector_length"])
        assert _blob_positions(blob) == expected
    assert table.compact(full=True) is not None  # applies every vector
    for file in table.files().to_pylist():
        assert file["deleted_rows"] == 0
        assert file["deletion_vector_uri"] is None and file["deletion_vector_offset"] is None


def test_expiring_the_snapshots_before_a_vector_delete_keeps_the_file_it_re_added(
    tmp_path: Path,
) -> None:
    """A delete by vectors removes a file's entry and adds the same path back with its vector:
    expiring the snapshots up to and past that delete must not delete the data file, which
    is still live (read again from a fresh handle, caches cleared)."""
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={"deletion-vectors.enabled": "true", "write-only": "true"},
    )
    first = rows(0, 300, 21)
    table.append(first)
    table.delete([("seq", "<", 100)])
    later = rows(300, 50, 22)
    table.append(later)
    table.expire_snapshots(retain_min=1, retain_max=1)
    at.clear_metadata_caches()
    reopened = at.open_table(str(tmp_path / "t"))
    expected = pa.concat_tables([first, later])["seq"].to_pylist()[100:]
    assert sorted(reopened.scan().to_arrow()["seq"].to_pylist()) == expected
    assert_table_intact(reopened.uri)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_filtered_reads_prune_row_groups_and_still_drop_exactly_the_deleted_rows(
    tmp_path: Path, mode: str
) -> None:
    """Files of many row groups (seq ascending, so each group has its own seq range and a
    filter on seq skips groups): the deleted rows of every group stay out of filtered reads,
    whichever groups the filter reads (a vector's positions are counted from the file's
    first row, not from the first group read)."""
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={"deletion-vectors.enabled": MODES[mode], "target-file-size": "256 KB"},
    )
    model = rows(0, 20_000, 5)
    table.append(model)
    groups = [
        pq.ParquetFile(tmp_path / "t" / path).metadata.num_row_groups
        for path in table.files().column("path").to_pylist()
    ]
    assert max(groups) >= 4, groups  # the layout this test is about
    gone = pc.or_(pc.equal(pc.bit_wise_and(model["seq"], 7), 3), pc.greater(model["score"], 1.0))
    table.delete([[("score", ">", 1.0)], [("seq", "in", list(range(3, 20_000, 8)))]])
    model = model.filter(pc.invert(gone.fill_null(False)))
    for low, high in [(0, 500), (4_000, 4_100), (9_990, 12_345), (17_000, 30_000), (-5, -1)]:
        where = [("seq", ">=", low), ("seq", "<", high)]
        expected = model.filter(
            pc.and_(pc.greater_equal(model["seq"], low), pc.less(model["seq"], high))
        )
        scan = table.scan(filter=where)
        assert by_seq(scan.to_arrow()).equals(by_seq(expected)), (low, high)
        assert scan.count() == expected.num_rows
        both = table.scan(filter=[[*where], [("seq", "=", 19_999)]], columns=["seq"]).to_arrow()
        oracle = model.filter(
            pc.or_(
                pc.and_(pc.greater_equal(model["seq"], low), pc.less(model["seq"], high)),
                pc.equal(model["seq"], 19_999),
            )
        )
        assert sorted(both["seq"].to_pylist()) == sorted(oracle["seq"].to_pylist())


@pytest.mark.parametrize("mode", sorted(MODES))
def test_columns_named_like_the_readers_position_column_read_and_delete_right(
    tmp_path: Path, mode: str
) -> None:
    """Filtered reads and deletes number rows in an extra column: a table's own columns of
    that kind of name are neither shadowed nor mistaken for it."""
    schema = pa.schema([("__position", pa.int64()), ("___position", pa.string())])
    table = at.create_table(
        str(tmp_path / "t"), schema, options={"deletion-vectors.enabled": MODES[mode]}
    )
    ids = np.arange(1_000, dtype=np.int64)[::-1]  # not the row positions
    model = pa.table({"__position": ids, "___position": [f"s{v % 7}" for v in ids]}, schema)
    table.append(model)
    assert table.delete([("__position", "<", 100)]).rows == 100
    assert table.delete([("___position", "=", "s3")]).rows == 129
    keep = pc.and_(
        pc.greater_equal(model["__position"], 100), pc.not_equal(model["___position"], "s3")
    )
    model = model.filter(keep)
    where = [("__position", ">=", 500), ("___position", "!=", "s1")]
    got = table.scan(filter=where).to_arrow().sort_by("__position")
    expected = model.filter(
        pc.and_(
            pc.greater_equal(model["__position"], 500), pc.not_equal(model["___position"], "s1")
        )
    ).sort_by("__position")
    assert got.equals(expected)
    assert table.scan().to_arrow().sort_by("__position").equals(model.sort_by("__position"))
