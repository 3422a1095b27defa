"""Maintenance commands: compact, expire, remove-orphans, rollback, consumers (and their lag)."""

from __future__ import annotations

import argparse
import datetime as dt
import time

import pyarrow as pa
import pyarrow.compute as pc

import appendtable as at
from appendtable.cli.commands import Context
from appendtable.cli.input_errors import InputError, UsageError
from appendtable.cli.output import Progress, format_bytes, plural, progress_bar, write_rows
from appendtable.cli.value_parsing import (
    parse_columns,
    parse_duration,
    parse_filters,
    parse_partition,
)

__all__ = [
    "run_compact",
    "run_consumers",
    "run_delete_consumer",
    "run_expire",
    "run_remove_orphans",
    "run_rollback",
]


def _ids(ids: list[int]) -> str:
    if not ids:
        return "none"
    if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 1:
        return f"{ids[0]}..{ids[-1]}"
    return ", ".join(str(i) for i in ids)


def _progress_text(progress: at.CompactionProgress) -> str:
    return (
        f"{progress.tasks_done}/{progress.tasks_total} tasks: "
        f"{plural(progress.files_read, 'file')} ({format_bytes(progress.bytes_read)}) -> "
        f"{plural(progress.files_written, 'file')} ({format_bytes(progress.bytes_written)})"
    )


def run_compact(args: argparse.Namespace, ctx: Context) -> int:
    if args.parallelism is not None and args.parallelism < 1:
        raise UsageError("--parallelism must be at least 1")
    table = ctx.open(args.uri)
    partitions = [
        parse_partition(text, table.schema, table.partition_by) for text in args.partition or ()
    ]
    progress = Progress(ctx.err, enabled=not args.quiet)
    last: list[at.CompactionProgress] = []

    def report(update: at.CompactionProgress) -> None:
        last[:] = [update]
        fraction = update.tasks_done / update.tasks_total if update.tasks_total else 1.0
        progress.update(f"compact {progress_bar(fraction)}  {_progress_text(update)}")

    if args.sort_by:
        snapshot = table.sort_compact(
            parse_columns(args.sort_by, "--sort-by"),
            strategy=args.strategy,
            partitions=partitions or None,
            parallelism=args.parallelism,
            progress=report,
        )
    else:
        if args.strategy != "order":
            raise UsageError("--strategy applies to a sort compaction (--sort-by) only")
        snapshot = table.compact(
            full=args.full,
            partitions=partitions or None,
            parallelism=args.parallelism,
            progress=report,
        )
    if last:
        progress.done(f"compact  {_progress_text(last[0])}")
    if snapshot is None:
        ctx.say("nothing to compact")
        return 0
    moved = f": {_progress_text(last[0])}" if last else ""
    ctx.say(
        f"snapshot {snapshot.id} ({snapshot.kind.value}){moved}; the table has "
        f"{plural(snapshot.total_file_count, 'data file')}"
    )
    return 0


