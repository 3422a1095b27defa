"""The ``system`` command: print a system table (``Table.system_table``), or list them. Only
the public API of :mod:`appendtable` is used."""

from __future__ import annotations

import argparse

import pyarrow as pa

import appendtable as at
from appendtable.cli.commands import Context
from appendtable.cli.input_errors import UsageError
from appendtable.cli.output import TextTable, write_rows

__all__ = ["run_system"]

_DESCRIPTION_WIDTH = 200


def _catalogue() -> pa.Table:
    """One row per system table: its name, whether it time-travels, and its description."""
    infos = [at.system_table_info(name) for name in at.SYSTEM_TABLE_NAMES]
    return pa.table(
        {
            "name": pa.array([info.name for info in infos], pa.string()),
            "time_travel": pa.array([info.time_travel for info in infos], pa.bool_()),
            "description": pa.array([info.doc for info in infos], pa.string()),
        }
    )


def run_system(args: argparse.Namespace, ctx: Context) -> int:
    if args.name is None:
        if args.snapshot is not None or args.tag is not None:
            raise UsageError("system: --snapshot and --tag need a system table NAME")
        listing = _catalogue()
        if args.format == "table":  # the descriptions whole: they are what the listing is for
            writer = TextTable(ctx.out, listing.schema, max_width=_DESCRIPTION_WIDTH)
            writer.write(listing)
            writer.close()
        else:
            write_rows(args.format, ctx.out, listing.schema, [listing])
        return 0
    try:
        info = at.system_table_info(args.name)
    except at.InvalidArgumentError as exc:
        raise UsageError(f"system: {exc}") from exc
    if not info.time_travel and (args.snapshot is not None or args.tag is not None):
        travels = ", ".join(n for n in at.SYSTEM_TABLE_NAMES if at.system_table_info(n).time_travel)
        raise UsageError(
            f"system: {info.name} describes the table as it is now; --snapshot and --tag apply "
            f"to {travels}"
        )
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must not be negative")
    rows = ctx.open(args.uri).system_table(info.name, snapshot_id=args.snapshot, tag=args.tag)
    write_rows(args.format, ctx.out, rows.schema, [rows], limit=args.limit)
    return 0
