"""The ``appendtable`` command line: create, load, inspect, tail and maintain tables.

Run ``appendtable --help`` or ``appendtable COMMAND --help``. Errors print one ``error: ...``
line on stderr; the exit code is 2 when the command line itself is wrong and 1 when the
operation failed (``--debug`` adds the traceback). Only the public API of :mod:`appendtable` is
used, so everything here can be done from Python as well.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import textwrap
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

import appendtable as at
from appendtable.cli.commands import (
    Context,
    run_append,
    run_create,
    run_files,
    run_head,
    run_info,
    run_scan,
    run_snapshots,
)
from appendtable.cli.follow import run_tail
from appendtable.cli.input_errors import CliError, UsageError
from appendtable.cli.inputs import INPUT_FORMATS
from appendtable.cli.maintain import (
    run_compact,
    run_consumers,
    run_delete,
    run_delete_consumer,
    run_expire,
    run_iceberg,
    run_purge,
    run_remove_orphans,
    run_rollback,
)
from appendtable.cli.output import FORMATS
from appendtable.cli.system import run_system
from appendtable.cli.value_parsing import parse_storage_options
from appendtable.cli.versions import ALTER_FLAGS, run_alter, run_schema, run_tag

__all__ = ["build_parser", "main"]

Command = Callable[[argparse.Namespace, Context], int]

_DESCRIPTION = """\
Apache Paimon-style append tables: Parquet files plus atomic snapshots, ordered streaming reads
and compaction. URI is a local path or an fsspec URL (s3://bucket/table, memory://t, ...)."""

_EPILOG = """\
examples:
  appendtable create /data/events --schema "day date, user_id int64 not null, action string" \\
      --partition-by day --option bucket=4 --option bucket-key=user_id
  appendtable append /data/events part-1.parquet part-2.csv
  appendtable info /data/events
  appendtable scan /data/events --filter "user_id = 7" --format csv
  appendtable tail /data/events --consumer-id billing
  appendtable alter /data/events --add-column "country string after action" --drop legacy

exit codes: 0 success, 1 the operation failed, 2 the command line is wrong."""

_COMMANDS: dict[str, tuple[str, str, str]] = {
    # name: (summary, description, examples)
    "create": (
        "create an empty table",
        "Create an empty table from a DDL schema or the schema of a Parquet (CSV, JSON lines) "
        "file.\n\nDDL types: bool, int8..int64, uint8..uint64, float16/32/64 (float, double), "
        "string, large_string, binary, large_binary, fixed_size_binary[N], date (date32), "
        "date64, timestamp[unit(, tz)], time32[unit], time64[unit], duration[unit], "
        "decimal(p, s), list<T>, large_list<T>, fixed_size_list<T>[N], struct<a T, ...>, "
        "map<K, V>; append 'not null' to a column. Units: s, ms, us, ns.",
        """\
  appendtable create /data/events \\
      --schema "id int64 not null, name string, ts timestamp[us, UTC], amount decimal(10,2)"
  appendtable create /data/events --schema-from sample.parquet --partition-by day \\
      --option bucket=8 --option bucket-key=user_id --option target-file-size=128mb
  appendtable --storage-option anon=false create s3://bucket/events --schema "id int64\"""",
    ),
    "append": (
        "append Parquet, CSV or JSON-lines files",
        "Append files (format by extension: .parquet, .csv, .jsonl/.ndjson/.json; or "
        "--format). Each file becomes one snapshot, or all of them one with --one-commit. CSV "
        "and JSON values are parsed into the table's column types. A file that fails leaves "
        "none of its rows visible; files before it stay committed (use --one-commit for all "
        "or nothing). Progress goes to stderr, one result line per commit to stdout.",
        """\
  appendtable append /data/events day-1.parquet day-2.parquet
  appendtable append /data/events --one-commit exports/*.csv
  appendtable append /data/events events.log --format jsonl --quiet""",
    ),
    "info": (
        "schema, options, latest snapshot and file statistics",
        "Describe a table: schema (in the DDL of 'create'), options, latest snapshot, retained "
        "snapshots, consumers, and data files per partition and bucket with the share of small "
        "files (below compaction.small-file-ratio x target-file-size).",
        "  appendtable info /data/events\n  appendtable info /data/events --max-groups 100",
    ),
    "snapshots": (
        "list the retained snapshots",
        "One row per retained snapshot: id, kind, time, commit user and identifier, rows, "
        "files, watermark.",
        "  appendtable snapshots /data/events\n  appendtable snapshots /data/events --format csv",
    ),
    "files": (
        "list the live data files of a snapshot",
        "One row per live data file of the latest snapshot (or --snapshot N).",
        "  appendtable files /data/events\n  appendtable files /data/events --snapshot 3",
    ),
    "head": (
        "print the first rows",
        "Print the first N rows in read order (each bucket in write order).",
        "  appendtable head /data/events\n  appendtable head /data/events -n 3 --format jsonl",
    ),
    "scan": (
        "read rows with a projection, filters and time travel",
        "Read the rows of the latest snapshot (or --snapshot N). Filters are 'column operator "
        "value' with =, !=, <, <=, >, >=, in (v1, v2), not in (...), is null, is not null; "
        "several --filter must all hold. Values are typed by the column (ISO dates and "
        "timestamps; quote strings with spaces). Partitions, buckets and files that cannot "
        "match are skipped unread.",
        """\
  appendtable scan /data/events --columns user_id,amount --filter "user_id in (7, 8)"
  appendtable scan /data/events --filter "day >= 2024-05-01" --filter "action = 'buy'"
  appendtable scan /data/events --snapshot 3 --format jsonl --limit 100
  appendtable scan /data/events --filter "amount is null" --count""",
    ),
    "tail": (
        "follow new rows like tail -f",
        "Print rows as new snapshots land, each bucket in write order. With --consumer-id the "
        "progress is saved after each printed snapshot, and a restarted tail continues there "
        "(a snapshot cut off half-way is printed again). With --group the tail joins that "
        "consumer group (as --member, default a fresh name) and prints the buckets the group "
        "gives it, committing each bucket's progress after each printed unit; run several to "
        "share the work, and a killed one's buckets move to the others once its lease runs "
        "out. --from: latest-full (default: the current rows, then new ones), latest (only new "
        "ones), earliest (everything retained); for a group it applies when the group is "
        "created. Ctrl-C stops it (exit code 0) and leaves the group.",
        """\
  appendtable tail /data/events
  appendtable tail /data/events --consumer-id billing --buckets 0,1 --format jsonl
  appendtable tail /data/events --group billing --member worker-1 --format jsonl
  appendtable tail /data/events --from latest --poll 200ms --idle-exit 30s""",
    ),
    "compact": (
        "merge small files",
        "Run one compaction round and commit it as one COMPACT snapshot. Without --full only "
        "ripe runs of small files are merged. --sort-by rewrites each partition sorted "
        "(scalable tables only). Rows are never lost, duplicated or reordered within a bucket; "
        "streams do not re-read compacted rows.",
        """\
  appendtable compact /data/events
  appendtable compact /data/events --full --partition day=2024-05-01
  appendtable compact /data/logs --sort-by user_id,ts --strategy zorder""",
    ),
    "delete": (
        "delete the rows matching a filter",
        "Delete the rows matching --filter (as in scan; several must all hold) in one DELETE "
        "snapshot. With table option deletion-vectors.enabled the rows are marked in deletion "
        "vectors, otherwise the files holding them are rewritten without them (copy-on-write); "
        "files holding none are never touched. Older snapshots (time travel, tags) keep the "
        "rows until they expire. --dry-run reports what would be deleted and writes nothing.",
        """\
  appendtable delete /data/events --filter "user_id = 42" --dry-run
  appendtable delete /data/events --filter 'day = 2024-05-01' --filter 'status in (x, y)'""",
    ),
    "expire": (
        "expire old snapshots",
        "Expire snapshots beyond the retention (table options snapshot.num-retained.min/max, "
        "snapshot.time-retained, unless given here) and delete the files only they reference. "
        "Snapshots a consumer still needs are kept.",
        """\
  appendtable expire /data/events --dry-run
  appendtable expire /data/events --retain-min 5 --older-than 1h""",
    ),
    "purge": (
        "remove every stored byte of the deleted rows",
        "Rewrite the files with deletion vectors without their deleted rows and the manifests "
        "without the removed files' statistics (one COMPACT snapshot), expire every older "
        "snapshot, then delete the unreferenced deletion vectors, delete records and orphan "
        "files older than --older-than (default 1d; younger ones are listed, not deleted). "
        "Tags holding deleted rows are named: refused unless --tags delete or --tags keep; a "
        "consumer or consumer group behind the latest snapshot blocks the purge. --dry-run "
        "reports and writes nothing.",
        """\
  appendtable purge /data/events --dry-run
  appendtable purge /data/events --older-than 0s --tags delete""",
    ),
    "remove-orphans": (
        "find (and with --force delete) unreferenced files",
        "List files that no retained snapshot references and that are older than --older-than "
        "(default 1d): leftovers of crashed writers and failed commits. A dry run by default: "
        "only --force deletes. Keep --older-than longer than any write can take.",
        """\
  appendtable remove-orphans /data/events
  appendtable remove-orphans /data/events --older-than 3d --force""",
    ),
    "consumers": (
        "list the stream consumers and consumer groups, and how far behind each one is",
        "List the consumers that tail the table (tail --consumer-id, or streams with a consumer "
        "id), one row each, and the buckets of each consumer group (tail --group, or streams "
        "with a group), one row each with the member that holds it: the next snapshot it "
        "needs, how many snapshots, rows and bytes it is behind the latest snapshot and for how "
        "many seconds, its last commit, and a status: caught-up, behind, stalled (rows waiting "
        "and no commit for --stalled-after), and for group buckets expired (the member's lease "
        "ran out: dead or hung), rebalancing or unassigned. Snapshots a consumer or group "
        "still needs are never expired, so delete consumers that are gone.",
        """\
  appendtable consumers /data/events
  appendtable consumers /data/events --group billing --stalled-after 5m --format jsonl""",
    ),
    "delete-consumer": (
        "forget a consumer (its snapshots may then expire)",
        "Delete a named consumer's progress. Its snapshots are no longer protected from "
        "expiration; a reader that comes back under that id starts afresh.",
        "  appendtable delete-consumer /data/events billing",
    ),
    "rollback": (
        "make the table hold an older snapshot's rows again",
        "Commit a new OVERWRITE snapshot that holds exactly the rows of SNAPSHOT_ID, or of "
        "the snapshot of --tag NAME (which may have expired). Only the data goes back: the "
        "current schema and options stay (the rows are read by field id under the current "
        "schema) unless --restore-schema is given. History is kept (snapshot ids never go "
        "back), and streams skip the rollback.",
        "  appendtable rollback /data/events 42\n  appendtable rollback /data/events --tag v1\n"
        "  appendtable rollback /data/events --tag v1 --restore-schema",
    ),
    "alter": (
        "change the schema or the options in place",
        "Change columns and options. All changes of one command land together as one new "
        "schema version (an ALTER snapshot), in the order given, or none does. Data files are "
        "not rewritten: old rows read an added column as null. A dotted name (payload.country) "
        "is a field of a struct column. Refused: dropping, renaming or retyping a partition "
        "column, narrowing a type, making a column required, a required column on a table "
        "with rows, layout options (bucket, bucket-key).\n\nWidening: int8 -> int16 -> int32 "
        "-> int64 (unsigned likewise), float32 -> float64, decimal(p, s) -> decimal(p' > p, "
        "s), string -> large_string, binary -> large_binary.",
        """\
  appendtable alter /data/events --add-column "country string after action"
  appendtable alter /data/events --rename amount=amount_eur --drop legacy --widen clicks=int64
  appendtable alter /data/events --add-column "payload.device string" --nullable user_id
  appendtable alter /data/events --move "country first" --set target-file-size=64mb
  appendtable alter /data/events --unset compaction.min.file-num""",
    ),
    "schema": (
        "print the schema (in the DDL of 'create'), or every version of it",
        "Print the current schema in the DDL that 'create --schema' takes back, after '--' "
        "comment lines with the schema id, the partition keys and the options. --history "
        "lists every schema version: id, time, columns, options, and which one is current.",
        """\
  appendtable schema /data/events
  appendtable create /data/copy --schema "$(appendtable schema /data/events)"
  appendtable schema /data/events --history --format jsonl""",
    ),
    "iceberg": (
        "print where the Iceberg mirror's metadata is (or --repair it)",
        "With option metadata.iceberg.storage = table-location, every snapshot is mirrored "
        "as Iceberg v2 metadata under URI/metadata/, which any Iceberg reader opens. This "
        "prints the location of the newest metadata.json. --repair writes a new version of the "
        "mirror from the table's own metadata, re-creating any mirror file that went missing "
        "(after a failed mirror write the next commit would also complete it).",
        """\
  appendtable iceberg /data/events
  appendtable iceberg /data/events --repair
  appendtable alter /data/events --set metadata.iceberg.storage=table-location""",
    ),
    "system": (
        "print a system table: the table's metadata as rows",
        "Print one of the table's system tables (after Apache Paimon's table$snapshots): "
        "snapshots, schemas, options, tags, consumers (the table as it is now), files, "
        "manifests, partitions, buckets (of the latest snapshot, or --snapshot N, or --tag "
        "NAME). Without NAME, list the system tables. Columns: docs/system_tables.md.",
        """\
  appendtable system /data/events
  appendtable system /data/events snapshots --format csv
  appendtable system /data/events partitions --snapshot 42
  appendtable system /data/events files --tag month-end --format jsonl""",
    ),
    "tag": (
        "list, create or delete tags (named snapshots)",
        "Without an action, list the tags and the snapshot each names. 'create NAME' tags the "
        "latest snapshot (or --snapshot N); a tagged snapshot stays readable (scan --tag) and "
        "its files are kept after it expires, until 'delete NAME'. Tags never move: delete a "
        "tag to reuse its name.",
        """\
  appendtable tag /data/events
  appendtable tag /data/events create v1
  appendtable tag /data/events create before-backfill --snapshot 42
  appendtable tag /data/events delete v1""",
    ),
}


def _add_common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """--storage-option and --debug, accepted before and after the command name."""
    suffix = "" if top else "_sub"
    parser.add_argument(
        "--storage-option",
        action="append",
        dest=f"storage_option{suffix}",
        metavar="KEY=VALUE",
        default=[],
        help="an fsspec storage option (repeatable), e.g. endpoint_url=http://localhost:8333; "
        "true/false and integers are typed, {...} is JSON",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        dest=f"debug{suffix}",
        help="log what happens and print tracebacks",
    )


def _formats(parser: argparse.ArgumentParser, default: str = "table") -> None:
    parser.add_argument(
        "--format", choices=FORMATS, default=default, help=f"output format (default {default})"
    )


def _command(
    subparsers: argparse._SubParsersAction[_Parser], name: str, run: Command
) -> argparse.ArgumentParser:
    summary, description, examples = _COMMANDS[name]
    paragraphs = (textwrap.fill(p, width=88) for p in description.split("\n\n"))
    parser = subparsers.add_parser(
        name,
        help=summary,
        description="\n\n".join(paragraphs),
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run)
    parser.add_argument("uri", metavar="URI", help="the table: a path or an fsspec URL")
    _add_common(parser, top=False)
    return parser


class _Change(argparse.Action):
    """Collects the change flags of ``alter`` as ``(flag, text)`` in command-line order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        changes = list(getattr(namespace, self.dest, None) or [])
        changes.append((self.option_strings[0], str(values)))
        setattr(namespace, self.dest, changes)


class _Parser(argparse.ArgumentParser):
    """argparse with the command line's error contract: one ``error: ...`` line, exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {self.prog}: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="appendtable",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"appendtable {at.__version__}")
    _add_common(parser, top=True)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    create = _command(commands, "create", run_create)
    source = create.add_mutually_exclusive_group(required=True)
    source.add_argument("--schema", metavar="DDL", help='e.g. "id int64 not null, name string"')
    source.add_argument(
        "--schema-from", metavar="FILE", help="take the schema of a Parquet (CSV, JSONL) file"
    )
    create.add_argument("--partition-by", metavar="COLUMNS", help="comma-separated columns")
    create.add_argument(
        "--option", action="append", metavar="KEY=VALUE", help="a table option (repeatable)"
    )

    append = _command(commands, "append", run_append)
    append.add_argument(
        "files", nargs="+", metavar="FILE", help="input files ('-': standard input, with --format)"
    )
    append.add_argument("--format", choices=INPUT_FORMATS, help="input format (default: by name)")
    append.add_argument(
        "--null-values",
        metavar="LIST",
        help="comma-separated CSV texts read as null (default: only an empty field; ',NA' adds NA)",
    )
    append.add_argument("--one-commit", action="store_true", help="one snapshot for all files")
    append.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")

    info = _command(commands, "info", run_info)
    info.add_argument(
        "--max-groups", type=int, default=20, metavar="N", help="partition/bucket rows shown"
    )

    _formats(_command(commands, "snapshots", run_snapshots))
    files = _command(commands, "files", run_files)
    files.add_argument("--snapshot", type=int, metavar="N", help="default: the latest")
    _formats(files)

    head = _command(commands, "head", run_head)
    head.add_argument("-n", type=int, default=10, help="number of rows (default 10)")
    head.add_argument("--columns", metavar="A,B", help="columns to print")
    _formats(head)

    scan = _command(commands, "scan", run_scan)
    scan.add_argument("--columns", metavar="A,B", help="columns to read")
    scan.add_argument(
        "--filter", action="append", metavar="'COL OP VALUE'", help="a filter (repeatable: AND)"
    )
    when = scan.add_mutually_exclusive_group()
    when.add_argument("--snapshot", type=int, metavar="N", help="time travel to snapshot N")
    when.add_argument("--tag", metavar="NAME", help="read the snapshot of tag NAME")
    scan.add_argument("--limit", type=int, metavar="N", help="print at most N rows")
    scan.add_argument("--count", action="store_true", help="print only the number of rows")
    _formats(scan)

    tail = _command(commands, "tail", run_tail)
    who = tail.add_mutually_exclusive_group()
    who.add_argument("--consumer-id", metavar="ID", help="save and resume progress under ID")
    who.add_argument("--group", metavar="GROUP", help="join consumer group GROUP")
    tail.add_argument("--member", metavar="NAME", help="the member name in --group")
    tail.add_argument("--buckets", metavar="0,1", help="read only these buckets")
    tail.add_argument(
        "--from",
        dest="start",
        choices=("latest-full", "latest", "earliest"),
        help="where a new reader starts (default latest-full; a consumer resumes instead)",
    )
    tail.add_argument("--columns", metavar="A,B", help="columns to print")
    tail.add_argument("--filter", action="append", metavar="'COL OP VALUE'", help="as in scan")
    tail.add_argument("--poll", default="1s", metavar="DURATION", help="poll interval (1s)")
    tail.add_argument("--max-units", type=int, metavar="N", help="stop after N snapshots")
    tail.add_argument(
        "--idle-exit", metavar="DURATION", help="stop when nothing new arrived for this long"
    )
    _formats(tail)

    compact = _command(commands, "compact", run_compact)
    compact.add_argument("--full", action="store_true", help="merge every run of small files")
    compact.add_argument(
        "--partition",
        action="append",
        metavar="K=V[,K=V]",
        help="only this partition (repeatable)",
    )
    compact.add_argument("--sort-by", metavar="A,B", help="sort compaction on these columns")
    compact.add_argument(
        "--strategy", choices=("order", "zorder", "hilbert"), default="order", help="for --sort-by"
    )
    compact.add_argument("--parallelism", type=int, metavar="N", help="rewrite threads")
    compact.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")

    delete = _command(commands, "delete", run_delete)
    delete.add_argument(
        "--filter", action="append", metavar="'COL OP VALUE'", help="as in scan (repeatable: AND)"
    )
    delete.add_argument("--dry-run", action="store_true", help="only report")

    expire = _command(commands, "expire", run_expire)
    expire.add_argument("--retain-min", type=int, metavar="N", help="keep at least N snapshots")
    expire.add_argument("--retain-max", type=int, metavar="N", help="keep at most N snapshots")
    expire.add_argument(
        "--older-than", metavar="DURATION", help="expire only snapshots older than this (1h)"
    )
    expire.add_argument("--dry-run", action="store_true", help="only report")

    purge = _command(commands, "purge", run_purge)
    purge.add_argument(
        "--older-than", default="1d", metavar="DURATION", help="minimum orphan age (default 1d)"
    )
    purge.add_argument(
        "--tags",
        choices=("refuse", "delete", "keep"),
        default="refuse",
        help="tags holding deleted rows: refuse (default), delete them, or keep them",
    )
    purge.add_argument("--dry-run", action="store_true", help="only report")

    orphans = _command(commands, "remove-orphans", run_remove_orphans)
    orphans.add_argument(
        "--older-than", default="1d", metavar="DURATION", help="minimum file age (default 1d)"
    )
    orphans.add_argument("--force", action="store_true", help="delete (default: a dry run)")

    consumers = _command(commands, "consumers", run_consumers)
    consumers.add_argument("--group", metavar="GROUP", help="only this consumer group")
    consumers.add_argument(
        "--stalled-after",
        default="30s",
        metavar="DURATION",
        help="rows waiting this long without a commit: stalled (30s)",
    )
    _formats(consumers)
    delete_consumer = _command(commands, "delete-consumer", run_delete_consumer)
    delete_consumer.add_argument("consumer_id", metavar="CONSUMER_ID")

    rollback = _command(commands, "rollback", run_rollback)
    rollback.add_argument("snapshot_id", type=int, nargs="?", metavar="SNAPSHOT_ID")
    rollback.add_argument("--tag", metavar="NAME", help="roll back to the snapshot of a tag")
    rollback.add_argument(
        "--restore-schema",
        action="store_true",
        help="also take the snapshot's schema version again: its columns and its options",
    )

    alter = _command(commands, "alter", run_alter)
    for flag, metavar, text in ALTER_FLAGS:
        alter.add_argument(
            flag, action=_Change, dest="changes", metavar=metavar, help=f"{text} (repeatable)"
        )

    schema = _command(commands, "schema", run_schema)
    schema.add_argument("--history", action="store_true", help="every schema version")
    _formats(schema)

    iceberg = _command(commands, "iceberg", run_iceberg)
    iceberg.add_argument("--repair", action="store_true", help="write the mirror now")

    system = _command(commands, "system", run_system)
    system.add_argument("name", nargs="?", metavar="NAME", help="the system table (default: list)")
    travel = system.add_mutually_exclusive_group()
    travel.add_argument("--snapshot", type=int, metavar="N", help="as of snapshot N")
    travel.add_argument("--tag", metavar="NAME", help="as of the snapshot of tag NAME")
    system.add_argument("--limit", type=int, metavar="N", help="print at most N rows")
    _formats(system)

    tag = _command(commands, "tag", run_tag)
    tag.add_argument(
        "action",
        nargs="?",
        choices=("list", "create", "delete"),
        default="list",
        help="list (default), create or delete",
    )
    tag.add_argument("name", nargs="?", metavar="NAME", help="the tag (create, delete)")
    tag.add_argument("--snapshot", type=int, metavar="N", help="create: default the latest")
    _formats(tag)
    return parser


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


#: A value that argparse would take for an option (``-1h``, ``-5m``): it reads as numbers only
#: ``-1`` and ``-1.5``.
_NEGATIVE_VALUE = re.compile(r"-\.?\d")


def attach_negative_values(argv: Sequence[str]) -> list[str]:
    """``--older-than -1h`` as ``--older-than=-1h``, so that the option's own check says what
    is wrong with the value (argparse said the option expected an argument)."""
    attached: list[str] = []
    for token in argv:
        last = attached[-1] if attached else ""
        option = last.startswith("--") and last != "--" and "=" not in last
        if option and _NEGATIVE_VALUE.match(token):
            attached[-1] = f"{last}={token}"
        else:
            attached.append(token)
    return attached


#: The loggers of the storage clients under the CLI, silent without ``--debug``.
STORAGE_CLIENT_LOGGERS = (
    "gcsfs",
    "s3fs",
    "adlfs",
    "fsspec",
    "aiobotocore",
    "botocore",
    "azure",
    "google",
    "urllib3",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(attach_negative_values(sys.argv[1:] if argv is None else argv))
    debug = bool(args.debug or args.debug_sub)
    # Only the project's own loggers go to DEBUG: storage clients' debug output carries
    # credentials (botocore logs access keys and session tokens), so theirs stays at WARNING,
    # and without --debug they are silent: their failures reach the user as the one error line
    # (gcsfs logs each request out of retries with its traceback).
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if debug:
        logging.getLogger("appendtable").setLevel(logging.DEBUG)
    else:
        for name in STORAGE_CLIENT_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        if str(args.uri).startswith("memory://"):
            raise UsageError(
                f"{args.uri}: a memory:// table lives only as long as the process that made it, "
                "and every appendtable command is a new process; use a directory or an object "
                "store (s3://...)"
            )
        context = Context(
            storage_options=parse_storage_options([*args.storage_option, *args.storage_option_sub])
        )
        run: Command = args.run
        return run(args, context)
    except (at.AppendTableError, CliError) as exc:
        if debug:
            traceback.print_exc()
        sys.stderr.write(f"error: {_one_line(exc)}\n")
        return exc.exit_code if isinstance(exc, CliError) else 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, like other Unix tools. Point stdout
        # at /dev/null so that flushing it at exit does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
