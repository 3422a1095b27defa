"""A rollback racing with an expiration never leaves the table pointing at deleted files.

Found by a user: one process appending, one rolling back to the snapshot before the latest,
one expiring all but the latest snapshot; within seconds the latest snapshot referenced data
files the expiration had deleted, and every scan and stream failed for good. A rollback
re-adds files that the history after its target removed, and an expiration that planned
before the rollback landed took them for unreferenced (``appendtable.commit.rollback_pins``
states the protocol that prevents it). The deterministic tests drive each interleaving; the
last runs the user's three processes."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from appendtable import orphans as orphans_module
from appendtable import table as table_module
from appendtable._state import TableState
from appendtable.commit import expire as expire_module
from appendtable.commit import rollback_pins
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.metadata import layout
from appendtable.storage import Storage
from tests.helpers.clock import age_tree
from tests.helpers.integrity import assert_table_intact
from tests.helpers.maintenance_loops import (
    FAR_FUTURE_MS,
    expiring,
    removing_orphans,
    rolling_back,
    run_together,
)

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")

SCHEMA = pa.schema([("n", pa.int64())])


def _history(tmp_path: Path) -> at.Table:
    """Snapshots 1-3 append [1], [2], [3]; 4 rolls back to 2 (dropping [3]'s file); 5
    appends [5]. Expiring all but 5 plans to delete [3]'s file: only 3 held it."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": True})
    for n in (1, 2, 3):
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
    table.rollback_to(2)
    table.append(pa.table({"n": [5]}, schema=SCHEMA))
    return table


def _expire_all_but_latest(uri: str) -> list[int]:
    result = at.open_table(uri).expire_snapshots(retain_min=1, older_than_ms=FAR_FUTURE_MS)
    return list(result.expired_snapshots)


def _rows(table: at.Table) -> list[int]:
    return sorted(at.open_table(table.uri).scan().to_arrow().column("n").to_pylist())


def _pins(table: at.Table) -> list[str]:
    return sorted(p.name for p in Path(table.uri, layout.PINNED_DIR).glob("*"))


def test_an_expiration_between_the_rollbacks_check_and_commit_keeps_the_targets_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollback to 3 has pinned it and found it still there; then an expiration deletes
    snapshots 1-4 and, seeing the pin, no file; then the rollback lands. Before the fix the
    expiration deleted [3]'s file and the rollback published a snapshot that referenced it."""
    table = _history(tmp_path)
    real_check = table._state.snapshots.check_retained
    expired: list[int] = []

    def check_then_expire(snapshot_id: int) -> None:
        real_check(snapshot_id)
        expired.extend(_expire_all_but_latest(table.uri))

    monkeypatch.setattr(table._state.snapshots, "check_retained", check_then_expire)
    landed = table.rollback_to(3)
    assert expired == [1, 2, 3, 4]
    assert landed.id == 6
    assert _rows(table) == [1, 2, 3]
    assert _pins(table) == []
    assert_table_intact(table.uri)
    # the files this expiration left are orphans now, and the next expiration is ordinary
    assert _expire_all_but_latest(table.uri) == [5]
    assert _rows(table) == [1, 2, 3]


def test_a_dry_run_of_orphan_removal_or_purge_leaves_even_a_crashed_rollbacks_pin(
    tmp_path: Path,
) -> None:
    """A dry run changes nothing: it deleted pins older than an hour (found by a review)."""
    table = _history(tmp_path)
    old = layout.pin_path(3, int(time.time() * 1000) - rollback_pins.PIN_RETENTION_MS - 1, "0" * 32)
    table._state.storage.ensure_parent(old)
    table._state.storage.create(old, b"3\n")
    table.remove_orphan_files(older_than=FAR_FUTURE_MS, dry_run=True)
    table.purge(dry_run=True)
    assert _pins(table) == [old.rsplit("/", 1)[-1]]
    _expire_all_but_latest(table.uri)  # (a real run prunes it)
    assert _pins(table) == []


def test_a_second_expiration_while_a_rollback_is_under_way_keeps_the_targets_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots 1-4 append [1]-[4], 5 rolls back to 2, 6 appends [6]. The rollback to 3 has
    pinned it and found it there; one expiration removes 1-3 (seeing the pin, it deletes no
    file), a second removes 4-5, which also held [3]'s file. The second deleted it (the pin
    named no snapshot it expired) and the rollback then published a snapshot referencing it;
    an expiration now deletes nothing while a pin names any snapshot no longer retained."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": True})
    for n in (1, 2, 3, 4):
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
    table.rollback_to(2)
    table.append(pa.table({"n": [6]}, schema=SCHEMA))
    real_check = table._state.snapshots.check_retained
    expired: list[list[int]] = []

    def check_then_expire_twice(snapshot_id: int) -> None:
        real_check(snapshot_id)
        for keep in (3, 1):
            other = at.open_table(table.uri)
            result = other.expire_snapshots(retain_min=keep, older_than_ms=FAR_FUTURE_MS)
            expired.append(list(result.expired_snapshots))

    monkeypatch.setattr(table._state.snapshots, "check_retained", check_then_expire_twice)
    assert table.rollback_to(3).id == 7
    assert expired == [[1, 2, 3], [4, 5]]
    assert _rows(table) == [1, 2, 3]


