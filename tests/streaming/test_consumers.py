"""Consumer ids: atomic progress, exact resumption, expiration fencing, abandoned consumers."""

from __future__ import annotations

import time

import msgspec
import pytest

import appendtable as at
from appendtable.metadata import codec
from appendtable.metadata.models import ConsumerState
from tests.helpers.data import EVENTS, events
from tests.streaming.helpers import drain, rows_of, seqs


def test_restart_resumes_at_the_committed_position(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    reader = table.stream(mode="latest", consumer_id="billing")
    for i in range(3):
        table.append(events(i * 10, 10))
    first = reader.poll()
    assert first is not None
    got = seqs(rows_of(reader, [first]))
    reader.commit()
    second = reader.poll()  # taken but never committed: the reader "dies" here
    assert second is not None

    restarted = at.open_table(uri).stream(consumer_id="billing")
    assert restarted.position == at.StreamPosition(2, False)
    units = drain(restarted)
    got += seqs(rows_of(restarted, units))
    assert sorted(got) == list(range(30))  # no row lost, none repeated
    restarted.commit()
    assert table.consumers() == {"billing": 4}


def test_commit_mid_unit_during_iteration_redelivers_that_unit(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    for i in range(3):
        table.append(events(i * 10, 10))
    reader = table.stream(mode="from-snapshot-full", snapshot_id=3, consumer_id="c")
    iterator = reader.batches(timeout=0.05)
    first = next(iterator)  # one of three files of the full unit
    reader.commit()  # mid-unit: the position stays before the unit
    assert table.consumers() == {"c": 3}
    rest = list(iterator)
    assert sum(b.num_rows for b in rest) + first.num_rows == 30
    reader.commit()
    assert table.consumers() == {"c": 4}
    resumed = at.open_table(uri).stream(consumer_id="c")
    assert resumed.position == at.StreamPosition(4, False)


def test_commit_right_after_a_units_last_batch_saves_the_unit(uri: str) -> None:
    """``for batch in reader: process(batch); reader.commit()``: the commit after the last
    batch of a unit saved the position before it (it moved only when the next batch was
    asked for), so a restart delivered the unit again (found by a user)."""
    table = at.create_table(uri, EVENTS)
    for i in range(3):
        table.append(events(i * 10, 10))  # snapshot 3 holds three files
    table.append(events(30, 10))  # 4
    reader = table.stream(mode="from-snapshot-full", snapshot_id=3, consumer_id="c")
    iterator = iter(reader)
    taken = 0
    while taken < 30:  # exactly the full unit of snapshot 3
        taken += next(iterator).num_rows
        if taken < 30:
            assert reader.position == at.StreamPosition(3, True)  # mid-unit
    assert taken == 30
    assert reader.position == at.StreamPosition(4, False)
    reader.commit()
    resumed = at.open_table(uri).stream(consumer_id="c")
    assert sorted(seqs(rows_of(resumed, drain(resumed)))) == list(range(30, 40))


def test_a_new_consumer_registers_at_once_and_fences_expiration(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    for i in range(6):
        table.append(events(i, 1))
    reader = table.stream(mode="from-snapshot", snapshot_id=3, consumer_id="slow")
    assert table.consumers() == {"slow": 3}
    future = int(time.time() * 1000) + 60_000
    result = table.expire_snapshots(retain_min=1, older_than_ms=future)
    assert result.expired_snapshots == [1, 2]
    assert [s.id for s in table.snapshots()] == [3, 4, 5, 6]
    assert sorted(seqs(rows_of(reader, drain(reader)))) == [2, 3, 4, 5]
    reader.commit()
    assert table.expire_snapshots(retain_min=1, older_than_ms=future).expired_snapshots == [
        3,
        4,
        5,
    ]


def test_abandoned_consumers_expire(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"consumer.expiration-time": "50 ms"})
    for i in range(4):
        table.append(events(i, 1))
    table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="gone")
    time.sleep(0.1)
    result = table.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1000)
    assert result.expired_consumers == ["gone"]
    assert result.expired_snapshots == [1, 2, 3]
    assert table.consumers() == {}


def test_positioned_reader_on_an_expired_snapshot_raises_with_a_hint(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 1))
    reader = table.stream(mode="latest")  # at snapshot 2, without a consumer id
    for i in range(1, 5):
        table.append(events(i, 1))
    table.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1000)
    with pytest.raises(at.SnapshotExpiredError, match="consumer id"):
        reader.poll()


