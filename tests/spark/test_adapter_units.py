"""Pure parts of the Spark adapter: options and split packing (no session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import appendtable as at
from appendtable_spark.api import write_table
from appendtable_spark.options import MAX_FILES_PER_TRIGGER, Use
from appendtable_spark.reader import default_target, pack
from appendtable_spark.settings import Settings


def _split(size: int, index: int) -> at.Split:
    meta = at.DataFileMeta(f"f{index}", size, 1, index, index, 0, 0, 0)
    return at.Split(
        snapshot_id=1,
        partition_keys=(),
        partition_types=(),
        partition_values=(),
        bucket=index % 2,
        files=(meta,),
    )


def test_splits_are_packed_in_order_into_few_tasks() -> None:
    splits = [_split(size, i) for i, size in enumerate([40, 40, 40, 100, 10, 10, 10])]
    groups = pack(splits, 100)
    assert [[s.files[0].path for s in g] for g in groups] == [
        ["f0", "f1"],
        ["f2"],
        ["f3"],
        ["f4", "f5", "f6"],
    ]
    assert [s for g in groups for s in g] == splits


def test_small_reads_spread_over_several_tasks_large_ones_take_128_mb() -> None:
    mb = 1024 * 1024
    assert default_target([_split(5 * mb, i) for i in range(3)]) == 16 * mb
    four = [_split(20 * mb, i) for i in range(4)]
    assert len(pack(four, default_target(four))) == 4  # one task per file, not one in all
    assert default_target([_split(1024 * mb, i) for i in range(10)]) == 128 * mb


def test_settings_split_storage_table_and_adapter_options() -> None:
    settings = Settings.parse(
        {
            "path": "file:///tmp/x",
            "storage.key": "k",
            "storage.client_kwargs": '{"endpoint_url": "http://127.0.0.1:9000"}',
            "storage.operation_timeout": "10",
            "bucket": "4",
            "maxFilesPerTrigger": "3",
            "columns": "a, b",
        },
        Use.READ | Use.STREAM,
    )
    assert settings.uri == "/tmp/x"
    assert settings.storage_options == {
        "key": "k",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"},
        "operation_timeout": 10,
    }
    assert settings.format_options == {"bucket": "4"}
    assert settings.get(MAX_FILES_PER_TRIGGER) == 3
    assert settings.columns() == ["a", "b"]
    with pytest.raises(at.InvalidOptionError, match="no table location"):
        Settings.parse({}, Use.READ)


@pytest.mark.parametrize(
    ("keywords", "name"),
    [
        ({"mode": "upsert"}, "mode"),
        ({"partitions": [{"day": "2024-05-01"}]}, "partitions="),
        ({"partition_by": 5}, "partition_by"),
    ],
)
def test_write_table_refuses_bad_arguments_naming_them_before_touching_data(
    tmp_path: Path, keywords: dict[str, Any], name: str
) -> None:
    with pytest.raises(at.InvalidArgumentError, match=name):
        write_table(None, str(tmp_path / "t"), **keywords)  # type: ignore[arg-type]
    assert not (tmp_path / "t").exists()
