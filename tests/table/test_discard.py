"""The discard gate: no failure path deletes a file that a retained snapshot references, and
a landed commit is reported as landed whatever fails after its publish."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.after_commit import hook
from appendtable.commit.discard import referenced_files
from appendtable.commit.manifests import ManifestStore
from appendtable.commit.snapshots import SnapshotStore
from appendtable.compaction import AutoCompaction, Compactor
from appendtable.errors import StorageError
from tests.helpers.data import EVENTS, events, sorted_rows

#: Every test ends with the shared integrity check (tests/helpers/integrity.py).
pytestmark = pytest.mark.usefixtures("tables_stay_intact")


def _live_paths(table: at.Table) -> list[str]:
    return table.files().column("path").to_pylist()


def _assert_every_referenced_file_exists(table: at.Table, root: Path) -> None:
    """Every file of every retained snapshot is on disk, and the table reads."""
    for snapshot in table.snapshots():
        for path in table.files(snapshot.id).column("path").to_pylist():
            assert (root / path).exists(), f"snapshot {snapshot.id} references deleted {path}"
        table.scan(snapshot_id=snapshot.id).to_arrow()


def _state(table: at.Table) -> Any:
    return table._state


def test_the_gate_keeps_referenced_files_and_deletes_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    table.append(events(0, 10))
    first = _live_paths(table)
    table.append(events(10, 10))
    table.compact(full=True)  # the first files are no longer live, but snapshots hold them
    with table.writer() as writer:  # files of a write that never landed
        writer.write(events(20, 10))
        stray = [f.path for m in writer.prepare_commit() for f in m.new_files]
    everything = first + _live_paths(table) + stray
    result = _state(table).discard(everything)
    assert sorted(result.deleted) == sorted(stray)
    assert sorted(result.referenced) == sorted(first + _live_paths(table))
    assert result.left == ()
    _assert_every_referenced_file_exists(table, root)
    assert not any((root / p).exists() for p in stray)


def test_since_narrows_the_check_to_later_snapshots(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    table.append(events(0, 10))
    old = _live_paths(table)
    latest = table.latest_snapshot()
    assert latest is not None
    table.append(events(10, 10))
    new = sorted(set(_live_paths(table)) - set(old))
    state = _state(table)
    # files written after snapshot 1 can only be referenced by snapshots after it: found
    result = state.discard(new, since_snapshot_id=latest.id)
    assert result.referenced == tuple(new) and result.deleted == ()
    # files held since before ``since`` are outside the narrowed check (the caller's promise
    # that its files are newer is what makes it safe): the full check finds them
    assert set(referenced_files(state.snapshots, state.manifests, old)) == set(old)
    assert referenced_files(state.snapshots, state.manifests, old, since_snapshot_id=1) == set()


def test_unreadable_snapshots_keep_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    table.append(events(0, 10))
    with table.writer() as writer:
        writer.write(events(10, 10))
        stray = [f.path for m in writer.prepare_commit() for f in m.new_files]

    def broken(self: ManifestStore, name: str, *, cache: bool = True) -> Any:
        raise StorageError("injected: the store is unreachable")

    monkeypatch.setattr(ManifestStore, "read_list", broken)
    result = _state(table).discard(stray)
    assert result.deleted == () and result.left == tuple(stray)
    assert all((root / p).exists() for p in stray)


def test_abort_after_a_commit_that_landed_keeps_its_files(tmp_path: Path) -> None:
    """What Spark does: ``abort`` after ``commit`` raised, although the snapshot landed."""
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS)
    with table.writer() as writer:
        writer.write(events(0, 50))
        messages = writer.prepare_commit()
    committer = table.committer("job")
    assert committer.commit(messages, identifier=1) is not None
    result = table.committer("cleanup").abort(messages)
    assert result.deleted == () and len(result.referenced) == len(messages[0].new_files)
    assert table.scan().count() == 50
    _assert_every_referenced_file_exists(table, root)


def test_staging_area_removal_keeps_a_referenced_file(tmp_path: Path) -> None:
    """Staged files are moved out before they are committed; if a commit ever named one in
    place, removing the area must not delete it."""
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    area = table.staging_area()
    with area.writer() as writer:
        writer.write(events(0, 10))
        messages = writer.prepare_commit()
    table.committer().commit(messages)  # committed in place (not through adopt_written)
    with area.writer() as writer:
        writer.write(events(10, 10))
        stray = [f.path for m in writer.prepare_commit() for f in m.new_files]
    result = area.remove()
    assert sorted(result.deleted) == sorted(stray)
    assert sorted(result.referenced) == sorted(_live_paths(table))
    _assert_every_referenced_file_exists(table, root)


# ---- fault injection after the publish ----------------------------------------------------


def _raise(error: BaseException, calls: list[int]) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise error

    return fail


POST_PUBLISH_STEPS = {
    "auto-compaction": (AutoCompaction, "after_commit"),
    "compaction-rewrite": (Compactor, "run_task"),
    "compaction-commit": (Compactor, "commit"),
    "expiration": (hook, "expire_snapshots"),
    "latest-hint": (SnapshotStore, "_write_hint"),
}
ERRORS = [
    ValueError("Table schema does not match schema used to create file"),  # pyarrow's, raw
    KeyError("injected"),
    RuntimeError("injected"),
    at.StorageError("injected"),
    OSError(28, "No space left on device"),
]


@pytest.mark.parametrize("step", sorted(POST_PUBLISH_STEPS))
@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("bucketed", [False, True], ids=["scalable", "bucketed"])
@pytest.mark.parametrize("maintenance", ["background", "inline"])
def test_a_failure_after_the_publish_never_fails_the_commit(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    step: str,
    error: BaseException,
    bucketed: bool,
    maintenance: str,
) -> None:
    root = tmp_path / "t"
    options: dict[str, object] = {
        "commit.maintenance": maintenance,
        "compaction.min.file-num": 2,
        "snapshot.num-retained.min": 1,
        "snapshot.num-retained.max": 2,
        "snapshot.time-retained": "0 s",
    }
    if bucketed:
        options |= {"bucket": 2, "bucket-key": "key", "full-compaction.delta-commits": 2}
    table = at.create_table(str(root), EVENTS, options=options)
    owner, name = POST_PUBLISH_STEPS[step]
    calls: list[int] = []
    monkeypatch.setattr(owner, name, _raise(error, calls))
    written = []
    with caplog.at_level(logging.WARNING):
        for start in range(0, 120, 20):
            data = events(start, 20)
            snapshot = table.append(data)  # raises nothing, although maintenance fails
            assert snapshot is not None and snapshot.kind == at.CommitKind.APPEND
            written.append(data)
            # the two-phase API too
            with table.writer() as writer:
                writer.write(events(1000 + start, 5))
                messages = writer.prepare_commit()
            assert table.committer().commit(messages) is not None
            written.append(events(1000 + start, 5))
        assert table.wait_for_maintenance(timeout=60)
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(pa.concat_tables(written))
    _assert_every_referenced_file_exists(table, root)
    assert calls  # the failing step did run
    if step != "latest-hint":  # (a hint is written in the background, its failure ignored)
        assert any(
            "landed, but the maintenance after it failed" in r.message for r in caplog.records
        )


def test_a_failure_inside_the_commit_after_its_publish_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug between the publish and the return of the commit protocol: the caller sees an
    error and aborts, and the gate keeps the files the landed snapshot references."""
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS)
    table.append(events(0, 10))
    publish = SnapshotStore.publish

    def publish_then_fail(self: SnapshotStore, snapshot: at.Snapshot) -> bool:
        publish(self, snapshot)
        raise ValueError("injected after the publish")

    monkeypatch.setattr(SnapshotStore, "publish", publish_then_fail)
    with pytest.raises(ValueError, match="injected"):
        table.append(events(10, 10))
    monkeypatch.setattr(SnapshotStore, "publish", publish)
    reopened = at.open_table(str(root))
    assert reopened.scan().count() == 20  # it landed, and its files are all there
    _assert_every_referenced_file_exists(reopened, root)
