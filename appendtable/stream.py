"""Streaming reads: a table used like a message queue.

A :class:`StreamReader` hands out *units*: the rows a snapshot added (a delta), or the whole of a
snapshot for the initial read of a start mode (a full unit), as ordered splits.

Guarantees:

* **Order.** Units come in snapshot order. Within a unit, splits of one (partition, bucket) are in
  write order, so each bucket of a bucketed table is delivered in exactly its write order, across
  units too. Partitions come in creation order, or by value with ``scan.plan-sort-partition``.
  Tables with ``bucket = -1`` guarantee snapshot order only.
* **Only appends produce rows.** COMPACT snapshots are skipped (compaction never re-emits rows);
  OVERWRITE snapshots are skipped unless ``streaming-read-append-overwrite`` is set.
* **Exactly once with a consumer id.** ``commit()`` persists the position atomically; a reader
  restarted with the same ``consumer_id`` resumes there: nothing lost, and nothing repeated past
  the last committed position. Snapshots a consumer still needs are never expired.
* **Never silently skips.** A position on an expired snapshot raises SnapshotExpiredError.
* **Stable schema.** A reader keeps the schema that was current when it was opened, across
  later schema changes (ALTER snapshots carry no rows and are skipped): files written under
  any schema version are read as that schema by field id, so added columns are absent, a
  renamed column keeps its old name, a widened one its old type, and a dropped one reads as
  null. A reader opened after a change has the new columns, null in older rows.
* **Cheap polling.** When nothing changed, a poll costs one existence check of the next snapshot
  file, whatever the table's history.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

import msgspec
import pyarrow as pa

from appendtable import argument_checks, display
from appendtable._state import TableState
from appendtable.commit.consumers import ConsumerStore, WatermarkGroupStore
from appendtable.datafiles.read_ahead import (
    ReadAheadLimits,
    read_ahead,
    read_files_ahead,
    shared_pool,
)
from appendtable.datafiles.reading import read_as
from appendtable.errors import (
    InvalidArgumentError,
    InvalidOptionError,
    ObjectNotFoundError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
)
from appendtable.index_pruning import index_probe, prune_with_index
from appendtable.metadata import layout
from appendtable.metadata import options as opt
from appendtable.metadata.models import (
    CommitKind,
    ConsumerState,
    DataFileMeta,
    ManifestEntry,
    Snapshot,
    Split,
)
from appendtable.planning.filters import Filter, parse_filter
from appendtable.planning.groups import UnitSelection
from appendtable.planning.stream_rules import (
    StartMode,
    StartRequest,
    emits_rows,
    may_emit,
    resolve_mode,
    resolve_start,
)
from appendtable.scan import check_columns, plan_entries, splits_of
from appendtable.stream_deletes import LaterDeletes

__all__ = ["StreamPosition", "StreamReader", "StreamUnit", "calling_on_failure"]

#: Units planned ahead of the one being handed out (their small files are read ahead).
_UNITS_AHEAD = 64
#: Units handed out whose preceding watermark is kept, to restore it when a read fails.
_WATERMARKS_REMEMBERED = 256
_T = TypeVar("_T")


@dataclass(frozen=True)
class StreamPosition:
    """Where a stream continues: the whole of ``next_snapshot`` (``full``) or its delta.
    ``next_snapshot = None`` means the latest snapshot once one exists. Serialisable with
    ``to_json`` / ``from_json`` (an engine's offset)."""

    next_snapshot: int | None
    full: bool = False

    def to_json(self) -> str:
        return msgspec.json.encode({"snapshot": self.next_snapshot, "full": self.full}).decode()

    @staticmethod
    def from_json(text: str | bytes) -> StreamPosition:
        try:
            data = msgspec.json.decode(text)
            snapshot, full = data["snapshot"], data.get("full", False)
        except (msgspec.DecodeError, KeyError, TypeError) as exc:
            raise InvalidArgumentError(f"text: not a stream position: {text!r}") from exc
        if snapshot is not None and (not isinstance(snapshot, int) or snapshot < 1):
            raise InvalidArgumentError(f"text: not a stream position: {text!r}")
        return StreamPosition(snapshot, bool(full))

    def stream_order(self) -> tuple[int, bool]:
        """A sort key in stream order: a snapshot's full unit before its delta, which comes
        before the next snapshot's; ``None`` (the latest, once one exists) first."""
        return (self.next_snapshot or 0, not self.full)


@dataclass(frozen=True)
class StreamUnit:
    """The next piece of work of a stream: ordered splits of one snapshot."""

    snapshot_id: int
    full: bool
    commit_kind: CommitKind
    splits: list[Split]
    watermark: int | None
    next_position: StreamPosition
    #: For a member of a consumer group: the buckets (file slots for ``bucket = -1``) whose
    #: position this unit advances; empty otherwise.
    group_units: tuple[int, ...] = ()

    @property
    def row_count(self) -> int:
        """The rows of the unit's files as its snapshot lists them (their deletion vectors of
        then applied), from metadata alone: rows that deletes committed after the snapshot
        remove, which ``read`` drops, are still counted (an upper bound then; see
        docs/queue.md), and so are rows a reader filter leaves out."""
        return sum(split.row_count for split in self.splits)

    @property
    def file_count(self) -> int:
        return sum(len(split.files) for split in self.splits)

    def __repr__(self) -> str:
        return display.unit_repr(self)

    def _repr_html_(self) -> str:
        return display.unit_html(self)


class _EndOfStream:
    def __repr__(self) -> str:
        return "END_OF_STREAM"


#: Returned by :meth:`StreamReader.next_unit` when a bounded stream has ended.
END_OF_STREAM: Final = _EndOfStream()


@dataclass(frozen=True)
class StreamConfig:
    mode: str
    snapshot_id: int | None
    timestamp_ms: int | None
    file_creation_time_ms: int | None
    consumer_id: str | None
    ignore_progress: bool
    bounded_watermark: int | None
    buckets: frozenset[int] | None
    poll_interval_s: float
    read_overwrite: bool
    alignment_group: str | None
    max_drift_ms: int
    alignment_update_ms: int
    alignment_idle_ms: int
    #: The stream's own read options (over the table's, at each schema version), for
    #: planning its splits (partition order, split sizes).
    read_options: Mapping[str, object] | None = None


def stream_config(
    state: TableState,
    read_options: Mapping[str, object] | None,
    *,
    mode: str | None,
    snapshot_id: int | None,
    timestamp_ms: int | None,
    file_creation_time_ms: int | None,
    consumer_id: str | None,
    bounded_watermark: int | None,
    buckets: Sequence[int] | None,
    poll_interval: float | None,
) -> StreamConfig:
    """Merge keyword arguments (first), read options, then table options."""
    options = state.options.with_overrides(read_options)

    def pick(value: _T | None, option: opt.OptionDef[_T]) -> _T | None:
        return _pick(options, value, option)

    chosen_buckets: frozenset[int] | None = None
    if buckets is not None:
        if state.options.bucket <= 0:
            raise InvalidArgumentError(
                "buckets: only bucketed tables (bucket = N > 0) can be read by bucket subsets"
            )
        chosen_buckets = argument_checks.bucket_ids(buckets, "buckets")
        outside = sorted(b for b in chosen_buckets if not 0 <= b < state.options.bucket)
        if outside:
            raise InvalidArgumentError(
                f"buckets: {outside[0]} is not a bucket of this table "
                f"(0..{state.options.bucket - 1})"
            )
    consumer = pick(consumer_id, opt.CONSUMER_ID)
    group = options.get(opt.WATERMARK_ALIGNMENT_GROUP) or None
    if group is not None and not options.is_set(opt.WATERMARK_ALIGNMENT_MAX_DRIFT):
        raise InvalidOptionError(
            "option 'scan.watermark.alignment.group' needs 'scan.watermark.alignment.max-drift'"
        )
    interval = poll_interval if poll_interval is not None else options.get(opt.POLL_INTERVAL) / 1000
    start = pick(snapshot_id, opt.SCAN_SNAPSHOT_ID)
    if start is not None and start < 1:
        raise SnapshotNotFoundError(f"no such snapshot: {start} (snapshot ids start at 1)")
    return StreamConfig(
        mode=pick(mode, opt.SCAN_MODE) or "default",
        snapshot_id=start,
        timestamp_ms=pick(timestamp_ms, opt.SCAN_TIMESTAMP_MILLIS),
        file_creation_time_ms=pick(file_creation_time_ms, opt.SCAN_FILE_CREATION_TIME),
        # an explicit consumer_id="" is refused like any invalid id, not taken for none (a
        # script's unset variable would re-deliver the whole table at every restart)
        consumer_id=(
            layout.validate_consumer_id(str(consumer))
            if consumer or consumer_id is not None
            else None
        ),
        ignore_progress=options.get(opt.CONSUMER_IGNORE_PROGRESS),
        bounded_watermark=pick(bounded_watermark, opt.SCAN_BOUNDED_WATERMARK),
        buckets=chosen_buckets,
        poll_interval_s=max(0.0, float(interval)),
        read_overwrite=options.get(opt.STREAMING_READ_OVERWRITE),
        alignment_group=group,
        max_drift_ms=options.get(opt.WATERMARK_ALIGNMENT_MAX_DRIFT),
        alignment_update_ms=options.get(opt.WATERMARK_ALIGNMENT_UPDATE_INTERVAL),
        alignment_idle_ms=options.get(opt.WATERMARK_ALIGNMENT_IDLE_TIMEOUT),
        read_options=dict(read_options) if read_options else None,
    )


def _pick(options: opt.Options, value: _T | None, option: opt.OptionDef[_T]) -> _T | None:
    """A keyword argument wins over a (read or table) option; unset options give None."""
    if value is not None:
        return value
    return options.get(option) if options.is_set(option) else None


def _start_request(config: StreamConfig) -> StartRequest:
    return StartRequest(
        mode=config.mode,
        snapshot_id=config.snapshot_id,
        timestamp_ms=config.timestamp_ms,
        file_creation_time_ms=config.file_creation_time_ms,
    )


def _describe(buckets: tuple[int, ...] | Literal["all"]) -> str:
    if buckets == "all":
        return "every bucket"
    return ("bucket " if len(buckets) == 1 else "buckets ") + ", ".join(map(str, buckets))


def _files_of(unit: StreamUnit) -> list[DataFileMeta]:
    return [file for split in unit.splits for file in split.files]


class StreamReader:
    """Tails a table. Use ``poll()`` for units of work, or iterate for record batches.

    Not thread-safe. ``close()`` (or a ``with`` block) leaves a watermark-alignment group.
    """

    def __init__(
        self,
        state: TableState,
        config: StreamConfig,
        *,
        columns: Sequence[str] | None = None,
        filter: object = None,
        position: StreamPosition | None = None,
        kept_by: str | None = None,
    ) -> None:
        """``kept_by`` names what keeps this stream's snapshots from expiring when it is not
        ``config.consumer_id`` (a consumer group): error messages name it."""
        self._state = state
        self._config = config
        self._kept_by = kept_by
        self.view = state.refresh()
        self._projection = state.projection(self.view)
        self.columns = check_columns(self.view, columns)
        self._filter: Filter | None = parse_filter(filter, self.view.column_types)
        self._index_probe = index_probe(self.view, self._filter) if self._filter else None
        self._consumers = ConsumerStore(state.storage)
        self._later_deletes = LaterDeletes(state)
        mode = resolve_mode(_start_request(config))
        self._creation_floor = (
            config.file_creation_time_ms if mode is StartMode.FROM_FILE_CREATION_TIME else None
        )
        self._finished = False
        self._last_watermark: int | None = None
        #: per unit handed out lately (its start, in stream order): the watermark before it,
        #: which a failed read of the unit restores (see ``_back_before``)
        self._watermark_before: dict[tuple[int, bool], int | None] = {}
        self._member = config.consumer_id or f"reader-{uuid.uuid4().hex[:12]}"
        self._group = (
            WatermarkGroupStore(state.storage, config.alignment_group)
            if config.alignment_group
            else None
        )
        self._published_ms = 0
        if position is None:
            position = self._start_position()
        self._position = position

    # ---- where the stream is -------------------------------------------------------------

    def _start_position(self) -> StreamPosition:
        config = self._config
        if config.consumer_id is not None and not config.ignore_progress:
            saved = self._consumers.resume(config.consumer_id)
            if saved is not None:
                self._check_same_buckets(config.consumer_id, saved)
                return StreamPosition(saved.next_snapshot, saved.full)
        position = self.start_mode_position()
        if config.consumer_id is not None and position.next_snapshot is not None:
            # Register at once: expiration must keep what this consumer will need.
            self._save(position, reset=config.ignore_progress)
        return position

    def start_mode_position(self) -> StreamPosition:
        """Where the stream's start mode starts now (saved progress aside). Raises
        SnapshotExpiredError rather than skip data."""
        snapshots = self._state.snapshots
        start = resolve_start(
            _start_request(self._config),
            earliest=snapshots.earliest_id(),
            latest=snapshots.latest_id(),
            first_at_or_after=snapshots.first_at_or_after,
            latest_compacted=self._latest_compacted,
        )
        return StreamPosition(start.next_snapshot, start.full)

    def _bucket_selection(self) -> tuple[int, ...] | Literal["all"]:
        buckets = self._config.buckets
        return "all" if buckets is None else tuple(sorted(buckets))

    def _check_same_buckets(self, consumer_id: str, saved: ConsumerState) -> None:
        """A consumer's position holds for the buckets it read: resuming it with others would
        silently skip what they received before it (nothing to check for a consumer saved
        before the selection was recorded)."""
        wanted = self._bucket_selection()
        if saved.buckets is None or saved.buckets == wanted:
            return
        raise InvalidArgumentError(
            f"consumer '{consumer_id}' reads {_describe(saved.buckets)} and is at snapshot "
            f"{saved.next_snapshot}; resuming it with {_describe(wanted)} would skip the rows "
            "written to them before: use the same buckets, another consumer id, or "
            "'consumer.ignore-progress' to start it again from the scan mode"
        )

    def _latest_compacted(self) -> int | None:
        snapshots = self._state.snapshots
        latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
        if latest is None or earliest is None:
            return None
        for snapshot_id in range(latest, earliest - 1, -1):
            if snapshots.get(snapshot_id).kind == CommitKind.COMPACT:
                return snapshot_id
        return None

    @property
    def position(self) -> StreamPosition:
        """The position after the last unit handed out (what ``commit()`` saves)."""
        return self._position

    @property
    def file_creation_floor_ms(self) -> int | None:
        """The ``scan.file-creation-time-millis`` of a ``from-file-creation-time`` stream: its
        full units hold only the files created at or after it (None: no such floor)."""
        return self._creation_floor

    @property
    def finished(self) -> bool:
        """True once a bounded stream (``scan.bounded.watermark``) has ended."""
        return self._finished

    def seek(self, position: StreamPosition) -> None:
        """Continue from ``position`` (for example an engine's restored offset)."""
        self._position = position
        self._finished = False

    # ---- planning --------------------------------------------------------------------------

    def next_unit(
        self, position: StreamPosition | None = None, *, select: UnitSelection | None = None
    ) -> StreamUnit | _EndOfStream | None:
        """The unit at ``position`` (default: the current one), without moving: a unit (maybe
        with no splits, for a skipped snapshot), END_OF_STREAM, or None if it does not exist
        yet. ``select`` narrows it to some buckets or file slots (a consumer group member's)."""
        position = self._position if position is None else position
        snapshots = self._state.snapshots
        snapshot_id = position.next_snapshot
        if snapshot_id is None:
            snapshot_id = snapshots.latest_id()
            if snapshot_id is None:
                return None
            position = StreamPosition(snapshot_id, full=True)
        if not snapshots.exists(snapshot_id):
            self._check_not_expired(snapshot_id)
            return None
        with self._expiry_reported(snapshot_id):  # it may expire while its unit is planned
            snapshot = snapshots.get(snapshot_id)
            bound = self._config.bounded_watermark
            if bound is not None and snapshot.watermark is not None and snapshot.watermark > bound:
                return END_OF_STREAM
            return self._plan_unit(snapshot, position.full, select)

    def _plan_unit(
        self, snapshot: Snapshot, full: bool, select: UnitSelection | None
    ) -> StreamUnit:
        following = StreamPosition(snapshot.id + 1, full=False)
        if full:
            entries = plan_entries(
                self._state,
                snapshot,
                self._filter,
                projection=self._projection,
                view=self.view,
                buckets=self._buckets(select),
            )
            if self._creation_floor is not None:
                floor = self._creation_floor
                entries = [e for e in entries if e.file.creation_time_ms >= floor]
            if select is not None:
                entries = [e for e in entries if select.selects(e.bucket, e.file.path)]
            return self._unit(snapshot, entries, full=True, following=following)
        if not emits_rows(snapshot.kind, read_overwrite=self._config.read_overwrite):
            return self._unit(snapshot, [], full=False, following=following)
        entries = self._delta_entries(snapshot, select)
        return self._unit(snapshot, entries, full=False, following=following)

    def _buckets(self, select: UnitSelection | None = None) -> set[int] | None:
        configured = set(self._config.buckets) if self._config.buckets is not None else None
        chosen = select.buckets() if select is not None else None
        if configured is None or chosen is None:
            return chosen if configured is None else configured
        return configured & chosen

    def _delta_entries(
        self, snapshot: Snapshot, select: UnitSelection | None = None
    ) -> list[ManifestEntry]:
        keys = self.view.schema.partition_keys
        truncate = self.view.options.stats_truncate
        buckets = self._config.buckets
        row_filter = self._filter
        selected = []
        for entry in self._state.manifests.delta_entries(snapshot):
            if entry.kind != 0:
                continue
            if buckets is not None and entry.bucket not in buckets:
                continue
            if select is not None and not select.selects(entry.bucket, entry.file.path):
                continue
            layout = self._projection.layout(entry.file.schema_id)
            if row_filter is not None and not (
                row_filter.matches_partition(keys, entry.partition)
                and row_filter.may_match_file(
                    entry.file, layout.stats_positions, truncate, layout.field_ids
                )
            ):
                continue
            selected.append(entry)
        if row_filter is None:
            return selected
        return prune_with_index(self._state.storage, selected, self._index_probe)

    def _unit(
        self,
        snapshot: Snapshot,
        entries: Sequence[ManifestEntry],
        *,
        full: bool,
        following: StreamPosition,
    ) -> StreamUnit:
        return StreamUnit(
            snapshot_id=snapshot.id,
            full=full,
            commit_kind=snapshot.kind,
            splits=[
                msgspec.structs.replace(split, stream=True)
                for split in splits_of(
                    self.view,
                    snapshot,
                    entries,
                    options=self.view.options.with_overrides(self._config.read_options),
                )
            ]
            if entries
            else [],
            watermark=snapshot.watermark,
            next_position=following,
        )

    def _check_not_expired(self, snapshot_id: int) -> None:
        """A missing snapshot is either not written yet or expired: SnapshotExpiredError for
        the latter, at every call while the stream stays there. Expiration removes the oldest
        snapshots first, so while the one before it exists it is not written yet (one more
        existence check per poll that finds nothing new); otherwise the latest id tells."""
        snapshots = self._state.snapshots
        if snapshot_id > 1 and snapshots.on_storage(snapshot_id - 1):  # not the cache
            return
        latest = snapshots.latest_id()
        # It may have been committed since the miss: expired only if it is still missing now.
        if latest is not None and snapshot_id <= latest and not snapshots.on_storage(snapshot_id):
            raise self._expired(snapshot_id)

    def _expired(self, snapshot_id: int, *, unit: bool = False) -> SnapshotExpiredError:
        earliest = self._state.snapshots.earliest_id()
        where = "reading a unit of" if unit else "positioned on"
        return SnapshotExpiredError(
            f"the stream is {where} snapshot {snapshot_id}, which has expired "
            f"(earliest retained is {earliest}); {self._expiry_advice()}"
        )

    def _expiry_advice(self) -> str:
        """What to do about an expired position: a stream kept by nothing needs a consumer
        id; a consumer's or group's record was removed (idle too long, or forgotten)."""
        kept_by = self._kept_by
        if kept_by is None and self._config.consumer_id is not None:
            kept_by = f"consumer '{self._config.consumer_id}'"
        if kept_by is None:
            return "use a consumer id, which keeps the snapshots a reader still needs from expiring"
        consumer_id = self._config.consumer_id if self._kept_by is None else None
        saved = self._consumers.get(consumer_id) if consumer_id is not None else None
        if saved is not None and saved.next_snapshot < (self._state.snapshots.earliest_id() or 0):
            return (
                f"{kept_by} holds a position (next snapshot {saved.next_snapshot}) that has "
                "expired too: it was saved after expiration had passed it (by another reader "
                f"with the same id?); table.delete_consumer('{consumer_id}') or "
                "'consumer.ignore-progress' starts it again from its start mode"
            )
        return (
            f"{kept_by} no longer kept it: its record was removed (idle longer than "
            "'consumer.expiration-time', or forgotten) before it got there; a reader created "
            "again starts from its start mode"
        )

    @contextmanager
    def _expiry_reported(self, snapshot_id: int, *, unit: bool = False) -> Iterator[None]:
        """A metadata or data file of the snapshot gone because the snapshot expired (this
        handle may still have cached it) is reported as SnapshotExpiredError."""
        try:
            yield
        except (ObjectNotFoundError, SnapshotNotFoundError) as exc:
            if self._state.snapshots.on_storage(snapshot_id):
                raise
            self._state.snapshots.forget(snapshot_id)
            raise self._expired(snapshot_id, unit=unit) from exc

    # ---- consuming ---------------------------------------------------------------------------

    def poll(self) -> StreamUnit | None:
        """The next unit with rows, advancing past it (and past skipped snapshots); None if
        there is none yet, the stream has ended, or watermark alignment holds this reader."""
        while not self._finished:
            unit = self.next_unit()
            if unit is None:
                self._heartbeat()
                return None
            if isinstance(unit, _EndOfStream):
                self._finished = True
                return None
            if not unit.splits:
                self._position = unit.next_position
                continue
            if not self._aligned(unit.watermark):
                return None
            start = StreamPosition(unit.snapshot_id, unit.full).stream_order()
            self._watermark_before[start] = self._last_watermark
            while len(self._watermark_before) > _WATERMARKS_REMEMBERED:
                del self._watermark_before[next(iter(self._watermark_before))]
            self._position = unit.next_position
            self._emitted(unit.watermark)
            return unit
        return None

    def read(self, unit: StreamUnit) -> Generator[pa.RecordBatch, None, None]:
        """The rows of a unit, in order (its small files are read ahead on a few threads),
        without those that deletes committed since its snapshot removed.

        **A failed read never skips the unit.** ``poll()`` moved the position past the unit
        when it handed it out; if reading it raises (``SchemaMismatchError``,
        ``SnapshotExpiredError``, a storage error), the position moves back to the unit before
        the error reaches the caller, so the next ``poll()`` hands the same unit out again
        and a ``commit()`` saves a position before it (units polled after it are handed out
        again too: nothing is lost, but they may be delivered twice). The caller stopping
        early (``break``) is not a failure: the position stays past the unit."""
        start = StreamPosition(unit.snapshot_id, unit.full)
        return calling_on_failure(self._batches_of(unit), lambda: self._back_before(start))

    def _batches_of(self, unit: StreamUnit) -> Generator[pa.RecordBatch, None, None]:
        self._later_deletes.look_again(unit.snapshot_id)
        yield from read_files_ahead(_files_of(unit), lambda file: self._read_file(unit, file))

    def _back_before(self, start: StreamPosition) -> None:
        """Move back to ``start``, a unit whose read failed, unless already before it, and
        take back the watermark published since (an alignment group must not let the others
        run ahead of rows this reader has yet to deliver)."""
        if self._position.stream_order() <= start.stream_order():
            return
        self._position = start
        order = start.stream_order()
        if order in self._watermark_before:
            self._last_watermark = self._watermark_before[order]
            for later in [key for key in self._watermark_before if key >= order]:
                del self._watermark_before[later]
            if self._group is not None:
                self._group.publish(self._member, self._last_watermark)
                self._published_ms = int(time.time() * 1000)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        """Record batches in stream order, blocking while there is nothing new; ends when a
        bounded stream ends. The position moves past a unit when its last batch is taken (before
        that batch is processed: a ``commit()`` after it saves the unit as consumed), so
        ``commit()`` mid-unit re-delivers that unit after a restart. Small files
        of the next units are read ahead while the current one is taken (which never changes
        what is delivered or in which order)."""
        return self.batches()

    def batches(self, *, timeout: float | None = None) -> Iterator[pa.RecordBatch]:
        """Like iteration, but stops once no new unit arrived for ``timeout`` seconds
        (``timeout=0``: catch up with what is committed now, then stop)."""
        consumed = self._position  # what ``position`` reports: past fully taken units only
        planned = self._position  # where planning continues (ahead of ``consumed``)
        handed = self._position  # where planning stood when it last gave out a unit
        #: Where planning got after that, past snapshots without rows for this stream (deletes,
        #: compactions, schema changes): once that unit is taken, the stream is past them too.
        past_empty: StreamPosition | None = None
        deadline = None if timeout is None else time.monotonic() + timeout

        def settled(position: StreamPosition) -> StreamPosition:
            return past_empty if position == handed and past_empty is not None else position

        def pull(block: bool) -> StreamUnit | None:
            nonlocal planned, handed, past_empty
            while True:
                self._position = planned
                try:
                    unit = self.poll()
                finally:
                    planned, self._position = self._position, consumed
                if unit is not None:
                    handed, past_empty = planned, None
                    return unit
                if planned != handed:
                    past_empty = planned
                if not block or self._finished:
                    return None
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                time.sleep(self._config.poll_interval_s)

        # Alignment publishes a unit's watermark when it is planned: plan one at a time there.
        limits = ReadAheadLimits(max_items=1 if self._group is not None else _UNITS_AHEAD)
        # Each batch is handed out once the next is known, so that the last one of a unit is
        # handed out with the position already past the unit: a ``commit()`` right after it
        # (the loop's next step) saves the whole unit as consumed.
        held: pa.RecordBatch | None = None
        try:
            for unit, batch in read_ahead(pull, _files_of, self._read_file, shared_pool(), limits):
                if batch is not None:
                    if held is not None:
                        yield held
                    held = batch
                    continue
                consumed = self._position = settled(unit.next_position)
                if held is not None:
                    last, held = held, None
                    yield last
                if timeout is not None:
                    deadline = time.monotonic() + timeout
        finally:
            self._position = settled(consumed)

    def _read_file(self, unit: StreamUnit, file: DataFileMeta) -> Iterator[pa.RecordBatch]:
        with self._expiry_reported(unit.snapshot_id, unit=True):
            yield from read_as(
                self._state.storage,
                file,
                self._projection,
                columns=self.columns,
                row_filter=self._filter,
                also_deleted=self._later_deletes.positions(file, unit.snapshot_id),
            )

    def checkpoint(self) -> StreamPosition:
        """The position to save and later ``seek`` to (an engine's offset)."""
        return self._position

    def commit(self, position: StreamPosition | None = None) -> None:
        """Persist progress for the consumer id (default: the current position). Atomic: a
        crash leaves the previous or the new progress."""
        if self._config.consumer_id is None:
            raise InvalidOptionError("commit() needs a consumer id (consumer_id= or 'consumer-id')")
        position = self._position if position is None else position
        if position.next_snapshot is None:
            return  # nothing read yet from an empty table
        self._save(position)

    def _save(self, position: StreamPosition, *, reset: bool = False) -> None:
        assert self._config.consumer_id is not None and position.next_snapshot is not None
        self._consumers.put(
            self._config.consumer_id,
            ConsumerState(
                next_snapshot=position.next_snapshot,
                full=position.full,
                time_ms=int(time.time() * 1000),
                buckets=self._bucket_selection(),
            ),
            reset=reset,
        )

    # ---- watermark alignment -------------------------------------------------------------------

    def _aligned(self, watermark: int | None) -> bool:
        if self._group is None:
            return True
        now = int(time.time() * 1000)
        others = {
            member: state
            for member, state in self._group.members().items()
            if member != self._member and now - state.time_ms <= self._config.alignment_idle_ms
        }
        allowed = may_emit(
            watermark,
            own=self._last_watermark,
            others=others,
            max_drift_ms=self._config.max_drift_ms,
        )
        if not allowed:
            self._heartbeat()
        return allowed

    def _emitted(self, watermark: int | None) -> None:
        if watermark is not None:
            self._last_watermark = watermark
        if self._group is not None:
            self._group.publish(self._member, self._last_watermark)
            self._published_ms = int(time.time() * 1000)

    def _heartbeat(self) -> None:
        if self._group is None:
            return
        now = int(time.time() * 1000)
        if now - self._published_ms >= self._config.alignment_update_ms:
            self._group.publish(self._member, self._last_watermark)
            self._published_ms = now

    def close(self) -> None:
        """Leave the watermark-alignment group (progress is saved only by ``commit``)."""
        if self._group is not None:
            self._group.leave(self._member)

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StreamReader(position={self._position}, finished={self._finished})"


def calling_on_failure(
    items: Generator[_T, None, None], on_failure: Callable[[], None]
) -> Generator[_T, None, None]:
    """The items of ``items``; ``on_failure()`` runs before an exception raised while producing
    one propagates. The caller stopping early is not a failure (``items`` is closed)."""
    try:
        while True:
            failed = True
            try:
                item = next(items)
                failed = False
            except StopIteration:
                failed = False
                return
            finally:
                if failed:
                    on_failure()
            yield item
    finally:
        items.close()