def _tagged_history(tmp_path: Path) -> at.Table:
    """[1] and [2] appended, tag 't' on snapshot 2, [3] overwrites them (snapshot 3), and
    1-2 expire: only the tag keeps the files of [1] and [2]."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": True})
    for n in (1, 2):
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
    table.create_tag("t")
    table.overwrite(pa.table({"n": [3]}, schema=SCHEMA))
    assert _expire_all_but_latest(table.uri) == [1, 2]
    return table


def _delete_tag_and_expire(uri: str) -> list[str]:
    other = at.open_table(uri)
    other.delete_tag("t")
    return other.expire_snapshots(retain_min=1, older_than_ms=FAR_FUTURE_MS).deleted_data_files


def test_a_tag_deleted_while_a_rollback_to_it_is_under_way_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollback to tag 't' has pinned its snapshot and found the tag still there; then
    the tag is deleted and an expiration frees its files. It deleted them (a rollback to a
    tag took no pin: the tag keeps its files, but only while it exists), and the rollback
    then published a snapshot referencing them."""
    table = _tagged_history(tmp_path)
    real_refresh = table._state.refresh
    freed: list[list[str]] = []

    def delete_then_refresh(*args: Any) -> Any:
        if not freed:  # the rollback has read its target and is about to commit
            freed.append(_delete_tag_and_expire(table.uri))
        return real_refresh(*args)

    monkeypatch.setattr(table._state, "refresh", delete_then_refresh)
    assert table.rollback_to(tag="t").id == 4
    assert freed == [[]]  # a pin names snapshot 2, which is not retained: nothing deleted
    assert _pins(table) == []
    assert _rows(table) == [1, 2]
    removed = _remove_orphans(table.uri)  # the files left are live in the rollback
    assert not [p for p in removed if p.endswith(".parquet")], removed
    assert _rows(table) == [1, 2]


def test_a_rollback_to_a_tag_deleted_before_its_pin_was_checked_fails_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tag is deleted (and its files freed) between the rollback's first read of it and
    its pin: the rollback's second read finds no tag, and nothing is committed."""
    table = _tagged_history(tmp_path)
    real_pinned = table_module.pinned

    @contextmanager
    def free_then_pin(storage: Storage, snapshot_id: int) -> Iterator[None]:
        assert len(_delete_tag_and_expire(table.uri)) == 2
        with real_pinned(storage, snapshot_id):
            yield

    monkeypatch.setattr(table_module, "pinned", free_then_pin)
    with pytest.raises(at.TagNotFoundError, match="no tag named 't'"):
        table.rollback_to(tag="t")
    assert at.open_table(table.uri).latest_snapshot().id == 3
    assert _rows(table) == [3]
    assert _pins(table) == []


def _remove_orphans(uri: str) -> list[str]:
    """Orphan removal that takes every unreferenced file for old enough."""
    removed = at.open_table(uri).remove_orphan_files(older_than=FAR_FUTURE_MS, dry_run=False)
    return removed.files


