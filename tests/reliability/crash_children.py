"""The child processes of the crash tests (run in forked children, killed with SIGKILL).

``writer_child`` performs appends, compactions and expirations on a table and logs each step
durably: ``begin``/``ack`` around every append (the ack only after ``append()`` returned),
``begin``/``end`` around maintenance. With a kill point armed it installs
:class:`KillingStorage`, which SIGKILLs the process at the N-th storage call matching the point
(no hook in library code: the table is built on the storage with ``Table(TableState(...))``)
and logs ``kill <run> <point> <detail>`` first, so the parent knows which point it hit.

``reader_child`` consumes a table with a consumer id, logging every delivered row, and
``commit()``s after each unit.
"""

from __future__ import annotations

import os
import random
import signal
import time
import traceback
from typing import Any

import pyarrow as pa

import appendtable as at
from appendtable._state import TableState
from appendtable.storage import LocalStorage
from appendtable.storage.local import temp_name
from appendtable.table import Table
from tests.helpers.crash import DurableLog

WRITER_SCHEMA = pa.schema(
    [
        ("p", pa.int32()),
        ("k", pa.int64()),
        ("run", pa.int32()),
        ("n", pa.int32()),
        ("i", pa.int32()),
    ]
)
ROWS_PER_APPEND = 6

#: Kill points inside one operation; ``<phase>:<where>``.
APPEND_POINTS = (
    "append:data-file",  # one data file complete (synced), the others maybe not
    "append:data-written",  # all data files written, before the first manifest
    "append:manifests-written",  # manifests written, writing a manifest list
    "append:before-link",  # snapshot temp file written, not linked
    "append:after-link",  # snapshot published, LATEST hint not written, not acknowledged
)
COMPACT_POINTS = tuple(p.replace("append:", "compact:") for p in APPEND_POINTS)
EXPIRE_POINTS = ("expire:delete",)  # the K-th delete of an expiration


def append_rows(run: int, n: int) -> pa.Table:
    """Append ``n`` of child ``run``: rows in two partitions and (usually) both buckets."""
    return pa.table(
        {
            "p": pa.array([i % 2 for i in range(ROWS_PER_APPEND)], pa.int32()),
            "k": pa.array([run * 100_000 + n * 10 + i for i in range(ROWS_PER_APPEND)]),
            "run": pa.array([run] * ROWS_PER_APPEND, pa.int32()),
            "n": pa.array([n] * ROWS_PER_APPEND, pa.int32()),
            "i": pa.array(range(ROWS_PER_APPEND), pa.int32()),
        },
        schema=WRITER_SCHEMA,
    )


class KillingStorage(LocalStorage):
    """Local storage that SIGKILLs its own process at the ``nth`` call matching ``point``.

    ``phase`` (set by the child around each operation) is the first half of a point's name,
    so an armed ``compact:before-link`` ignores the publishes of appends."""

    def __init__(self, root: str, log: DurableLog, run: int) -> None:
        super().__init__(root, fsync=False)
        self.log = log
        self.run = run
        self.phase = "idle"
        self.point: str | None = None
        self.nth = 0
        self.seen = 0
        self.deletes = {"snapshot": 0, "other": 0}

    def arm(self, point: str, nth: int) -> None:
        self.point, self.nth, self.seen = point, nth, 0

    def _due(self, where: str) -> bool:
        """Count a call at ``<phase>:<where>``; True when it is the one to die at."""
        if self.point != f"{self.phase}:{where}":
            return False
        self.seen += 1
        return self.seen == self.nth

    def _die(self, detail: str) -> None:
        self.log.write(f"kill {self.run} {self.point} {detail}")
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # pragma: no cover - the signal is delivered first

    def _metadata(self, path: str) -> None:
        if path.startswith("manifest/"):
            if self._due("data-written"):
                self._die(path)
            if path.startswith("manifest/manifest-list-") and self._due("manifests-written"):
                self._die(path)

    def create(self, path: str, data: bytes) -> None:
        self._metadata(path)
        super().create(path, data)

    def write(self, path: str, data: bytes) -> None:
        self._metadata(path)
        super().write(path, data)

    def sync_file(self, path: str) -> None:
        super().sync_file(path)
        if path.endswith(".parquet") and self._due("data-file"):
            self._die(path)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        is_snapshot = path.startswith("snapshot/snapshot-")
        if is_snapshot and self._due("before-link"):
            temp = _write_temp_beside(self._abs(path), data)
            self._die(os.path.basename(temp))
        created = super().put_if_absent(path, data)
        if is_snapshot and self._due("after-link"):
            self._die(f"{path}:{created}")
        return created

    def delete(self, path: str) -> None:
        if self.phase == "expire":
            kind = "snapshot" if path.startswith("snapshot/") else "other"
            if self._due("delete"):
                # which deletes came before: snapshot files first, then data and metadata files
                self._die(f"{kind}:{path}:{self.deletes['snapshot']}:{self.deletes['other']}")
            self.deletes[kind] += 1
        super().delete(path)


def writer_child(uri: str, log_path: str, run: int, plan: dict[str, Any]) -> None:
    """Scripted writes on the table at ``uri`` (see the module docstring).

    ``plan``: ``mode`` "random" (loop of random operations until killed from outside) or
    "exact" (``appends`` appends, then the operation of ``point``, armed to die at its
    ``nth`` matching call; for ``expire:delete``, ``target`` picks which delete); ``seed``."""
    log = DurableLog(log_path)
    try:
        _writer(uri, log, run, plan)
    except BaseException:
        log.write(f"error {run} " + traceback.format_exc().replace("\n", "\\n"))
        raise
    log.write(f"exit {run}")


