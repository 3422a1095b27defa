"""The Spark adapter's write modes (``appendtable_spark.write_mode``), without a session: each
mode survives the trip through the format's options (how ``write_table`` hands a write to
``df.write.format("appendtable")``), appends never read the partition-overwrite options, and
``write_table``'s keywords build the same settings as the options they stand for."""

from __future__ import annotations

import json
import string
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

import appendtable as at
from appendtable_spark import options as registry
from appendtable_spark.options import Use
from appendtable_spark.settings import Settings, check_append
from appendtable_spark.write_mode import (
    Append,
    OverwriteDynamic,
    OverwritePartitions,
    OverwriteTable,
    WriteMode,
    format_write,
)

MODES: list[WriteMode] = [
    Append(),
    OverwriteTable(),
    OverwritePartitions(({"day": "2024-05-01"}, {"day": "2024-05-02", "hour": 3})),
    OverwriteDynamic(),
]


def test_the_examples_cover_every_write_mode() -> None:
    assert {type(mode) for mode in MODES} == set(get_args(WriteMode))


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: type(mode).__name__)
def test_every_write_mode_reaches_the_format_as_itself(mode: WriteMode) -> None:
    spark_mode, options = format_write(mode)
    assert spark_mode in ("append", "overwrite")
    if spark_mode == "append":
        check_append(options)  # an append names no partitions to replace
    parsed = Settings.parse({**options, "path": "/t"}, Use.WRITE)
    assert parsed.write_mode(spark_mode == "overwrite") == mode


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"overwritePartitions": '[{"day": "2024-05-01"}]'},
        {"partitionOverwriteMode": "dynamic"},
        {"partitionOverwriteMode": "static"},
    ],
)
def test_only_an_overwrite_reads_which_partitions_it_replaces(options: dict[str, str]) -> None:
    """A catalog table created with ``partitionOverwriteMode`` = ``dynamic`` still takes
    ``INSERT INTO``: an append is an append whatever the options say."""
    parsed = Settings.parse({**options, "path": "/t"}, Use.WRITE)
    assert parsed.write_mode(False) == Append()
    expected: WriteMode = OverwriteTable()
    if "overwritePartitions" in options:
        expected = OverwritePartitions(tuple(json.loads(options["overwritePartitions"])))
    elif options.get("partitionOverwriteMode") == "dynamic":
        expected = OverwriteDynamic()
    assert parsed.write_mode(True) == expected


NAMES = st.lists(st.text(alphabet=string.ascii_letters[:4] + ", ", max_size=6), max_size=4)
SPECS = st.lists(
    st.dictionaries(
        st.sampled_from(["day", "hour", "kind"]),
        st.one_of(st.integers(-5, 5), st.text(max_size=5), st.booleans(), st.none()),
        max_size=2,
    ),
    max_size=3,
)


def _outcome(parse: Any) -> Any:
    try:
        return parse().adapter
    except at.AppendTableError as exc:
        return (type(exc), str(exc))


@settings(max_examples=200, deadline=None)
@given(st.one_of(NAMES, st.text(alphabet="ab, ", max_size=6)), SPECS, st.booleans())
def test_keywords_build_the_settings_their_options_would(
    partition_by: list[str] | str, partitions: list[dict[str, object]], merge: bool
) -> None:
    """``write_table(partition_by=..., partitions=..., merge_schema=...)``: the same values, or
    the same error naming the option, as options ``partitionBy`` (names joined by commas),
    ``overwritePartitions`` (JSON) and ``mergeSchema``."""
    names = [partition_by] if isinstance(partition_by, str) else partition_by
    texts = {
        "path": "/t",
        "partitionBy": ",".join(names),
        "overwritePartitions": json.dumps(partitions),
        "mergeSchema": "true" if merge else "false",
    }
    keywords = {
        registry.PARTITION_BY: partition_by,
        registry.OVERWRITE_PARTITIONS: partitions,
        registry.MERGE_SCHEMA: merge,
    }
    from_texts = _outcome(lambda: Settings.parse(texts, Use.WRITE))
    from_keywords = _outcome(lambda: Settings.parse({"path": "/t"}, Use.WRITE, keywords=keywords))
    assert from_keywords == from_texts


@pytest.mark.parametrize(
    ("option", "text", "keyword", "value"),
    [
        ("partitionBy", "day", registry.PARTITION_BY, ["day"]),
        ("PARTITION-BY", "day", registry.PARTITION_BY, "day"),
        (
            "overwritepartitions",
            '[{"day": "2024-05-01"}]',
            registry.OVERWRITE_PARTITIONS,
            [{"day": "2024-05-01"}],
        ),
        ("mergeSchema", "true", registry.MERGE_SCHEMA, True),
    ],
)
def test_a_setting_is_given_as_a_keyword_or_an_option_not_both(
    option: str, text: str, keyword: registry.SparkOption[Any], value: object
) -> None:
    with pytest.raises(
        at.InvalidArgumentError, match=f"give {keyword.keyword}= or option '{keyword.name}'"
    ):
        Settings.parse({"path": "/t", option: text}, Use.WRITE, keywords={keyword: value})
