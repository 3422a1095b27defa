"""The adapter's option registry: every key is declared once, unknown keys and bad values are
refused naming the option, and each option applies where it is declared (no session)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")

import appendtable as at
from appendtable_spark import options as registry
from appendtable_spark.options import Use
from appendtable_spark.settings import Settings

ALL = Use.READ | Use.STREAM | Use.WRITE | Use.SINK


def _parse(options: dict[str, str], use: Use = ALL) -> Settings:
    return Settings.parse({"path": "/t", **options}, use)


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("scan.snapshot_id", "scan.snapshot-id"),
        ("maxFilePerTrigger", "maxFilesPerTrigger"),
        ("mergeschemas", "mergeSchema"),
        ("comitUser", "commitUser"),
        ("buckets", "bucket"),
        ("partitionOverwriteMod", "partitionOverwriteMode"),
    ],
)
def test_an_unknown_key_is_refused_with_the_closest_name(key: str, suggestion: str) -> None:
    with pytest.raises(at.InvalidOptionError, match=f"'{key}'.*did you mean '{suggestion}'"):
        _parse({key: "1"})


def test_keys_match_ignoring_case_as_spark_delivers_them() -> None:
    settings = _parse({"MAXROWSPERTRIGGER": "7", "Scan.Mode": "latest"}, Use.STREAM)
    assert settings.get(registry.MAX_ROWS_PER_TRIGGER) == 7
    assert settings.format_options == {"scan.mode": "latest"}


@pytest.mark.parametrize(
    ("options", "use", "message"),
    [
        ({"maxFilesPerTrigger": "0"}, Use.STREAM, "maxFilesPerTrigger.*0 is not a positive"),
        ({"maxFilesPerTrigger": "-1"}, Use.STREAM, "maxFilesPerTrigger.*-1 is not a positive"),
        ({"maxRowsPerTrigger": "1.5"}, Use.STREAM, "maxRowsPerTrigger.*'1.5' is not an integer"),
        ({"maxRowsPerTrigger": "abc"}, Use.STREAM, "maxRowsPerTrigger.*'abc'"),
        ({"splitTargetBytes": "0"}, Use.READ, "splitTargetBytes"),
        ({"mergeSchema": "yes"}, Use.WRITE, "mergeSchema.*true or false"),
        ({"partitionOverwriteMode": "all"}, Use.WRITE, "partitionOverwriteMode.*static, dynamic"),
        ({"overwritePartitions": "day=1"}, Use.WRITE, "overwritePartitions.*not JSON"),
        ({"overwritePartitions": '{"day": 1}'}, Use.WRITE, "overwritePartitions.*list"),
        ({"commitIdentifier": "x", "commitUser": "u"}, Use.WRITE, "commitIdentifier"),
        ({"commitIdentifier": "3"}, Use.WRITE, "needs 'commitUser'"),
        ({"columns": " , "}, Use.READ, "columns.*no column"),
        ({"columns": "id,v,id"}, Use.READ, "'columns'.*column 'id' is named twice"),
        ({"columns": "id, v, ID"}, Use.READ, "'columns'.*column 'ID' is named twice"),
        ({"partitionBy": "day,Day"}, Use.WRITE, "'partitionBy'.*column 'Day' is named twice"),
        ({"bucket": "four"}, Use.WRITE, "bucket"),
        ({"scan.snapshot-id": "x"}, Use.READ, "scan.snapshot-id"),
        ({"scan.mode": "earliest"}, Use.STREAM, "scan.mode"),
    ],
)
def test_a_bad_value_is_refused_naming_the_option(
    options: dict[str, str], use: Use, message: str
) -> None:
    with pytest.raises(at.InvalidOptionError, match=message):
        _parse(options, use)


@pytest.mark.parametrize(
    ("options", "use", "message"),
    [
        ({"maxFilesPerTrigger": "3"}, Use.READ, "applies to streaming reads, not to batch reads"),
        ({"mergeSchema": "true"}, Use.READ, "applies to batch writes, streaming writes"),
        ({"splitTargetBytes": "1"}, Use.WRITE, "applies to batch reads"),
        ({"commitIdentifier": "1", "commitUser": "u"}, Use.SINK, "commitIdentifier"),
        ({"checkpointLocation": "/c"}, Use.WRITE, "applies to streaming writes"),
        ({"schema": "a INT"}, Use.READ, "applies to CREATE TABLE"),
        ({"location": "/t"}, Use.READ, "unknown option 'location'"),
    ],
)
def test_an_option_given_where_it_does_not_apply_is_refused(
    options: dict[str, str], use: Use, message: str
) -> None:
    with pytest.raises(at.InvalidOptionError, match=message):
        _parse(options, use)


def test_aliases_name_the_same_setting() -> None:
    delta = _parse({"txnAppId": "app", "txnVersion": "4"}, Use.WRITE)
    assert delta.commit_identity() == ("app", 4)
    same = _parse({"txnAppId": "app", "commitUser": "app"}, Use.WRITE)
    assert same.commit_identity() == ("app", None)
    with pytest.raises(at.InvalidOptionError, match="name the same setting"):
        _parse({"txnAppId": "app", "commitUser": "other"}, Use.WRITE)
    assert _parse({"partition-by": "a, b"}, Use.WRITE).partition_by() == ["a", "b"]


@pytest.mark.parametrize(
    "options",
    [
        {"maxFilesPerTrigger": "1", "maxRowsPerTrigger": "10"},
        {"overwritePartitions": '[{"d": 1}]', "partitionOverwriteMode": "dynamic"},
        {"scan.snapshot-id": "1", "scan.tag-name": "t"},
    ],
)
def test_exclusive_options_are_refused_together(options: dict[str, str]) -> None:
    with pytest.raises(at.InvalidOptionError, match="not both"):
        _parse(options)


def test_storage_core_and_spark_keys_are_routed() -> None:
    settings = _parse(
        {
            "storage.client_kwargs": '{"endpoint_url": "http://x"}',
            "storage.anon": "true",
            "storage.key": "plain text",
            "bucket": "4",
            "__partition_columns": '["day"]',
        },
        Use.WRITE,
    )
    assert settings.storage_options == {
        "client_kwargs": {"endpoint_url": "http://x"},
        "anon": True,
        "key": "plain text",
    }
    assert settings.format_options == {"bucket": "4"}
    assert settings.partition_by() == ["day"]


def test_catalog_keys_are_taken_only_at_create_table() -> None:
    created = Settings.parse(
        {
            "location": "file:/w/t",
            "path": "file:/w/t",
            "owner": "me",
            "provider": "appendtable",
            "option.bucket": "2",
            "schema": "a INT",
        },
        Use.CREATE,
    )
    assert created.uri == "/w/t"
    assert created.format_options == {"bucket": "2"}
    with pytest.raises(at.InvalidOptionError, match="unknown option 'owner'"):
        _parse({"owner": "me"}, Use.READ)


def test_every_option_is_declared_once_with_a_use_and_a_doc() -> None:
    seen: set[str] = set()
    for name, option in registry.OPTIONS.items():
        assert name == option.name
        assert option.uses, name
        assert option.doc, name
        for key in option.keys:
            assert key not in seen, key
            assert key not in at.option_keys(), f"{key} is a core option too"
            seen.add(key)
            assert registry.lookup(key) is option
    sample: dict[str, Any] = {"columns": "a", "maxRowsPerTrigger": "2"}
    for key, value in sample.items():
        assert registry.lookup(key.lower()) is not None, value
