"""Rows a stream must not deliver because a delete committed after its unit removed them.

A stream unit of snapshot ``U`` (the rows an APPEND added, or a whole snapshot) is read from
the files ``U`` lists, which a later delete does not change (it re-adds a file with a vector,
or rewrites it, in a new snapshot; a compaction may even have merged the file's rows into
another since). So the rule is stated on rows, not positions: a DELETE snapshot ``D`` names a
record of its filter and of its base snapshot ``B`` (the latest snapshot when it planned; it
deleted exactly the rows of ``B`` matching the filter). When a stream reads a file ``f`` of
unit ``U``, it drops the rows of ``f`` matching the filter of every ``D > U`` such that

* ``B >= U``: every row of ``U`` was a row of ``B`` (rows appended after ``U`` are in other
  units), so the rows of ``f`` matching the filter are the ones ``D`` deleted; unless a
  rollback in the history of ``B`` undid ``U`` (restored a snapshot ``T < U``): then the rows
  ``U`` added were not rows of ``B``, and only those of ``f`` older than ``T`` were (told by
  sequence numbers, which are never reused: ``f`` is skipped when its first row is newer than
  ``T``; a file compacted from rows on both sides of ``T`` counts as older); or
* ``B < U`` and ``D`` removed ``f`` itself (a delete planned before ``U`` committed and
  committed after it: it conflicts unless the files it changes stayed the same from ``B`` to
  its commit, so ``f`` holds rows of ``B`` only; files ``U`` added in between hold none of
  the rows it deleted).

The filter is evaluated on the file read as the delete's own schema version (by field id), so
renames and widenings since do not matter. A delete committed before ``U`` is already in
``U``'s files (its vectors, its rewrites).

Only deletes in effect at the latest snapshot count: a rollback ``R`` to a snapshot ``T``
undoes every snapshot in ``(T, R]``. Walking back from the latest snapshot through the
newest rollback at or before it (``Snapshot.last_rollback``), then from its target, gives the
snapshots whose changes the latest one holds; a delete outside them was undone (a rollback
of a rollback that restores a snapshot at or after it brings it back).

Hence: a stream past the deleted rows is not told anything (deletes emit nothing), and one
that has not delivered them yet never does, with the order of the remaining rows unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from appendtable._state import TableState
from appendtable.commit.changes import ROLLBACK_PROPERTY, ROLLBACK_SEQUENCE_PROPERTY
from appendtable.datafiles.deletion_vectors import Positions
from appendtable.datafiles.projection import Projection
from appendtable.datafiles.reading import read_as
from appendtable.deletes import filter_of, matching_positions, record_of
from appendtable.errors import SnapshotNotFoundError
from appendtable.metadata.models import (
    CommitKind,
    DataFileMeta,
    DeleteRecord,
    FileKind,
    Split,
)
from appendtable.planning.filters import Filter

__all__ = ["LaterDeletes", "read_stream_split"]

#: Units for which the deletes committed so far were looked up (the latest snapshot is read
#: once per unit, not once per file).
_UNITS_REMEMBERED = 1024


@dataclass(frozen=True)
class _Undone:
    """The snapshots ``(target, rollback]`` that a rollback undid. Rows they added have
    sequence numbers from ``first_sequence`` on (the target's ``next_sequence``; None where
    unknown: a rollback written before it was recorded, whose target has expired)."""

    target: int
    rollback: int
    first_sequence: int | None

    def holds(self, snapshot_id: int) -> bool:
        return self.target < snapshot_id <= self.rollback


@dataclass(frozen=True)
class _Delete:
    snapshot_id: int
    base: int
    #: paths of the files the delete removed (re-added with a vector, rewritten or dropped)
    touched: frozenset[str]
    record: DeleteRecord
    filter: Filter


class LaterDeletes:
    """The DELETE snapshots of a table after some snapshot, found once and cached (snapshots
    never change). The latest snapshot is looked up when the first file of a unit is read:
    deletes committed before a unit's files are read apply to it. Thread-safe: the
    read-ahead threads of a stream share one."""

    def __init__(self, state: TableState) -> None:
        self._state = state
        self._lock = threading.Lock()
        #: snapshot ids scanned so far: [low, high], with the deletes among them
        self._low: int | None = None
        self._high = 0
        self._found: dict[int, _Delete] = {}
        #: units whose files were read since the deletes were last looked for (in order)
        self._looked_for: dict[int, None] = {}
        #: per snapshot (the latest, or a delete's base): what the rollbacks in its history undid
        self._undone: dict[int, list[_Undone]] = {}

    def positions(self, file: DataFileMeta, unit_snapshot: int) -> Positions | None:
        """The positions of ``file``'s rows (of a unit of snapshot ``unit_snapshot``) that
        deletes committed after that snapshot removed; None if there are none."""
        chunks = [
            matching_positions(
                self._state,
                file,
                self._state.projection(self._state.view_of(delete.record.schema_id)),
                delete.filter,
            )
            for delete in self._after(unit_snapshot)
            if file.path in delete.touched
            or (
                delete.base >= unit_snapshot
                and self._rows_of_base(delete.base, unit_snapshot, file)
            )
        ]
        chunks = [c for c in chunks if len(c)]
        if not chunks:
            return None
        return np.unique(np.concatenate(chunks))

    def _rows_of_base(self, base: int, unit_snapshot: int, file: DataFileMeta) -> bool:
        """Whether the rows of ``file``, of a unit of ``unit_snapshot``, were rows of ``base``
        (a delete's base, at or after the unit): yes, unless a rollback in the history of
        ``base`` undid the unit's snapshot. Then only rows older than the rollback's target
        were: the file's rows are taken as such unless all of them are newer (a file that
        compaction made of rows from both sides of the target counts as older: its rows
        matching the delete are not delivered)."""
        with self._lock:
            undone = self._undone_at(base)
        for rollback in undone:
            if rollback.holds(unit_snapshot):
                first = rollback.first_sequence
                return first is None or file.min_seq < first
        return True

    def look_again(self, unit_snapshot: int) -> None:
        """Look for new deletes when the next file of this unit is read (a unit read again)."""
        with self._lock:
            self._looked_for.pop(unit_snapshot, None)

    def _after(self, snapshot_id: int) -> list[_Delete]:
        with self._lock:  # (the first file of a unit reads; the others wait for its answer)
            if snapshot_id in self._looked_for and self._low is not None:
                latest = self._high
            else:
                latest = self._latest()
                self._looked_for[snapshot_id] = None
                while len(self._looked_for) > _UNITS_REMEMBERED:
                    del self._looked_for[next(iter(self._looked_for))]
            first = snapshot_id + 1
            if self._low is None or first > self._high + 1:
                # (only ids after ``snapshot_id`` matter: those between the range scanned and
                # ``first`` may have expired since, and are never scanned)
                self._scan(first, latest)
                self._low, self._high = first, max(latest, snapshot_id)
            else:
                if first < self._low:
                    self._scan(first, self._low - 1)
                    self._low = first
                if latest > self._high:
                    self._scan(self._high + 1, latest)
                    self._high = latest
            undone = self._undone_at(latest)
            return [
                d
                for i, d in sorted(self._found.items())
                if i > snapshot_id and not any(rollback.holds(i) for rollback in undone)
            ]

    def _latest(self) -> int:
        """The latest snapshot id now. Once a range was scanned, one existence check tells
        that nothing was committed since: every commit (a delete, a rollback) takes the next
        id, and expiration never removes the latest snapshot."""
        if self._low is not None and not self._state.snapshots.exists(self._high + 1):
            return self._high
        return self._state.snapshots.latest_id() or 0

    def _undone_at(self, latest: int) -> list[_Undone]:
        """What the rollbacks in the history of ``latest`` undid (the table at ``latest``
        holds none of those snapshots' changes), newest first. Called under the lock."""
        found = self._undone.get(latest)
        if found is not None:
            return found
        undone: list[_Undone] = []
        current = latest
        while current:
            try:
                rollback_id = self._state.snapshots.get(current).last_rollback
                if rollback_id is None:
                    break
                properties = self._state.snapshots.get(rollback_id).properties
            except SnapshotNotFoundError:
                break  # (expired: older than every unit a stream can still read)
            target = properties.get(ROLLBACK_PROPERTY)
            if target is None:
                break
            sequence = properties.get(ROLLBACK_SEQUENCE_PROPERTY)
            first = int(sequence) if sequence is not None else self._next_sequence(int(target))
            undone.append(_Undone(int(target), rollback_id, first))
            current = int(target)
        if len(self._undone) >= _UNITS_REMEMBERED:
            self._undone.clear()
        self._undone[latest] = undone
        return undone

    def _next_sequence(self, snapshot_id: int) -> int | None:
        try:
            return self._state.snapshots.get(snapshot_id).next_sequence
        except SnapshotNotFoundError:
            return None

    def _scan(self, first: int, last: int) -> None:
        snapshots, manifests = self._state.snapshots, self._state.manifests
        for snapshot_id in range(first, last + 1):
            snapshot = snapshots.get(snapshot_id)
            if snapshot.kind != CommitKind.DELETE:
                continue
            record = record_of(self._state, snapshot)
            if record is None:
                continue
            touched = frozenset(
                e.file.path for e in manifests.delta_entries(snapshot) if e.kind == FileKind.DELETE
            )
            self._found[snapshot_id] = _Delete(
                snapshot_id, record.base_snapshot, touched, record, filter_of(record)
            )


def read_stream_split(
    state: TableState,
    split: Split,
    projection: Projection,
    *,
    columns: Sequence[str] | None = None,
    row_filter: Filter | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of a split of a stream unit (``Split.stream``), file by file in order, without
    those that deletes committed after its snapshot removed (read in any process: an engine's
    worker reads the split it was given)."""
    later = LaterDeletes(state)
    for file in split.files:
        yield from read_as(
            state.storage,
            file,
            projection,
            columns=columns,
            row_filter=row_filter,
            also_deleted=later.positions(file, split.snapshot_id),
        )
