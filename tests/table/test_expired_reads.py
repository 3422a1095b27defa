"""A handle that read a snapshot before another handle (or process) expired it: every read of
that snapshot raises SnapshotExpiredError, never an answer from its cache or an
ObjectNotFoundError about a data file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import appendtable as at
from tests.helpers.data import EVENTS, events

FUTURE = 10**15

pytestmark = pytest.mark.usefixtures("tables_stay_intact")


def _table(root: Path) -> at.Table:
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(6):
        table.append(events(i * 10, 10))
    table.compact(full=True)  # the files of snapshots 1..6 are deleted when they expire
    return table


def _expire_elsewhere(root: Path) -> None:
    code = (
        "import appendtable as at, sys;"
        f"at.open_table(sys.argv[1]).expire_snapshots(retain_min=1, older_than_ms={FUTURE})"
    )
    subprocess.run([sys.executable, "-c", code, str(root)], check=True)


@pytest.mark.parametrize("read", ["count", "to_arrow", "plan", "to_batches", "filtered count"])
def test_a_stale_handle_reading_an_expired_snapshot_raises_snapshot_expired(
    tmp_path: Path, read: str
) -> None:
    root = tmp_path / "t"
    stale = _table(root)
    assert stale.scan(snapshot_id=4).count() == 40  # cached by this handle
    made_before = stale.scan(snapshot_id=4)
    made_before.plan()
    _expire_elsewhere(root)
    for scan in (made_before, None):
        with pytest.raises(at.SnapshotExpiredError, match="expired"):
            scan = scan or stale.scan(snapshot_id=4)
            if read == "count":
                scan.count()
            elif read == "to_arrow":
                scan.to_arrow()
            elif read == "plan":
                scan.plan()
            elif read == "to_batches":
                list(scan.to_batches())
            else:
                stale.scan(snapshot_id=4, filter=[("seq", ">", 5)]).count()
    assert stale.scan().count() == 60  # the latest is unaffected


def test_time_travel_to_an_instant_before_the_earliest_retained_snapshot_says_expired(
    tmp_path: Path,
) -> None:
    """A user's scan at the instant of snapshot 1, after it expired, was told that no snapshot
    was committed by then (SnapshotNotFoundError), which was false; the scan by id already
    said expired. Before anything expired, an instant before the first snapshot is not
    found."""
    table = _table(tmp_path / "t")
    first = table.snapshots()[0]
    with pytest.raises(at.SnapshotNotFoundError, match="no snapshot was committed") as info:
        table.scan(timestamp_ms=first.time_ms - 1)
    assert not isinstance(info.value, at.SnapshotExpiredError)
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    for instant in (first.time_ms, first.time_ms - 1):
        with pytest.raises(at.SnapshotExpiredError, match="older than the earliest retained"):
            table.scan(timestamp_ms=instant)
    latest = table.latest_snapshot()
    assert latest is not None
    assert table.scan(timestamp_ms=latest.time_ms).snapshot == latest


@pytest.mark.parametrize("use", ["scan", "rollback_to", "create_tag", "snapshot"])
def test_an_expired_snapshot_used_by_id_says_how_to_keep_one(tmp_path: Path, use: str) -> None:
    """Found by a docs-only hunt: time travel, rollback and tagging an expired snapshot
    suggested a consumer id, which only streams have; the hint is now a tag or more
    retention (a stream's own message keeps the consumer id)."""
    table = _table(tmp_path / "t")
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    calls = {
        "scan": lambda: table.scan(snapshot_id=2),
        "rollback_to": lambda: table.rollback_to(2),
        "create_tag": lambda: table.create_tag("old", snapshot_id=2),
        "snapshot": lambda: table.snapshot(2),
    }
    with pytest.raises(at.SnapshotExpiredError) as expired:
        calls[use]()
    message = str(expired.value)
    assert "snapshot 2 has expired (earliest retained is 7)" in message
    assert "tag it" in message and "snapshot.time-retained" in message
    assert "consumer id" not in message
    with pytest.raises(at.SnapshotExpiredError, match="A consumer id keeps"):
        table.stream(mode="from-snapshot", snapshot_id=2)


def test_reading_planned_splits_of_a_snapshot_that_expired_since_raises_snapshot_expired(
    tmp_path: Path,
) -> None:
    """``Table.read(split)`` (how Spark's executors read a planned DataFrame): the files of a
    snapshot that expired after planning are gone because it expired, not deleted outside."""
    table = _table(tmp_path / "t")
    splits = table.scan(snapshot_id=3).plan()
    _expire_elsewhere(tmp_path / "t")
    with pytest.raises(at.SnapshotExpiredError, match="snapshot 3 has expired"):
        for split in splits:
            list(table.read(split))


def test_a_data_file_deleted_outside_the_table_is_reported_as_missing(tmp_path: Path) -> None:
    """The snapshot is retained (or a tag holds it): a missing file is named as missing."""
    table = _table(tmp_path / "t")
    table.create_tag("kept", snapshot_id=3)
    tagged = table.scan(tag="kept").plan()
    latest = table.scan().plan()
    _expire_elsewhere(tmp_path / "t")
    for splits in (tagged, latest):
        victim = tmp_path / "t" / splits[0].files[0].path
        kept = victim.read_bytes()
        victim.unlink()
        with pytest.raises(at.ObjectNotFoundError, match="is missing"):
            for split in splits:
                list(table.read(split))
        victim.write_bytes(kept)  # (the end-of-test check wants every file back)
