"""How a consumer's progress is saved: each save replaces the record only if it still holds
the version read (or written) just before, and saves again when another writer changed it in
between (another reader with the same id, ``delete_consumer``, a save delivered late); one
that keeps changing under every save is reported, not overwritten blindly. Late delivery
itself, on the object stores, is in tests/cloud/test_consumer_late_save.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from appendtable.commit.consumers import ConsumerStore
from appendtable.errors import CommitConflictError
from appendtable.metadata import codec
from appendtable.metadata.models import ConsumerState
from appendtable.storage.local import LocalStorage


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


def test_a_deleted_consumer_is_saved_again(tmp_path: Path) -> None:
    store = ConsumerStore(LocalStorage(str(tmp_path)))
    store.put("c", ConsumerState(next_snapshot=5, time_ms=2))
    ConsumerStore(LocalStorage(str(tmp_path))).delete("c")  # delete_consumer, elsewhere
    mine = ConsumerState(next_snapshot=9, time_ms=3)
    store.put("c", mine)
    assert store.get("c") == mine