def test_orphan_removal_while_a_rollback_is_under_way_keeps_the_targets_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollback to 3 has pinned it and found it still there; an expiration deletes
    snapshots 1-4 and, seeing the pin, leaves their files to orphan removal; orphan removal
    runs before the rollback lands. It deleted [3]'s file (old enough, and no retained
    snapshot named it), and the rollback then published a snapshot referencing it; it now
    deletes no data file or manifest while a pin names a snapshot that is not retained."""
    table = _history(tmp_path)
    real_check = table._state.snapshots.check_retained
    removed: list[str] = []

    def check_expire_and_remove(snapshot_id: int) -> None:
        real_check(snapshot_id)
        assert _expire_all_but_latest(table.uri) == [1, 2, 3, 4]
        removed.extend(_remove_orphans(table.uri))

    monkeypatch.setattr(table._state.snapshots, "check_retained", check_expire_and_remove)
    table.rollback_to(3)
    assert not [p for p in removed if p.endswith(".parquet")], removed
    assert _rows(table) == [1, 2, 3]
    assert len(_remove_orphans(table.uri)) > 0  # once it landed: what only 1-4 held
    assert _rows(table) == [1, 2, 3]


def test_a_rollback_landing_while_orphan_removal_runs_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, but the rollback lands (and removes its pin) after orphan removal read the
    snapshots and before it deletes: it reads the snapshots that landed after the pins, and
    keeps [3]'s file."""
    table = _history(tmp_path)
    roller = at.open_table(table.uri)
    real_check = roller._state.snapshots.check_retained
    real_live_files = orphans_module.live_files
    read: list[orphans_module.LiveFiles] = []

    def check_expire_and_read(snapshot_id: int) -> None:
        real_check(snapshot_id)
        assert _expire_all_but_latest(table.uri) == [1, 2, 3, 4]
        read.append(real_live_files(at.open_table(table.uri)._state))

    def read_before_the_rollback_landed(state: TableState) -> orphans_module.LiveFiles:
        monkeypatch.setattr(roller._state.snapshots, "check_retained", check_expire_and_read)
        assert roller.rollback_to(3).id == 6
        assert read[0].through == 5
        return read[0]

    monkeypatch.setattr(orphans_module, "live_files", read_before_the_rollback_landed)
    removed = _remove_orphans(table.uri)
    assert not [p for p in removed if p.endswith(".parquet")], removed
    assert _pins(table) == []
    assert _rows(table) == [1, 2, 3]


def test_a_rollback_landing_while_an_expiration_runs_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The expiration has planned (latest: 5); the whole rollback to 3 lands and removes its
    pin before the expiration deletes anything. The expiration reads the latest snapshot's
    rollbacks again and keeps [3]'s file, which the rollback re-added."""
    table = _history(tmp_path)
    real_record = expire_module.record_expiration
    landed: list[int] = []

    def rollback_then_record(storage: Storage, snapshots: dict[int, tuple[str, str]]) -> None:
        if not landed:
            landed.append(at.open_table(table.uri).rollback_to(3).id)
        real_record(storage, snapshots)

    monkeypatch.setattr(expire_module, "record_expiration", rollback_then_record)
    assert _expire_all_but_latest(table.uri) == [1, 2, 3, 4]
    assert landed == [6]
    assert _rows(table) == [1, 2, 3]
    assert _pins(table) == []


