"""Tags: named snapshots that stay readable and keep their files through expiration and orphan
removal, until deleted; rollback to a tag; the stored form is atomic and CRC-checked."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.commit.tags import TagStore

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
FOREVER = 2**62


def _rows(start: int, count: int) -> pa.Table:
    return pa.table(
        {"k": pa.array(range(start, start + count), pa.int64()), "v": [f"v{start}"] * count}
    )


@pytest.fixture
def table(uri: str) -> at.Table:
    return at.create_table(uri, SCHEMA, options={"bucket": 2, "bucket-key": "k"})


def _expire_all(table: at.Table) -> at.ExpireResult:
    return table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=FOREVER)


def _referenced_files_exist(table: at.Table) -> None:
    """Every data file of every retained snapshot and tag can be read."""
    for snapshot in table.snapshots():
        table.scan(snapshot_id=snapshot.id).to_arrow()
    for name in table.tags():
        table.scan(tag=name).to_arrow()


def test_create_list_read_and_delete(table: at.Table) -> None:
    table.append(_rows(0, 3))
    first = table.create_tag("v1")
    assert first.id == 1
    table.append(_rows(3, 3))
    table.create_tag("v0", snapshot_id=1)
    assert table.tags() == {"v0": 1, "v1": 1}
    assert table.scan(tag="v1").count() == 3 and table.scan().count() == 6
    with pytest.raises(at.TagExistsError, match="v1"):
        table.create_tag("v1")
    with pytest.raises(at.TagNotFoundError, match="nope"):
        table.scan(tag="nope")
    with pytest.raises(at.InvalidArgumentError, match="tag name"):
        table.create_tag("../escape")
    with pytest.raises(at.InvalidArgumentError, match="not both"):
        table.scan(tag="v1", snapshot_id=1)
    with pytest.raises(at.SnapshotNotFoundError):
        table.create_tag("future", snapshot_id=99)
    table.delete_tag("v0")
    assert table.tags() == {"v1": 1}
    with pytest.raises(at.TagNotFoundError):
        table.delete_tag("v0")
    assert isinstance(at.TagNotFoundError("x"), LookupError)


def test_a_tag_on_an_empty_table_is_refused(table: at.Table) -> None:
    with pytest.raises(at.SnapshotNotFoundError, match="no snapshot"):
        table.create_tag("empty")


def test_a_tagged_snapshot_survives_expiration_with_its_files(table: at.Table) -> None:
    table.append(_rows(0, 5))
    table.append(_rows(5, 5))
    tagged = table.scan().to_arrow()
    table.create_tag("release")
    table.overwrite(_rows(100, 2))  # replaces every file the tag references
    table.compact(full=True)
    result = _expire_all(table)
    assert result.expired_snapshots  # the tagged snapshot itself left the log
    assert 2 not in [s.id for s in table.snapshots()]
    assert table.scan(tag="release").to_arrow().sort_by("k").equals(tagged.sort_by("k"))
    _referenced_files_exist(table)
    # Orphan removal keeps them too.
    orphans = table.remove_orphan_files(older_than=dt.timedelta(0), dry_run=False)
    assert not orphans.files
    assert table.scan(tag="release").count() == 10


def test_deleting_a_tag_releases_its_files_at_the_next_expiration(table: at.Table) -> None:
    table.append(_rows(0, 5))
    table.create_tag("a")
    table.create_tag("b")  # the same snapshot, twice
    table.overwrite(_rows(100, 2))
    _expire_all(table)
    live = set(table.files().column("path").to_pylist())
    table.delete_tag("a")
    freed = _expire_all(table)
    assert not freed.deleted_data_files  # tag b still holds them
    assert table.scan(tag="b").count() == 5
    table.delete_tag("b")
    freed = _expire_all(table)
    assert freed.deleted_data_files and not set(freed.deleted_data_files) & live
    assert table.scan().count() == 2
    _referenced_files_exist(table)
    # Nothing of the tags is left behind: no orphan, no release record.
    assert not table.remove_orphan_files(older_than=dt.timedelta(0)).files
    if table.uri.startswith("/"):
        assert sorted(p.name for p in (Path(table.uri) / "tag").iterdir()) == []


def test_a_released_tag_on_a_retained_snapshot_frees_nothing(table: at.Table) -> None:
    table.append(_rows(0, 5))
    table.create_tag("t")
    table.append(_rows(5, 1))
    table.delete_tag("t")
    result = table.expire_snapshots(retain_min=5, older_than_ms=FOREVER)
    assert not result.deleted_data_files and not result.expired_snapshots
    assert table.scan(snapshot_id=1).count() == 5


def test_rollback_to_a_tag_whose_snapshot_expired(table: at.Table) -> None:
    table.append(_rows(0, 4))
    table.create_tag("good")
    expected = table.scan().to_arrow().sort_by("k")
    table.append(_rows(4, 4))
    table.overwrite(_rows(50, 1))
    _expire_all(table)
    snapshot = table.rollback_to(tag="good")
    assert snapshot.kind == at.CommitKind.OVERWRITE
    assert table.scan().to_arrow().sort_by("k").equals(expected)
    with pytest.raises(at.InvalidArgumentError):
        table.rollback_to(1, tag="good")
    # The rolled-back table keeps its files through later expirations (the rollback re-adds).
    table.delete_tag("good")
    table.append(_rows(9, 1))
    _expire_all(table)
    assert table.scan().count() == 5
    _referenced_files_exist(table)


def test_rollback_to_a_tag_keeps_the_schema_unless_asked_to_restore_it(table: at.Table) -> None:
    table.append(_rows(0, 2))
    table.create_tag("before")
    with table.update_schema() as update:
        update.add_column("extra", pa.float64())
    evolved = table.schema
    assert "extra" in evolved.names
    table.rollback_to(tag="before")
    assert table.schema == evolved
    restored = table.scan().to_arrow()
    assert restored.schema == evolved
    assert restored.column("extra").null_count == 2
    table.rollback_to(tag="before", restore_schema=True)
    assert table.schema == SCHEMA
    assert table.scan().to_arrow().schema == SCHEMA


def test_tag_files_are_crc_checked(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(_rows(0, 1))
    table.create_tag("x")
    path = tmp_path / "t" / "tag" / "tag-x"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(at.CorruptMetadataError, match="tag-x"):
        table.scan(tag="x")
    data[-3] ^= 0x01  # repaired, for the end-of-test check
    path.write_bytes(bytes(data))


def test_the_scan_tag_name_option_is_a_known_read_option(table: at.Table) -> None:
    assert table.option("scan.tag-name") == ""


def test_a_stream_can_start_at_a_tag(table: at.Table) -> None:
    table.append(_rows(0, 2))
    table.append(_rows(2, 3))
    table.create_tag("start", snapshot_id=2)
    table.append(_rows(5, 1))
    delta = [r["k"] for b in table.stream(tag="start").batches(timeout=0) for r in b.to_pylist()]
    assert sorted(delta) == [2, 3, 4, 5]
    full = table.stream(tag="start", mode="from-snapshot-full").batches(timeout=0)
    assert sorted(r["k"] for b in full for r in b.to_pylist()) == list(range(6))
    with pytest.raises(at.InvalidArgumentError, match="not both"):
        table.stream(tag="start", snapshot_id=1)


def test_the_discard_gate_keeps_files_a_tag_holds(table: at.Table) -> None:
    """A write whose commit landed, was tagged, and whose snapshot then expired: giving up on
    the write later must not delete the files the tag still reads."""
    writer = table.writer()
    writer.write(_rows(0, 4))
    messages = writer.prepare_commit()
    paths = [f.path for m in messages for f in m.new_files]
    table.committer().commit(messages)
    table.create_tag("landed")
    table.overwrite(_rows(10, 1))
    _expire_all(table)
    result = table._state.discard(paths, since_snapshot_id=0)
    assert sorted(result.referenced) == sorted(paths) and not result.deleted
    assert table.scan(tag="landed").count() == 4


def test_a_release_record_whose_metadata_an_expiration_already_deleted_frees_nothing(
    table: at.Table,
) -> None:
    """A create_tag that lost the race with an expiration (its snapshot expired while it was
    being tagged) leaves a release record naming manifests the expiration had deleted; so
    does an expiration killed part-way through freeing a deleted tag. Every later expiration,
    orphan removal and purge then failed with 'file not found' on a manifest list, and no
    call could remove the record (found by a user). Such a record now frees nothing, is
    removed by the next expiration, and nothing else is affected."""
    for start in (0, 10, 20):
        table.append(_rows(start, 3))
    first = table.snapshots()[0]
    _expire_all(table)  # snapshot 1 and its manifests are gone
    tags = TagStore(table._state.storage)
    tags.create("late", first)  # what a create_tag racing that expiration left
    tags.delete("late")
    assert list(tags.released())
    clear_metadata_caches()  # (as in another process: nothing of snapshot 1 is cached)
    assert table.remove_orphan_files(dry_run=True).files == []
    table.append(_rows(30, 3))
    _expire_all(table)
    assert list(tags.released()) == []
    assert table.remove_orphan_files(dry_run=True).files == []
    assert sorted(table.scan().to_arrow().column("k").to_pylist()) == [
        *range(3),
        *range(10, 13),
        *range(20, 23),
        *range(30, 33),
    ]
    _referenced_files_exist(table)


def test_a_tag_losing_the_race_with_expiration_says_expired(
    table: at.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot expires between the tag's write and its check: SnapshotExpiredError (it
    was SnapshotNotFoundError), no tag, and the next expiration still works."""
    for start in (0, 10):
        table.append(_rows(start, 3))
    first = table.snapshots()[0]
    real_on_storage = table._state.snapshots.on_storage

    def expire_first(snapshot_id: int) -> bool:
        _expire_all(at.open_table(table.uri))
        return real_on_storage(snapshot_id)

    monkeypatch.setattr(table._state.snapshots, "on_storage", expire_first)
    with pytest.raises(at.SnapshotExpiredError, match="expired while it was being tagged"):
        table.create_tag("t", snapshot_id=first.id)
    monkeypatch.undo()
    assert table.tags() == {}
    table.append(_rows(20, 3))
    _expire_all(table)
    assert table.remove_orphan_files(dry_run=True).files == []


@pytest.mark.parametrize("name", ["release\n", "release\r\n", "\nrelease", "rel\nease"])
def test_a_name_with_a_line_break_is_refused_everywhere_a_name_is_checked(
    table: at.Table, name: str
) -> None:
    """``$`` in a pattern also matches before a final newline: ``release\\n`` was accepted as a
    tag, a second tag that prints like ``release``, stored under a file name with a newline."""
    table.append(_rows(0, 3))
    table.create_tag("release")
    with pytest.raises(at.InvalidArgumentError, match="tag name"):
        table.create_tag(name)
    with pytest.raises(at.InvalidOptionError, match="consumer id"):
        table.stream(consumer_id=name)
    assert table.tags() == {"release": 1}
