"""Every start mode of a stream, and waiting on an empty table."""

from __future__ import annotations

import time

import pytest

import appendtable as at
from tests.helpers.data import EVENTS, events
from tests.streaming.helpers import append_spaced, drain, rows_of, seqs


@pytest.fixture
def five(uri: str) -> at.Table:
    """A table with snapshots 1..5, each adding rows seq 10*(i-1) .. 10*i - 1."""
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    for i in range(5):
        append_spaced(table, events(10 * i, 10))
    return table


def _read_all(reader: at.StreamReader) -> tuple[list[tuple[int, bool]], list[int]]:
    units = drain(reader)
    return [(u.snapshot_id, u.full) for u in units], sorted(seqs(rows_of(reader, units)))


def test_latest_full_reads_the_latest_snapshot_whole_then_deltas(five: at.Table) -> None:
    readers = [five.stream(), five.stream(mode="latest-full"), five.stream(mode="full")]
    for reader in readers:
        units, rows = _read_all(reader)
        assert units == [(5, True)]
        assert rows == list(range(50))
    append_spaced(five, events(50, 3))
    for reader in readers:
        units, rows = _read_all(reader)
        assert units == [(6, False)] and rows == [50, 51, 52]


def test_latest_reads_only_what_comes_after(five: at.Table) -> None:
    reader = five.stream(mode="latest")
    assert reader.poll() is None
    append_spaced(five, events(50, 4))
    units, rows = _read_all(reader)
    assert units == [(6, False)] and rows == [50, 51, 52, 53]


def test_from_snapshot_and_from_snapshot_full(five: at.Table) -> None:
    units, rows = _read_all(five.stream(mode="from-snapshot", snapshot_id=3))
    assert units == [(3, False), (4, False), (5, False)] and rows == list(range(20, 50))
    units, rows = _read_all(five.stream(mode="from-snapshot-full", snapshot_id=3))
    assert units == [(3, True), (4, False), (5, False)] and rows == list(range(50))
    # default resolves to from-snapshot when a snapshot id is given
    units, _ = _read_all(five.stream(snapshot_id=4))
    assert units == [(4, False), (5, False)]


def test_from_timestamp(five: at.Table) -> None:
    third = five.snapshot(3)
    units, rows = _read_all(five.stream(mode="from-timestamp", timestamp_ms=third.time_ms))
    assert units[0] == (3, False) and rows == list(range(20, 50))
    units, _ = _read_all(five.stream(timestamp_ms=third.time_ms))  # default resolves
    assert units[0] == (3, False)
    future = five.stream(timestamp_ms=int(time.time() * 1000) + 60_000)
    assert future.poll() is None
    append_spaced(five, events(50, 1))
    assert [u.snapshot_id for u in drain(future)] == [6]


def test_from_file_creation_time(five: at.Table) -> None:
    cut = five.snapshot(3).time_ms + 1  # files of snapshots 4 and 5 were written after it
    files = five.files().to_pylist()
    expected = sorted(
        r["seq"]
        for r in five.scan().to_arrow().to_pylist()
        if any(
            f["created"].timestamp() * 1000 >= cut
            and f["min_sequence"] <= r["seq"] <= f["max_sequence"]
            for f in files
        )
    )
    reader = five.stream(mode="from-file-creation-time", file_creation_time_ms=cut)
    units, rows = _read_all(reader)
    assert units == [(5, True)]
    assert rows == expected == list(range(30, 50))


def test_options_under_paimon_keys_behave_the_same(five: at.Table, uri: str) -> None:
    by_option = five.stream(options={"scan.mode": "from-snapshot", "scan.snapshot-id": "4"})
    assert [u.snapshot_id for u in drain(by_option)] == [4, 5]
    table = at.create_table(
        uri + "-opts",
        EVENTS,
        options={"scan.mode": "latest", "continuous.discovery-interval": "5 ms"},
    )
    append_spaced(table, events(0, 2))
    reader = table.stream()  # table option: latest
    assert reader.poll() is None
    append_spaced(table, events(2, 2))
    assert [u.snapshot_id for u in drain(reader)] == [2]
    with pytest.raises(at.InvalidOptionError, match=r"scan\.mode"):
        table.stream(options={"scan.mode": "sideways"})
    with pytest.raises(at.InvalidOptionError, match="did you mean"):
        table.stream(options={"scan.snapshotid": "1"})


