"""Which rows an overwrite replaces, however it is asked for: partition-overwrite options given
with an append are refused before anything is written, and Spark's session setting
``spark.sql.sources.partitionOverwriteMode`` is honoured where the adapter can see it
(``write_table``) and warned about where it cannot (the format's writes)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")

SESSION_MODE = "spark.sql.sources.partitionOverwriteMode"
ROWS = pa.schema([("id", pa.int64()), ("part", pa.string())])


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


@pytest.fixture
def session_dynamic(spark_at: Any) -> Iterator[Any]:
    """The session with ``partitionOverwriteMode`` = ``dynamic`` (as the test found it after)."""
    before = spark_at.conf.get(SESSION_MODE, None)
    spark_at.conf.set(SESSION_MODE, "DYNAMIC")  # Spark takes it in any case
    try:
        yield spark_at
    finally:
        if before is None:
            spark_at.conf.unset(SESSION_MODE)
        else:
            spark_at.conf.set(SESSION_MODE, before)


def _table(path: Path, *, partitioned: bool = True) -> at.Table:
    """Three rows in each of partitions a, b, c."""
    table = at.create_table(str(path), ROWS, partition_by=["part"] if partitioned else [])
    table.append(
        pa.table(
            {"id": [i for i in range(3) for _ in "abc"], "part": ["a", "b", "c"] * 3}, schema=ROWS
        )
    )
    return table


def _rows(uri: str) -> list[tuple[int, str]]:
    return sorted((r["id"], r["part"]) for r in at.open_table(uri).scan().to_arrow().to_pylist())


def _new_rows(spark: Any) -> Any:
    return spark.createDataFrame([(9, "a")], "id BIGINT, part STRING")


def _format_append(options: dict[str, str]) -> Callable[[Any, str], None]:
    def write(df: Any, uri: str) -> None:
        writer = df.write.format("appendtable").mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save(uri)

    return write


def _write_table_append(options: dict[str, str], native: bool) -> Callable[[Any, str], None]:
    def write(df: Any, uri: str) -> None:
        appendtable_spark.write_table(df, uri, options=options, native=native)

    return write


def _sql_insert_into(options: dict[str, str]) -> Callable[[Any, str], None]:
    def write(df: Any, uri: str) -> None:
        spark = df.sparkSession
        spark.sql(f"CREATE TABLE ins_t USING appendtable LOCATION '{uri}'")
        given = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
        spark.sql(f"INSERT INTO ins_t WITH ({given}) VALUES (9, 'a')")

    return write


STATIC = {"overwritePartitions": '[{"part": "a"}]'}
DYNAMIC = {"partitionOverwriteMode": "dynamic"}


@pytest.mark.parametrize(
    ("option", "write"),
    [
        ("overwritePartitions", _format_append(STATIC)),
        ("partitionOverwriteMode", _format_append(DYNAMIC)),
        ("overwritePartitions", _write_table_append(STATIC, native=True)),
        ("overwritePartitions", _write_table_append(STATIC, native=False)),
        ("partitionOverwriteMode", _write_table_append(DYNAMIC, native=True)),
        ("partitionOverwriteMode", _write_table_append(DYNAMIC, native=False)),
        ("overwritePartitions", _sql_insert_into(STATIC)),
        ("partitionOverwriteMode", _sql_insert_into(DYNAMIC)),
    ],
    ids=[
        "format-static",
        "format-dynamic",
        "write_table-native-static",
        "write_table-python-static",
        "write_table-native-dynamic",
        "write_table-python-dynamic",
        "sql-insert-into-static",
        "sql-insert-into-dynamic",
    ],
)
def test_partition_overwrite_options_with_an_append_are_refused_before_writing(
    spark_at: Any, tmp_path: Path, option: str, write: Callable[[Any, str], None]
) -> None:
    table = _table(tmp_path / "t")
    before = _rows(table.uri)
    with pytest.raises(Exception, match=rf"option '{option}'.*mode\(\"overwrite\"\)") as caught:
        write(_new_rows(spark_at), table.uri)
    assert isinstance(caught.value, (at.InvalidOptionError, pyspark.errors.PySparkException))
    after = at.open_table(table.uri)
    assert after.latest_snapshot() is not None and after.latest_snapshot().id == 1
    assert _rows(table.uri) == before
    staging = Path(table.uri) / "_staging"
    assert not staging.exists() or not any(staging.rglob("*.parquet"))


def test_a_catalog_table_created_dynamic_still_takes_insert_into(
    spark_at: Any, tmp_path: Path
) -> None:
    """The mode stored at CREATE TABLE is for its overwrites: an INSERT INTO appends."""
    table = _table(tmp_path / "t")
    spark_at.sql(
        f"CREATE TABLE dyn_t USING appendtable LOCATION '{table.uri}' "
        "TBLPROPERTIES ('partitionOverwriteMode' = 'dynamic')"
    )
    spark_at.sql("INSERT INTO dyn_t VALUES (9, 'a')")
    assert _rows(table.uri).count((9, "a")) == 1 and len(_rows(table.uri)) == 10
    spark_at.sql("INSERT OVERWRITE dyn_t VALUES (8, 'b')")
    assert _rows(table.uri) == sorted(
        [(i, p) for i in range(3) for p in "ac"] + [(9, "a"), (8, "b")]
    )


@pytest.mark.parametrize("native", [True, False], ids=["native", "python-writer"])
def test_write_table_honours_the_sessions_dynamic_partition_overwrite(
    session_dynamic: Any, tmp_path: Path, native: bool
) -> None:
    spark = session_dynamic
    others = [(i, p) for i in range(3) for p in "bc"]
    table = _table(tmp_path / "dynamic")
    appendtable_spark.write_table(_new_rows(spark), table.uri, mode="overwrite", native=native)
    assert _rows(table.uri) == sorted([*others, (9, "a")])
    # what the write itself says wins over the session: static partitions ...
    static = _table(tmp_path / "static")
    appendtable_spark.write_table(
        _new_rows(spark), static.uri, mode="overwrite", partitions=[{"part": "a"}], native=native
    )
    assert _rows(static.uri) == sorted([*others, (9, "a")])
    # ... or the whole table
    whole = _table(tmp_path / "whole")
    appendtable_spark.write_table(
        _new_rows(spark),
        whole.uri,
        mode="overwrite",
        options={"partitionOverwriteMode": "static"},
        native=native,
    )
    assert _rows(whole.uri) == [(9, "a")]
    # Spark's rule: a table without partition columns is replaced whole
    flat = _table(tmp_path / "flat", partitioned=False)
    appendtable_spark.write_table(_new_rows(spark), flat.uri, mode="overwrite", native=native)
    assert _rows(flat.uri) == [(9, "a")]
    # and an append stays an append
    appendtable_spark.write_table(_new_rows(spark), flat.uri, native=native)
    assert _rows(flat.uri) == [(9, "a"), (9, "a")]


def test_the_format_cannot_see_the_session_setting_and_register_warns(
    session_dynamic: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark hands a Python data source only the write's options: ``format("appendtable")``
    with ``mode("overwrite")`` replaces the whole table whatever the session says (documented
    in docs/spark.md; this test notices if Spark starts passing the setting)."""
    spark = session_dynamic
    with caplog.at_level(logging.WARNING, logger="appendtable_spark"):
        appendtable_spark.register(spark)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert SESSION_MODE in warned[0].getMessage()
    assert "partitionOverwriteMode" in warned[0].getMessage().replace(SESSION_MODE, "")
    table = _table(tmp_path / "t")
    _new_rows(spark).write.format("appendtable").mode("overwrite").save(table.uri)
    assert _rows(table.uri) == [(9, "a")]
    # with the option, the format overwrites dynamically
    again = _table(tmp_path / "again")
    _new_rows(spark).write.format("appendtable").option("partitionOverwriteMode", "dynamic").mode(
        "overwrite"
    ).save(again.uri)
    assert _rows(again.uri) == sorted([(i, p) for i in range(3) for p in "bc"] + [(9, "a")])