def test_a_rollback_whose_target_expired_after_its_pin_fails_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pin is written, then an expiration deletes the target before the rollback checks
    it: SnapshotExpiredError, no snapshot, no pin left, and the expiration (which saw the pin)
    deleted no file, so nothing a retained snapshot references is gone."""
    table = _history(tmp_path)
    real_pinned = rollback_pins.pinned

    @contextmanager
    def pin_then_expire(storage: Storage, snapshot_id: int) -> Iterator[None]:
        with real_pinned(storage, snapshot_id):
            assert _expire_all_but_latest(table.uri) == [1, 2, 3, 4]
            yield

    monkeypatch.setattr(table_module, "pinned", pin_then_expire)
    with pytest.raises(at.SnapshotExpiredError, match="snapshot 3 has expired"):
        table.rollback_to(3)
    assert at.open_table(table.uri).latest_snapshot().id == 5
    assert _rows(table) == [1, 2, 5]
    assert _pins(table) == []
    data = {p.name for p in Path(table.uri).glob("bucket-0/*.parquet")}
    assert len(data) == 4  # [3]'s file is left to orphan removal, not deleted


def test_a_crashed_rollbacks_pin_is_pruned_and_stops_holding_files(tmp_path: Path) -> None:
    """A pin older than PIN_RETENTION_MS (its rollback crashed) is deleted by the next
    expiration, which then deletes what it planned; a younger pin of an expired snapshot
    keeps every file of that expiration."""
    table = _history(tmp_path)
    storage = table._state.storage
    now = int(time.time() * 1000)
    old = layout.pin_path(3, now - rollback_pins.PIN_RETENTION_MS - 1, "0" * 32)
    storage.ensure_parent(old)
    storage.create(old, b"3\n")
    assert _expire_all_but_latest(table.uri) == [1, 2, 3, 4]
    assert _pins(table) == []
    assert len(list(Path(table.uri).glob("bucket-0/*.parquet"))) == 3  # [3]'s file went

    young = _history(tmp_path / "second")
    storage = young._state.storage
    fresh = layout.pin_path(2, now, "1" * 32)
    storage.ensure_parent(fresh)
    storage.create(fresh, b"2\n")
    assert _expire_all_but_latest(young.uri) == [1, 2, 3, 4]
    assert len(list(Path(young.uri).glob("bucket-0/*.parquet"))) == 4
    assert _pins(young) == [fresh.rsplit("/", 1)[-1]]
    Path(young.uri, fresh).unlink()  # (a pin of a live rollback is not an orphan: not left)


def _appender(uri: str, seconds: float) -> None:
    table = at.open_table(uri)
    stop = time.time() + seconds
    n = 0
    while time.time() < stop:
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
        n += 1
        time.sleep(0.02)


_roller = partial(rolling_back, position=-2)
_expirer = partial(expiring, keep=1)


@pytest.mark.slow
def test_processes_appending_rolling_back_and_expiring_keep_the_table_readable(
    tmp_path: Path,
) -> None:
    """The user's reproduction (it broke the table in 4 of 6 runs of 15 s): three processes
    for 8 s, then every retained snapshot reads whole from a fresh handle."""
    uri = str(tmp_path / "t")
    at.create_table(uri, SCHEMA, options={"bucket": 2, "bucket-key": "n", "write-only": True})
    run_together(uri, 8.0, _appender, _roller, _expirer)
    table = at.open_table(uri)
    latest = table.latest_snapshot()
    assert latest is not None and latest.id > 20, latest  # the three ran
    rollbacks = [s for s in table.snapshots() if s.kind is at.CommitKind.OVERWRITE]
    for snapshot in table.snapshots():
        table.scan(snapshot_id=snapshot.id).to_arrow()
    assert_table_intact(uri)
    print(f"\n{latest.id} snapshots, {len(rollbacks)} rollbacks retained")


@pytest.mark.slow
def test_processes_rolling_back_expiring_and_removing_orphans_keep_the_table_readable(
    tmp_path: Path,
) -> None:
    """Rollbacks re-adding hour-old data files, an expiration leaving the files of pinned
    snapshots to orphan removal, and orphan removal, beside an appender (four processes,
    6 s): every retained snapshot still reads whole."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={"write-only": True})
    for n in range(30):
        table.append(pa.table({"n": [n]}, schema=SCHEMA))
    age_tree(uri, seconds=3600)
    run_together(
        uri,
        6.0,
        _appender,
        _roller,
        partial(rolling_back, position=0, pause=0.01),  # the oldest: the next to expire
        partial(expiring, keep=2),
        partial(removing_orphans, older_than=dt.timedelta(minutes=30)),  # not in-flight files
    )
    table = at.open_table(uri)
    latest = table.latest_snapshot()
    assert latest is not None and latest.id > 60, latest  # they ran
    assert_table_intact(uri)


