"""Every system table against an independent model of what was done to the table (see
``tests/system/model.py``), on local and memory:// tables: after appends, compaction,
overwrites, expiration, schema evolution, tags, consumers and rollbacks, at every retained
snapshot and tag."""

from __future__ import annotations

import pytest

import appendtable as at
from tests.system.model import Model, check, read_system


def test_an_empty_table(uri: str) -> None:
    model = Model.create(uri)
    check(model)
    for name in at.SYSTEM_TABLE_NAMES:
        expected = 1 if name == "schemas" else len(model.schemas[0][1]) if name == "options" else 0
        assert read_system(model.table, name).num_rows == expected, name


def test_a_history_of_every_kind_of_change(uri: str) -> None:
    model = Model.create(uri)
    model.append([("mon", 5), ("tue", 3)], watermark=1_700_000_000_000)
    check(model)
    model.append([("a/b:c", 4), (None, 2), ("mon", 1)])
    model.tag("first-two")
    model.register("slow", 2, full=False)
    check(model)
    model.append([("tue", 6)], watermark=1_700_000_500_000)
    model.compact()
    check(model)
    model.add_column("extra")
    model.append([("mon", 3), ("tue", 2)])
    model.register("fresh", 5, full=True)
    check(model)
    model.overwrite("tue", 4)
    model.set_option("target-file-size", "64mb")
    model.rename_column("amount", "price")
    model.append([("a/b:c", 2)])
    check(model)
    model.drain("slow")
    model.expire(retain=4)
    check(model)  # first-two's snapshot expired: the tag still reads it
    model.rollback(tag="first-two", restore_schema=True)  # before 'extra' and the rename
    check(model)
    model.append([("mon", 2), (None, 1)])
    model.rollback(len(model.snapshots) - 1)  # the schema stays
    model.tag("after-rollback")
    model.delete_consumer("fresh")
    model.compact()
    check(model)
    model.drain("slow")
    model.expire(retain=1)
    model.delete_tag("first-two")
    check(model)


def test_time_travel_to_an_expired_snapshot_fails_and_a_tag_still_reads(uri: str) -> None:
    model = Model.create(uri)
    for day in ("mon", "tue", "mon"):
        model.append([(day, 2)])
    model.tag("t")
    model.append([("tue", 1)])
    model.expire(retain=1)
    with pytest.raises(at.SnapshotExpiredError):
        model.table.system_table("files", snapshot_id=1)
    assert read_system(model.table, "files", tag="t")["record_count"].to_pylist() != []
    check(model)


def test_files_by_time(uri: str) -> None:
    model = Model.create(uri)
    model.append([("mon", 2)])
    model.append([("tue", 3)])
    first = model.table.snapshot(1)
    at_first = read_system(model.table, "partitions", timestamp_ms=first.time_ms)
    assert at_first["record_count"].to_pylist() == [2]
    with pytest.raises(at.SnapshotNotFoundError):
        model.table.system_table("buckets", timestamp_ms=first.time_ms - 10_000)


def test_commit_user_identifier_and_properties(uri: str) -> None:
    model = Model.create(uri)
    table = model.table
    with table.writer() as writer:
        writer.write(model._data([("mon", 2)])[0])
        messages = writer.prepare_commit()
    committer = table.committer("nightly-job")
    committer.commit(messages, identifier=41, properties={"source": "export-7", "k=v": "a,b"})
    row = read_system(table, "snapshots").to_pylist()[-1]
    assert (row["commit_user"], row["commit_identifier"]) == ("nightly-job", 41)
    assert dict(row["properties"]) == {"source": "export-7", "k=v": "a,b"}
