"""Option parsing, typed access with defaults, and table option validation."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.errors import InvalidOptionError
from appendtable.metadata import options as opt
from appendtable.metadata.options import (
    OPTIONS,
    Options,
    parse_bool,
    parse_duration_ms,
    parse_options,
    parse_size,
    validate_table_options,
)

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


# ---- sizes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("65536", 65536),
        ("  65536  ", 65536),
        ("1b", 1),
        ("10 B", 10),
        ("1k", KiB),
        ("1 kb", KiB),
        ("512 KiB", 512 * KiB),
        ("512KIB", 512 * KiB),
        ("128 MB", 128 * MiB),
        ("128mb", 128 * MiB),
        ("128 m", 128 * MiB),
        ("1 MiB", MiB),
        ("1gb", GiB),
        ("1 GiB", GiB),
        ("1 G", GiB),
        ("2 TB", 2 * TiB),
        ("1 tib", TiB),
        ("1.5 KB", 1536),
        ("0.5 gb", GiB // 2),
        ("\t8\tmb\n", 8 * MiB),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", " ", "MB", "abc", "-1", "-1 MB", "1 PB", "1 MBs", "1,5 MB", "1e3", "1 M B", "1 mb x"],
)
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize("text", ["1.5", "0.9", "0.9 B", "2.5b"])
def test_parse_size_rejects_a_fraction_of_a_byte(text: str) -> None:
    """A plain byte count must be whole ("0.9" would have read as 0, turning an option off)."""
    with pytest.raises(ValueError, match="whole number of bytes"):
        parse_size(text)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from([("", 1), ("b", 1), ("kb", KiB), ("MiB", MiB), ("g", GiB), ("TB", TiB)]),
    st.sampled_from(["", " ", "  "]),
)
def test_parse_size_scales_integers(number: int, unit: tuple[str, int], gap: str) -> None:
    suffix, factor = unit
    assert parse_size(f"{number}{gap}{suffix}") == number * factor


# ---- durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("250", 250),
        ("500ms", 500),
        ("500 ms", 500),
        ("5 millis", 5),
        ("1 milli", 1),
        ("10 s", 10_000),
        ("10s", 10_000),
        ("1 sec", 1000),
        ("2 secs", 2000),
        ("1 second", 1000),
        ("3 seconds", 3000),
        ("1.5 s", 1500),
        ("2 min", 120_000),
        ("2 mins", 120_000),
        ("1 minute", 60_000),
        ("10 minutes", 600_000),
        ("1 h", 3_600_000),
        ("1 H", 3_600_000),
        ("2 hour", 7_200_000),
        ("24 hours", 86_400_000),
        ("7 d", 7 * 86_400_000),
        ("1 day", 86_400_000),
        ("30 days", 30 * 86_400_000),
        (" 10 S ", 10_000),
    ],
)
def test_parse_duration_ms(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize(
    "text", ["", "s", "five", "-5 s", "1 w", "1 week", "10 sec s", "1 hr", "1e3", "1:00", "10 mss"]
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_ms(text)


# ---- booleans -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["true", "TRUE", "True", " true ", "1", "yes", "YES", "on", "On"])
def test_parse_bool_true(text: str) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["false", "FALSE", "False", "\tfalse\n", "0", "no", "off", "OFF"])
def test_parse_bool_false(text: str) -> None:
    assert parse_bool(text) is False


@pytest.mark.parametrize("text", ["", "2", "t", "f", "y", "n", "maybe", "truee", "10", "-1"])
def test_parse_bool_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a boolean"):
        parse_bool(text)


# ---- parse_options ------------------------------------------------------------------------------


def test_parse_options_normalises_values_to_strings() -> None:
    parsed = parse_options(
        {
            "bucket": 4,
            "bucket-key": ["a", "b"],
            "write-only": True,
            "precommit-compact": False,
            "target-file-size": "128 MB",
            "compaction.small-file-ratio": 0.5,
        }
    )
    assert parsed == {
        "bucket": "4",
        "bucket-key": "a,b",
        "write-only": "true",
        "precommit-compact": "false",
        "target-file-size": "128 MB",
        "compaction.small-file-ratio": "0.5",
    }
    assert parse_options(None) == {}
    assert parse_options({}) == {}
    assert parse_options({"bucket-key": ("x",)}) == {"bucket-key": "x"}


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("buckets", "bucket"),
        ("bucket_key", "bucket-key"),
        ("bucket-keys", "bucket-key"),
        ("target-file-sise", "target-file-size"),
        ("target.file.size", "target-file-size"),
        ("snapshot.num-retained-min", "snapshot.num-retained.min"),
        ("compaction.min.file-nums", "compaction.min.file-num"),
        ("scan.modes", "scan.mode"),
        ("consumer_id", "consumer-id"),
        ("write-buffer-spilable", "write-buffer-spillable"),
    ],
)
def test_unknown_key_suggests_the_closest_key(key: str, suggestion: str) -> None:
    with pytest.raises(InvalidOptionError) as info:
        parse_options({key: "1"})
    message = str(info.value)
    assert f"'{key}'" in message
    assert f"did you mean '{suggestion}'" in message


def test_unknown_key_without_a_close_match_has_no_suggestion() -> None:
    with pytest.raises(InvalidOptionError, match="unknown option 'zzzzzzzz'") as info:
        parse_options({"zzzzzzzz": "1"})
    assert "did you mean" not in str(info.value)


def test_keys_are_case_sensitive() -> None:
    with pytest.raises(InvalidOptionError, match="did you mean 'bucket'"):
        parse_options({"BUCKET": "2"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("bucket", "four"),
        ("bucket", "1.5"),
        ("bucket-key", " , "),
        ("bucket-key", ""),
        ("target-file-size", "big"),
        ("target-file-size", "-1 MB"),
        ("file.compression", "lzo"),
        ("metadata.stats-mode", "truncate"),
        ("metadata.stats-mode", "truncate(x)"),
        ("write-buffer-spillable", "sometimes"),
        ("write-only", 2),
        ("watermark.delay", "1 fortnight"),
        ("commit.max-retries", "many"),
        ("compaction.small-file-ratio", "half"),
        ("scan.mode", "earliest"),
        ("scan.snapshot-id", "latest"),
        ("continuous.discovery-interval", "-1"),
    ],
)
def test_bad_values_name_the_option(key: str, value: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        parse_options({key: value})
    assert f"'{key}'" in str(info.value)
    assert "invalid value" in str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("file.compression", "ZSTD"),
        ("file.compression", "none"),
        ("metadata.stats-mode", "truncate(32)"),
        ("metadata.stats-mode", "FULL"),
        ("metadata.stats-mode", "counts"),
        ("scan.mode", "from-snapshot-full"),
        ("scan.mode", "Latest"),
        ("snapshot.time-retained", "2 h"),
        ("manifest.target-file-size", "8 MB"),
    ],
)
def test_good_values_are_accepted(key: str, value: str) -> None:
    assert parse_options({key: value}) == {key: value}


def test_every_option_has_a_parseable_documented_definition() -> None:
    assert len(OPTIONS) > 40
    for key, definition in OPTIONS.items():
        assert definition.key == key
        assert key == key.lower()  # suggestions for unknown keys compare lower-cased
        assert definition.doc
        assert Options().get(definition) == definition.default


# ---- Options ------------------------------------------------------------------------------------


def test_defaults_of_the_design() -> None:
    options = Options()
    assert options.bucket == -1
    assert options.bucket_key == ()
    assert options.target_file_size == 256 * MiB
    assert options.get(opt.FILE_COMPRESSION) == "zstd"
    assert options.get(opt.WRITE_BUFFER_SPILLABLE) is True
    # a time budget, not a count: appends never fail from contention alone
    assert options.get(opt.COMMIT_MAX_RETRIES) == -1
    assert options.get(opt.COMMIT_TIMEOUT) == 300_000
    assert options.get(opt.COMMIT_MIN_RETRY_WAIT) == 10
    assert options.get(opt.COMMIT_MAX_RETRY_WAIT) == 2_000
    assert options.get(opt.MANIFEST_TARGET_SIZE) == 8 * MiB
    assert options.get(opt.MANIFEST_MERGE_MIN_COUNT) == 30
    assert options.get(opt.COMPACTION_MIN_FILE_NUM) == 5
    assert options.get(opt.COMPACTION_MAX_FILE_NUM) == 50
    assert options.get(opt.COMPACTION_SMALL_FILE_RATIO) == 0.7
    assert options.get(opt.SNAPSHOT_RETAINED_MIN) == 10
    assert options.get(opt.SNAPSHOT_TIME_RETAINED) == 3_600_000
    assert options.get(opt.PARTITION_DEFAULT_NAME) == "__DEFAULT_PARTITION__"
    assert options.get(opt.SCAN_MODE) == "default"
    assert options.stats_truncate == 16
    assert options.as_dict() == {}
    assert not options.is_set(opt.BUCKET)


def test_get_parses_set_values() -> None:
    options = Options(
        parse_options(
            {
                "bucket": "8",
                "bucket-key": " a , b,,c ",
                "target-file-size": "64 MB",
                "snapshot.time-retained": "2 h",
                "write-only": "yes",
                "scan.mode": "LATEST",
                "metadata.stats-mode": "full",
            }
        )
    )
    assert options.bucket == 8
    assert options.bucket_key == ("a", "b", "c")
    assert options.target_file_size == 64 * MiB
    assert options.get(opt.SNAPSHOT_TIME_RETAINED) == 7_200_000
    assert options.get(opt.WRITE_ONLY) is True
    assert options.get(opt.SCAN_MODE) == "latest"
    assert options.stats_truncate is None
    assert options.is_set(opt.BUCKET)
    assert not options.is_set(opt.WRITE_BUFFER_SIZE)
    assert Options({"metadata.stats-mode": "truncate(4)"}).stats_truncate == 4
    assert Options({"metadata.stats-mode": "counts"}).stats_truncate is None


def test_write_parallelism() -> None:
    assert Options({"write.parallelism": "3"}).write_parallelism == 3
    assert Options().write_parallelism == max(1, os.cpu_count() or 1)


def test_with_overrides_validates_and_does_not_mutate() -> None:
    base = Options({"bucket": "4", "bucket-key": "k"})
    updated = base.with_overrides({"target-file-size": "1 MB", "bucket": 8})
    assert updated.bucket == 8
    assert updated.bucket_key == ("k",)
    assert updated.target_file_size == MiB
    assert base.bucket == 4
    assert base.as_dict() == {"bucket": "4", "bucket-key": "k"}
    assert base.with_overrides(None).as_dict() == base.as_dict()
    with pytest.raises(InvalidOptionError, match="did you mean 'target-file-size'"):
        base.with_overrides({"target-file-sizes": "1 MB"})
    with pytest.raises(InvalidOptionError, match="'bucket'"):
        base.with_overrides({"bucket": "x"})
    assert "bucket" in repr(base)


def test_as_dict_is_a_copy() -> None:
    options = Options({"bucket": "2"})
    options.as_dict()["bucket"] = "3"
    assert options.bucket == 2


# ---- validate_table_options ---------------------------------------------------------------------

COLUMNS = ["p", "a", "b", "ts"]
PARTITIONS = ["p"]


def validate(raw: dict[str, object]) -> None:
    validate_table_options(Options(parse_options(raw)), columns=COLUMNS, partition_keys=PARTITIONS)


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"bucket": "-1"},
        {"bucket": "1", "bucket-key": "a"},
        {"bucket": "64", "bucket-key": "a,b"},
        {"bucket": "4", "bucket-key": "a", "full-compaction.delta-commits": "3"},
        {"compaction.min.file-num": "2", "compaction.max.file-num": "2"},
        {"compaction.small-file-ratio": "1"},
        {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"},
        {"watermark.column": "ts"},
        {"manifest.merge-min-count": "2"},
    ],
)
def test_valid_table_options(raw: dict[str, object]) -> None:
    validate(raw)


@pytest.mark.parametrize(
    ("raw", "option", "detail"),
    [
        ({"bucket": "0"}, "bucket", "got 0"),
        ({"bucket": "-2"}, "bucket", "got -2"),
        ({"bucket": "-100"}, "bucket", "got -100"),
        ({"bucket-key": "a"}, "bucket-key", "bucket"),
        ({"bucket": "-1", "bucket-key": "a"}, "bucket-key", "bucket"),
        ({"bucket": "4"}, "bucket", "bucket-key"),
        ({"bucket": "4", "bucket-key": "nope"}, "bucket-key", "'nope'"),
        ({"bucket": "4", "bucket-key": "a,nope"}, "bucket-key", "'nope'"),
        ({"bucket": "4", "bucket-key": "p"}, "bucket-key", "'p' is a partition column"),
        ({"bucket": "4", "bucket-key": "a,b,a"}, "bucket-key", "twice"),
        ({"full-compaction.delta-commits": "5"}, "full-compaction.delta-commits", "bucket"),
        ({"compaction.min.file-num": "1"}, "compaction.min.file-num", "at least 2"),
        ({"compaction.max.file-num": "1"}, "compaction.max.file-num", "at least 2"),
        (
            {"compaction.min.file-num": "10", "compaction.max.file-num": "5"},
            "compaction.max.file-num",
            "compaction.min.file-num",
        ),
        ({"manifest.merge-min-count": "1"}, "manifest.merge-min-count", "at least 2"),
        ({"compaction.small-file-ratio": "0"}, "compaction.small-file-ratio", "(0, 1]"),
        ({"compaction.small-file-ratio": "-0.5"}, "compaction.small-file-ratio", "(0, 1]"),
        ({"compaction.small-file-ratio": "1.01"}, "compaction.small-file-ratio", "(0, 1]"),
        ({"compaction.small-file-ratio": "nan"}, "compaction.small-file-ratio", "(0, 1]"),
        ({"compaction.small-file-ratio": "inf"}, "compaction.small-file-ratio", "(0, 1]"),
        ({"snapshot.num-retained.min": "0"}, "snapshot.num-retained.min", "at least 1"),
        (
            {"snapshot.num-retained.min": "10", "snapshot.num-retained.max": "9"},
            "snapshot.num-retained.max",
            "snapshot.num-retained.min",
        ),
        ({"watermark.column": "event_time"}, "watermark.column", "'event_time'"),
        ({"target-file-size": "0"}, "target-file-size", "positive"),
        ({"write-buffer-size": "0 MB"}, "write-buffer-size", "positive"),
        ({"manifest.target-file-size": "0"}, "manifest.target-file-size", "positive"),
        ({"source.split.target-size": "0"}, "source.split.target-size", "positive"),
        ({"file.compression.zstd-level": "23"}, "file.compression.zstd-level", "-131072..22"),
        ({"file.compression.zstd-level": "-131073"}, "file.compression.zstd-level", "outside"),
        ({"metadata.iceberg.max-snapshots": "0"}, "metadata.iceberg.max-snapshots", "positive"),
        ({"metadata.iceberg.max-snapshots": "-1"}, "metadata.iceberg.max-snapshots", "positive"),
        ({"snapshot.expire.limit": "0"}, "snapshot.expire.limit", "positive"),
        ({"write-max-writers-to-spill": "-1"}, "write-max-writers-to-spill", "negative"),
        ({"write.parallelism": "-2"}, "write.parallelism", "negative"),
        ({"commit.max-retries": "-2"}, "commit.max-retries", "-1 (no count)"),
    ],
)
def test_invalid_table_options_name_the_option(
    raw: dict[str, object], option: str, detail: str
) -> None:
    with pytest.raises(InvalidOptionError) as info:
        validate(raw)
    message = str(info.value)
    assert f"'{option}'" in message
    assert detail in message


@pytest.mark.parametrize("level", ["-131072", "-5", "0", "1", "22"])
def test_every_zstd_level_arrow_accepts_is_accepted(level: str) -> None:
    raw = {"file.compression.zstd-level": level}
    validate(raw)
    assert Options(parse_options(raw)).get(opt.FILE_COMPRESSION_LEVEL) == int(level)