def test_an_expiration_planned_over_snapshots_another_one_removed_skips_them(
    tmp_path: Path,
) -> None:
    """Two expirations at once: the one that read the snapshots first found their manifest
    lists deleted by the other and failed with 'file not found' (seen by a user running two
    maintenance processes). It now skips what the other removed; a snapshot still there whose
    list is missing is damage, and still raises."""
    table = _history(tmp_path)
    state = table._state
    for snapshot_id in range(1, 6):
        state.snapshots.get(snapshot_id)  # this handle has read them (cached)
    assert _expire_all_but_latest(table.uri) == [1, 2, 3, 4]  # another process
    clear_metadata_caches()  # (its manifest lists were not read yet)
    plan = expire_module.plan_expiration(state.snapshots, state.manifests, 1, 5)
    assert plan.snapshot_ids == [] and plan.data_files == [] and plan.metadata_files == []
    damaged = _history(tmp_path / "damaged")
    latest = damaged.latest_snapshot()
    assert latest is not None
    first = damaged._state.snapshots.get(1)
    Path(damaged.uri, layout.manifest_path(first.delta_manifest_list)).unlink()
    clear_metadata_caches()
    with pytest.raises(at.ObjectNotFoundError):
        expire_module.plan_expiration(
            damaged._state.snapshots, damaged._state.manifests, 1, latest.id
        )
    Path(damaged.uri, layout.snapshot_path(1)).unlink()  # (so the integrity check passes)
    damaged._state.snapshots.forget(1)


def _expire_and_compact(uri: str, seconds: float) -> None:
    table = at.open_table(uri)
    stop = time.time() + seconds
    while time.time() < stop:
        table.expire_snapshots(retain_min=1, older_than_ms=FAR_FUTURE_MS)
        table.compact(full=True)


@pytest.mark.slow
def test_two_processes_expiring_and_compacting_beside_an_appender_never_fail(
    tmp_path: Path,
) -> None:
    """The user's setup that failed with 'file not found' on manifest lists (an expiration
    planning over snapshots the other had removed) and on a conflict message (naming the
    snapshot that changed a file, read after it expired): every call of every process
    succeeds or loses a race with an AppendTableError the docs name, for 6 s."""
    uri = str(tmp_path / "t")
    at.create_table(uri, SCHEMA, options={"bucket": 2, "bucket-key": "n", "write-only": True})
    run_together(uri, 6.0, _appender, _expire_and_compact, _expire_and_compact)
    table = at.open_table(uri)
    latest = table.latest_snapshot()
    assert latest is not None and latest.id > 20
    assert table.scan().to_arrow().num_rows == table.scan().count()


def test_a_purge_deletes_no_vector_while_a_rollback_is_under_way(tmp_path: Path) -> None:
    """A rollback landing during a purge restored deletion vectors of a snapshot the purge
    expired, and the purge's last step deleted them: the new latest snapshot failed to read
    (found by a user, 8 of 20 trials). While a pin exists the purge deletes no vector or
    delete record (the next purge does)."""
    table = at.create_table(
        str(tmp_path / "t"), SCHEMA, options={"write-only": True, "deletion-vectors.enabled": True}
    )
    table.append(pa.table({"n": list(range(10))}, schema=SCHEMA))
    table.delete([("n", "<", 3)])
    index = Path(table.uri, layout.INDEX_DIR)
    before = sorted(p.name for p in index.iterdir())
    assert any(name.endswith(".puffin") for name in before)
    with rollback_pins.pinned(table._state.storage, 2):
        held = table.purge(older_than=dt.timedelta(0))
        # (the purge's expiration marks the expired DELETE snapshot's record as landed)
        kept = sorted(p.name for p in index.iterdir() if not p.name.startswith("landed-"))
        assert kept == before
        assert not [p for p in held.deleted_files if p.startswith(f"{layout.INDEX_DIR}/")]
    again = table.purge(older_than=dt.timedelta(0))
    assert [p for p in again.deleted_files if p.startswith(f"{layout.INDEX_DIR}/")]
    assert not list(index.iterdir())  # the records, vectors and marks are all gone
    assert _rows(table) == list(range(3, 10))
