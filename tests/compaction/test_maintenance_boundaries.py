"""Boundary cases of the deletion paths: the age rule of expiration one snapshot
either side, the compaction window sliding, tag-held files in results and dry runs, a rollback
to a tag of an expired snapshot followed by releasing the tag, expiring and removing orphans,
and the metadata an expiration deletes against what the kept snapshot still uses."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import appendtable as at
from appendtable.metadata.models import DataFileMeta
from appendtable.planning.compaction_selection import pick_windows
from appendtable.planning.expiration import expire_until
from tests.helpers.clock import past_every_file_ms
from tests.helpers.data import EVENTS, events
from tests.helpers.integrity import assert_table_intact

FUTURE = 10**15

pytestmark = pytest.mark.usefixtures("tables_stay_intact")


def _appends(root: Path, count: int, **options: object) -> at.Table:
    table = at.create_table(str(root), EVENTS, options={"write-only": True, **options})
    for i in range(count):
        table.append(events(i * 10, 10))
        time.sleep(0.003)  # distinct commit times
    return table


def test_the_age_rule_expires_exactly_the_snapshots_whose_successor_is_older(
    tmp_path: Path,
) -> None:
    for cut_at in range(2, 7):
        table = _appends(tmp_path / f"t{cut_at}", 6)
        times = {s.id: s.time_ms for s in table.snapshots()}
        # snapshot i expires when i + 1 was committed before the cut-off
        on = table.expire_snapshots(retain_min=1, older_than_ms=times[cut_at], dry_run=True)
        assert on.expired_snapshots == list(range(1, cut_at - 1)), cut_at
        after = table.expire_snapshots(retain_min=1, older_than_ms=times[cut_at] + 1)
        assert after.expired_snapshots == list(range(1, cut_at)), cut_at
        assert table.earliest_snapshot().id == cut_at
        assert table.scan().count() == 60


def _expected_end(
    earliest: int,
    latest: int,
    retain_min: int,
    retain_max: int,
    limit: int,
    floor: int | None,
    older: int,
    times: list[int],
) -> int:
    """An independent statement of the rule: walk up from the earliest snapshot while it may
    expire; the first that may not is the oldest kept."""
    snapshot = earliest
    while snapshot < latest:
        forced = snapshot <= latest - retain_max  # beyond retain_max
        old = times[snapshot + 1] < older  # its successor is older than the cut-off
        if (
            snapshot > latest - retain_min
            or (floor is not None and snapshot >= floor)
            or snapshot >= earliest + limit
            or not (forced or old)
        ):
            break
        snapshot += 1
    return snapshot


@settings(max_examples=300, deadline=None)
@given(
    earliest=st.integers(1, 6),
    span=st.integers(0, 12),
    retain_min=st.integers(1, 8),
    extra=st.integers(0, 8),
    limit=st.integers(1, 15),
    floor=st.none() | st.integers(1, 20),
    older=st.integers(0, 25),
    steps=st.lists(st.integers(0, 3), min_size=25, max_size=25),
)
def test_expire_until_matches_an_independent_model(
    earliest: int,
    span: int,
    retain_min: int,
    extra: int,
    limit: int,
    floor: int | None,
    older: int,
    steps: list[int],
) -> None:
    latest = earliest + span
    times = [sum(steps[: i + 1]) for i in range(len(steps))]  # non-decreasing commit times
    got = expire_until(
        earliest=earliest,
        latest=latest,
        retain_min=retain_min,
        retain_max=retain_min + extra,
        limit=limit,
        consumer_floor=floor,
        older_than_ms=older,
        committed_at=lambda i: times[i],
    )
    model = _expected_end(
        earliest, latest, retain_min, retain_min + extra, limit, floor, older, times
    )
    assert got == model


def _file(index: int, size: int) -> DataFileMeta:
    return DataFileMeta(
        path=f"bucket-0/data-{index}.parquet",
        file_size=size,
        row_count=1,
        min_seq=index,
        max_seq=index,
        schema_id=0,
        creation_time_ms=0,
        source=0,
    )


def _windows_model(
    sizes: list[int], target: int, min_files: int, max_files: int
) -> list[list[int]]:
    """Index windows: grow from ``start``; pick at the threshold; beyond 2 x target drop the
    oldest (move ``start`` forward)."""
    picked: list[list[int]] = []
    start = 0
    for end in range(len(sizes)):
        count = end - start + 1
        size = sum(sizes[start : end + 1])
        if (count >= min_files and size >= target) or count >= max_files:
            picked.append(list(range(start, end + 1)))
            start = end + 1
            continue
        while start <= end and sum(sizes[start : end + 1]) > 2 * target:
            start += 1
    return picked


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 100), max_size=40),
    target=st.integers(1, 150),
    min_files=st.integers(2, 6),
    more=st.integers(0, 6),
)
def test_the_compaction_window_slides_by_dropping_its_oldest_file(
    sizes: list[int], target: int, min_files: int, more: int
) -> None:
    files = [_file(i, size) for i, size in enumerate(sizes)]
    windows = pick_windows(files, target=target, min_files=min_files, max_files=min_files + more)
    got = [[f.min_seq for f in window] for window in windows]
    assert got == _windows_model(sizes, target, min_files, min_files + more)
    for window in got:  # adjacent files only: rewriting them keeps the bucket's order
        assert window == list(range(window[0], window[-1] + 1))


def test_a_sliding_window_compacts_contiguous_files_in_a_table(tmp_path: Path) -> None:
    table = at.create_table(
        str(tmp_path / "t"),
        EVENTS,
        options={
            "write-only": True,
            "bucket": 1,
            "bucket-key": "key",
            "compaction.min.file-num": 3,
            "target-file-size": "4 kB",
        },
    )
    for i, rows in enumerate([400, 5, 5, 400, 5, 5, 5]):
        table.append(events(i * 1000, rows))
    before = table.scan().to_arrow().column("seq").to_pylist()
    assert table.compact() is not None
    assert table.scan().to_arrow().column("seq").to_pylist() == before  # bucket order kept
    assert table.latest_snapshot().kind == at.CommitKind.COMPACT


def test_tag_held_files_are_never_reported_as_deleted(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _appends(root, 4)
    table.create_tag("keep", 2)
    held = set(table.files(2).column("path").to_pylist())
    table.compact(full=True)  # snapshot 5 replaces every file
    everything = set(table.files(4).column("path").to_pylist())
    dry = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE, dry_run=True)
    assert set(dry.deleted_data_files) == everything - held
    real = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert real.deleted_data_files == dry.deleted_data_files
    assert real.deleted_metadata_files == dry.deleted_metadata_files
    assert all((root / path).exists() for path in held)
    assert not any((root / path).exists() for path in everything - held)
    assert table.scan(tag="keep").count() == 20


def test_rollback_to_a_tag_of_an_expired_snapshot_then_release_expire_and_remove_orphans(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    table = _appends(root, 3)
    table.create_tag("t", 3)
    restored = set(table.files(3).column("path").to_pylist())
    table.compact(full=True)  # 4
    table.append(events(100, 10))  # 5
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)  # 1..4 gone, the tag keeps 3
    rollback = table.rollback_to(tag="t")  # 6: restores the tag's files (in its base list)
    table.delete_tag("t")
    table.append(events(200, 10))  # 7
    table.expire_snapshots(retain_min=3, older_than_ms=FUTURE)  # releases the tag
    assert [s.id for s in table.snapshots()] == [5, 6, 7]
    table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert all((root / path).exists() for path in restored)
    assert table.scan(snapshot_id=rollback.id).count() == 30
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == list(range(30)) + list(
        range(200, 210)
    )
    assert_table_intact(str(root))


def test_expiration_keeps_the_manifests_the_kept_snapshot_uses(tmp_path: Path) -> None:
    """With manifests merged often, the kept snapshot's base list names manifests written by
    expired snapshots; the check reads them with the caches cleared."""
    root = tmp_path / "t"
    table = _appends(root, 12, **{"manifest.merge-min-count": 3})
    kept = table.latest_snapshot()
    result = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert result.expired_snapshots == list(range(1, 12))
    used = {m.file_name for m in table._state.manifests.all_manifests(kept)}
    assert not {p.rsplit("/", 1)[-1] for p in result.deleted_metadata_files} & used
    assert assert_table_intact(str(root)) == 12


def test_an_older_retained_rollback_keeps_the_files_it_restored(tmp_path: Path) -> None:
    """Two retained rollbacks: the older restores files (from a tag, since deleted) that an
    expired compaction had removed and a later compaction removed again; the newer rolls back
    to a state without them. Only the older rollback, reached through the newer one's
    ``previous-rollback`` link, still holds them: expiration must keep them."""
    root = tmp_path / "t"
    table = _appends(root, 3)  # 1..3: F1, F2, F3
    table.create_tag("t", 3)
    table.compact(full=True)  # 4: removes F1..F3, adds C
    restoring = table.rollback_to(tag="t")  # 5: F1..F3 again
    table.compact(full=True)  # 6: removes F1..F3 again
    newest = table.rollback_to(4)  # 7: back to C alone
    table.delete_tag("t")
    assert (restoring.id, newest.id) == (5, 7)
    files = {s: set(table.files(s).column("path").to_pylist()) for s in range(1, 8)}
    retained = set().union(*(files[s] for s in range(4, 8)))
    unreferenced = set().union(*(files[s] for s in range(1, 4))) - retained
    assert files[3] <= files[5] and not files[3] & files[7]  # only the older rollback
    dry = table.expire_snapshots(retain_min=4, older_than_ms=FUTURE, dry_run=True)
    real = table.expire_snapshots(retain_min=4, older_than_ms=FUTURE)
    assert real.expired_snapshots == dry.expired_snapshots == [1, 2, 3]
    assert set(real.deleted_data_files) == set(dry.deleted_data_files) == unreferenced
    assert all((root / path).exists() for path in retained)
    assert table.scan(snapshot_id=restoring.id).count() == 30
    assert_table_intact(str(root))


def _history_with_deletions(root: Path) -> dict[int, set[str]]:
    """Eight snapshots with deletions inside any range: appends, a compaction, a rollback to a
    state before it (re-adding the files it removed), compactions again. Returns each
    snapshot's live data files."""
    table = _appends(root, 2)  # 1, 2: F1, F2
    table.compact(full=True)  # 3: removes F1, F2
    table.rollback_to(2)  # 4: F1, F2 again (removes 3's file)
    table.append(events(100, 10))  # 5
    table.compact(full=True)  # 6: removes F1, F2 and 5's file
    table.append(events(200, 10))  # 7
    table.append(events(300, 10))  # 8
    kinds = [s.kind for s in table.snapshots()]
    assert kinds[2] == kinds[5] == at.CommitKind.COMPACT and table.latest_snapshot().id == 8
    files = {s: set(table.files(s).column("path").to_pylist()) for s in range(1, 9)}
    table.close()
    return files