@pytest.mark.parametrize("mode", ["default", "latest-full", "latest", "from-file-creation-time"])
def test_empty_table_waits_for_its_first_snapshot(uri: str, mode: str) -> None:
    table = at.create_table(uri, EVENTS)
    reader = table.stream(mode=mode, file_creation_time_ms=0)
    assert reader.poll() is None
    append_spaced(table, events(0, 5))
    units = drain(reader)
    assert [u.snapshot_id for u in units] == [1]
    assert sorted(seqs(rows_of(reader, units))) == list(range(5))


@pytest.mark.parametrize(
    "mode", ["default", "latest-full", "latest", "from-file-creation-time", "compacted-full"]
)
@pytest.mark.parametrize("then", ["overwrite", "delete", "append"])
def test_a_reader_created_on_an_empty_table_misses_no_row_appended_after(
    uri: str, mode: str, then: str
) -> None:
    """A reader created on an empty table, not polled before the first append and a commit
    replacing its rows: the start was resolved at the first poll, to the latest snapshot in
    full, and the first append's rows were never delivered (found by a docs-only hunt)."""
    table = at.create_table(uri, EVENTS)
    reader = table.stream(mode=mode, file_creation_time_ms=0, consumer_id="c")
    append_spaced(table, events(0, 5))
    if then == "overwrite":
        table.overwrite(events(100, 2))
    elif then == "delete":
        assert table.delete([("seq", "<", 3)]) is not None
    else:
        append_spaced(table, events(5, 5))
    units = drain(reader)
    # (a delete committed before a stream reaches its rows removes them from it: queue.md)
    expected = {"append": list(range(10)), "overwrite": list(range(5)), "delete": [3, 4]}[then]
    assert sorted(seqs(rows_of(reader, units))) == expected
    reader.commit()
    assert table.consumers() == {"c": table.latest_snapshot().id + 1}


@pytest.mark.parametrize("consumer_id", [None, "c1"])
def test_from_snapshot_on_an_expired_id_raises(five: at.Table, consumer_id: str | None) -> None:
    """With a consumer id too (found by a docs-only hunt, which was told to "use a consumer
    id" while it had one): the message says what a consumer id keeps, and nothing is saved."""
    five.expire_snapshots(retain_min=2, older_than_ms=int(time.time() * 1000) + 1000)
    assert five.snapshots()[0].id == 4
    with pytest.raises(at.SnapshotExpiredError) as raised:
        five.stream(mode="from-snapshot", snapshot_id=2, consumer_id=consumer_id)
    message = str(raised.value)
    assert "start at a retained snapshot" in message
    assert "consumer id keeps what a reader needs only from the position it first saves" in message
    assert "use a consumer id" not in message
    assert five.consumers() == {}


def test_blocking_iteration_ends_for_bounded_streams(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    for i, watermark in enumerate([100, 200, 300, 400]):
        table.append(events(10 * i, 10), watermark=watermark)
    reader = table.stream(mode="from-snapshot", snapshot_id=1, bounded_watermark=250)
    rows = [row for batch in reader for row in batch.to_pylist()]  # returns: bounded
    assert sorted(r["seq"] for r in rows) == list(range(20))
    assert reader.finished
    # a watermark exactly at the bound is still read
    exact = table.stream(mode="from-snapshot", snapshot_id=1, bounded_watermark=300)
    assert [u.snapshot_id for u in drain(exact)] == [1, 2, 3]
    # the full phase ends at once if its snapshot is already past the bound
    assert drain(table.stream(bounded_watermark=50)) == []


def test_compacted_full_starts_from_the_latest_compaction(uri: str) -> None:
    table = at.create_table(
        uri, EVENTS, options={"bucket": 2, "bucket-key": "key", "write-only": True}
    )
    for i in range(4):
        append_spaced(table, events(10 * i, 10))
    compacted = table.compact(full=True)
    assert compacted is not None and compacted.id == 5
    append_spaced(table, events(40, 10))
    reader = table.stream(mode="compacted-full")
    units = drain(reader)
    assert [(u.snapshot_id, u.full) for u in units] == [(5, True), (6, False)]
    rows = rows_of(reader, units)
    assert sorted(seqs(rows)) == list(range(50))
    # the compacted full unit still delivers each bucket in write order
    per_key: dict[object, list[int]] = {}
    for row in rows_of(reader, units[:1]):
        per_key.setdefault(row["key"], []).append(int(row["seq"]))  # type: ignore[call-overload]
    for values in per_key.values():
        assert values == sorted(values)
    # without any compaction it reads the latest snapshot whole
    plain = at.create_table(uri + "-plain", EVENTS, options={"write-only": True})
    append_spaced(plain, events(0, 3))
    assert [(u.snapshot_id, u.full) for u in drain(plain.stream(mode="compacted-full"))] == [
        (1, True)
    ]