def test_register_is_quiet_when_the_session_overwrites_statically(
    spark_at: Any, caplog: pytest.LogCaptureFixture
) -> None:
    assert spark_at.conf.get(SESSION_MODE, "static").lower() == "static"
    with caplog.at_level(logging.WARNING, logger="appendtable_spark"):
        appendtable_spark.register(spark_at)
    assert [r for r in caplog.records if r.name.startswith("appendtable_spark")] == []


def test_sql_insert_overwrite_is_refused_by_spark_when_the_session_is_dynamic(
    session_dynamic: Any, tmp_path: Path
) -> None:
    """docs/spark.md: Spark itself refuses the statement, and nothing changes."""
    table = _table(tmp_path / "t")
    before = _rows(table.uri)
    session_dynamic.sql(f"CREATE TABLE sql_dyn USING appendtable LOCATION '{table.uri}'")
    with pytest.raises(pyspark.errors.PySparkException, match="dynamic overwrite"):
        session_dynamic.sql("INSERT OVERWRITE sql_dyn VALUES (9, 'a')")
    assert _rows(table.uri) == before


@pytest.mark.parametrize("nothing", [[], [{}]], ids=["[]", "[{}]"])
def test_an_empty_list_of_partitions_is_refused_not_read_as_every_row(
    spark_at: Any, tmp_path: Path, nothing: list[dict[str, object]]
) -> None:
    """``write_table(df, uri, mode="overwrite", partitions=[])`` (and the option ``[]``)
    replaced the whole table, as the core's overwrite did (found by a docs-only hunt); so did
    an empty spec ``{}``, which names no partition column."""
    table = _table(tmp_path / "t")
    before = _rows(table.uri)
    df = _new_rows(spark_at)
    writes = [
        lambda: appendtable_spark.write_table(df, table.uri, mode="overwrite", partitions=nothing),
        lambda: (
            df.write.format("appendtable")
            .mode("overwrite")
            .option("overwritePartitions", json.dumps(nothing))
            .save(table.uri)
        ),
    ]
    for write in writes:
        with pytest.raises(Exception, match=r"empty (list|spec|object)") as caught:
            write()
        assert isinstance(caught.value, (at.AppendTableError, pyspark.errors.PySparkException))
    assert _rows(table.uri) == before