@pytest.mark.parametrize("removal", ["delete_consumer", "consumer.expiration-time"])
def test_a_consumer_whose_record_was_removed_is_told_so(uri: str, removal: str) -> None:
    """A reader with a consumer id whose position expired was told to "use a consumer id":
    the message says its record was removed and how to go on."""
    options = {"consumer.expiration-time": "1 ms"} if removal != "delete_consumer" else {}
    table = at.create_table(uri, EVENTS, options=options)
    table.append(events(0, 1))
    reader = table.stream(mode="latest", consumer_id="billing")  # registered at snapshot 2
    for i in range(1, 5):
        table.append(events(i, 1))
    if removal == "delete_consumer":
        table.delete_consumer("billing")
    time.sleep(0.01)
    result = table.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1000)
    assert 2 in result.expired_snapshots
    with pytest.raises(at.SnapshotExpiredError) as raised:
        reader.poll()
    message = str(raised.value)
    assert "consumer 'billing' no longer kept it" in message
    assert "use a consumer id" not in message


@pytest.mark.parametrize("writer_handle", ["reader's", "another"])
@pytest.mark.parametrize("idle_polls", [0, 1, 5, 40])
def test_a_reader_waiting_when_its_next_snapshot_expires_raises_at_every_poll(
    uri: str, idle_polls: int, writer_handle: str
) -> None:
    """Found by a docs-only hunt: a reader that had polled while waiting (so had missed its
    next snapshot before) checked for expiration only at every 16th miss, so when that
    snapshot was written and expired between two polls, the next 15 polls returned None, and
    ``appendtable tail --idle-exit`` ended with status 0 having delivered nothing more. The
    error comes at every poll until the reader is moved, whatever came before."""
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    table.append(events(0, 1))
    reader = table.stream(mode="from-snapshot", snapshot_id=1)
    assert reader.poll() is not None
    for _ in range(idle_polls):
        assert reader.poll() is None  # waiting for snapshot 2
    writer = table if writer_handle == "reader's" else at.open_table(uri)  # as another process
    for i in range(1, 4):
        writer.append(events(i, 1))
    writer.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1000)
    for _ in range(20):
        with pytest.raises(at.SnapshotExpiredError, match="snapshot 2, which has expired"):
            reader.poll()
    assert reader.position.next_snapshot == 2
    reader.seek(at.StreamPosition(4, full=True))  # moved on: reads what is retained
    unit = reader.poll()
    assert unit is not None and unit.snapshot_id == 4


def test_commit_needs_a_consumer_id(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    with pytest.raises(at.InvalidOptionError, match="consumer id"):
        table.stream().commit()
    with pytest.raises(at.InvalidOptionError, match="invalid consumer id"):
        table.stream(consumer_id="../escape")


def test_positions_round_trip_for_engines(uri: str) -> None:
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 3))
    reader = table.stream(mode="from-snapshot-full", snapshot_id=1)
    saved = at.StreamPosition.from_json(reader.checkpoint().to_json())
    assert saved == at.StreamPosition(1, True)
    drain(reader)
    table.append(events(3, 3))
    again = table.stream(position=saved)
    assert sorted(seqs(rows_of(again, drain(again)))) == list(range(6))
    with pytest.raises(at.InvalidArgumentError, match="text: not a stream position"):
        at.StreamPosition.from_json("{}")


@pytest.mark.parametrize("name", ["", " ", "a b", "-x"])
def test_an_empty_or_invalid_consumer_id_is_refused_not_taken_for_none(uri: str, name: str) -> None:
    """Found by a docs-only hunt: ``consumer_id=""`` (``tail --consumer-id "$UNSET"``) read
    like no consumer id, so every restart delivered the whole table again."""
    table = at.create_table(uri, EVENTS)
    table.append(events(0, 1))
    with pytest.raises(at.InvalidOptionError, match="consumer id"):
        table.stream(consumer_id=name)
    assert table.consumers() == {}


def _bucket_of_each_seq(table: at.Table, buckets: int) -> dict[int, int]:
    """Which bucket each row is in, from one full read per bucket."""
    found: dict[int, int] = {}
    for bucket in range(buckets):
        reader = table.stream(mode="from-snapshot-full", snapshot_id=1, buckets=[bucket])
        for seq in seqs(rows_of(reader, drain(reader))):
            found[seq] = bucket
    return found


