"""Table.purge: afterwards no file under the table's location holds a deleted row's bytes.

Rows carry distinctive markers and 64-bit secrets (tests/helpers/deleted_bytes.py); after
deletes in both modes (and a compaction, tags, a consumer), a purge, then every file under the
table's root is scanned raw, as Parquet values (pyarrow) and as decoded metadata, for the
deleted rows' values: none is found, while the remaining rows all read back (oracle: pyarrow
compute over the rows appended). A dry run leaves the directory byte-identical; tags and
consumers that would lose rows block the purge, by name."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable.cli import main
from appendtable.commit.snapshots import flush_hints
from tests.helpers.deleted_bytes import (
    MARKER_SCHEMA,
    MODES,
    find_values,
    local_files,
    marked_rows,
    marked_table,
)
from tests.helpers.integrity import assert_table_intact

NOW = dt.timedelta(0)


def make(tmp_path: Path, mode: str, *, compression: str = "none") -> at.Table:
    return marked_table(str(tmp_path / "t"), mode, compression=compression)


def expected(appended: pa.Table, deleted: set[int]) -> pa.Table:
    keep = pc.invert(pc.is_in(appended["id"], pa.array(sorted(deleted), pa.int64())))
    return appended.filter(keep).sort_by("id")


def read_sorted(table: at.Table) -> pa.Table:
    return table.scan().to_arrow().select(MARKER_SCHEMA.names).sort_by("id")


def fill(table: at.Table, batches: int = 4, size: int = 40) -> pa.Table:
    appended = [marked_rows(range(b * size, (b + 1) * size)) for b in range(batches)]
    for part in appended:
        table.append(part)
    return pa.concat_tables(appended)


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_purge_leaves_no_deleted_bytes(tmp_path: Path, mode: str, compression: str) -> None:
    table = make(tmp_path, mode, compression=compression)
    appended = fill(table)
    root = tmp_path / "t"
    table.create_tag("before")
    table.delete([("id", "<", 10)])  # part of the first file of each bucket
    table.delete(
        [
            [("marker", "=", "m00000077z-row-payload")],
            [("secret", ">", 0x3A5C_7E00_0000_0000 + 150 * 7919)],
        ]
    )
    table.compact(full=True)
    table.delete([("id", "in", [41, 42, 43, 120])])
    deleted = {
        int(k)
        for k in pc.filter(
            appended["id"],
            pc.or_(
                pc.or_(
                    pc.less(appended["id"], 10),
                    pc.is_in(appended["id"], pa.array([77, 41, 42, 43, 120])),
                ),
                pc.greater(appended["id"], 150),
            ),
        ).to_pylist()
    }
    assert read_sorted(table).equals(expected(appended, deleted))
    assert find_values(local_files(root), deleted), "the test data must be findable before"

    with pytest.raises(at.PurgeBlockedError, match="before"):
        table.purge(older_than=NOW)
    result = table.purge(older_than=NOW, tags="delete")
    assert result.tags_holding_deletes == ["before"] and result.tags_deleted == ["before"]
    assert table.tags() == {}
    assert find_values(local_files(root), deleted) == []
    assert read_sorted(table).equals(expected(appended, deleted))
    assert table.scan().count() == len(appended) - len(deleted)
    assert [s.id for s in table.snapshots()] == [result.snapshot.id]
    assert_table_intact(str(root))
    # the table keeps working: appends, deletes and another purge
    more = marked_rows(range(500, 520))
    table.append(more)
    table.delete([("id", ">=", 515)])
    again = table.purge(older_than=NOW)
    deleted |= set(range(515, 520))
    assert find_values(local_files(root), deleted) == []
    assert read_sorted(table).equals(expected(pa.concat_tables([appended, more]), deleted))
    # vectors of the files holding 515..519 are rewritten; copy-on-write left none
    assert again.files_rewritten >= 1 if mode == "dv" else again.files_rewritten == 0


@pytest.mark.parametrize("mode", sorted(MODES))
def test_dry_run_changes_nothing(tmp_path: Path, mode: str) -> None:
    table = make(tmp_path, mode)
    appended = fill(table, batches=2)
    table.create_tag("old")
    deletion = table.delete([("id", "<", 5)])
    root = tmp_path / "t"
    flush_hints()  # the LATEST hint is written after the commit returns
    before = local_files(root)
    result = table.purge(older_than=NOW, tags="delete", dry_run=True)
    assert result.dry_run and result.tags_holding_deletes == ["old"]
    assert result.files_rewritten == deletion.vectors_written
    assert result.rows_dropped == (5 if mode == "dv" else 0)
    assert local_files(root) == before
    assert table.tags() == {"old": table.tags()["old"]}
    assert read_sorted(table).equals(expected(appended, set(range(5))))


@pytest.mark.parametrize("tags", ["delete", "keep"])
@pytest.mark.parametrize("mirror", [False, True], ids=["plain", "mirror"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_dry_run_lists_the_files_the_purge_then_deletes(
    tmp_path: Path, mode: str, mirror: bool, tags: str
) -> None:
    """A user's dry run said 0 files where the purge then deleted 8, among them the file
    holding the deleted rows (it listed only orphans). Every file the purge deletes (data,
    vectors, delete records, manifests, the mirror's old versions) is listed beforehand, and
    nothing else; the files that disappear are exactly those listed."""
    table = make(tmp_path, mode)
    if mirror:
        table.set_options({"metadata.iceberg.storage": "table-location"})
    fill(table, batches=3)
    table.create_tag("old")
    table.delete([("id", "<", 5)])
    table.delete([("id", "in", [50, 90])])
    table.wait_for_maintenance()
    flush_hints()
    root = tmp_path / "t"
    before = local_files(root)
    dry = table.purge(older_than=NOW, tags=tags, dry_run=True)
    assert local_files(root) == before
    real = table.purge(older_than=NOW, tags=tags)
    assert dry.deleted_files == real.deleted_files
    assert any(path.endswith(".parquet") for path in dry.deleted_files) == (tags == "delete")
    gone = set(before) - set(local_files(root))
    hints = {"snapshot/LATEST", "snapshot/EARLIEST", "metadata/version-hint.text"}
    expired = {f"snapshot/snapshot-{i}" for i in real.expired_snapshots}
    assert gone - hints - expired - {"tag/tag-old"} == set(real.deleted_files)
    assert (dry.files_rewritten, dry.rows_dropped) == (real.files_rewritten, real.rows_dropped)
    assert dry.expired_snapshots == real.expired_snapshots


@pytest.mark.parametrize("mode", sorted(MODES))
def test_kept_tags_are_named_and_keep_their_rows(tmp_path: Path, mode: str) -> None:
    table = make(tmp_path, mode)
    appended = fill(table, batches=2)
    tag_snapshot = table.create_tag("audit").id
    table.append(marked_rows(range(200, 210)))
    table.create_tag("after-append")  # before the delete too
    table.delete([("id", "<", 5)])
    result = table.purge(older_than=NOW, tags="keep")
    assert result.tags_kept == ["after-append", "audit"]
    assert "audit" in repr(result)
    # the kept tag still shows the deleted rows: they were not purged, by request
    audit = table.scan(tag="audit").to_arrow().sort_by("id")
    assert audit.select(MARKER_SCHEMA.names).equals(appended.sort_by("id"))
    assert table.tags()["audit"] == tag_snapshot
    # deleting the tags and purging again removes the rest
    table.delete_tag("audit")
    table.delete_tag("after-append")
    table.purge(older_than=NOW)
    assert find_values(local_files(tmp_path / "t"), range(5)) == []


def test_tags_after_every_delete_do_not_block(tmp_path: Path) -> None:
    table = make(tmp_path, "cow")
    fill(table, batches=2)
    table.delete([("id", "<", 5)])
    table.purge(older_than=NOW)
    table.append(marked_rows(range(300, 310)))
    table.create_tag("clean")
    result = table.purge(older_than=NOW)
    assert result.tags_holding_deletes == [] and table.tags() == {"clean": table.tags()["clean"]}


def test_a_tag_on_a_copy_on_write_delete_is_named_for_the_statistics_it_keeps(
    tmp_path: Path,
) -> None:
    """The delete's own snapshot holds no deleted row, but its manifests name the files the
    delete replaced, with their statistics: values of the deleted rows. The refusal says so
    (it said "older than a delete"), and keeping the tag keeps those bytes."""
    table = make(tmp_path, "cow")
    appended = fill(table, batches=2)
    last = appended["id"][-1].as_py()  # the largest id: the maximum in its file's statistics
    table.delete([("id", "=", last)])
    table.create_tag("at-delete")
    with pytest.raises(at.PurgeBlockedError, match="names files a delete replaced"):
        table.purge(older_than=NOW)
    result = table.purge(older_than=NOW, tags="keep")
    assert result.tags_kept == ["at-delete"]
    assert find_values(local_files(tmp_path / "t"), {last}), "the tag keeps the statistics"
    assert read_sorted(table).equals(expected(appended, {last}))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_consumer_behind_blocks_until_it_catches_up(tmp_path: Path, mode: str) -> None:
    table = make(tmp_path, mode)
    appended = fill(table, batches=2)
    reader = table.stream(consumer_id="billing", mode="from-snapshot", snapshot_id=1)
    first = reader.poll()
    assert first is not None
    got = [pa.Table.from_batches(list(reader.read(first)), MARKER_SCHEMA)]
    reader.commit()
    table.delete([("id", ">=", 70)])
    flush_hints()  # the LATEST hint is written after the commit returns
    before = local_files(tmp_path / "t")
    with pytest.raises(at.PurgeBlockedError, match="billing"):
        table.purge(older_than=NOW)
    assert any("billing" in b for b in table.purge(dry_run=True).blocked_by)
    assert local_files(tmp_path / "t") == before
    while (unit := reader.poll()) is not None:
        got.append(pa.Table.from_batches(list(reader.read(unit)), MARKER_SCHEMA))
    reader.commit()
    table.purge(older_than=NOW)
    assert find_values(local_files(tmp_path / "t"), range(70, 80)) == []
    delivered = pa.concat_tables(got).sort_by("id")
    assert delivered.equals(expected(appended, set(range(70, 80))))
    table.append(marked_rows(range(600, 605)))
    late = [
        pa.Table.from_batches(list(reader.read(u)), MARKER_SCHEMA) for u in iter(reader.poll, None)
    ]
    assert pa.concat_tables(late).sort_by("id").equals(marked_rows(range(600, 605)))


def test_bad_tags_argument(tmp_path: Path) -> None:
    table = make(tmp_path, "dv")
    with pytest.raises(at.InvalidArgumentError, match="tags"):
        table.purge(tags="sometimes")


def test_purge_of_empty_and_untouched_tables(tmp_path: Path) -> None:
    table = make(tmp_path, "dv")
    assert table.purge().snapshot is None
    appended = fill(table, batches=2)
    result = table.purge(older_than=NOW)
    assert result.files_rewritten == 0
    assert read_sorted(table).equals(appended.sort_by("id"))


def test_cli_purge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = make(tmp_path, "dv")
    appended = fill(table, batches=2)
    table.create_tag("keepme")
    uri = str(tmp_path / "t")
    assert main(["delete", uri, "--filter", "id < 7"]) == 0
    flush_hints()
    before = local_files(tmp_path / "t")
    capsys.readouterr()
    assert main(["purge", uri, "--dry-run", "--older-than", "0s"]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "would refuse: tag 'keepme'" in out
    assert local_files(tmp_path / "t") == before
    assert main(["purge", uri, "--older-than", "0s"]) == 1
    assert "keepme" in capsys.readouterr().err
    assert main(["purge", uri, "--older-than", "0s", "--tags", "keep"]) == 0
    out = capsys.readouterr().out
    assert "tag keepme holds deleted rows: kept" in out
    assert read_sorted(table).equals(expected(appended, set(range(7))))
    table.delete_tag("keepme")
    assert main(["purge", uri, "--older-than", "0s"]) == 0
    assert find_values(local_files(tmp_path / "t"), range(7)) == []


@pytest.mark.parametrize("between", ["purge", "compact-expire"])
def test_stream_reads_on_after_skipped_snapshots_expired(tmp_path: Path, between: str) -> None:
    """A stream that skipped snapshots without reading a file (COMPACT: a purge's, a
    compaction's) keeps reading after they expired (found by test_delete_model: the later
    deletes' cache scanned the skipped, expired ids)."""
    table = make(tmp_path, "dv")
    reader = table.stream(mode="from-snapshot", snapshot_id=1)
    got: list[pa.Table] = []

    def drain() -> None:
        while (unit := reader.poll()) is not None:
            got.append(pa.Table.from_batches(list(reader.read(unit)), MARKER_SCHEMA))

    for batch in range(3):
        table.append(marked_rows(range(batch * 10, batch * 10 + 10)))
        drain()
        for _ in range(2):  # two skipped snapshots in a row, then expired
            if between == "purge":
                table.purge(older_than=NOW)
            else:
                table.compact(full=True)
                table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)
            drain()
    table.delete([("id", "=", 5)])
    table.append(marked_rows(range(200, 202)))
    drain()
    expected_ids = [*range(30), 200, 201]  # row 5 was delivered before its delete
    assert sorted(pa.concat_tables(got)["id"].to_pylist()) == expected_ids


@pytest.mark.parametrize("mode", sorted(MODES))
def test_records_of_deletes_that_did_not_land_do_not_stop_a_purge(
    tmp_path: Path, mode: str
) -> None:
    """A delete writes its record before its snapshot names it, and not atomically: one killed
    mid-write leaves a truncated record (found by test_delete_crash, where such a record made
    every later purge fail). A purge skips those, and removes them once old enough; a
    truncated record a snapshot names is corruption, and raises naming it."""
    table = make(tmp_path, mode)
    appended = fill(table, batches=2)
    table.delete([("id", "<", 5)])
    index = tmp_path / "t" / "index"
    named = next(index.glob("delete-*"))
    whole = named.read_bytes()
    leftovers = [index / f"delete-{'a' * 32}", index / f"delete-{'b' * 32}"]
    leftovers[0].write_bytes(b"")
    leftovers[1].write_bytes(whole[: len(whole) // 2])
    an_hour_ago = dt.datetime.now().timestamp() - 3600
    for path in leftovers:
        os.utime(path, (an_hour_ago, an_hour_ago))
    assert table.purge(older_than=NOW, dry_run=True).blocked_by == []
    result = table.purge(older_than=NOW)
    assert {str(index / Path(p).name) for p in result.deleted_files} >= {str(p) for p in leftovers}
    assert not any(path.exists() for path in leftovers)
    assert read_sorted(table).equals(expected(appended, set(range(5))))
    assert find_values(local_files(tmp_path / "t"), range(5)) == []
    # a record the latest snapshot names, truncated: corruption, named
    table.delete([("id", ">=", 75)])
    (record,) = index.glob("delete-*")
    record.write_bytes(record.read_bytes()[:10])
    with pytest.raises(at.CorruptMetadataError, match=record.name):
        table.purge(older_than=NOW)


@pytest.mark.parametrize("expire", ["explicit", "automatic"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_landed_delete_whose_snapshot_expired_before_the_purge_leaves_no_record(
    tmp_path: Path, mode: str, expire: str
) -> None:
    """The DELETE snapshot expired before the purge (by ``expire_snapshots``, or by the
    writers' own expiration): nothing named its record any more, and a purge with the default
    cut-off kept it as perhaps a delete in flight, with the deleted value in its filter
    (found by a docs-only hunt). The expiration marks the record as landed; the purge deletes
    it at once, lists it beforehand, and leaves no byte of the deleted rows."""
    table = make(tmp_path, mode)
    appended = fill(table, batches=2)
    deleted = {3, 41}
    assert table.delete([("id", "in", sorted(deleted))]) is not None
    if expire == "explicit":
        table.append(marked_rows(range(200, 203)))
        table.expire_snapshots(retain_min=1, older_than_ms=2**62)
    else:  # the writers' own expiration, after the commits that follow
        table.set_options(
            {
                "write-only": "false",
                "snapshot.num-retained.min": "1",
                "snapshot.num-retained.max": "2",
                "commit.maintenance": "inline",
            }
        )
        for start in (200, 201, 202):
            table.append(marked_rows(range(start, start + 1)))
    appended = pa.concat_tables([appended, marked_rows(range(200, 203))])
    delete_snapshots = [s for s in table.snapshots() if s.kind == at.CommitKind.DELETE]
    assert delete_snapshots == []  # expired: no snapshot names the record
    root = tmp_path / "t"
    assert find_values(local_files(root), deleted), "the record holds the deleted values"
    dry = table.purge(dry_run=True)  # the default cut-off: a day
    assert [p for p in dry.deleted_files if p.startswith("index/delete-")]
    real = table.purge()
    assert real.deleted_files == dry.deleted_files
    assert find_values(local_files(root), deleted) == []
    assert not list((root / "index").glob("landed-*"))
    assert read_sorted(table).equals(expected(appended, deleted))


def test_a_kept_tag_keeps_the_landed_records_until_a_purge_deletes_it(tmp_path: Path) -> None:
    """With ``tags="keep"`` every delete record stays (the next purge names the tag again),
    landed or not; deleting the tag then purges them."""
    table = make(tmp_path, "dv")
    appended = fill(table, batches=2)
    table.create_tag("before")
    table.delete([("id", "=", 7)])
    table.append(marked_rows(range(200, 202)))
    table.expire_snapshots(retain_min=1, older_than_ms=2**62)
    root = tmp_path / "t"
    kept = table.purge(tags="keep")
    assert kept.tags_kept == ["before"]
    assert list((root / "index").glob("delete-*")) and list((root / "index").glob("landed-*"))
    again = table.purge(tags="delete")
    assert again.tags_deleted == ["before"]
    assert find_values(local_files(root), {7}) == []
    assert not list((root / "index").glob("landed-*"))
    appended = pa.concat_tables([appended, marked_rows(range(200, 202))])
    assert read_sorted(table).equals(expected(appended, {7}))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_tag_made_after_a_purge_does_not_block_the_next(tmp_path: Path, mode: str) -> None:
    """The purge snapshot names the files it rewrote with their vectors (no statistics): a tag
    on it, or on a later snapshot, was named as holding deleted rows, and every later purge of
    a deletion-vector table was refused (found by a docs-only hunt)."""
    table = make(tmp_path, mode)
    appended = fill(table, batches=2)
    table.delete([("id", "=", 2)])
    table.purge(older_than=NOW)
    table.create_tag("release")
    table.append(marked_rows(range(300, 302)))
    table.create_tag("later")
    result = table.purge(older_than=NOW)
    assert result.tags_holding_deletes == [] and sorted(table.tags()) == ["later", "release"]
    assert read_sorted(table).equals(
        expected(pa.concat_tables([appended, marked_rows(range(300, 302))]), {2})
    )
    table.delete([("id", "=", 300)])  # planned after both tags: named (conservatively)
    assert table.purge(older_than=NOW, dry_run=True).tags_holding_deletes == ["later", "release"]
