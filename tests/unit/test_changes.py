"""The pure rules of the commit protocol: sequence numbers, conflicts, watermarks, idempotence."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.commit.changes import (
    CommitRequest,
    PartitionScope,
    already_committed,
    check_deletes_live,
    check_overwrite,
    entries_for,
    merged_watermark,
    updated_users,
)
from appendtable.errors import CommitConflictError
from appendtable.metadata.models import (
    CommitKind,
    CommitMessage,
    CommitUserRecord,
    DataFileMeta,
    DeletionVectorRef,
    FileKind,
    FileSource,
    ManifestEntry,
)

DAY = 86_400_000


def data_file(
    path: str, rows: int, min_seq: int = 0, source: int = FileSource.APPEND
) -> DataFileMeta:
    return DataFileMeta(
        path=path,
        file_size=rows * 10,
        row_count=rows,
        min_seq=min_seq,
        max_seq=min_seq + rows - 1,
        schema_id=0,
        creation_time_ms=1,
        source=source,
        null_counts=(0,),
        min_values=(1,),
        max_values=(rows,),
    )


def message(
    partition: tuple[object, ...] = ("p",),
    bucket: int = 0,
    *,
    new: tuple[DataFileMeta, ...] = (),
    before: tuple[DataFileMeta, ...] = (),
    after: tuple[DataFileMeta, ...] = (),
) -> CommitMessage:
    return CommitMessage(
        partition=partition,  # type: ignore[arg-type]
        bucket=bucket,
        total_buckets=4,
        schema_id=0,
        new_files=new,
        compact_before=before,
        compact_after=after,
    )


# ---- entries_for --------------------------------------------------------------------------------


def test_new_files_get_contiguous_ranges_in_message_and_file_order() -> None:
    first = message(("a",), 0, new=(data_file("a1", 3), data_file("a2", 2, min_seq=3)))
    second = message(("b",), 2, new=(data_file("b1", 5),))
    adds, deletes, next_sequence = entries_for([first, second], 100)
    assert deletes == []
    assert next_sequence == 110
    assert [(e.file.path, e.file.min_seq, e.file.max_seq) for e in adds] == [
        ("a1", 100, 102),
        ("a2", 103, 104),
        ("b1", 105, 109),
    ]
    assert [(e.kind, e.partition, e.bucket, e.total_buckets) for e in adds] == [
        (FileKind.ADD, ("a",), 0, 4),
        (FileKind.ADD, ("a",), 0, 4),
        (FileKind.ADD, ("b",), 2, 4),
    ]
    # Only the sequence range changes; everything else of the file is kept.
    assert adds[0].file.null_counts == (0,)
    assert adds[0].file.max_values == (3,)
    assert adds[0].file.file_size == 30


def test_compaction_keeps_given_ranges_and_deletes_the_inputs() -> None:
    before = (data_file("old1", 4, min_seq=10), data_file("old2", 6, min_seq=14))
    after = (data_file("merged", 10, min_seq=10, source=FileSource.COMPACT),)
    adds, deletes, next_sequence = entries_for([message(before=before, after=after)], 500)
    assert next_sequence == 500  # compaction consumes no sequence numbers
    assert [(e.kind, e.file) for e in adds] == [(FileKind.ADD, after[0])]
    assert [(e.kind, e.file) for e in deletes] == [(FileKind.DELETE, f) for f in before]
    assert all(e.partition == ("p",) and e.bucket == 0 for e in adds + deletes)


def test_no_messages() -> None:
    assert entries_for([], 7) == ([], [], 7)


@st.composite
def messages(draw: st.DrawFn) -> list[CommitMessage]:
    result = []
    for m in range(draw(st.integers(0, 5))):
        rows = draw(st.lists(st.integers(1, 1000), max_size=4))
        local = 0
        new = []
        for f, count in enumerate(rows):
            new.append(data_file(f"m{m}-f{f}", count, min_seq=local))
            local += count
        before = tuple(
            data_file(f"m{m}-old{i}", 1, min_seq=i) for i in range(draw(st.integers(0, 2)))
        )
        result.append(
            message((f"part{m % 2}",), draw(st.integers(0, 3)), new=tuple(new), before=before)
        )
    return result


@settings(max_examples=200, deadline=None)
@given(messages(), st.integers(0, 2**40))
def test_sequence_ranges_tile_the_new_rows(batch: list[CommitMessage], start: int) -> None:
    adds, deletes, next_sequence = entries_for(batch, start)
    expected_files = [f for m in batch for f in m.new_files]
    assert [e.file.path for e in adds] == [f.path for f in expected_files]
    cursor = start
    for added, original in zip(adds, expected_files, strict=True):
        assert added.file.min_seq == cursor
        assert added.file.max_seq == cursor + original.row_count - 1
        assert added.file.row_count == original.row_count
        cursor += original.row_count
    assert next_sequence == cursor == start + sum(f.row_count for f in expected_files)
    assert [e.file for e in deletes] == [f for m in batch for f in m.compact_before]
    assert all(e.kind == FileKind.DELETE for e in deletes)


# ---- conflicts ----------------------------------------------------------------------------------


def files(*paths: str) -> list[DataFileMeta]:
    return [data_file(path, 3) for path in paths]


def test_deleting_live_files_is_fine() -> None:
    check_deletes_live([], set())
    check_deletes_live(files("a", "b"), {"a", "b", "c"})


def test_deleting_a_file_that_is_gone_conflicts_and_names_it() -> None:
    with pytest.raises(CommitConflictError, match="gone-file") as info:
        check_deletes_live(files("a", "gone-file"), {"a", "b"})
    assert "1 file(s)" in str(info.value)


def test_removing_a_file_whose_deletion_vector_changed_conflicts() -> None:
    """A compaction (or delete) planned on a file before another delete gave it a new vector
    must not commit: removing the old key would resurrect the rows the vector deleted."""
    planned = data_file("a", 3)
    vector = DeletionVectorRef("index/dv-1.puffin", 4, 20, 1)
    now = msgspec.structs.replace(planned, deletion=vector)
    live = {"a": ManifestEntry(FileKind.ADD, (), 0, -1, now)}
    with pytest.raises(CommitConflictError, match="deletion vector"):
        check_deletes_live([planned], live)
    check_deletes_live([now], live)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from("abcdefgh")), st.sets(st.sampled_from("abcdefgh")))
def test_delete_conflict_exactly_when_a_deleted_file_is_not_live(
    deleting: set[str], live: set[str]
) -> None:
    if deleting <= live:
        check_deletes_live(files(*deleting), live)
    else:
        with pytest.raises(CommitConflictError) as info:
            check_deletes_live(files(*sorted(deleting)), live)
        assert min(deleting - live) in str(info.value)


def test_overwrite_conflicts() -> None:
    check_overwrite({"a", "b"}, {"a", "b"})
    check_overwrite(set(), set())
    with pytest.raises(CommitConflictError, match=r"added to the overwritten partitions.*c"):
        check_overwrite({"a", "b"}, {"a", "b", "c"})  # appended after the overwrite planned
    with pytest.raises(CommitConflictError, match=r"no longer live.*b"):
        check_overwrite({"a", "b"}, {"a"})  # compacted or overwritten concurrently


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from("abcdef")), st.sets(st.sampled_from("abcdef")))
def test_overwrite_conflicts_exactly_when_the_scope_changed(
    planned: set[str], live_in_scope: set[str]
) -> None:
    if planned == live_in_scope:
        check_overwrite(planned, live_in_scope)
    else:
        with pytest.raises(CommitConflictError):
            check_overwrite(planned, live_in_scope)


# ---- watermarks ---------------------------------------------------------------------------------


def test_merged_watermark() -> None:
    assert merged_watermark(None, None) is None
    assert merged_watermark(None, 5) == 5
    assert merged_watermark(5, None) == 5
    assert merged_watermark(5, 3) == 5
    assert merged_watermark(3, 5) == 5
    assert merged_watermark(-10, -20) == -10


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=30))
def test_watermark_never_decreases(proposals: list[int | None]) -> None:
    current: int | None = None
    for index, proposal in enumerate(proposals):
        merged = merged_watermark(current, proposal)
        if current is not None:
            assert merged is not None
            assert merged >= current
        seen = [p for p in proposals[: index + 1] if p is not None]
        assert merged == (max(seen) if seen else None)
        current = merged


# ---- idempotence records ------------------------------------------------------------------------


def record(user: str, identifier: int, time_ms: int = 0, snapshot_id: int = 1) -> CommitUserRecord:
    return CommitUserRecord(user, identifier, snapshot_id, time_ms)


def test_already_committed() -> None:
    records = [record("alice", 5), record("bob", 9)]
    assert already_committed(records, "alice", 5)
    assert already_committed(records, "alice", 4)
    assert already_committed(records, "alice", -1)
    assert not already_committed(records, "alice", 6)
    assert not already_committed(records, "carol", 0)
    assert not already_committed(records, "bob", 10)
    assert not already_committed([], "alice", 0)
    assert not already_committed(records, "ALICE", 1)  # users are exact strings


def test_updated_users_replaces_the_own_record() -> None:
    records = [record("bob", 1, time_ms=100), record("alice", 5, time_ms=50, snapshot_id=3)]
    updated = updated_users(records, "alice", 6, 8, now_ms=200, retention_ms=DAY)
    assert updated == [record("alice", 6, time_ms=200, snapshot_id=8), record("bob", 1, 100)]


def test_updated_users_records_the_owner_of_the_identifier() -> None:
    records = [CommitUserRecord("alice", 5, 3, 50, "query=a;base=0"), record("bob", 1, 100)]
    updated = updated_users(records, "alice", 6, 8, now_ms=200, retention_ms=DAY, owner="o2")
    assert CommitUserRecord("alice", 6, 8, 200, "o2") in updated
    assert updated_users(records, "bob", 2, 9, now_ms=200, retention_ms=DAY)[-1].owner == ""


def test_updated_users_drops_idle_users_but_never_the_committer() -> None:
    now = 10 * DAY
    records = [
        record("expired", 1, time_ms=now - DAY - 1),
        record("boundary", 2, time_ms=now - DAY),  # exactly the retention: kept
        record("fresh", 3, time_ms=now - 1),
        record("me", 4, time_ms=0),  # my own old record: replaced, not dropped
    ]
    updated = updated_users(records, "me", 5, 42, now_ms=now, retention_ms=DAY)
    assert [r.user for r in updated] == ["boundary", "fresh", "me"]
    assert updated[-1] == CommitUserRecord("me", 5, 42, now)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(alphabet="abcxyz", min_size=1, max_size=3),
        st.tuples(st.integers(0, 100), st.integers(0, 2000)),
        max_size=10,
    ),
    st.text(alphabet="abcxyz", min_size=1, max_size=3),
    st.integers(0, 1000),
    st.integers(0, 2000),
    st.integers(0, 1500),
)
def test_updated_users_properties(
    existing: dict[str, tuple[int, int]], user: str, identifier: int, now: int, retention: int
) -> None:
    records = [record(u, i, time_ms=t) for u, (i, t) in existing.items()]
    updated = updated_users(records, user, identifier, 77, now_ms=now, retention_ms=retention)
    users = [r.user for r in updated]
    assert users == sorted(users)
    assert len(set(users)) == len(users)
    assert CommitUserRecord(user, identifier, 77, now) in updated
    for r in records:
        if r.user != user:
            assert (r in updated) == (now - r.time_ms <= retention)
    assert already_committed(updated, user, identifier)
    assert not already_committed(updated, user, identifier + 1)


# ---- scopes and requests ------------------------------------------------------------------------


def test_scope_matches() -> None:
    keys = ("day", "region")
    everything = PartitionScope()
    assert everything.matches((1, "eu"), keys)
    assert everything.matches((), ())
    one_day = PartitionScope(({"day": 1},))
    assert one_day.matches((1, "eu"), keys)
    assert one_day.matches((1, None), keys)
    assert not one_day.matches((2, "eu"), keys)
    exact = PartitionScope(({"day": 1, "region": "eu"}, {"day": 2, "region": "us"}))
    assert exact.matches((1, "eu"), keys)
    assert exact.matches((2, "us"), keys)
    assert not exact.matches((1, "us"), keys)
    assert not exact.matches((2, "eu"), keys)
    nulls = PartitionScope(({"region": None},))
    assert nulls.matches((1, None), keys)
    assert not nulls.matches((1, "eu"), keys)
    assert PartitionScope(({},)).matches((3, "x"), keys)  # an empty spec: the whole table
    assert not PartitionScope(()).matches((3, "x"), keys)  # no specs: nothing
    with pytest.raises(ValueError):
        one_day.matches((1,), keys)


def test_commit_request_is_empty() -> None:
    empty = CommitRequest(kind=CommitKind.APPEND, commit_user="u", messages=(message(),))
    assert empty.is_empty
    assert CommitRequest(kind=CommitKind.APPEND, commit_user="u", messages=()).is_empty
    with_file = CommitRequest(
        kind=CommitKind.APPEND, commit_user="u", messages=(message(new=(data_file("f", 1),)),)
    )
    assert not with_file.is_empty
    overwrite_all = CommitRequest(
        kind=CommitKind.OVERWRITE, commit_user="u", messages=(), overwrite=PartitionScope()
    )
    assert not overwrite_all.is_empty  # replacing everything with nothing is a change