def test_expiration_deletes_exactly_what_only_the_expired_snapshots_held(tmp_path: Path) -> None:
    """For every range [begin, end) of that history (the table first expired up to begin):
    the data files deleted are exactly those live in an expired snapshot and in no retained
    one, whatever deleted them (the first snapshot after begin, one in the middle, the kept
    one) and whether a rollback in the range re-added them; nothing else is left over."""
    base = tmp_path / "base"
    files = _history_with_deletions(base)
    for begin in range(1, 8):
        for end in range(begin + 1, 9):
            root = tmp_path / f"run-{begin}-{end}"
            shutil.copytree(base, root)
            table = at.open_table(str(root))
            table.expire_snapshots(retain_min=9 - begin, older_than_ms=FUTURE)
            assert table.earliest_snapshot().id == begin
            result = table.expire_snapshots(retain_min=9 - end, older_than_ms=FUTURE)
            expired = set().union(*(files[s] for s in range(begin, end)))
            retained = set().union(*(files[s] for s in range(end, 9)))
            where = f"expiring [{begin}, {end})"
            assert result.expired_snapshots == list(range(begin, end)), where
            assert set(result.deleted_data_files) == expired - retained, where
            assert not any((root / p).exists() for p in expired - retained), where
            orphans = table.remove_orphan_files(older_than=FUTURE, dry_run=True)
            assert orphans.files == [], where
            assert assert_table_intact(str(root)) == len(retained), where
            shutil.rmtree(root)
