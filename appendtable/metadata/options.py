"""Table and read options: the registry, value parsing, and validation.

Options are string key/value pairs, stored in the table schema (table options) or given per read
(scan and streaming options), under Paimon-compatible keys. ``parse_options`` rejects unknown keys
(suggesting the closest known key) and values that do not parse; sizes accept ``128 MB``,
``128mb``, ``1 GiB`` or plain bytes, durations ``10 s``, ``500 ms``, ``1 h``, ``7 d`` or plain
milliseconds. :class:`Options` gives typed access with defaults.
"""

from __future__ import annotations

import difflib
import enum
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from appendtable.errors import InvalidOptionError

__all__ = [
    "OPTIONS",
    "OptionDef",
    "Options",
    "parse_bool",
    "parse_duration_ms",
    "option_keys",
    "parse_options",
    "parse_size",
]

T = TypeVar("T")

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}
_DURATION_UNITS = {
    "": 1,
    "ms": 1,
    "millis": 1,
    "milli": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*\Z")


def parse_size(text: str) -> int:
    """Bytes from ``"256 MB"``, ``"1gb"``, ``"512 KiB"`` or ``"1048576"`` (binary multiples)."""
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r} (examples: '128 MB', '1 GB', '65536')")
    number = float(match.group(1))
    if _SIZE_UNITS[unit] == 1 and number != int(number):
        raise ValueError(f"not a whole number of bytes: {text!r} (examples: '1.5 MB', '65536')")
    return int(number * _SIZE_UNITS[unit])


def parse_duration_ms(text: str) -> int:
    """Milliseconds from ``"10 s"``, ``"500ms"``, ``"1 h"``, ``"7 d"`` or ``"250"`` (ms)."""
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _DURATION_UNITS:
        raise ValueError(f"not a duration: {text!r} (examples: '10 s', '500 ms', '1 h', '7 d')")
    return int(float(match.group(1)) * _DURATION_UNITS[unit])


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r} (use 'true' or 'false')")


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"not an integer: {text!r}") from None


def _parse_snapshot_id(text: str) -> int:
    number = _parse_int(text)
    if number < 1:
        raise ValueError(f"{number} is not a snapshot id (snapshot ids start at 1)")
    return number


def _parse_consumer_id(text: str) -> str:
    if not _CONSUMER_NAME.match(text):
        raise ValueError(
            f"{text!r} is not a consumer id: use 1-200 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (leave the option out for none)"
        )
    return text


def _parse_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None


def _parse_str(text: str) -> str:
    return text


_CONSUMER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")
_DIRECTORY_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}\Z")


def _parse_directory_name(text: str) -> str:
    """A value that becomes a directory name: 1-200 letters, digits, '.', '_' or '-',
    starting with a letter, digit or '_' (never '.', '..' or a path)."""
    if not _DIRECTORY_NAME.match(text):
        raise ValueError(
            f"{text!r} is not a directory name: use 1-200 letters, digits, '.', '_' or '-', "
            "starting with a letter, digit or '_'"
        )
    return text


def _parse_columns(text: str) -> tuple[str, ...]:
    columns = tuple(c.strip() for c in text.split(",") if c.strip())
    if not columns:
        raise ValueError("expected a comma-separated list of column names")
    return columns


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        lowered = text.strip().lower()
        if lowered not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return lowered

    return parse


