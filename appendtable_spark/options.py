"""The adapter's own options, declared once: the format's read, write and streaming options,
the helpers' keywords that stand for them, and Delta's aliases.

Spark hands a data source its options as strings with lower-cased keys. Every key is one of:
an adapter option below (matched ignoring case, by name or alias), a table or read option of the
core (``bucket``, ``scan.mode``, ``consumer-id``, ...: checked by the core's registry), a
``storage.<key>`` fsspec storage option, or a key Spark itself adds (``path``, the catalog's
keys at ``CREATE TABLE``). Anything else is refused with the closest known key as a
suggestion, and a value that does not parse is refused naming its option, when the DataFrame
or stream is defined.
"""

from __future__ import annotations

import difflib
import enum
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import appendtable as at

__all__ = [
    "CATALOG_KEYS",
    "OPTIONS",
    "SPARK_KEYS",
    "SparkOption",
    "Use",
    "lookup",
    "unknown_key_message",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Use(enum.Flag):
    """Where an option applies."""

    READ = enum.auto()  #: ``spark.read.format("appendtable")``, ``read_table``, SQL ``SELECT``
    STREAM = enum.auto()  #: ``spark.readStream.format("appendtable")``
    WRITE = enum.auto()  #: ``df.write.format("appendtable")``, ``write_table``, SQL ``INSERT``
    SINK = enum.auto()  #: ``writeStream.format("appendtable")``, ``foreach_batch_sink``
    CREATE = enum.auto()  #: ``CREATE TABLE ... USING appendtable`` (options and TBLPROPERTIES)

    def describe(self) -> str:
        return ", ".join(_USE_WORDS[use] for use in Use if use in self)


_USE_WORDS = {
    Use.READ: "batch reads",
    Use.STREAM: "streaming reads",
    Use.WRITE: "batch writes",
    Use.SINK: "streaming writes",
    Use.CREATE: "CREATE TABLE",
}


@dataclass(frozen=True)
class SparkOption(Generic[T_co]):
    """One adapter option: its documented name (matched ignoring case), how its string value
    parses, its default, where it applies, its meaning, other names it answers to, and the
    keyword of the helper functions that stands for it."""

    name: str
    parse: Callable[[str], T_co]
    default: T_co
    uses: Use
    doc: str
    aliases: tuple[str, ...] = ()
    keyword: str | None = None
    #: how the helper keyword's Python value becomes the option's value (None: as its text)
    from_keyword: Callable[[object], T_co] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The lower-case keys Spark delivers it under."""
        return tuple(key.lower() for key in (self.name, *self.aliases))

    def value(self, text: str) -> T_co:
        """The parsed value; InvalidOptionError naming the option if it does not parse."""
        return self._checked(self.parse, text)

    def keyword_value(self, value: object) -> T_co:
        """The value of the helper keyword standing for this option, checked as the option's
        text is; InvalidOptionError naming the option if it is not one."""
        if self.from_keyword is None:
            return self.value(str(value))
        return self._checked(self.from_keyword, value)

    def _checked(self, convert: Callable[[Any], T_co], given: object) -> T_co:
        try:
            return convert(given)
        except at.AppendTableError:  # some derive from ValueError: already specific
            raise
        except ValueError as exc:
            raise at.InvalidOptionError(f"invalid value for option '{self.name}': {exc}") from None


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("it is empty")
    return text


def _system_table(text: str) -> str:
    try:
        return at.system_table_info(text.strip()).name
    except at.InvalidArgumentError as exc:
        raise ValueError(str(exc)) from None


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return lowered == "true"


def _positive(text: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None
    if number < 1:
        raise ValueError(f"{number} is not a positive integer")
    return number


def _identifier(text: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None
    if number < 0:
        raise ValueError(f"{number} is negative")
    return number


def _columns(text: str) -> tuple[str, ...]:
    return _column_names(text.split(","))


def _column_keyword(value: object) -> tuple[str, ...]:
    """``partition_by=``: a column name or a list of them (each may list several, separated
    by commas, as the option's text does)."""
    if not isinstance(value, str | Iterable):
        raise at.InvalidArgumentError(
            f"partition_by must be a column name or a list of them, got {value!r}"
        )
    names = [value] if isinstance(value, str) else [str(name) for name in value]
    return _column_names(part for name in names for part in name.split(","))


def _column_names(names: Iterable[str]) -> tuple[str, ...]:
    columns = tuple(c.strip() for c in names if c.strip())
    if not columns:
        raise ValueError("no column named")
    seen: set[str] = set()
    for column in columns:  # Spark resolves names ignoring case
        if column.lower() in seen:
            raise ValueError(f"column '{column}' is named twice")
        seen.add(column.lower())
    return columns


def _json_columns(text: str) -> tuple[str, ...]:
    columns = json.loads(text)
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ValueError(f"{text!r} is not a JSON list of column names")
    return tuple(columns)


def _partitions(text: str) -> tuple[dict[str, object], ...]:
    try:
        specs = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not JSON ({exc})") from None
    return _partition_specs(specs)


def _partition_specs(specs: object) -> tuple[dict[str, object], ...]:
    """``partitions=`` (or the option's JSON): a list of partition specs, column to value."""
    if not isinstance(specs, list | tuple) or not all(isinstance(s, dict) for s in specs):
        raise ValueError('it must be a JSON list of objects such as [{"day": "2024-05-01"}]')
    if not specs:
        raise ValueError("an empty list names no partition to replace (leave the option out)")
    if not all(specs):
        raise ValueError(
            "an empty object {} names no partition column (it would replace every row; leave "
            "the option out)"
        )
    return tuple(dict(spec) for spec in specs)


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        lowered = text.strip().lower()
        if lowered not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return lowered

    return parse


OPTIONS: dict[str, SparkOption[Any]] = {}


def _define(option: SparkOption[T]) -> SparkOption[T]:
    for key in option.keys:
        assert key not in _BY_KEY, f"option key {key} defined twice"
        _BY_KEY[key] = option
    OPTIONS[option.name] = option
    return option


_BY_KEY: dict[str, SparkOption[Any]] = {}
_NO_COLUMNS: tuple[str, ...] = ()
_NO_PARTITIONS: tuple[dict[str, object], ...] = ()
_ANY_READ = Use.READ | Use.STREAM
_ANY_WRITE = Use.WRITE | Use.SINK

# ---- reading -------------------------------------------------------------------------------------
COLUMNS = _define(
    SparkOption(
        "columns",
        _columns,
        _NO_COLUMNS,
        _ANY_READ,
        "comma-separated columns to read, in this order (Spark asks a Python source for every "
        "column, so this is how a read skips the others)",
        keyword="columns",
    )
)
SPLIT_TARGET_BYTES = _define(
    SparkOption(
        "splitTargetBytes",
        _positive,
        0,
        Use.READ,
        "bytes of data files per Spark task (default: about 128 MB, less to spread a small "
        "read over about 8 tasks, never below 16 MB)",
    )
)
SYSTEM_TABLE = _define(
    SparkOption(
        "systemTable",
        _system_table,
        "",
        Use.READ | Use.CREATE,
        "read the table's metadata instead of its rows: one of "
        + ", ".join(f"`{name}`" for name in at.SYSTEM_TABLE_NAMES)
        + " (docs/system_tables.md)",
    )
)
MAX_FILES_PER_TRIGGER = _define(
    SparkOption(
        "maxFilesPerTrigger",
        _positive,
        0,
        Use.STREAM,
        "at most this many data files per micro-batch, the first one included (a large "
        "snapshot, a full start too, is cut between files)",
    )
)
MAX_ROWS_PER_TRIGGER = _define(
    SparkOption(
        "maxRowsPerTrigger",
        _positive,
        0,
        Use.STREAM,
        "at most this many rows per micro-batch, in whole files: a batch takes files while "
        "their rows fit, and always at least one file (a file with more rows is a batch of "
        "its own)",
    )
)

# ---- writing -------------------------------------------------------------------------------------
PARTITION_BY = _define(
    SparkOption(
        "partitionBy",
        _columns,
        _NO_COLUMNS,
        _ANY_WRITE | Use.CREATE,
        "comma-separated partition columns of a table the write creates",
        aliases=("partition-by",),
        keyword="partition_by",
        from_keyword=_column_keyword,
    )
)
SPARK_PARTITION_COLUMNS = _define(
    SparkOption(
        "__partition_columns",
        _json_columns,
        _NO_COLUMNS,
        _ANY_WRITE,
        "set by Spark from `DataFrameWriter.partitionBy(...)`: the partition columns of a "
        "table the write creates",
    )
)
MERGE_SCHEMA = _define(
    SparkOption(
        "mergeSchema",
        _boolean,
        False,
        _ANY_WRITE,
        "add the DataFrame's new columns and struct fields to the table before writing, and "
        "write the table's nullable columns it lacks as nulls",
        keyword="merge_schema",
    )
)
COMMIT_USER = _define(
    SparkOption(
        "commitUser",
        _text,
        "",
        _ANY_WRITE,
        "a name stable across retries: with `commitIdentifier` (batch writes) or the batch id "
        "(streaming writes) it makes a write idempotent",
        aliases=("txnAppId",),
        keyword="commit_user",
    )
)
COMMIT_USER_REUSE = _define(
    SparkOption(
        "commitUserReuse",
        _choice("fail", "continue"),
        "fail",
        Use.SINK,
        "what a streaming query does when its `commitUser` last committed for another query "
        "(another checkpoint): `fail` at its first micro-batch, before writing anything; "
        "`continue`: take the commit user over, committing its batches after the other "
        "query's (where it starts reading is up to its start options)",
        keyword="commit_user_reuse",
    )
)
COMMIT_OWNER = _define(
    SparkOption(
        "commitOwner",
        _text,
        "",
        Use.WRITE,
        "set by `foreach_batch_sink`: the streaming query whose micro-batch this write is, "
        "recorded with `commitUser` and `commitIdentifier`",
    )
)
COMMIT_IDENTIFIER = _define(
    SparkOption(
        "commitIdentifier",
        _identifier,
        0,
        Use.WRITE,
        "with `commitUser`: the write is a no-op if this (user, identifier) already landed",
        aliases=("txnVersion",),
    )
)
OVERWRITE_PARTITIONS = _define(
    SparkOption(
        "overwritePartitions",
        _partitions,
        _NO_PARTITIONS,
        Use.WRITE,
        'the static partitions an overwrite replaces, as JSON: `[{"day": "2024-05-01"}]` '
        "(a row of any other partition fails the write; refused with an append)",
        keyword="partitions",
        from_keyword=_partition_specs,
    )
)
PARTITION_OVERWRITE_MODE = _define(
    SparkOption(
        "partitionOverwriteMode",
        _choice("static", "dynamic"),
        "static",
        Use.WRITE | Use.CREATE,
        "`dynamic`: an overwrite replaces only the partitions it writes rows into (Spark's "
        "`partitionOverwriteMode`; how SQL `INSERT OVERWRITE` replaces partitions; refused "
        "with an append). The session's `spark.sql.sources.partitionOverwriteMode` does not "
        "reach the format: give this option (`write_table` honours the session setting)",
    )
)
CHECKPOINT_LOCATION = _define(
    SparkOption(
        "checkpointLocation",
        _text,
        "",
        Use.SINK,
        "Spark's own: the streaming query's checkpoint",
    )
)

# ---- creating a table from SQL ------------------------------------------------------------------
SCHEMA = _define(
    SparkOption(
        "schema",
        _text,
        "",
        Use.CREATE,
        "the columns of a table `CREATE TABLE` creates, as Spark SQL DDL: "
        "`'day DATE, user_id BIGINT NOT NULL, tags ARRAY<STRING>'`",
    )
)

#: Keys Spark adds to every source's options (``load(uri)``).
SPARK_KEYS = frozenset({"path"})
#: Keys Spark's catalog adds at ``CREATE TABLE`` (``LOCATION`` arrives as both).
CATALOG_KEYS = frozenset({"location", "owner", "provider", "comment", "external"})


def lookup(key: str) -> SparkOption[Any] | None:
    """The adapter option a lower-case key names, if any."""
    return _BY_KEY.get(key)


def unknown_key_message(key: str, known: Iterable[str]) -> str:
    """``unknown option 'x'; did you mean 'y'?``, comparing ignoring case with every option
    name (``known``: the core's keys too)."""
    names = {name.lower(): name for name in known}
    for option in OPTIONS.values():
        names.update({alias.lower(): alias for alias in (option.name, *option.aliases)})
    close = difflib.get_close_matches(key.lower(), list(names), n=1, cutoff=0.6)
    hint = f"; did you mean '{names[close[0]]}'?" if close else ""
    return f"unknown option '{key}'{hint}"
