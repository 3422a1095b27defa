"""Each partition has its own text in the system tables (found by a docs-only hunt): the
directory of null, of '' and of a value spelled as the default name is the default name, and
``partitions`` / ``buckets`` summed the three into one row. The oracle groups the appended
rows by their partition values with pyarrow compute."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.metadata.types import TypeSpec
from appendtable.planning.partitions import partition_path, partition_text

DEFAULT = "__DEFAULT_PARTITION__"
#: value of p -> its text in the system tables
TEXTS = {
    None: f"p={DEFAULT}",
    "": "p=",
    DEFAULT: "p=%5F_DEFAULT_PARTITION__",
    "_DEFAULT_PARTITION__": "p=_DEFAULT_PARTITION__",
    "a/b": "p=a%2Fb",
    "null": "p=null",
}


def test_the_null_empty_and_default_spelled_partitions_are_rows_of_their_own(
    tmp_path: Path,
) -> None:
    schema = pa.schema([("p", pa.string()), ("q", pa.int64()), ("v", pa.int64())])
    table = at.create_table(str(tmp_path / "t"), schema, partition_by=["p", "q"])
    values = list(TEXTS)
    data = pa.table(
        {
            "p": [values[i % len(values)] for i in range(30)],
            "q": [None if i % 4 == 0 else 1 for i in range(30)],
            "v": list(range(30)),
        },
        schema=schema,
    )
    table.append(data.slice(0, 17))
    table.append(data.slice(17))
    counts = data.group_by(["p", "q"]).aggregate([("v", "count")]).to_pylist()
    expected = {
        f"{TEXTS[row['p']]}/q={DEFAULT if row['q'] is None else row['q']}": row["v_count"]
        for row in counts
    }
    partitions = table.system_table("partitions")
    assert len(expected) == len(counts) and partitions.num_rows == len(counts)
    texts, rows = partitions["partition"].to_pylist(), partitions["record_count"].to_pylist()
    assert dict(zip(texts, rows, strict=True)) == expected
    buckets = table.system_table("buckets")
    assert sorted(buckets["partition"].to_pylist()) == sorted(expected)
    files = table.system_table("files")
    assert set(files["partition"].to_pylist()) == set(expected)
    per_file = list(
        zip(files["partition"].to_pylist(), files["record_count"].to_pylist(), strict=True)
    )
    for text, count in expected.items():  # each text names the rows of one partition
        assert sum(r for p, r in per_file if p == text) == count


@pytest.mark.parametrize("default", ["__DEFAULT_PARTITION__", "null", "_", "9"])
@pytest.mark.parametrize("value", [None, "", "__DEFAULT_PARTITION__", "null", "_", "9", "x"])
def test_texts_differ_where_directories_do_not(default: str, value: str | None) -> None:
    """Two partitions never share a text; the text is the directory name except for '' and a
    value spelled as the default name."""
    spec = [TypeSpec(kind="string")]
    text = partition_text(["p"], (value,), spec, default)
    others = {partition_text(["p"], (v,), spec, default) for v in [None, "", default, "x", "y"]}
    assert len(others) == 5
    if value is None or value not in ("", default):
        assert text == partition_path(["p"], (value,), spec, default)
    else:
        assert text != partition_path(["p"], (value,), spec, default)
