"""Commands that change a table in place or name its versions: alter, schema, tag. Only the
public API of :mod:`appendtable` is used."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pyarrow as pa

import appendtable as at
from appendtable.cli.commands import Context, snapshot_line
from appendtable.cli.ddl import (
    parse_column,
    parse_move,
    parse_path,
    parse_type,
)
from appendtable.cli.input_errors import CliError, UsageError
from appendtable.cli.output import cell_text, plural, write_rows
from appendtable.cli.value_parsing import parse_options

__all__ = ["ALTER_FLAGS", "run_alter", "run_schema", "run_tag"]

#: The change flags of ``alter``, in the order ``--help`` lists them: (flag, metavar, help).
ALTER_FLAGS: tuple[tuple[str, str, str], ...] = (
    (
        "--add-column",
        "'NAME TYPE [not null] [first|after COL]'",
        "add a column (a dotted name adds a struct field)",
    ),
    ("--rename", "OLD=NEW", "rename a column or struct field"),
    ("--drop", "COLUMN", "drop a column or struct field"),
    ("--widen", "COLUMN=TYPE", "widen a column's type (e.g. int32 to int64)"),
    ("--nullable", "COLUMN", "make a required (not null) column nullable"),
    ("--doc", "COLUMN=TEXT", "set a column's doc (empty TEXT: remove it)"),
    ("--move", "'COLUMN first|after COL|before COL'", "move a column or struct field"),
    ("--set", "KEY=VALUE", "set a table option"),
    ("--unset", "KEY", "return a table option to its default"),
)


# ---- alter --------------------------------------------------------------------------------------


def _column(text: str, what: str) -> str | tuple[str, ...]:
    """A column named on the command line: the text (a dotted name is a struct field, as in
    ``UpdateSchema``); names in backticks or double quotes are taken whole
    (```odd.name```, ``payload.`x y```)."""
    name = text.strip()
    if not name:
        raise UsageError(f"{what}: expected a column name, got {text!r}")
    if "`" in name or '"' in name:
        return parse_path(name, what=f"{what} {text!r}")
    return name


def _pair(text: str, what: str, right: str) -> tuple[str | tuple[str, ...], str]:
    """``COLUMN=VALUE`` (the column ends at the first '=')."""
    column, sep, value = text.partition("=")
    if not sep:
        raise UsageError(f"{what} expects COLUMN={right}, got {text!r}")
    return _column(column, what), value.strip()


def _name(path: str | tuple[str, ...]) -> str:
    return path if isinstance(path, str) else ".".join(path)


def _field_type(schema: pa.Schema, path: str | tuple[str, ...]) -> pa.DataType | None:
    """The type of a column or struct field before the change (None if it cannot be found)."""
    if isinstance(path, str):
        parts = [path] if path in schema.names else path.split(".")
    else:
        parts = list(path)
    fields: Sequence[pa.Field] = list(schema)
    found: pa.Field | None = None
    for part in parts:
        found = next((f for f in fields if f.name == part), None)
        if found is None:
            return None
        fields = list(found.type) if pa.types.is_struct(found.type) else []
    return None if found is None else found.type


def _plan(
    update: at.UpdateSchema, changes: Sequence[tuple[str, str]], schema: pa.Schema
) -> tuple[list[str], list[str]]:
    """Add ``changes`` (flag, text), in command-line order, to ``update``. Returns the lines
    that describe them and the names of the required columns added."""
    lines: list[str] = []
    required: list[str] = []
    for flag, text in changes:
        what = f"{flag} {text!r}"
        if flag == "--add-column":
            column = parse_column(text, what=what)
            update.add_column(
                column.path,
                column.type,
                nullable=column.nullable,
                first=column.first,
                after=column.after,
            )
            place = " first" if column.first else f" after {column.after}" if column.after else ""
            null = "" if column.nullable else " not null"
            lines.append(f"added column {column.name} {at.format_type(column.type)}{null}{place}")
            if not column.nullable:
                required.append(column.name)
        elif flag == "--rename":
            old, new = _pair(text, flag, "NEW")
            if len(new) > 2 and new[0] == new[-1] and new[0] in '`"':
                new = new[1:-1]  # a quoted new name, as in the DDL
            if not new:
                raise UsageError(f"{flag} {text!r}: the new name is empty")
            update.rename_column(old, new)
            lines.append(f"renamed column {_name(old)} to {new}")
        elif flag == "--drop":
            path = _column(text, flag)
            update.drop_column(path)
            lines.append(f"dropped column {_name(path)}")
        elif flag == "--widen":
            path, type_text = _pair(text, flag, "TYPE")
            dtype = parse_type(type_text, what=f"{flag} column '{_name(path)}'")
            update.update_column(path, type=dtype)
            old_type = _field_type(schema, path)
            was = "" if old_type is None else f" from {at.format_type(old_type)}"
            lines.append(f"widened column {_name(path)}{was} to {at.format_type(dtype)}")
        elif flag == "--nullable":
            path = _column(text, flag)
            update.update_column(path, nullable=True)
            lines.append(f"made column {_name(path)} nullable")
        elif flag == "--doc":
            path, doc = _pair(text, flag, "TEXT")
            update.update_column(path, doc=doc)
            lines.append(
                f"set the doc of column {_name(path)}"
                if doc
                else f"removed the doc of column {_name(path)}"
            )
        elif flag == "--move":
            move = parse_move(text, what=what)
            if move.first:
                update.move_first(move.path)
                lines.append(f"moved column {move.name} first")
            elif move.after is not None:
                update.move_after(move.path, move.after)
                lines.append(f"moved column {move.name} after {move.after}")
            else:
                assert move.before is not None
                update.move_before(move.path, move.before)
                lines.append(f"moved column {move.name} before {move.before}")
        elif flag == "--set":
            options = parse_options([text], flag)
            update.set_options(options)
            lines.extend(f"set option {k}={v}" for k, v in options.items())
        else:
            assert flag == "--unset", flag
            key = text.strip()
            if not key:
                raise UsageError(f"{flag}: expected an option key, got {text!r}")
            update.unset_options([key])
            lines.append(f"unset option {key}")
    return lines, required


def run_alter(args: argparse.Namespace, ctx: Context) -> int:
    changes: list[tuple[str, str]] = args.changes or []
    if not changes:
        flags = ", ".join(flag for flag, _, _ in ALTER_FLAGS)
        raise UsageError(f"alter: nothing to change (give one or more of {flags})")
    table = ctx.open(args.uri)
    before = table.schema_id
    update = table.update_schema()
    required: list[str] = []
    try:
        lines, required = _plan(update, changes, table.schema)
        snapshot = update.commit()
    except (at.InvalidSchemaError, at.InvalidOptionError, at.InvalidArgumentError) as exc:
        message = str(exc)
        if isinstance(exc, at.SchemaChangeError) and exc.column is None and required:
            # The refusal of a required column on a table with rows names no column.
            message += f" (adding {', '.join(repr(name) for name in required)})"
        raise CliError(f"alter: {message}; nothing was changed") from exc
    if snapshot is None:
        ctx.say(f"nothing to change: the table is like that already (schema {before})")
        return 0
    ctx.say(
        f"altered {table.uri}: schema {before} -> {snapshot.schema_id} "
        f"(snapshot {snapshot.id}, {snapshot.kind.value})"
    )
    for line in lines:
        ctx.say(f"  {line}")
    ctx.say(f"  schema: {at.format_schema(table.schemas()[snapshot.schema_id])}")
    return 0


# ---- schema -------------------------------------------------------------------------------------


def _versions(table: at.Table) -> pa.Table:
    """Every schema version: schema_id, time, columns (in the DDL), options, current."""
    history = table.schema_history()
    schemas = table.schemas()
    ids = history["schema_id"].to_pylist()
    listed = history["columns"].to_pylist()
    columns = [
        at.format_schema(schemas[i]) if i in schemas else text
        for i, text in zip(ids, listed, strict=True)
    ]
    return history.set_column(
        history.schema.get_field_index("columns"), "columns", pa.array(columns, pa.string())
    )


def run_schema(args: argparse.Namespace, ctx: Context) -> int:
    table = ctx.open(args.uri)
    versions = _versions(table)
    if not args.history:
        current = versions.filter(versions["current"])
        if args.format != "table":
            write_rows(args.format, ctx.out, current.schema, [current])
            return 0
        row = current.to_pylist()[0]
        ctx.say(f"-- schema {row['schema_id']} of {table.uri}")
        if table.partition_by:
            ctx.say(f"-- partitioned by: {', '.join(table.partition_by)}")
        if row["options"]:
            ctx.say(f"-- options: {row['options']}")
        ctx.say(at.format_schema(table.schemas()[row["schema_id"]], separator=",\n"))
        return 0
    if args.format != "table":
        write_rows(args.format, ctx.out, versions.schema, [versions])
        return 0
    # A text table would cut the columns at 40 characters: one block per version instead.
    for row in versions.to_pylist():
        current = "  (current)" if row["current"] else ""
        ctx.say(f"schema {row['schema_id']}  {cell_text(row['time'])}{current}")
        ctx.say(f"  columns  {row['columns']}")
        ctx.say(f"  options  {row['options'] or '-'}")
    ctx.say(f"({plural(versions.num_rows, 'schema version')})")
    return 0


# ---- tag ----------------------------------------------------------------------------------------


def _tag_name(args: argparse.Namespace) -> str:
    if not args.name:
        raise UsageError(f"tag {args.action}: give the tag's NAME")
    return str(args.name)


def run_tag(args: argparse.Namespace, ctx: Context) -> int:
    if args.action != "create" and args.snapshot is not None:
        raise UsageError("--snapshot applies to 'tag URI create NAME' only")
    if args.action == "list" and args.name is not None:
        raise UsageError(f"tag: unexpected {args.name!r} (use: tag URI create|delete NAME)")
    table = ctx.open(args.uri)
    if args.action == "list":
        tags = table.tags()
        rows = pa.table(
            {
                "tag": pa.array(list(tags), pa.string()),
                "snapshot_id": pa.array(list(tags.values()), pa.int64()),
            }
        )
        write_rows(args.format, ctx.out, rows.schema, [rows])
        return 0
    name = _tag_name(args)
    try:
        if args.action == "create":
            snapshot = table.create_tag(name, args.snapshot)
            ctx.say(f"created tag {name} on snapshot {snapshot_line(snapshot)}")
            return 0
        table.delete_tag(name)
    except at.InvalidArgumentError as exc:  # a malformed tag name
        raise UsageError(str(exc)) from exc
    ctx.say(f"deleted tag {name}")
    return 0
