"""How far behind the latest snapshot the table's consumers and consumer-group members are.

One row per named consumer of every bucket (``bucket`` null), one per bucket for a consumer of
some buckets (``buckets=``), and one row per unit of each consumer group (a bucket, or a file
slot of a ``bucket = -1`` table) with the member that holds it. Behind means: snapshots from
the consumer's next one to the latest, and the rows and bytes that the append snapshots among
them added to the unit (with a full position, the unit's whole content at that snapshot and
what came after), and how long ago the oldest unread snapshot was committed.

Cost: the delta manifests of the snapshots behind the slowest reader are read, up to
``EXACT_WINDOW`` snapshots; a position further behind is estimated from the live files of its
snapshot and of the latest one (``exact`` false): rows are exact unless rows were removed
(overwrite, rollback) in between, bytes change with compaction. A delete in between also makes
``exact`` false: the rows it removed from the appends behind are still counted (reading
them back to tell would cost as much as the stream's own read), and the stream skips them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from appendtable._state import TableState
from appendtable.commit.consumers import ConsumerStore
from appendtable.commit.groups import GroupStore, list_groups
from appendtable.errors import SnapshotNotFoundError
from appendtable.metadata import options as opt
from appendtable.metadata.groups import GroupGeneration, MemberLease, UnitProgress
from appendtable.metadata.models import CommitKind, ManifestEntry, Snapshot
from appendtable.planning.groups import lease_expired, slot_of
from appendtable.planning.stream_rules import emits_rows

__all__ = ["EXACT_WINDOW", "LAG_SCHEMA", "consumer_lag"]

#: Snapshots whose deltas are read at most; positions further behind are estimated.
EXACT_WINDOW = 1000

LAG_SCHEMA = pa.schema(
    [
        pa.field("consumer", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("member", pa.string()),
        pa.field("bucket", pa.int32()),
        pa.field("next_snapshot", pa.int64(), nullable=False),
        pa.field("snapshots_behind", pa.int64(), nullable=False),
        pa.field("rows_behind", pa.int64(), nullable=False),
        pa.field("bytes_behind", pa.int64(), nullable=False),
        pa.field("time_behind", pa.duration("ms"), nullable=False),
        pa.field("last_commit", pa.timestamp("ms", tz="UTC")),
        pa.field("status", pa.string(), nullable=False),
        pa.field("exact", pa.bool_(), nullable=False),
    ]
)

#: A unit key: ``None`` (every bucket), ``("bucket", b, 0)`` or ``("slot", k, slots)``.
_Key = tuple[str, int, int] | None


@dataclass(frozen=True)
class _Position:
    consumer: str
    kind: str
    member: str | None
    unit: int | None
    key: _Key
    next_snapshot: int
    full: bool
    last_commit_ms: int | None
    status: str  # decided before rows are known: "" lets the rows decide


@dataclass
class _Amounts:
    rows: int = 0
    bytes: int = 0

    def add(self, other: _Amounts) -> None:
        self.rows += other.rows
        self.bytes += other.bytes


#: How entries are grouped: None (all together), ``("bucket",)``, or ``("slot", slots)``.
_Grouping = tuple[str, int] | tuple[str] | None


def _grouping(key: _Key) -> tuple[_Grouping, int | None]:
    if key is None:
        return None, None
    if key[0] == "bucket":
        return ("bucket",), key[1]
    return ("slot", key[2]), key[1]


def _aggregate(entries: Iterable[ManifestEntry], grouping: _Grouping) -> dict[int | None, _Amounts]:
    totals: dict[int | None, _Amounts] = {}
    for entry in entries:
        unit: int | None = None
        if grouping is not None and len(grouping) == 1:
            unit = entry.bucket
        elif grouping is not None and len(grouping) == 2:
            unit = slot_of(entry.file.path, grouping[1])
        totals.setdefault(unit, _Amounts()).add(
            _Amounts(entry.file.live_row_count, entry.file.file_size)
        )
    return totals


@dataclass
class _Window:
    """Rows and bytes that snapshots added (or hold), per unit, read once each."""

    state: TableState
    read_overwrite: bool
    _added: dict[tuple[int, _Grouping], dict[int | None, _Amounts]] = field(default_factory=dict)
    _live: dict[tuple[int, _Grouping], dict[int | None, _Amounts]] = field(default_factory=dict)
    _entries: dict[int, list[ManifestEntry]] = field(default_factory=dict)

    def added(self, snapshot_id: int, key: _Key) -> _Amounts:
        grouping, unit = _grouping(key)
        cached = self._added.get((snapshot_id, grouping))
        if cached is None:
            entries = self._entries.get(snapshot_id)
            if entries is None:
                snapshot = self.state.snapshots.get(snapshot_id)
                entries = []
                if emits_rows(snapshot.kind, read_overwrite=self.read_overwrite):
                    delta = self.state.manifests.delta_entries(snapshot)
                    entries = [e for e in delta if e.kind == 0]
                self._entries[snapshot_id] = entries
            cached = self._added[(snapshot_id, grouping)] = _aggregate(entries, grouping)
        return cached.get(unit, _Amounts())

    def deletes(self, snapshot_id: int) -> bool:
        """Whether the snapshot deleted rows (the rows it removed from earlier appends are
        still counted as behind: the stream skips them when it gets there)."""
        return self.state.snapshots.get(snapshot_id).kind == CommitKind.DELETE

    def live(self, snapshot: Snapshot, key: _Key) -> _Amounts:
        grouping, unit = _grouping(key)
        cached = self._live.get((snapshot.id, grouping))
        if cached is None:
            entries = self.state.manifests.live_files(snapshot)
            cached = self._live[(snapshot.id, grouping)] = _aggregate(entries, grouping)
        return cached.get(unit, _Amounts())


def consumer_lag(
    state: TableState, *, group: str | None = None, stalled_after_ms: int = 30_000
) -> pa.Table:
    """The lag of every consumer and consumer-group unit (only ``group``'s when given), as a
    table of ``LAG_SCHEMA`` sorted by consumer, member and bucket.

    ``status``: ``caught-up`` (nothing to read), ``behind``, ``stalled`` (rows waiting for
    longer than ``stalled_after_ms`` and no commit for as long), and for group units
    ``expired`` (the holder's lease ran out: it is dead, hung or cut off, and the unit moves
    at the next rebalance), ``rebalancing`` (the holder has not claimed it yet) or
    ``unassigned`` (the group has no member)."""
    now = int(time.time() * 1000)
    positions = [] if group is not None else _consumer_positions(state)
    names = [group] if group is not None else list_groups(state.storage)
    for name in names:
        positions.extend(_group_positions(GroupStore(state.storage, name), now))
    latest = state.snapshots.latest()
    read_overwrite = state.refresh().options.get(opt.STREAMING_READ_OVERWRITE)
    window = _Window(state, read_overwrite)
    positions.sort(
        key=lambda p: (p.consumer, p.kind, p.member or "", -1 if p.unit is None else p.unit)
    )
    rows = [_row(p, latest, window, now, stalled_after_ms) for p in positions]
    return pa.Table.from_pylist(rows, schema=LAG_SCHEMA)


def _consumer_positions(state: TableState) -> list[_Position]:
    """A row for a consumer of every bucket; one per bucket for a consumer of some buckets."""
    found = []
    for name, consumer in sorted(ConsumerStore(state.storage).all().items()):
        units: list[int | None] = (
            list(consumer.buckets) if isinstance(consumer.buckets, tuple) else [None]
        )
        for unit in units:
            found.append(
                _Position(
                    consumer=name,
                    kind="consumer",
                    member=None,
                    unit=unit,
                    key=None if unit is None else ("bucket", unit, 0),
                    next_snapshot=consumer.next_snapshot,
                    full=consumer.full,
                    last_commit_ms=consumer.time_ms or None,
                    status="",
                )
            )
    return found


def _group_positions(store: GroupStore, now: int) -> list[_Position]:
    latest = store.latest()
    if latest is None:
        return []
    leases = store.leases()
    found = []
    for unit, position in sorted(store.positions(latest).items()):
        if unit >= latest.units:
            continue
        owner = latest.owner(unit)
        record = position.record
        found.append(
            _Position(
                consumer=store.group,
                kind="group",
                member=owner,
                unit=unit,
                key=("slot", unit, latest.units) if latest.by_file else ("bucket", unit, 0),
                next_snapshot=position.next_snapshot,
                full=position.full,
                last_commit_ms=record.time_ms if record is not None else None,
                status=_holder_status(latest, owner, leases.get(owner or ""), record, now),
            )
        )
    return found


def _holder_status(
    generation: GroupGeneration,
    owner: str | None,
    lease: MemberLease | None,
    record: UnitProgress | None,
    now: int,
) -> str:
    if owner is None:
        return "unassigned"
    if lease is None or lease_expired(lease.renewed_ms, lease.lease_ms, now):
        return "expired"
    session = generation.members[owner].session
    if record is None or record.session != session:
        return "rebalancing"
    return ""


def _row(
    position: _Position,
    latest: Snapshot | None,
    window: _Window,
    now: int,
    stalled_after_ms: int,
) -> dict[str, object]:
    behind, exact, waiting_ms = _Amounts(), True, 0
    snapshots_behind = 0
    if latest is not None and position.next_snapshot <= latest.id:
        snapshots_behind = latest.id - position.next_snapshot + 1
        behind, exact = _behind(position, latest, window)
        waiting_ms = max(0, now - _commit_time(window.state, position.next_snapshot))
    status = position.status
    if not status:
        last = position.last_commit_ms or 0
        if behind.rows == 0:
            status = "caught-up"
        elif waiting_ms > stalled_after_ms and now - last > stalled_after_ms:
            status = "stalled"
        else:
            status = "behind"
    return {
        "consumer": position.consumer,
        "kind": position.kind,
        "member": position.member,
        "bucket": position.unit,
        "next_snapshot": position.next_snapshot,
        "snapshots_behind": snapshots_behind,
        "rows_behind": behind.rows,
        "bytes_behind": behind.bytes,
        "time_behind": waiting_ms if behind.rows else 0,
        "last_commit": position.last_commit_ms,
        "status": status,
        "exact": exact,
    }


def _behind(position: _Position, latest: Snapshot, window: _Window) -> tuple[_Amounts, bool]:
    """Rows and bytes between the position and the latest snapshot, and whether exactly."""
    first = position.next_snapshot
    snapshots = window.state.snapshots
    if latest.id - first >= EXACT_WINDOW:
        # Estimated: what is live now, less what was live at the position (plus what its own
        # snapshot added, for a delta position; a full position reads all of it).
        now = window.live(latest, position.key)
        if position.full:
            return _Amounts(now.rows, now.bytes), False
        try:
            start = snapshots.get(first)
        except SnapshotNotFoundError:
            return _Amounts(now.rows, now.bytes), False
        then = window.live(start, position.key)
        own = window.added(first, position.key)
        rows = max(0, now.rows - then.rows + own.rows)
        return _Amounts(rows, max(0, now.bytes - then.bytes + own.bytes)), False
    amounts = _Amounts()
    if position.full:
        amounts.add(window.live(snapshots.get(first), position.key))
        first += 1
    exact = True
    for snapshot_id in range(first, latest.id + 1):
        amounts.add(window.added(snapshot_id, position.key))
        exact = exact and not window.deletes(snapshot_id)
    return amounts, exact


def _commit_time(state: TableState, snapshot_id: int) -> int:
    try:
        return state.snapshots.get(snapshot_id).time_ms
    except SnapshotNotFoundError:
        earliest = state.snapshots.earliest_id()
        return state.snapshots.get(earliest).time_ms if earliest is not None else 0