def run_expire(args: argparse.Namespace, ctx: Context) -> int:
    for name in ("retain_min", "retain_max"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if (
        args.retain_min is not None
        and args.retain_max is not None
        and (args.retain_max < args.retain_min)
    ):
        raise UsageError("--retain-max must not be smaller than --retain-min")
    older_than_ms = None
    if args.older_than is not None:
        seconds = parse_duration(args.older_than, "--older-than")
        older_than_ms = int((time.time() - seconds) * 1000)
    table = ctx.open(args.uri)
    try:
        result = table.expire_snapshots(
            retain_min=args.retain_min,
            retain_max=args.retain_max,
            older_than_ms=older_than_ms,
            dry_run=args.dry_run,
        )
    except (at.InvalidArgumentError, at.InvalidOptionError) as exc:  # retain_min <= retain_max
        raise UsageError(f"expire: {exc}") from None
    verb = "would expire" if args.dry_run else "expired"
    deleted = "would delete" if args.dry_run else "deleted"
    ctx.say(f"{verb} snapshots: {_ids(result.expired_snapshots)}")
    ctx.say(
        f"{deleted} {plural(len(result.deleted_data_files), 'data file')} and "
        f"{plural(len(result.deleted_metadata_files), 'metadata file')}"
    )
    if result.expired_consumers:
        ctx.say(f"{verb} consumers: {', '.join(result.expired_consumers)}")
    if result.expired_groups:
        ctx.say(f"{verb} consumer groups: {', '.join(result.expired_groups)}")
    ctx.say(f"earliest retained snapshot: {result.earliest_snapshot}")
    if args.dry_run:
        ctx.say("dry run: nothing was deleted")
    return 0


def run_delete(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    where = parse_filters(args.filter, table.schema)
    if where is None:
        raise UsageError("delete needs --filter (what to delete)")
    result = table.delete(where, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    how = (
        f"{plural(result.vectors_written, 'deletion vector')} written"
        if result.mode == "deletion-vectors"
        else f"{plural(result.files_rewritten, 'file')} rewritten"
    )
    ctx.say(
        f"{verb} {plural(result.rows, 'row')} in {plural(result.files_touched, 'file')} "
        f"({how}, {result.files_removed:,} removed; {result.mode})"
    )
    if result.snapshot is not None:
        ctx.say(f"snapshot {result.snapshot.id} (DELETE)")
    if args.dry_run:
        ctx.say("dry run: nothing was written")
    return 0


def run_purge(args: argparse.Namespace, ctx: Context) -> int:
    seconds = parse_duration(args.older_than, "--older-than")
    table = ctx.open(args.uri)
    result = table.purge(
        older_than=dt.timedelta(seconds=seconds), tags=args.tags, dry_run=args.dry_run
    )
    verb = "would purge" if args.dry_run else "purged"
    ctx.say(
        f"{verb}: {plural(result.files_rewritten, 'file')} rewritten without "
        f"{plural(result.rows_dropped, 'deleted row')}, "
        f"{plural(len(result.expired_snapshots), 'snapshot')} expired, "
        f"{plural(len(result.deleted_files), 'file')} deleted"
    )
    for name in result.tags_deleted:
        ctx.say(f"tag {name} held deleted rows: deleted")
    for name in result.tags_kept:
        ctx.say(f"tag {name} holds deleted rows: kept (its rows are not purged)")
    for path in result.young_orphans:
        ctx.say(f"unreferenced but younger than {args.older_than}, left: {path}")
    for what in result.blocked_by:
        ctx.say(f"would refuse: {what}")
    if result.snapshot is not None:
        ctx.say(f"snapshot {result.snapshot.id} (COMPACT)")
    if args.dry_run:
        ctx.say("dry run: nothing was written")
    return 0


def run_remove_orphans(args: argparse.Namespace, ctx: Context) -> int:
    seconds = parse_duration(args.older_than, "--older-than")
    table = ctx.open(args.uri)
    result = table.remove_orphan_files(
        older_than=dt.timedelta(seconds=seconds), dry_run=not args.force
    )
    for path in result.files:
        ctx.say(path)
    for path in result.not_table_files:
        ctx.say(f"not the table's, left alone: {path}")
    found = f"{plural(len(result.files), 'orphan file')} ({format_bytes(result.bytes)})"
    if args.force:
        ctx.say(f"deleted {found} older than {args.older_than}")
    else:
        ctx.say(
            f"dry run: {found} older than {args.older_than} would be deleted; "
            "nothing was deleted (use --force to delete)"
        )
    return 0


def run_rollback(args: argparse.Namespace, ctx: Context) -> int:
    if (args.snapshot_id is None) == (args.tag is None):
        raise UsageError("rollback: give a SNAPSHOT_ID or --tag NAME (exactly one)")
    table = ctx.open(args.uri)
    restore = bool(args.restore_schema)
    if args.tag is not None:
        tagged = table.tags().get(args.tag)
        snapshot = table.rollback_to(tag=args.tag, restore_schema=restore)
        target = f"tag {args.tag}" + ("" if tagged is None else f" (snapshot {tagged})")
    else:
        snapshot = table.rollback_to(args.snapshot_id, restore_schema=restore)
        target = f"snapshot {args.snapshot_id}"
    ctx.say(
        f"rolled back to {target}: new snapshot {snapshot.id} "
        f"({snapshot.kind.value}) holds {plural(snapshot.total_record_count, 'row')} in "
        f"{plural(snapshot.total_file_count, 'file')}, schema {snapshot.schema_id}"
        + (" (restored)" if restore else " (kept)")
    )
    return 0


def run_consumers(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    stalled_after = parse_duration(args.stalled_after, "--stalled-after")
    if args.group is not None and args.group not in table.consumer_groups():
        raise InputError(f"{args.uri} has no consumer group {args.group!r}")
    lag = table.consumer_lag(group=args.group, stalled_after=stalled_after)
    # Seconds print the same in every format (a duration would print as H:MM:SS text).
    seconds = pc.divide(lag["time_behind"].cast(pa.int64()), 1000.0)
    at_column = lag.schema.get_field_index("time_behind")
    rows = lag.set_column(at_column, pa.field("seconds_behind", pa.float64(), False), seconds)
    write_rows(args.format, ctx.out, rows.schema, rows.to_batches())
    return 0


def run_delete_consumer(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    if args.consumer_id not in table.consumers():
        hint = (
            " (it is a consumer group: members leave it with close(); Table.delete_consumer_group "
            "forgets it)"
            if args.consumer_id in table.consumer_groups()
            else ""
        )
        raise InputError(f"{args.uri} has no consumer {args.consumer_id!r}{hint}")
    table.delete_consumer(args.consumer_id)
    ctx.say(f"deleted consumer {args.consumer_id}")
    return 0


def run_iceberg(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    if args.repair:
        location = table.publish_iceberg(rebuild=True)
        ctx.say(f"Iceberg mirror rebuilt: {location or 'no snapshot to mirror yet'}")
        return 0
    location = table.iceberg_metadata_location()
    if location is None:
        if table.option("metadata.iceberg.storage") == "disabled":
            ctx.say(
                "the Iceberg mirror is off (turn it on: appendtable alter URI --set "
                "metadata.iceberg.storage=table-location)"
            )
        else:
            ctx.say("the Iceberg mirror is on but not written yet (it follows the next commit)")
        return 0
    ctx.say(location)
    return 0
