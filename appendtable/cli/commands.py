"""Commands that create, load and inspect tables: create, append, info, snapshots, files, head,
scan. Only the public API of :mod:`appendtable` is used."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc

import appendtable as at
from appendtable.cli.ddl import parse_schema
from appendtable.cli.input_errors import InputError, UsageError
from appendtable.cli.inputs import NULL_VALUES, InputFile, open_input, read_schema
from appendtable.cli.output import (
    Progress,
    cell_text,
    format_bytes,
    plural,
    print_pairs,
    progress_bar,
    write_rows,
)
from appendtable.cli.value_parsing import (
    parse_columns,
    parse_filters,
    parse_options,
)

__all__ = [
    "Context",
    "run_append",
    "run_create",
    "run_files",
    "run_head",
    "run_info",
    "run_scan",
    "run_snapshots",
    "snapshot_line",
]

# The public API lists only the options set on a table, not effective values with defaults;
# these two mirror the option registry's defaults (tests/cli keeps them equal).


@dataclass
class Context:
    """What every command gets besides its arguments."""

    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)
    storage_options: Mapping[str, object] | None = None

    def open(self, uri: str) -> at.Table:
        return at.open_table(uri, storage_options=self.storage_options or None)

    def say(self, text: str) -> None:
        self.out.write(text + "\n")


# ---- create -------------------------------------------------------------------------------------


def run_create(args: argparse.Namespace, ctx: Context) -> int:
    if args.schema is not None:
        schema = parse_schema(args.schema, what="--schema")
    else:
        schema = read_schema(args.schema_from)
    partition_by = parse_columns(args.partition_by, "--partition-by") if args.partition_by else []
    table = at.create_table(
        args.uri,
        schema,
        partition_by=partition_by,
        options=parse_options(args.option, "--option"),
        storage_options=ctx.storage_options or None,
    )
    ctx.say(f"created table {table.uri}")
    ctx.say(f"  schema: {at.format_schema(table.schema)}")
    if partition_by:
        ctx.say(f"  partitioned by: {', '.join(partition_by)}")
    if table.options:
        ctx.say("  options: " + ", ".join(f"{k}={v}" for k, v in sorted(table.options.items())))
    return 0


# ---- append -------------------------------------------------------------------------------------


class _Feed:
    """Writes input files into a writer, drawing the progress line."""

    def __init__(self, inputs: list[InputFile], progress: Progress) -> None:
        self.inputs = inputs
        self.progress = progress

    def write(self, writer: at.TableWriter, index: int) -> int:
        source = self.inputs[index]
        label = f"[{index + 1}/{len(self.inputs)}] {source.path}"
        rows = 0
        for batch, consumed in source.batches():
            try:
                writer.write(_with_missing_nulls(batch, source.schema))
            except at.SchemaMismatchError as exc:
                raise InputError(f"{source.path}: {exc}") from exc
            rows += batch.num_rows
            fraction = consumed / source.size if source.size else 1.0
            self.progress.update(
                f"{label} {progress_bar(fraction)}  {plural(rows, 'row')}  "
                f"{format_bytes(consumed)} / {format_bytes(source.size)}"
            )
        self.progress.done(f"{label}  {plural(rows, 'row')}  {format_bytes(source.size)}  read")
        return rows


def _with_missing_nulls(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Nullable table columns the input lacks, filled with nulls (CSV cannot hold lists, and
    JSON lines often leave keys out); the writer rejects every other mismatch."""
    missing = [f for f in schema if f.nullable and f.name not in batch.schema.names]
    for column in missing:
        batch = batch.append_column(column, pa.nulls(batch.num_rows, column.type))
    return batch


def _commit(committer: at.TableCommit, messages: list[at.CommitMessage]) -> at.Snapshot | None:
    with committer.discarding(messages):
        return committer.commit(messages)


def _landed(snapshot: at.Snapshot | None, rows: int) -> str:
    if snapshot is None:
        return "no rows, nothing committed"
    return (
        f"{plural(rows, 'row')} -> snapshot {snapshot.id} "
        f"(table: {plural(snapshot.total_record_count, 'row')}, "
        f"{plural(snapshot.total_file_count, 'file')})"
    )