def _int_between(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        number = _parse_int(text)
        if not low <= number <= high:
            raise ValueError(f"{number} is outside {low}..{high}")
        return number

    return parse


def _parse_stats_mode(text: str) -> str:
    lowered = text.strip().lower()
    if lowered in ("none", "counts", "full") or re.fullmatch(r"truncate\(\d+\)", lowered):
        return lowered
    raise ValueError(f"{text!r} is not one of none, counts, full, truncate(N)")


@dataclass(frozen=True)
class OptionDef(Generic[T]):
    """One option: its key, how to parse its string value, its default and its meaning."""

    key: str
    parse: Callable[[str], T]
    default: T
    doc: str


OPTIONS: dict[str, OptionDef[Any]] = {}


def _define(key: str, parse: Callable[[str], T], default: T, doc: str) -> OptionDef[T]:
    definition = OptionDef(key, parse, default, doc)
    OPTIONS[key] = definition
    return definition


MB = 1024**2
# ---- layout and writing ------------------------------------------------------------------------
BUCKET = _define("bucket", _parse_int, -1, "-1: scalable (unaware) mode; N > 0: N hash buckets")
_NO_COLUMNS: tuple[str, ...] = ()
BUCKET_KEY = _define(
    "bucket-key",
    _parse_columns,
    _NO_COLUMNS,
    "comma-separated bucket key columns (required if bucket > 0)",
)
TARGET_FILE_SIZE = _define(
    "target-file-size", parse_size, 256 * MB, "rolling size of data files and compaction target"
)
FILE_COMPRESSION = _define(
    "file.compression",
    _choice("zstd", "snappy", "gzip", "lz4", "brotli", "none"),
    "zstd",
    "Parquet compression codec",
)
FILE_COMPRESSION_LEVEL = _define(
    "file.compression.zstd-level",
    _int_between(-131072, 22),
    1,
    "zstd level for data files (-131072..22: negative levels are zstd's fast ones)",
)
SMALL_FILE_COMPRESSION = _define(
    "file.compression.small-file",
    _choice("zstd", "snappy", "gzip", "lz4", "brotli", "none"),
    "snappy",
    "codec of the data files written in one piece from less than "
    "file.compression.small-file-size of Arrow data (one-row appends, micro-batches, small "
    "compaction outputs): a tiny zstd file costs twice as much to read and write as a snappy "
    "one; files that compaction merges past that size get file.compression",
)
SMALL_FILE_SIZE = _define(
    "file.compression.small-file-size",
    parse_size,
    256 * 1024,
    "below this much Arrow data a data file written in one piece is small "
    "(file.compression.small-file); a file started before its last rows arrive (over a row "
    "group: a quarter of target-file-size once encoded, at most 1 Mi rows or 128 MiB of "
    "Arrow data) is not; 0: every file uses file.compression",
)
STATS_MODE = _define(
    "metadata.stats-mode",
    _parse_stats_mode,
    "truncate(16)",
    "column statistics in manifests: none, counts, full, truncate(N) (strings cut to N chars)",
)
ICEBERG_STORAGE = _define(
    "metadata.iceberg.storage",
    _choice("disabled", "table-location"),
    "disabled",
    "mirror every snapshot as Iceberg v2 metadata (v3 with deletion vectors) under "
    "<table>/metadata/",
)
FILE_INDEX_BLOOM_COLUMNS = _define(
    "file-index.bloom-filter.columns",
    _parse_columns,
    _NO_COLUMNS,
    "comma-separated columns with a bloom filter per data file, for = / in lookups",
)
FILE_INDEX_BLOOM_FPP = _define(
    "file-index.bloom-filter.fpp",
    _parse_float,
    0.01,
    "false-positive probability of the bloom filters",
)
FILE_INDEX_BLOOM_ITEMS = _define(
    "file-index.bloom-filter.items",
    _parse_int,
    0,
    "distinct values a bloom filter is sized for (0: each file's own count)",
)
FILE_INDEX_IN_MANIFEST_THRESHOLD = _define(
    "file-index.in-manifest-threshold",
    parse_size,
    500,
    "a file's bloom filters up to this size are copied into the manifest; larger ones are "
    "read from the data file when a scan probes them",
)
ICEBERG_MAX_SNAPSHOTS = _define(
    "metadata.iceberg.max-snapshots",
    _parse_int,
    100,
    "most snapshots the Iceberg mirror lists (the newest retained ones)",
)
PARTITION_DEFAULT_NAME = _define(
    "partition.default-name",
    _parse_directory_name,
    "__DEFAULT_PARTITION__",
    "directory name for null and empty partition values",
)
WRITE_BUFFER_SIZE = _define(
    "write-buffer-size", parse_size, 256 * MB, "memory a writer may buffer before spilling/flushing"
)
WRITE_BUFFER_SPILLABLE = _define(
    "write-buffer-spillable", parse_bool, True, "spill buffered rows to local disk under pressure"
)
WRITE_BUFFER_FOR_APPEND = _define(
    "write-buffer-for-append",
    parse_bool,
    False,
    "always buffer rows (and spill) rather than writing big groups through as they fill",
)
WRITE_MAX_WRITERS_TO_SPILL = _define(
    "write-max-writers-to-spill",
    _parse_int,
    10,
    "with more open (partition, bucket) groups than this, buffers spill instead of flushing",
)
WRITE_SPILL_DIR = _define(
    "write-buffer-spill.dir", _parse_str, "", "local directory for spill files (default: temp)"
)
WRITE_PARALLELISM = _define(
    "write.parallelism",
    _parse_int,
    0,
    "threads that encode Parquet files concurrently (0: one per CPU)",
)
DELETION_VECTORS_ENABLED = _define(
    "deletion-vectors.enabled",
    parse_bool,
    False,
    "Table.delete() marks deleted rows in deletion vectors (merge-on-read) instead of "
    "rewriting the files that hold them (copy-on-write)",
)
WRITE_ONLY = _define(
    "write-only", parse_bool, False, "writers never compact or expire: a dedicated job does"
)
WATERMARK_COLUMN = _define(
    "watermark.column", _parse_str, "", "event-time column the writer derives watermarks from"
)
WATERMARK_DELAY = _define(
    "watermark.delay", parse_duration_ms, 0, "watermark = max(event time) - delay"
)
# ---- commit -------------------------------------------------------------------------------------
COMMIT_MAX_RETRIES = _define(
    "commit.max-retries",
    _parse_int,
    -1,
    "retries after losing the race for the next snapshot id; -1: no count, only "
    "'commit.timeout' bounds them (appends never conflict, so they keep trying while other "
    "writers win the races)",
)
COMMIT_MIN_RETRY_WAIT = _define("commit.min-retry-wait", parse_duration_ms, 10, "backoff base")
COMMIT_MAX_RETRY_WAIT = _define(
    "commit.max-retry-wait", parse_duration_ms, 2_000, "backoff cap (waits are jittered)"
)
COMMIT_TIMEOUT = _define(
    "commit.timeout",
    parse_duration_ms,
    300_000,
    "how long a commit keeps retrying after lost races before it gives up with "
    "CommitConflictError (0: no limit)",
)
COMMIT_FSYNC = _define(
    "commit.fsync", parse_bool, True, "fsync data and metadata files on local disk before publish"
)
COMMIT_MAINTENANCE = _define(
    "commit.maintenance",
    _choice("background", "inline"),
    "background",
    "where the compaction and expiration after a commit run: 'background' (a worker thread "
    "of the table handle, off the commit's latency; finished at close() and at interpreter "
    "exit) or 'inline' (inside the commit call)",
)
COMMIT_SINGLE_WRITER = _define(
    "commit.single-writer",
    parse_bool,
    False,
    "allow commits on a backend without atomic create: the user guarantees a single writer",
)
COMMIT_USER_RETENTION = _define(
    "commit.user-retention",
    parse_duration_ms,
    30 * 86_400_000,
    "how long the last identifier of an idle commit user is kept for idempotence",
)
# ---- manifests ----------------------------------------------------------------------------------
MANIFEST_TARGET_SIZE = _define(
    "manifest.target-file-size", parse_size, 8 * MB, "manifest rolling and merge target"
)
MANIFEST_MERGE_MIN_COUNT = _define(
    "manifest.merge-min-count", _parse_int, 30, "small manifests of one size tier before a merge"
)
MANIFEST_FULL_COMPACTION_SIZE = _define(
    "manifest.full-compaction-threshold-size",
    parse_size,
    16 * MB,
    "size of manifests holding deletes that triggers a full manifest rewrite",
)
# ---- snapshots and consumers -------------------------------------------------------------------
SNAPSHOT_RETAINED_MIN = _define(
    "snapshot.num-retained.min", _parse_int, 10, "always keep at least this many snapshots"
)
SNAPSHOT_RETAINED_MAX = _define(
    "snapshot.num-retained.max", _parse_int, 2**31 - 1, "never keep more than this many"
)
SNAPSHOT_TIME_RETAINED = _define(
    "snapshot.time-retained", parse_duration_ms, 3_600_000, "keep snapshots younger than this"
)
SNAPSHOT_EXPIRE_LIMIT = _define(
    "snapshot.expire.limit", _parse_int, 50, "at most this many snapshots expired per run"
)
CONSUMER_EXPIRATION_TIME = _define(
    "consumer.expiration-time",
    parse_duration_ms,
    0,
    "consumers that have not committed for longer than this are removed by expiration "
    "(polls without a commit do not count; groups: a lease renewal counts; 0: never)",
)
GROUP_LEASE_TIME = _define(
    "consumer.group.lease-time",
    parse_duration_ms,
    5000,
    "a consumer group member that does not renew its lease for this long loses its buckets",
)
GROUP_FILE_SLOTS = _define(
    "consumer.group.file-slots",
    _parse_int,
    16,
    "units a consumer group shares of a bucket = -1 table (each file is in one slot)",
)
# ---- compaction ---------------------------------------------------------------------------------
COMPACTION_MIN_FILE_NUM = _define(
    "compaction.min.file-num", _parse_int, 5, "fewest files worth compacting together"
)
COMPACTION_MAX_FILE_NUM = _define(
    "compaction.max.file-num", _parse_int, 50, "compact this many files even if they are small"
)
COMPACTION_SMALL_FILE_RATIO = _define(
    "compaction.small-file-ratio", _parse_float, 0.7, "files below ratio x target are small"
)
COMPACTION_FILE_NUM_LIMIT = _define(
    "compaction.file-num-limit", _parse_int, 100_000, "most small files a coordinator holds"
)
FULL_COMPACTION_DELTA_COMMITS = _define(
    "full-compaction.delta-commits", _parse_int, 0, "bucketed: full compaction every N commits"
)
PRECOMMIT_COMPACT = _define(
    "precommit-compact", parse_bool, False, "merge a commit's small new files before committing"
)
SPLIT_OPEN_FILE_COST = _define(
    "source.split.open-file-cost", parse_size, 4 * MB, "weight of opening a file in packing"
)
SPLIT_TARGET_SIZE = _define(
    "source.split.target-size", parse_size, 128 * MB, "target size of read splits"
)


# ---- scans and streams --------------------------------------------------------------------------
class StartMode(enum.StrEnum):
    """Where a stream starts: option ``scan.mode`` once ``default`` is resolved."""

    LATEST_FULL = "latest-full"
    LATEST = "latest"
    FROM_SNAPSHOT = "from-snapshot"
    FROM_SNAPSHOT_FULL = "from-snapshot-full"
    FROM_TIMESTAMP = "from-timestamp"
    FROM_FILE_CREATION_TIME = "from-file-creation-time"
    COMPACTED_FULL = "compacted-full"


#: Values of ``scan.mode``: ``default`` (resolved from the other scan options) and the start
#: modes (``full`` is also taken, a deprecated alias of ``latest-full``).
SCAN_MODES: tuple[str, ...] = ("default", *(mode.value for mode in StartMode))
SCAN_MODE = _define("scan.mode", _choice(*SCAN_MODES, "full"), "default", "where a stream starts")
SCAN_SNAPSHOT_ID = _define(
    "scan.snapshot-id", _parse_snapshot_id, 0, "snapshot for from-snapshot(-full)"
)
SCAN_TIMESTAMP_MILLIS = _define(
    "scan.timestamp-millis", _parse_int, 0, "epoch ms for from-timestamp / time travel"
)
SCAN_TAG_NAME = _define("scan.tag-name", _parse_str, "", "tag a batch read uses (time travel)")
SCAN_FILE_CREATION_TIME = _define(
    "scan.file-creation-time-millis", _parse_int, 0, "epoch ms for from-file-creation-time"
)
SCAN_BOUNDED_WATERMARK = _define(
    "scan.bounded.watermark",
    _parse_int,
    0,
    "end a stream at the first snapshot whose watermark exceeds this",
)
SCAN_PLAN_SORT_PARTITION = _define(
    "scan.plan-sort-partition", parse_bool, False, "order partitions by value, not creation"
)
WATERMARK_ALIGNMENT_GROUP = _define(
    "scan.watermark.alignment.group", _parse_str, "", "readers that align their watermarks"
)
WATERMARK_ALIGNMENT_MAX_DRIFT = _define(
    "scan.watermark.alignment.max-drift",
    parse_duration_ms,
    0,
    "how far ahead of the slowest group member a reader may run",
)
WATERMARK_ALIGNMENT_UPDATE_INTERVAL = _define(
    "scan.watermark.alignment.update-interval",
    parse_duration_ms,
    1000,
    "how often a reader publishes its watermark to its group",
)
WATERMARK_ALIGNMENT_IDLE_TIMEOUT = _define(
    "scan.watermark.alignment.idle-timeout",
    parse_duration_ms,
    60_000,
    "group members silent for longer than this are ignored by alignment",
)
CONSUMER_ID = _define(
    "consumer-id", _parse_consumer_id, "", "persist streaming progress under this id"
)
CONSUMER_IGNORE_PROGRESS = _define(
    "consumer.ignore-progress", parse_bool, False, "start from scan.mode even if a consumer exists"
)
STREAMING_READ_OVERWRITE = _define(
    "streaming-read-append-overwrite",
    parse_bool,
    False,
    "streams also emit the files added by OVERWRITE snapshots",
)
POLL_INTERVAL = _define(
    "continuous.discovery-interval", parse_duration_ms, 1000, "stream poll interval"
)

#: Options fixed at creation because the files already written depend on them: the layout
#: (``bucket``, ``bucket-key``, ``partition.default-name``) and ``metadata.stats-mode`` (readers
#: prune with the truncation the files were written with).
IMMUTABLE_OPTIONS = frozenset(
    {BUCKET.key, BUCKET_KEY.key, PARTITION_DEFAULT_NAME.key, STATS_MODE.key}
)


def parse_options(raw: Mapping[str, object] | None) -> dict[str, str]:
    """Validate option keys and values; return them normalised to strings.

    Raises :class:`InvalidOptionError` naming the option for an unknown key (with the closest
    known key as a suggestion) or a value that does not parse.
    """
    normalised: dict[str, str] = {}
    for key, value in (raw or {}).items():
        if key not in OPTIONS:
            raise InvalidOptionError(_unknown_key_message(key))
        if value is None:
            raise InvalidOptionError(f"option '{key}' has no value (None)")
        text = _to_text(value)
        try:
            OPTIONS[key].parse(text)
        except ValueError as exc:
            raise InvalidOptionError(f"invalid value for option '{key}': {exc}") from None
        normalised[key] = text
    return normalised


def option_keys() -> frozenset[str]:
    """Every key the registry knows (table and read options)."""
    return frozenset(OPTIONS)


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _unknown_key_message(key: str) -> str:
    # Keys are lower case: compare case-insensitively so 'BUCKET' still suggests 'bucket'.
    close = difflib.get_close_matches(key.lower(), list(OPTIONS), n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown option '{key}'{hint}"


class Options:
    """Typed, read-only view of validated options with defaults."""

    __slots__ = ("_raw",)

    def __init__(self, raw: Mapping[str, str] | None = None) -> None:
        self._raw = dict(raw or {})

    def get(self, option: OptionDef[T]) -> T:
        text = self._raw.get(option.key)
        if text is None:
            return option.default
        try:
            return option.parse(text)
        except ValueError as exc:  # a stored value no validated write produces
            raise InvalidOptionError(
                f"the table's option '{option.key}' = {text!r} is invalid: {exc}"
            ) from None

    def is_set(self, option: OptionDef[Any]) -> bool:
        return option.key in self._raw

    def with_overrides(self, overrides: Mapping[str, object] | None) -> Options:
        """These options updated with ``overrides`` (validated)."""
        merged = dict(self._raw)
        merged.update(parse_options(overrides))
        return Options(merged)

    def as_dict(self) -> dict[str, str]:
        return dict(self._raw)

    def __repr__(self) -> str:
        return f"Options({self._raw!r})"

    # ---- derived values used in several places ---------------------------------------------

    @property
    def bucket(self) -> int:
        return self.get(BUCKET)

    @property
    def bucket_key(self) -> tuple[str, ...]:
        return self.get(BUCKET_KEY)

    @property
    def target_file_size(self) -> int:
        return self.get(TARGET_FILE_SIZE)

    @property
    def write_parallelism(self) -> int:
        value = self.get(WRITE_PARALLELISM)
        return value if value > 0 else max(1, os.cpu_count() or 1)

    @property
    def stats_truncate(self) -> int | None:
        """Characters kept in string statistics; None for full values."""
        mode = self.get(STATS_MODE)
        if mode.startswith("truncate("):
            return int(mode[len("truncate(") : -1])
        return None


def validate_table_options(
    options: Options, *, columns: Iterable[str], partition_keys: Iterable[str]
) -> None:
    """Check combinations that are only meaningful together. Raises InvalidOptionError."""
    column_list = list(columns)
    partitions = set(partition_keys)
    bucket = options.bucket
    keys = options.bucket_key
    if bucket == 0 or bucket < -1:
        raise InvalidOptionError(
            f"option 'bucket' must be -1 (scalable mode) or a positive number of buckets, "
            f"got {bucket}"
        )
    if bucket == -1 and keys:
        raise InvalidOptionError(
            "option 'bucket-key' needs a fixed number of buckets: set 'bucket' to N > 0, "
            "or remove 'bucket-key' for the scalable (bucket = -1) mode"
        )
    if bucket > 0 and not keys:
        raise InvalidOptionError(
            f"option 'bucket' = {bucket} needs 'bucket-key': the columns whose hash picks the "
            "bucket (rows of one key stay in order in one bucket)"
        )
    _check_columns_option(
        BUCKET_KEY.key, keys, column_list, partitions, "a bucket key must vary inside a partition"
    )
    if options.get(FULL_COMPACTION_DELTA_COMMITS) and bucket == -1:
        raise InvalidOptionError(
            "option 'full-compaction.delta-commits' applies to bucketed tables only (bucket > 0)"
        )
    for option in (
        TARGET_FILE_SIZE,
        WRITE_BUFFER_SIZE,
        MANIFEST_TARGET_SIZE,
        SPLIT_TARGET_SIZE,
        GROUP_LEASE_TIME,
        GROUP_FILE_SLOTS,
        ICEBERG_MAX_SNAPSHOTS,
        SNAPSHOT_EXPIRE_LIMIT,
    ):
        if options.get(option) <= 0:
            raise InvalidOptionError(f"option '{option.key}' must be positive")
    for option in (WRITE_MAX_WRITERS_TO_SPILL, WRITE_PARALLELISM):
        if options.get(option) < 0:
            raise InvalidOptionError(f"option '{option.key}' must not be negative")
    if options.get(COMMIT_MAX_RETRIES) < -1:
        raise InvalidOptionError(
            f"option '{COMMIT_MAX_RETRIES.key}' must be -1 (no count) or a number of retries"
        )
    for option in (COMPACTION_MIN_FILE_NUM, COMPACTION_MAX_FILE_NUM, MANIFEST_MERGE_MIN_COUNT):
        if options.get(option) < 2:
            raise InvalidOptionError(f"option '{option.key}' must be at least 2")
    if options.get(COMPACTION_MAX_FILE_NUM) < options.get(COMPACTION_MIN_FILE_NUM):
        raise InvalidOptionError(
            "option 'compaction.max.file-num' must not be smaller than 'compaction.min.file-num'"
        )
    ratio = options.get(COMPACTION_SMALL_FILE_RATIO)
    if not 0 < ratio <= 1:
        raise InvalidOptionError("option 'compaction.small-file-ratio' must be in (0, 1]")
    if options.get(SNAPSHOT_RETAINED_MIN) < 1:
        raise InvalidOptionError("option 'snapshot.num-retained.min' must be at least 1")
    if options.get(SNAPSHOT_RETAINED_MAX) < options.get(SNAPSHOT_RETAINED_MIN):
        raise InvalidOptionError(
            "option 'snapshot.num-retained.max' must not be smaller than "
            "'snapshot.num-retained.min'"
        )
    _validate_file_index(options, column_list, partitions)
    watermark_column = options.get(WATERMARK_COLUMN)
    if watermark_column and watermark_column not in column_list:
        raise InvalidOptionError(
            f"option 'watermark.column' names column '{watermark_column}', which is not in the "
            "schema"
        )


def _check_columns_option(
    key: str, named: tuple[str, ...], columns: list[str], partitions: set[str], why: str
) -> None:
    """An option listing columns names each once, each in the schema and none a partition
    column (``why`` says why not)."""
    for column in named:
        if column not in columns:
            raise InvalidOptionError(
                f"option '{key}' names column '{column}', which is not in the schema "
                f"(columns: {', '.join(columns)})"
            )
        if column in partitions:
            raise InvalidOptionError(
                f"option '{key}' column '{column}' is a partition column; {why}"
            )
    if len(set(named)) != len(named):
        raise InvalidOptionError(f"option '{key}' lists a column twice")


def _validate_file_index(options: Options, columns: list[str], partitions: set[str]) -> None:
    _check_columns_option(
        FILE_INDEX_BLOOM_COLUMNS.key,
        options.get(FILE_INDEX_BLOOM_COLUMNS),
        columns,
        partitions,
        "partitions are pruned by their values already",
    )
    if not 0 < options.get(FILE_INDEX_BLOOM_FPP) < 1:
        raise InvalidOptionError(f"option '{FILE_INDEX_BLOOM_FPP.key}' must be in (0, 1)")
    if options.get(FILE_INDEX_BLOOM_ITEMS) < 0:
        raise InvalidOptionError(f"option '{FILE_INDEX_BLOOM_ITEMS.key}' must not be negative")