def _writer(uri: str, log: DurableLog, run: int, plan: dict[str, Any]) -> None:
    storage = KillingStorage(uri, log, run)
    table = Table(TableState(storage, at.open_table(uri)._state.schema))
    rng = random.Random(plan["seed"])
    log.write(f"start {run}")
    count = 0

    def latest() -> int:
        snapshot = table.latest_snapshot()
        return 0 if snapshot is None else snapshot.id

    def append() -> None:
        nonlocal count
        storage.phase = "append"
        log.write(f"begin {run} append {count} {latest()}")
        snapshot = table.append(append_rows(run, count))
        assert snapshot is not None
        log.write(f"ack {run} {count} {snapshot.id}")
        storage.phase = "idle"
        count += 1

    def compact(full: bool) -> None:
        storage.phase = "compact"
        log.write(f"begin {run} compact {latest()}")
        snapshot = table.compact(full=full)
        log.write(f"end {run} compact {snapshot.id if snapshot else 0}")
        storage.phase = "idle"

    def expire(retain: int) -> None:
        storage.phase = "expire"
        log.write(f"begin {run} expire {latest()}")
        result = table.expire_snapshots(
            retain_min=retain, older_than_ms=int(time.time() * 1000) + 1
        )
        log.write(f"end {run} expire {len(result.expired_snapshots)}")
        storage.phase = "idle"

    if plan["mode"] == "random":
        while True:
            roll = rng.random()
            if roll < 0.55:
                append()
            elif roll < 0.8:
                compact(full=rng.random() < 0.7)
            else:
                expire(rng.randint(1, 5))

    point: str = plan["point"]
    for _ in range(plan["appends"]):
        append()
    if point.startswith("append:"):
        storage.arm(point, plan["nth"])
        append()
    elif point.startswith("compact:"):
        storage.arm(point, plan["nth"])
        compact(full=True)
    else:
        compact(full=True)  # leaves DELETE entries, so expiring past it deletes data files
        append()
        append()
        preview = table.expire_snapshots(
            retain_min=2, older_than_ms=int(time.time() * 1000) + 1, dry_run=True
        )
        snapshots = len(preview.expired_snapshots)
        files = len(preview.deleted_data_files) + len(preview.deleted_metadata_files)
        # "snapshots": die mid-way through the snapshot files; "between": after the last
        # snapshot file, before the first data/metadata file; "files": among the files.
        nth = {
            "snapshots": rng.randint(1, max(1, snapshots)),
            "between": snapshots + 1,
            "files": snapshots + 1 + rng.randint(1, max(1, files - 1)),
        }[plan["target"]]
        storage.arm(point, nth)
        expire(2)


def _write_temp_beside(final: str, data: bytes) -> str:
    """A temporary file beside ``final``, named as the storage names them, holding ``data``
    (what a write leaves when it dies before its rename or link)."""
    os.makedirs(os.path.dirname(final), exist_ok=True)
    temp = os.path.join(os.path.dirname(final), temp_name(os.path.basename(final)))
    with open(temp, "wb") as handle:
        handle.write(data)
    return temp


class CommitKillingStorage(LocalStorage):
    """Local storage that SIGKILLs its process inside its ``nth`` write of consumer progress:
    the temp file is written, the rename that would make it the consumer's state is not."""

    def __init__(self, root: str, log: DurableLog, run: int, nth: int) -> None:
        super().__init__(root, fsync=False)
        self.log, self.run, self.nth = log, run, nth

    def _write(self, path: str, data: bytes) -> None:
        """(The hook under every write, ``write`` and ``replace_if_unchanged`` alike.)"""
        if path.startswith("consumer/"):
            self.nth -= 1
            if self.nth == 0:
                temp = _write_temp_beside(self._abs(path), data)
                self.log.write(f"kill {self.run} consumer-commit {os.path.basename(temp)}")
                os.kill(os.getpid(), signal.SIGKILL)
        super()._write(path, data)


def reader_child(
    uri: str,
    log_path: str,
    run: int,
    consumer_id: str,
    processing_s: float,
    die_in_consumer_write: int = 0,
) -> None:
    """Read the table with ``consumer_id`` until no unit is left; per unit log ``unit``, one
    ``row <run> <snapshot> <seq>`` per row, ``delivered``, then ``commit()`` and log
    ``committed``. ``processing_s`` is slept between delivering and committing a unit. With
    ``die_in_consumer_write`` = N, die inside the N-th write of the consumer's progress."""
    log = DurableLog(log_path)
    try:
        table = at.open_table(uri)
        if die_in_consumer_write:
            storage = CommitKillingStorage(uri, log, run, die_in_consumer_write)
            table = Table(TableState(storage, table._state.schema))
        reader = table.stream(consumer_id=consumer_id, mode="from-snapshot", snapshot_id=1)
        log.write(f"start {run} {reader.position.next_snapshot}")
        while True:
            unit = reader.poll()
            if unit is None:
                break
            log.write(f"unit {run} {unit.snapshot_id}")
            for batch in reader.read(unit):
                seqs = batch.column("seq").to_pylist()
                log.write(*(f"row {run} {unit.snapshot_id} {seq}" for seq in seqs))
            log.write(f"delivered {run} {unit.snapshot_id}")
            time.sleep(processing_s)
            reader.commit()
            log.write(f"committed {run} {unit.snapshot_id}")
    except BaseException:
        log.write(f"error {run} " + traceback.format_exc().replace("\n", "\\n"))
        raise
    log.write(f"done {run}")
