"""Expiration records: which snapshot held each id that an expiration removed.

A snapshot id may be held by two snapshots over time: a commit that stalled past the
retention can publish under an id that had already expired (``Committer._in_log``). A commit
that has just published tells the two cases apart by its parent's and its successor's
``parent_nonce`` while they exist; once both have expired too, only these records are left.

Guarantees: an expiration writes its record (``snapshot/expired/``, a new name, durable)
before it deletes the first of its snapshots, so anyone who sees a snapshot file gone finds
its record; a record names the nonce the expiration read for each id. Records are small and
are pruned by later expirations once older than ``RECORD_RETENTION_MS``: a commit stalled
longer than that between publishing and checking cannot tell, and says so
(``CommitStateUnknownError``) rather than guess.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from appendtable.errors import ObjectNotFoundError, StorageError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import ExpiredSnapshots
from appendtable.storage import Storage

__all__ = [
    "PRUNE_EVERY",
    "RECORD_RETENTION_MS",
    "holders_of",
    "prune_records",
    "record_expiration",
]

#: How long a record is kept (it matters only to a commit checking the log right after it
#: published, and to one that stalled past the retention before publishing).
RECORD_RETENTION_MS = 60 * 60 * 1000
#: An expiration prunes old records when the earliest snapshot id passes a multiple of this
#: (a listing of the records every few hundred expired snapshots, not at every expiration).
PRUNE_EVERY = 256


def record_expiration(storage: Storage, nonces: Mapping[int, str]) -> None:
    """Durably record that the snapshots ``nonces`` (id -> nonce) are about to be deleted."""
    if not nonces:
        return
    now_ms = int(time.time() * 1000)
    path = layout.expiration_record_path(min(nonces), max(nonces), now_ms, uuid.uuid4().hex)
    record = ExpiredSnapshots(time_ms=now_ms, nonces={str(i): n for i, n in nonces.items()})
    storage.ensure_parent(path)
    storage.create(path, codec.encode(record, codec.Kind.EXPIRED_SNAPSHOTS))
    storage.sync_names([path])


def holders_of(storage: Storage, snapshot_id: int) -> set[str]:
    """The nonces that expiration records name for ``snapshot_id`` (empty: none does)."""
    nonces: set[str] = set()
    for name in storage.listnames(layout.EXPIRED_DIR):
        span = layout.expiration_record_span(name)
        if span is None or not span[0] <= snapshot_id <= span[1]:
            continue
        path = f"{layout.EXPIRED_DIR}/{name.rsplit('/', 1)[-1]}"
        try:
            data = storage.read(path)
        except ObjectNotFoundError:
            continue  # pruned meanwhile
        record = codec.decode(data, ExpiredSnapshots, codec.Kind.EXPIRED_SNAPSHOTS, path)
        if str(snapshot_id) in record.nonces:
            nonces.add(record.nonces[str(snapshot_id)])
    return nonces


def prune_records(storage: Storage, *, earliest: int, now_ms: int) -> list[str]:
    """Delete the records older than ``RECORD_RETENTION_MS`` whose snapshots all lie below
    ``earliest``; the paths deleted."""
    pruned: list[str] = []
    for name in storage.listnames(layout.EXPIRED_DIR):
        span = layout.expiration_record_span(name)
        if span is None or span[1] >= earliest or now_ms - span[2] < RECORD_RETENTION_MS:
            continue
        path = f"{layout.EXPIRED_DIR}/{name.rsplit('/', 1)[-1]}"
        try:
            storage.delete(path)
        except StorageError:
            continue  # the next pruning tries again
        pruned.append(path)
    return pruned