@pytest.mark.parametrize(
    ("first", "then"),
    [([0], [0, 1]), ([0], None), (None, [1]), ([0, 2], [2]), ([1], [0])],
)
def test_a_consumer_resumed_with_other_buckets_is_refused_naming_both(
    uri: str, first: list[int] | None, then: list[int] | None
) -> None:
    """Found by a docs-only hunt: a consumer id reused with other buckets resumed at its saved
    snapshot, so the rows the new buckets had received before were skipped, silently, and
    the lag said it was caught up. Its progress holds for the buckets it read: other buckets
    are refused (nothing saved), the same ones continue, and ignore-progress starts again."""
    table = at.create_table(uri, EVENTS, options={"bucket": 3, "bucket-key": "key"})
    table.append(events(0, 60))
    reader = table.stream(mode="from-snapshot-full", snapshot_id=1, consumer_id="c", buckets=first)
    got = seqs(rows_of(reader, drain(reader)))
    reader.commit()
    saved = table.consumers()
    table.append(events(60, 60))

    def described(buckets: list[int] | None) -> str:
        if buckets is None:
            return "every bucket"
        return ("bucket " if len(buckets) == 1 else "buckets ") + ", ".join(map(str, buckets))

    with pytest.raises(at.InvalidArgumentError) as refused:
        table.stream(consumer_id="c", buckets=then)
    message = str(refused.value)
    assert "consumer 'c'" in message and f"reads {described(first)} and is at snapshot 2" in message
    assert f"with {described(then)} would skip" in message
    assert table.consumers() == saved  # nothing saved by the refused reader

    same = at.open_table(uri).stream(consumer_id="c", buckets=first)
    got += seqs(rows_of(same, drain(same)))
    where = _bucket_of_each_seq(table, 3)
    assert sorted(got) == sorted(s for s in range(120) if first is None or where[s] in first)

    again = table.stream(
        mode="from-snapshot-full",
        snapshot_id=1,
        consumer_id="c",
        buckets=then,
        options={"consumer.ignore-progress": "true"},
    )
    expected = sorted(s for s in range(120) if then is None or where[s] in then)
    assert sorted(seqs(rows_of(again, drain(again)))) == expected
    again.commit()
    resumed = table.stream(consumer_id="c", buckets=then)  # now recorded with the new buckets
    assert resumed.poll() is None


def test_a_consumer_saved_before_buckets_were_recorded_resumes_with_any(uri: str) -> None:
    """Progress files written before the selection was recorded carry none: nothing to check."""
    table = at.create_table(uri, EVENTS, options={"bucket": 2, "bucket-key": "key"})
    for i in range(3):
        table.append(events(i * 10, 10))
    old = b'{"next_snapshot": 3, "time_ms": 1, "full": false}'
    storage = table._state.storage
    storage.write(
        "consumer/consumer-old",
        codec.encode(msgspec.json.decode(old, type=ConsumerState), codec.Kind.CONSUMER),
    )
    reader = table.stream(consumer_id="old", buckets=[1])
    assert reader.position == at.StreamPosition(3, False)


def test_the_lag_of_a_consumer_of_some_buckets_counts_its_buckets_only(uri: str) -> None:
    table = at.create_table(uri, EVENTS, options={"bucket": 3, "bucket-key": "key"})
    table.append(events(0, 40))
    reader = table.stream(mode="from-snapshot-full", snapshot_id=1, consumer_id="c", buckets=[0, 2])
    drain(reader)
    reader.commit()
    table.append(events(40, 90))
    everyone = table.stream(mode="from-snapshot-full", snapshot_id=1, consumer_id="all")
    everyone.commit()  # at snapshot 1, full: behind by all 130 rows
    where = _bucket_of_each_seq(table, 3)
    lag = table.consumer_lag().to_pylist()
    rows = {(r["consumer"], r["bucket"]): r["rows_behind"] for r in lag}
    assert rows == {
        ("all", None): 130,
        ("c", 0): sum(1 for s in range(40, 130) if where[s] == 0),
        ("c", 2): sum(1 for s in range(40, 130) if where[s] == 2),
    }


def test_the_lag_past_a_delete_is_not_called_exact(uri: str) -> None:
    """Found by a docs-only hunt: rows_behind counted rows a delete had removed since they
    were appended, still calling itself exact; the stream then delivered fewer. The count
    stays (telling would mean reading the files), and ``exact`` says it is an upper bound."""
    table = at.create_table(uri, EVENTS, options={"write-only": True})
    table.append(events(0, 10))
    reader = table.stream(mode="from-snapshot-full", snapshot_id=1, consumer_id="c")
    drain(reader)
    reader.commit()  # at snapshot 2
    table.append(events(10, 10))
    [row] = table.consumer_lag().to_pylist()
    assert (row["rows_behind"], row["exact"]) == (10, True)
    table.delete([("seq", "<", 13)])  # 3 of the rows behind, and 10 already read
    [row] = table.consumer_lag().to_pylist()
    assert (row["rows_behind"], row["exact"]) == (10, False)
    resumed = table.stream(consumer_id="c")
    assert sorted(seqs(rows_of(resumed, drain(resumed)))) == list(range(13, 20))
    resumed.commit()
    [row] = table.consumer_lag().to_pylist()
    assert (row["rows_behind"], row["exact"], row["status"]) == (0, True, "caught-up")