def run_append(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    # Every input is checked to exist before anything is committed.
    nulls = NULL_VALUES if args.null_values is None else tuple(args.null_values.split(","))
    inputs = [open_input(path, args.format, table.schema, nulls) for path in args.files]
    feed = _Feed(inputs, Progress(ctx.err, enabled=not args.quiet))
    committer = table.committer()
    if args.one_commit:
        with table.writer() as writer:
            rows = sum(feed.write(writer, i) for i in range(len(inputs)))
            messages = writer.prepare_commit()
        snapshot = _commit(committer, messages)
        ctx.say(f"{plural(len(inputs), 'file')}: {_landed(snapshot, rows)}")
        return 0
    for index, source in enumerate(inputs):
        with table.writer() as writer:
            rows = feed.write(writer, index)
            messages = writer.prepare_commit()
        snapshot = _commit(committer, messages)
        ctx.say(f"{source.path}: {_landed(snapshot, rows)}")
        ctx.out.flush()
    return 0


# ---- info ---------------------------------------------------------------------------------------


def small_file_threshold(table: at.Table) -> int:
    """Files below this are small (``compaction.small-file-ratio`` x ``target-file-size``)."""
    target = table.option("target-file-size")
    ratio = table.option("compaction.small-file-ratio")
    assert isinstance(target, int) and isinstance(ratio, float)
    return int(target * ratio)


def snapshot_line(snapshot: at.Snapshot) -> str:
    history = f"{snapshot.kind.value} at {cell_text(_utc(snapshot.time_ms))}"
    text = (
        f"{snapshot.id} ({history}), {plural(snapshot.total_record_count, 'row')}, "
        f"{plural(snapshot.total_file_count, 'file')}"
    )
    if snapshot.watermark is not None:
        text += f", watermark {cell_text(_utc(snapshot.watermark))}"
    return text


def _utc(epoch_ms: int) -> object:
    return pa.scalar(epoch_ms, pa.timestamp("ms", tz="UTC")).as_py()


def run_info(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    latest = table.latest_snapshot()
    history = table.history()
    layout = (
        f"{table.bucket} buckets, bucket key {', '.join(table.bucket_key)}"
        if table.bucket > 0
        else "scalable (bucket = -1)"
    )
    pairs: list[tuple[str, object]] = [
        ("table", table.uri),
        ("partitioned by", ", ".join(table.partition_by) or "-"),
        ("layout", layout),
        ("options", ", ".join(f"{k}={v}" for k, v in sorted(table.options.items())) or "-"),
        ("latest snapshot", snapshot_line(latest) if latest else "none (empty table)"),
        ("schema id", table.schema_id),
    ]
    if history.num_rows:
        ids = history["id"].to_pylist()
        pairs.append(("snapshots", f"{len(ids):,} retained ({ids[0]}..{ids[-1]})"))
    consumers = table.consumers()
    if consumers:
        pairs.append(
            ("consumers", ", ".join(f"{name} (next {n})" for name, n in consumers.items()))
        )
    tags = table.tags()
    if tags:
        pairs.append(("tags", ", ".join(f"{name} -> {n}" for name, n in tags.items())))
    files = table.files()
    threshold = small_file_threshold(table)
    total = int(pc.sum(files["bytes"]).as_py() or 0)
    small = pc.less(files["bytes"], threshold)
    small_count = int(pc.sum(small).as_py() or 0)
    pairs.append(("data files", f"{plural(files.num_rows, 'file')}, {format_bytes(total)}"))
    ratio = f"{small_count / files.num_rows:.0%}" if files.num_rows else "-"
    pairs.append(("small files", f"{small_count:,} ({ratio}) below {format_bytes(threshold)}"))
    print_pairs(ctx.out, pairs)
    ctx.say("schema (as --schema takes it):")
    ctx.say("  " + at.format_schema(table.schema, separator=",\n  "))
    if files.num_rows:
        ctx.say("")
        groups = (
            files.append_column("small", small)
            .group_by(["partition", "bucket"], use_threads=False)
            .aggregate([("path", "count"), ("rows", "sum"), ("bytes", "sum"), ("small", "sum")])
            .select(["partition", "bucket", "path_count", "small_sum", "rows_sum", "bytes_sum"])
            .rename_columns(["partition", "bucket", "files", "small", "rows", "bytes"])
            .sort_by([("partition", "ascending"), ("bucket", "ascending")])
        )
        shown = groups.slice(0, args.max_groups)
        sizes = pa.array([format_bytes(b) for b in shown["bytes"].to_pylist()], pa.string())
        shown = shown.set_column(5, "size", sizes)
        write_rows("table", ctx.out, shown.schema, [shown])
        if groups.num_rows > shown.num_rows:
            ctx.say(f"... {groups.num_rows - shown.num_rows:,} more (--max-groups)")
    return 0


# ---- snapshots, files, head, scan -------------------------------------------------------------


def run_snapshots(args: argparse.Namespace, ctx: Context) -> int:
    history = ctx.open(args.uri).history()
    write_rows(args.format, ctx.out, history.schema, [history])
    return 0


def run_files(args: argparse.Namespace, ctx: Context) -> int:
    files = ctx.open(args.uri).files(args.snapshot)
    write_rows(args.format, ctx.out, files.schema, [files])
    return 0


def run_head(args: argparse.Namespace, ctx: Context) -> int:
    if args.n < 0:
        raise UsageError("-n must not be negative")
    scan = ctx.open(args.uri).scan(
        columns=parse_columns(args.columns, "--columns") if args.columns else None
    )
    write_rows(args.format, ctx.out, scan.output_schema, scan.to_batches(), limit=args.n)
    return 0


def run_scan(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    # Filters are typed by the schema of the snapshot read, which time travel (--snapshot,
    # --tag) may take to an older schema version (a column renamed or widened since).
    pinned = table.scan(snapshot_id=args.snapshot, tag=args.tag)
    snapshot_id = args.snapshot
    if args.tag is None and pinned.snapshot is not None:
        snapshot_id = pinned.snapshot.id  # the latest stays the one the filters were typed by
    scan = table.scan(
        columns=parse_columns(args.columns, "--columns") if args.columns else None,
        filter=parse_filters(args.filter, pinned.output_schema),
        snapshot_id=snapshot_id,
        tag=args.tag,
    )
    if args.count:
        ctx.say(str(scan.count()))
        return 0
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must not be negative")
    write_rows(args.format, ctx.out, scan.output_schema, scan.to_batches(), limit=args.limit)
    return 0
