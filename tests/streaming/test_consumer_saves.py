"""How a consumer's progress is saved: each save replaces the record only if it still holds
the version read (or written) just before, and saves again when another writer changed it in
between (another reader with the same id, ``delete_consumer``, a save delivered late); one
that keeps changing under every save is reported, not overwritten blindly. Late delivery
itself, on the object stores, is in tests/cloud/test_consumer_late_save.py."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import appendtable as at
from appendtable.commit.consumers import ConsumerStore
from appendtable.errors import CommitConflictError
from appendtable.metadata import codec
from appendtable.metadata.models import ConsumerState
from appendtable.storage.local import LocalStorage
from tests.helpers.data import EVENTS, events
from tests.streaming.helpers import drain, rows_of, seqs


def _rival(rivals: int) -> ConsumerState:
    return ConsumerState(next_snapshot=1, time_ms=rivals)  # (each save differs from the last)


class _Rivalled(LocalStorage):
    """Local disk where another writer saves the record between our version read and our
    write, ``rivals`` times."""

    def __init__(self, root: str, rivals: int) -> None:
        super().__init__(root)
        self.rivals = rivals

    def _replace_if_unchanged(self, path: str, data: bytes, version: str | None) -> str | None:
        if self.rivals:
            self._write(path, codec.encode(_rival(self.rivals), codec.Kind.CONSUMER))
            self.rivals -= 1
        return super()._replace_if_unchanged(path, data, version)


@pytest.mark.parametrize("rivals", [1, 3, 7])
def test_a_save_raced_by_another_writer_saves_again_and_lands(tmp_path: Path, rivals: int) -> None:
    storage = _Rivalled(str(tmp_path), 0)
    store = ConsumerStore(storage)
    store.put("c", ConsumerState(next_snapshot=5, time_ms=2))
    storage.rivals = rivals
    mine = ConsumerState(next_snapshot=9, time_ms=3)
    store.put("c", mine)  # the rival's record, then ours
    assert store.get("c") == mine and storage.rivals == 0


def test_a_record_changing_under_every_save_is_reported(tmp_path: Path) -> None:
    store = ConsumerStore(_Rivalled(str(tmp_path), rivals=100))
    with pytest.raises(CommitConflictError, match=r"consumer 'c'.*consumer-c.*same id"):
        store.put("c", ConsumerState(next_snapshot=9, time_ms=3))
    assert store.get("c") == _rival(100 - 7)  # the last of the 8 rivals


def test_a_consumer_deleted_elsewhere_is_registered_again_by_its_reader(tmp_path: Path) -> None:
    store = ConsumerStore(LocalStorage(str(tmp_path)))
    store.put("c", ConsumerState(next_snapshot=5, time_ms=2))
    ConsumerStore(LocalStorage(str(tmp_path))).delete("c")  # delete_consumer, elsewhere
    mine = ConsumerState(next_snapshot=9, time_ms=3)
    store.put("c", mine)  # no snapshot expired: nothing is lost by saving it again
    assert store.get("c") == mine


# ---- through the public API: two readers with one id, a removed consumer -------------------


def _seqs_of(reader: at.StreamReader) -> list[int]:
    return seqs(rows_of(reader, drain(reader)))


def test_a_stale_reader_with_the_same_id_cannot_move_the_consumer_back(tmp_path: Path) -> None:
    """Found by a docs-only hunt: an old reader (stalled) committed after a restarted one with
    the same id, moving the consumer back; the next restart delivered rows again."""
    table = at.create_table(str(tmp_path / "t"), EVENTS)
    table.append(events(0, 10))
    old = table.stream(consumer_id="c")
    assert _seqs_of(old) == list(range(10))
    old.commit()
    table.append(events(10, 10))
    assert old.poll() is not None  # read, not committed: then it stalls
    new = table.stream(consumer_id="c")
    table.append(events(20, 10))
    assert _seqs_of(new) == list(range(10, 30))
    new.commit()
    assert table.consumers() == {"c": 4}
    with pytest.raises(CommitConflictError, match=r"consumer 'c'.*later position.*snapshot 4"):
        old.commit()
    assert table.consumers() == {"c": 4}
    table.append(events(30, 10))
    assert _seqs_of(table.stream(consumer_id="c")) == list(range(30, 40))


def test_a_reader_of_a_removed_consumer_does_not_bring_it_back(tmp_path: Path) -> None:
    """A reader's commit after ``delete_consumer`` (or expiration of an idle consumer) created
    the record again, at a position whose snapshots may have expired meanwhile: every reader
    created with the id then failed on an expired snapshot."""
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    table.append(events(0, 10))
    reader = table.stream(consumer_id="c")
    assert _seqs_of(reader) == list(range(10))
    reader.commit()
    table.delete_consumer("c")
    for n in range(1, 4):
        table.append(events(n * 10, 10))
    now_ms = int(dt.datetime.now().timestamp() * 1000)
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=now_ms + 60_000)
    assert [s.id for s in table.snapshots()] == [4]
    with pytest.raises(CommitConflictError, match=r"consumer 'c' was removed.*has expired"):
        reader.commit()
    assert table.consumers() == {}
    again = table.stream(consumer_id="c")  # starts from its start mode: the latest in full
    assert _seqs_of(again) == list(range(40))


def test_a_reader_registers_its_consumer_again_while_its_position_is_retained(
    tmp_path: Path,
) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    table.append(events(0, 10))
    reader = table.stream(consumer_id="c")
    assert _seqs_of(reader) == list(range(10))
    reader.commit()
    table.delete_consumer("c")  # (or removed by consumer.expiration-time while idle)
    table.append(events(10, 10))
    assert _seqs_of(reader) == list(range(10, 20))
    reader.commit()
    assert table.consumers() == {"c": 3}


def test_a_reader_may_rewind_its_own_consumer(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), EVENTS)
    table.append(events(0, 10))
    reader = table.stream(consumer_id="c")
    start = reader.checkpoint()
    drain(reader)
    reader.commit()
    reader.commit(start)  # no one else saved since: a deliberate rewind
    assert table.consumers() == {"c": start.next_snapshot}


def test_a_consumer_saved_at_an_expired_snapshot_is_named_as_such(tmp_path: Path) -> None:
    """The error said the consumer's record had been removed and that a reader created again
    would start from its start mode; but the record was there, and every new reader failed."""
    table = at.create_table(str(tmp_path / "t"), EVENTS, options={"write-only": True})
    for n in range(4):
        table.append(events(n * 10, 10))
    now_ms = int(dt.datetime.now().timestamp() * 1000)
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=now_ms + 60_000)
    ConsumerStore(LocalStorage(table.uri)).put(
        "c", ConsumerState(next_snapshot=2, time_ms=now_ms), reset=True
    )  # as a writer that saved after expiration had passed it
    advice = r"holds a position \(next snapshot 2\) that has expired.*delete_consumer\('c'\)"
    with pytest.raises(at.SnapshotExpiredError, match=advice):
        reader = table.stream(consumer_id="c")
        reader.poll()
