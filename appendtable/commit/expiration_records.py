"""Expiration records: which snapshot held each id that an expiration removed.

A snapshot id may be held by two snapshots over time: a commit that stalled past the
retention can publish under an id that had already expired (``Committer._in_log``). A commit
that has just published tells the two cases apart by its successor's ``parent_nonce`` while the
successor exists; once it has expired too, its expiration record still says it.

Guarantees: an expiration by this version writes its record (``snapshot/expired/``, a new
name, durable) before it deletes the first of its snapshots, so a snapshot file it removed has
a record until the record is pruned; a record names the nonce and parent nonce the expiration
read for each id. Records are small and are pruned by later expirations once older than
``RECORD_RETENTION_MS`` (by the pruning process's clock) and below the earliest snapshot; a
commit finding no record (pruned, or the expiration was by an older version) cannot tell, and
says so (``CommitStateUnknownError``) rather than guess.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping

from appendtable.errors import ObjectNotFoundError, StorageError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import ExpiredSnapshots
from appendtable.storage import Storage

__all__ = [
    "PRUNE_EVERY",
    "RECORD_RETENTION_MS",
    "prune_records",
    "recorded_parents",
    "record_expiration",
]

#: How long a record is kept (it matters only to a commit checking the log right after it
#: published, and to one that stalled past the retention before publishing).
RECORD_RETENTION_MS = 60 * 60 * 1000
#: An expiration prunes old records when the earliest snapshot id passes a multiple of this
#: (a listing of the records every few hundred expired snapshots, not at every expiration).
PRUNE_EVERY = 256


def record_expiration(storage: Storage, snapshots: Mapping[int, tuple[str, str]]) -> None:
    """Durably record that ``snapshots`` (id -> (nonce, parent nonce)) are about to be
    deleted."""
    if not snapshots:
        return
    now_ms = int(time.time() * 1000)
    first, last = min(snapshots), max(snapshots)
    path = layout.expiration_record_path(first, last, now_ms, uuid.uuid4().hex)
    record = ExpiredSnapshots(
        time_ms=now_ms,
        nonces={str(i): nonce for i, (nonce, _) in snapshots.items()},
        parent_nonces={str(i): parent for i, (_, parent) in snapshots.items()},
    )
    storage.ensure_parent(path)
    storage.create(path, codec.encode(record, codec.Kind.EXPIRED_SNAPSHOTS))
    storage.sync_names([path])


def recorded_parents(storage: Storage, snapshot_id: int) -> set[str]:
    """The parent nonces that expiration records name for ``snapshot_id`` (one per snapshot
    that held the id and expired; empty: no record names it)."""
    parents: set[str] = set()
    for path, (first, last, _) in _listed(storage):
        if not first <= snapshot_id <= last:
            continue
        try:
            data = storage.read(path)
        except ObjectNotFoundError:
            continue  # pruned meanwhile
        record = codec.decode(data, ExpiredSnapshots, codec.Kind.EXPIRED_SNAPSHOTS, path)
        if str(snapshot_id) in record.parent_nonces:
            parents.add(record.parent_nonces[str(snapshot_id)])
    return parents


def prune_records(storage: Storage, *, earliest: int, now_ms: int) -> list[str]:
    """Delete the records older than ``RECORD_RETENTION_MS`` whose snapshots all lie below
    ``earliest``; the paths deleted."""
    pruned: list[str] = []
    for path, (_, last, time_ms) in _listed(storage):
        if last >= earliest or now_ms - time_ms < RECORD_RETENTION_MS:
            continue
        try:
            storage.delete(path)
        except StorageError:
            continue  # the next pruning tries again
        pruned.append(path)
    return pruned


def _listed(storage: Storage) -> Iterator[tuple[str, tuple[int, int, int]]]:
    """Each record's path and (first id, last id, time ms), from its name."""
    for name in storage.listnames(layout.EXPIRED_DIR):
        span = layout.expiration_record_span(name)
        if span is not None:
            yield f"{layout.EXPIRED_DIR}/{name.rsplit('/', 1)[-1]}", span
