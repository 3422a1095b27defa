"""``appendtable tail``: follow a table like ``tail -f``, printing rows as snapshots land.

With ``--consumer-id`` the reader's progress is committed after each printed unit (one
snapshot's rows), so a restarted ``tail`` continues after the last unit it printed completely,
and when it catches up past snapshots without rows, so a consumer that drained the table
holds back neither expiration nor purge. A unit interrupted half-way is printed again
(at-least-once). With ``--group`` it is a member of
a consumer group and the same holds per bucket it is given; a unit whose buckets were taken
over meanwhile is printed again by their new holder. Ctrl-C ends it cleanly.
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa

import appendtable as at
from appendtable.cli.commands import Context
from appendtable.cli.input_errors import UsageError
from appendtable.cli.output import make_writer
from appendtable.cli.value_parsing import (
    parse_buckets,
    parse_columns,
    parse_duration,
    parse_filters,
)

__all__ = ["run_tail"]


def _reader(
    args: argparse.Namespace, table: at.Table, poll: float
) -> at.StreamReader | at.GroupReader:
    mode: str | None = None
    snapshot_id: int | None = None
    if args.start == "earliest":
        earliest = table.earliest_snapshot()
        if earliest is not None:
            mode, snapshot_id = "from-snapshot-full", earliest.id
        else:
            mode = "latest-full"  # empty: everything from the first snapshot on
    elif args.start is not None:
        mode = args.start
    filters = parse_filters(args.filter, table.schema)
    columns = parse_columns(args.columns, "--columns") if args.columns else None
    group: str | None = args.group
    if group is not None:
        if args.buckets:
            raise UsageError("--buckets cannot be combined with --group: the group assigns them")
        return table.stream(
            mode=mode,
            snapshot_id=snapshot_id,
            group=group,
            member=args.member,
            columns=columns,
            filter=filters,
            poll_interval=poll,
        )
    if args.member is not None:
        raise UsageError("--member needs --group: the consumer group to join")
    return table.stream(
        mode=mode,
        snapshot_id=snapshot_id,
        consumer_id=args.consumer_id,
        buckets=parse_buckets(args.buckets) if args.buckets else None,
        columns=columns,
        filter=filters,
        poll_interval=poll,
    )


def _commit(reader: at.StreamReader | at.GroupReader, ctx: Context) -> None:
    try:
        reader.commit()
    except at.ConsumerFencedError as exc:
        # Another member took these buckets over: it prints their rows again from the last
        # commit. This member goes on with the buckets it still holds.
        ctx.err.write(f"appendtable tail: {exc}\n")
        ctx.err.flush()


def _uncommitted(
    reader: at.StreamReader | at.GroupReader, committed: at.StreamPosition | None
) -> bool:
    """Whether the reader moved since its last commit (``committed``: a stream reader's)."""
    if isinstance(reader, at.GroupReader):
        return reader.positions != reader.committed
    return reader.position != committed


def _stream_position(reader: at.StreamReader | at.GroupReader) -> at.StreamPosition | None:
    """A stream reader's position (a group member's are per bucket: see ``_uncommitted``)."""
    return reader.position if isinstance(reader, at.StreamReader) else None


def run_tail(args: argparse.Namespace, ctx: Context) -> int:
    poll = parse_duration(args.poll, "--poll")
    idle_exit = parse_duration(args.idle_exit, "--idle-exit") if args.idle_exit else None
    if args.max_units is not None and args.max_units < 1:
        raise UsageError("--max-units must be at least 1")
    table = ctx.open(args.uri)
    reader = _reader(args, table, poll)
    columns = reader.columns if reader.columns is not None else table.schema.names
    schema = pa.schema([table.schema.field(name) for name in columns])
    header = True  # CSV: one header for the whole stream
    units = 0
    last_activity = time.monotonic()
    keeps_progress = bool(args.consumer_id or args.group)
    committed = _stream_position(reader)
    try:
        with reader:
            while args.max_units is None or units < args.max_units:
                unit = reader.poll()
                if unit is None:
                    if keeps_progress and _uncommitted(reader, committed):
                        # caught up past snapshots without rows (compactions, deletes,
                        # schema changes): a consumer left before them would hold them
                        _commit(reader, ctx)
                        committed = _stream_position(reader)
                    if reader.finished:
                        break
                    if idle_exit is not None and time.monotonic() - last_activity >= idle_exit:
                        break
                    time.sleep(poll)
                    continue
                if args.format == "table":
                    # (the rows printed are counted after them: the unit's own count includes
                    # rows that later deletes or --filter leave out)
                    ctx.say(
                        f"-- snapshot {unit.snapshot_id} ({unit.commit_kind.value}"
                        f"{', full' if unit.full else ''})"
                    )
                writer = make_writer(args.format, ctx.out, schema, header=header, footer=True)
                header = False
                for batch in reader.read(unit):
                    writer.write(batch)
                writer.close()
                ctx.out.flush()
                if keeps_progress:
                    _commit(reader, ctx)  # only after the whole unit was printed
                    committed = _stream_position(reader)
                units += 1
                last_activity = time.monotonic()
    except KeyboardInterrupt:
        ctx.err.write("\n")
    return 0
