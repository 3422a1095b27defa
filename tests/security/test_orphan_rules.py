"""What orphan removal takes for the table's, place by place, exactly; the age cut-off at the
millisecond; and the live set's corner cases (commit-users records, an earliest snapshot that
is not 1, a retained snapshot whose metadata is gone)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.orphans import TEMP_FILE_MIN_AGE_MS
from tests.helpers.clock import age, past_every_file_ms
from tests.helpers.data import EVENTS, events
from tests.helpers.integrity import assert_table_intact

FUTURE = 10**15
HEX = "0123456789abcdef0123456789abcdef"

pytestmark = pytest.mark.usefixtures("tables_stay_intact")


def _plant(root: Path, paths: list[str], *, old: bool = True) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"planted")
    if old:
        age([root / p for p in paths], seconds=TEMP_FILE_MIN_AGE_MS / 1000 + 3600)


def test_every_place_of_the_layout_is_classified_exactly(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, partition_by=["day"], options={"write-only": True})
    table.append(events(0, 10))
    table.create_tag("kept")
    consumer = table.stream(consumer_id="reader", mode="latest")
    consumer.poll()
    consumer.commit()
    orphans = [
        f"snapshot/.snapshot-9.{HEX}.tmp",
        f"schema/.schema-1.{HEX}.tmp",
        f"manifest/.manifest-x.{HEX}.tmp",
        f"consumer/.consumer-reader.{HEX}.tmp",
        f"tag/.tag-x.{HEX}.tmp",
        f"metadata/.v3.metadata.json.{HEX}.tmp",
        f"watermark/group-1/.member-1.{HEX}.tmp",
        f"watermark/.stray.{HEX}.tmp",
        f"day=2024-01-01/bucket-0/.data-x-0.parquet.{HEX}.tmp",
        "manifest/manifest-0000",
        "manifest/manifest-list-0000",
        "manifest/commit-users-0000",
        "metadata/v1.metadata.json",  # the mirror is off: its files are all orphans
        "metadata/version-hint.text",
        "metadata/snap-1-abc.avro",
        "metadata/abc-m0.avro",
        "metadata/dv-0123456789abcdef0123456789abcdef.puffin",  # the mirror's vectors
        "day=2024-01-01/bucket-0/data-stray-0.parquet",
        "day=2030-01-01/bucket-3/data-stray-1.parquet",
        "_staging/area-1/part-0.parquet",
        "_staging/area-1/_temporary/0/task/part-1.parquet",
        "_staging/area-1/day=1/bucket-0/data-x-0.parquet",
        f"_staging/area-1/.part-0.parquet.{HEX}.tmp",
    ]
    kept = ["watermark/group-1/member-1", "watermark/group-1/member-2"]
    foreign = [
        "README.md",
        f".root.{HEX}.tmp",
        "bucket-0/data-a-0.parquet",
        "=x/bucket-0/data-b-0.parquet",
        "day=2024-01-01/other/data-c-0.parquet",
        "day=2024-01-01/day=2/bucket-0/data-d-0.parquet",
        "day=2024-01-01/notes.txt",
        f"day=2024-01-01/.notes.{HEX}.tmp",
        "day=2024-01-01/bucket-0/notes.txt",
        "day=2024-01-01/bucket-0/sub/data-e-0.parquet",
        "snapshot/snapshot-notes",
        "snapshot/sub/x",
        "schema/schema-x",
        "manifest/notes",
        "consumer/notes",
        "tag/notes",
        "metadata/notes.txt",
        "metadata/dv-0123.puffin",  # not a name the mirror writes
        "watermark/notes",
        "watermark/bad group!/member",
        "watermark/group-1/bad member!",
        "watermark/group-1/sub/x",
        "_staging/README",
        f"_staging/.x.{HEX}.tmp",
        "_staging/bad id!/part-0.parquet",
        "other/data-f-0.parquet",
    ]
    _plant(root, orphans + kept + foreign)
    young = [f"snapshot/.LATEST.{HEX}.tmp", f"manifest/.manifest-y.{HEX}.tmp"]
    _plant(root, young, old=False)
    os.symlink(tmp_path, root / "day=2024-01-01" / "bucket-0" / "data-link-0.parquet")
    os.symlink(tmp_path, root / "_staging" / "area-1" / "link")

    listed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=True)
    assert sorted(listed.files) == sorted(orphans)
    expected_foreign = {
        "README.md",
        f".root.{HEX}.tmp",
        "bucket-0/",
        "=x/",
        "day=2024-01-01/other/",
        "day=2024-01-01/day=2/",
        "day=2024-01-01/notes.txt",
        f"day=2024-01-01/.notes.{HEX}.tmp",
        "day=2024-01-01/bucket-0/notes.txt",
        "day=2024-01-01/bucket-0/sub/",
        "day=2024-01-01/bucket-0/data-link-0.parquet",
        "snapshot/snapshot-notes",
        "snapshot/sub/",
        "schema/schema-x",
        "manifest/notes",
        "consumer/notes",
        "tag/notes",
        "metadata/notes.txt",
        "metadata/dv-0123.puffin",  # not a name the mirror writes
        "watermark/notes",
        "watermark/bad group!/",
        "watermark/group-1/bad member!",
        "watermark/group-1/sub/",
        "_staging/README",
        f"_staging/.x.{HEX}.tmp",
        "_staging/bad id!/",
        "_staging/area-1/link",
        "other/",
    }
    assert set(listed.not_table_files) == expected_foreign
    assert listed.bytes == len(b"planted") * len(orphans)
    removed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert removed.files == listed.files and removed.bytes == listed.bytes
    assert not any((root / p).exists() for p in orphans)
    assert all((root / p).exists() for p in kept + foreign + young)
    assert table.tags() == {"kept": 1} and table.consumers() == {"reader": 2}
    for path in young:
        (root / path).unlink()


def test_partition_directories_of_other_keys_or_another_order_are_not_the_tables(
    tmp_path: Path,
) -> None:
    """Only the number of ``k=v`` levels was checked (found by a docs-only hunt): a user's
    ``backup=2024/hour=1/bucket-0/data-*.parquet`` in a table partitioned by (region, hour),
    or the keys in another order, were taken for orphans and deleted (by purge too)."""
    root = tmp_path / "t"
    schema = pa.schema([("region", pa.string()), ("hour", pa.int32()), ("id", pa.int64())])
    table = at.create_table(
        str(root), schema, partition_by=["region", "hour"], options={"write-only": True}
    )
    table.append(pa.table({"region": ["eu"], "hour": [1], "id": [1]}, schema=schema))
    orphans = [
        "region=eu/hour=1/bucket-0/data-stray-0.parquet",
        "region=us/hour=7/bucket-2/data-stray-1.parquet",
    ]
    foreign = [
        "backup=2024/hour=1/bucket-0/data-export-0.parquet",
        "hour=1/region=eu/bucket-0/data-swapped-0.parquet",
        "region=eu/backup=1/bucket-0/data-other-0.parquet",
        "regionx=eu/hour=1/bucket-0/data-prefix-0.parquet",
        "Region=eu/hour=1/bucket-0/data-case-0.parquet",
    ]
    _plant(root, orphans + foreign)
    listed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=True)
    assert sorted(listed.files) == sorted(orphans)
    assert set(listed.not_table_files) == {
        "backup=2024/",
        "hour=1/",
        "region=eu/backup=1/",
        "regionx=eu/",
        "Region=eu/",
    }
    table.purge(older_than=dt.timedelta(0))
    assert not any((root / p).exists() for p in orphans)
    assert all((root / p).exists() for p in foreign)
    assert table.scan().to_arrow()["id"].to_pylist() == [1]


def test_the_cut_off_is_exclusive_to_the_millisecond(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS)
    table.append(events(0, 1))
    cut = (int(past_every_file_ms()) // 1000 - 7 * 86400) * 1000  # a whole second, days ago
    stray = root / "bucket-0" / "data-stray-0.parquet"
    stray.write_bytes(b"x")
    os.utime(stray, ns=(cut * 10**6, cut * 10**6))
    assert table.remove_orphan_files(older_than=cut, dry_run=True).files == []
    assert table.remove_orphan_files(older_than=cut + 1, dry_run=True).files == [
        "bucket-0/data-stray-0.parquet"
    ]


def test_commit_user_records_are_never_orphans(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for identifier in range(3):
        with table.writer() as writer:
            writer.write(events(identifier * 10, 10))
            messages = writer.prepare_commit()
        table.committer("job").commit(messages, identifier=identifier)
    assert table.latest_snapshot().commit_users is not None
    table.remove_orphan_files(older_than=FUTURE, dry_run=False)
    assert table.has_committed("job", 2)
    assert assert_table_intact(str(root)) == 3


def test_an_earliest_snapshot_after_1_counts_whole(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i * 10, 10))
    table.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    assert [s.id for s in table.snapshots()] == [2, 3]
    assert (
        at.open_table(str(root)).remove_orphan_files(older_than=FUTURE, dry_run=False).files == []
    )
    assert table.scan().count() == 30


def test_a_retained_snapshot_with_missing_metadata_stops_the_removal(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(3):
        table.append(events(i * 10, 10))
    data_files = sorted(table.files().column("path").to_pylist())
    lost = root / "manifest" / table.snapshot(2).delta_manifest_list
    saved = lost.read_bytes()
    lost.unlink()
    from appendtable.commit.metadata_cache import clear_metadata_caches

    clear_metadata_caches()
    with pytest.raises(at.ObjectNotFoundError):
        at.open_table(str(root)).remove_orphan_files(older_than=FUTURE, dry_run=False)
    assert all((root / p).exists() for p in data_files)
    lost.write_bytes(saved)  # repaired, for the end-of-test check
