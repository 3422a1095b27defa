"""Rollback pins: a rollback keeps its target's files from an expiration running meanwhile.

A rollback re-adds data files that the history after its target removed. An expiration that
planned before the rollback landed counts those files as referenced by no retained snapshot,
and would delete them under the new snapshot (found by a user: three processes appending,
rolling back and expiring left the latest snapshot pointing at deleted files).

Protocol (the tags' one, see ``expire``): the rollback writes a pin naming its target
(``snapshot/pinned/``, a new name, durable), then checks that the target's snapshot file is
still there (else ``SnapshotExpiredError``, nothing committed), or for a rollback to a tag
(whose files the tag keeps only until it is deleted) that the tag still names it, commits,
and removes the pin.
An expiration, after deleting its snapshot files and before deleting any other file, reads the
pins and the latest snapshot's rollbacks again: it deletes no data or metadata file at all when
a pin names a snapshot that is no longer retained (expired by it, or by an earlier expiration:
the snapshots it expires may hold that one's files too; they are left to orphan removal), and
keeps the files live in a rollback that landed meanwhile. Orphan removal, after reading the live
set, reads the pins (deleting no data file or manifest while one names a snapshot no longer
retained), then counts the snapshots committed since. A purge deletes no deletion vector or
delete record while any pin exists (it reads the pins after its expiration, and the references
after them).

Why that suffices: a rollback that found its target still there wrote its pin before the
target was deleted; a reader of the live set that did not count the target (it was gone)
reads the pins later still, and either finds the pin, or the rollback had already landed and
the snapshots it reads next (the latest snapshot's rollbacks, the snapshots committed since)
hold its files. A pin left by a rollback that crashed is removed by a later expiration once older
than ``PIN_RETENTION_MS`` (by that process's clock); until then it only delays reclaiming
space.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from appendtable.errors import StorageError
from appendtable.metadata import layout
from appendtable.storage import Storage

__all__ = ["PIN_RETENTION_MS", "pinned", "pinned_ids"]

#: A pin older than this is a crashed rollback's: expiration removes it.
PIN_RETENTION_MS = 60 * 60 * 1000


@contextmanager
def pinned(storage: Storage, snapshot_id: int) -> Iterator[None]:
    """Pin ``snapshot_id`` for the duration of the block (durably written before the block
    runs, removed after it, whatever it raised)."""
    path = layout.pin_path(snapshot_id, int(time.time() * 1000), uuid.uuid4().hex)
    storage.ensure_parent(path)
    storage.create(path, f"{snapshot_id}\n".encode("ascii"))
    storage.sync_names([path])
    try:
        yield
    finally:
        try:
            storage.delete(path)
        except StorageError:
            pass  # removed by expiration once old: it only delays reclaiming space


def pinned_ids(storage: Storage, *, now_ms: int, prune: bool = True) -> set[int]:
    """The snapshot ids that rollbacks in progress pin. Pins older than ``PIN_RETENTION_MS``
    (crashed rollbacks') pin nothing, and are deleted on the way (unless not ``prune``: a dry
    run changes nothing)."""
    pinned: set[int] = set()
    for path, (snapshot_id, time_ms) in _listed(storage):
        if now_ms - time_ms < PIN_RETENTION_MS:
            pinned.add(snapshot_id)
            continue
        if not prune:
            continue
        try:
            storage.delete(path)
        except StorageError:
            continue  # the next expiration tries again
    return pinned


def _listed(storage: Storage) -> Iterator[tuple[str, tuple[int, int]]]:
    """Each pin's path and (snapshot id, time ms), from its name."""
    for name in storage.listnames(layout.PINNED_DIR):
        span = layout.pin_span(name)
        if span is not None:
            yield f"{layout.PINNED_DIR}/{name.rsplit('/', 1)[-1]}", span
