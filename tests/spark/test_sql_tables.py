"""Tables in Spark SQL: ``CREATE TABLE ... USING appendtable LOCATION``, queries that read the
latest snapshot, ``INSERT INTO`` / ``INSERT OVERWRITE``, schema changes made elsewhere, ``DROP
TABLE`` (never deletes data), and a table defined in one SparkSession used from a new one with
a Hive metastore."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import appendtable as at

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")

from pyspark.errors import PySparkException  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EVENTS = pa.schema([("day", pa.string()), ("id", pa.int64()), ("v", pa.float64())])


@pytest.fixture(scope="module")
def spark_at(spark: Any) -> Any:
    appendtable_spark.register(spark)
    return spark


@pytest.fixture
def sql(spark_at: Any) -> Any:
    """``spark.sql`` (the catalog tables a test creates are dropped afterwards by
    ``tests/conftest.py``)."""
    return spark_at.sql


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {"day": ["mon" if i % 2 else "tue" for i in ids], "id": ids, "v": [i / 2 for i in ids]},
        schema=EVENTS,
    )


def _events(path: Path, rows: int = 10) -> at.Table:
    table = at.create_table(str(path), EVENTS, partition_by=["day"])
    table.append(_rows(0, rows))
    return table


def _count(sql: Any, statement: str) -> int:
    return int(sql(statement).collect()[0][0])


def test_a_sql_table_reads_the_latest_snapshot_at_each_query(sql: Any, tmp_path: Path) -> None:
    table = _events(tmp_path / "events")
    sql(f"CREATE TABLE events USING appendtable LOCATION '{table.uri}'")
    assert _count(sql, "SELECT count(*) FROM events") == 10
    assert _count(sql, "SELECT count(*) FROM events WHERE day = 'tue'") == 5
    assert _count(sql, "SELECT count(*) FROM events") == 10
    table.append(_rows(10, 4))
    assert _count(sql, "SELECT count(*) FROM events") == 14
    by_day = {r[0]: r[1] for r in sql("SELECT day, count(*) FROM events GROUP BY day").collect()}
    assert by_day == {"mon": 7, "tue": 7}
    # one statement scanning the table twice with different filters (one relation in Spark)
    assert (
        _count(
            sql,
            "SELECT count(*) FROM (SELECT * FROM events WHERE id < 3 UNION ALL "
            "SELECT * FROM events WHERE id >= 7)",
        )
        == 3 + 7
    )
    assert (
        _count(
            sql,
            "WITH e AS (SELECT * FROM events) SELECT count(*) FROM e a JOIN e b "
            "ON a.id = b.id AND a.id = 2 AND b.day = 'tue'",
        )
        == 1
    )
    # time travel through the statement's options
    assert _count(sql, "SELECT count(*) FROM events WITH ('scan.snapshot-id' = '1')") == 10


def test_insert_into_and_insert_overwrite(sql: Any, tmp_path: Path) -> None:
    table = _events(tmp_path / "events")
    sql(f"CREATE TABLE ins USING appendtable LOCATION '{table.uri}'")
    sql("INSERT INTO ins VALUES ('wed', 100, 1.5), ('wed', 101, 2.5)")
    latest = table.latest_snapshot()
    assert latest is not None and latest.kind == at.CommitKind.APPEND and latest.id == 2
    assert table.scan().count() == 12
    sql("INSERT INTO ins SELECT day, id + 1000, v FROM ins WHERE day = 'mon'")
    assert table.scan().count() == 17
    sql("INSERT OVERWRITE ins VALUES ('thu', 7, 0.0)")
    overwritten = table.latest_snapshot()
    assert overwritten is not None and overwritten.kind == at.CommitKind.OVERWRITE
    assert table.scan().to_arrow().to_pylist() == [{"day": "thu", "id": 7, "v": 0.0}]
    assert _count(sql, "SELECT count(*) FROM ins") == 1
    # a null in a NOT NULL column is refused, and nothing lands
    sql(
        f"CREATE TABLE strict USING appendtable LOCATION '{tmp_path / 'strict'}' "
        "TBLPROPERTIES ('schema' = 'id BIGINT NOT NULL')"
    )
    with pytest.raises(PySparkException, match=r"(?i)null"):
        sql("INSERT INTO strict VALUES (NULL)")
    assert at.open_table(str(tmp_path / "strict")).scan().count() == 0


def test_insert_select_of_a_relation_with_the_tables_own_columns(
    sql: Any, spark_at: Any, tmp_path: Path
) -> None:
    """Spark hands the writer no location for ``INSERT INTO t SELECT * FROM s`` when s has
    t's names and types: refused saying what works (nothing lands), and those ways land."""
    table = _events(tmp_path / "events")
    sql(f"CREATE TABLE landing USING appendtable LOCATION '{table.uri}'")
    staged = tmp_path / "staging.parquet"
    pq.write_table(_rows(100, 3), staged)
    spark_at.read.parquet(str(staged)).createOrReplaceTempView("staging")
    with pytest.raises(PySparkException, match="Name the columns differently"):
        sql("INSERT INTO landing SELECT * FROM staging")
    assert table.scan().count() == 10
    sql("INSERT INTO landing SELECT day AS c1, id AS c2, v AS c3 FROM staging")
    appendtable_spark.create_temp_view(spark_at, "landing_view", table.uri)
    sql("INSERT INTO landing_view SELECT * FROM staging")
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == [*range(10), 100, 100, 101, 101, 102, 102]


def test_create_table_makes_a_new_table_from_its_properties(sql: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "made")
    sql(
        f"CREATE TABLE made USING appendtable LOCATION '{uri}' TBLPROPERTIES ("
        "'schema' = 'day DATE, id BIGINT NOT NULL, tags ARRAY<STRING>, amount DECIMAL(20, 4)', "
        "'partitionBy' = 'day', 'bucket' = '4', 'bucket-key' = 'id', "
        "'partitionOverwriteMode' = 'dynamic')"
    )
    table = at.open_table(uri)
    assert table.partition_by == ["day"] and table.bucket == 4 and table.bucket_key == ["id"]
    assert table.schema.field("id").nullable is False
    assert table.schema.field("amount").type == pa.decimal128(20, 4)
    sql(
        "INSERT INTO made VALUES (DATE'2024-05-01', 1, array('a'), 1.5), "
        "(DATE'2024-05-02', 2, array(), 2.25), (DATE'2024-05-02', 3, NULL, NULL)"
    )
    # dynamic partition overwrite: only the partitions the statement writes are replaced
    sql("INSERT OVERWRITE made VALUES (DATE'2024-05-02', 9, array('z'), 0)")
    rows = sorted(
        (str(r["day"]), r["id"]) for r in table.scan(columns=["day", "id"]).to_arrow().to_pylist()
    )
    assert rows == [("2024-05-01", 1), ("2024-05-02", 9)]
    assert Counter(r[0] for r in sql("SELECT id FROM made").collect()) == Counter([1, 9])
    # every file sits in the bucket of its rows
    for split in table.scan().plan():
        ids = pa.concat_arrays([b.column(0) for b in table.read(split, columns=["id"])])
        assert set(at.bucket_ids([ids], 4).tolist()) == {split.bucket}


def test_create_table_refuses_what_it_cannot_honour(sql: Any, tmp_path: Path) -> None:
    table = _events(tmp_path / "events")
    with pytest.raises(PySparkException, match="needs LOCATION"):
        sql("CREATE TABLE nowhere USING appendtable")
    with pytest.raises(PySparkException, match=r"no appendtable table at .*'schema'"):
        sql(f"CREATE TABLE missing USING appendtable LOCATION '{tmp_path / 'none'}'")
    with pytest.raises(PySparkException, match="has option bucket"):
        sql(
            f"CREATE TABLE other USING appendtable LOCATION '{table.uri}' "
            "TBLPROPERTIES ('bucket' = '4', 'bucket-key' = 'id')"
        )
    with pytest.raises(PySparkException, match="partitioned by"):
        sql(
            f"CREATE TABLE other USING appendtable LOCATION '{table.uri}' "
            "TBLPROPERTIES ('partitionBy' = 'id')"
        )
    with pytest.raises(PySparkException, match="unknown option 'buckets'; did you mean 'bucket'"):
        sql(
            f"CREATE TABLE other USING appendtable LOCATION '{table.uri}' "
            "TBLPROPERTIES ('buckets' = '4')"
        )
    # a column list: Spark calls no Python at CREATE, and later statements cannot find it
    sql(
        f"CREATE TABLE listed (day STRING, id BIGINT, v DOUBLE) USING appendtable "
        f"LOCATION '{table.uri}'"
    )
    with pytest.raises(PySparkException, match="CREATE TABLE <name> USING appendtable LOCATION"):
        sql("SELECT * FROM listed").collect()
    assert table.scan().count() == 10


def test_a_schema_change_made_elsewhere_asks_to_redefine_the_table(
    sql: Any, spark_at: Any, tmp_path: Path
) -> None:
    table = _events(tmp_path / "events")
    sql(f"CREATE TABLE evolving USING appendtable LOCATION '{table.uri}'")
    with table.update_schema() as update:
        update.add_column("country", pa.string())
    for statement in (
        "SELECT * FROM evolving",
        "SELECT * FROM evolving WITH ('scan.snapshot-id' = '1')",  # the entry is out of date
        "INSERT INTO evolving VALUES ('x', 1, 1.0)",
    ):
        with pytest.raises(PySparkException, match=r"country.*DROP TABLE <name>; CREATE TABLE"):
            sql(statement).collect()
    assert table.scan().count() == 10
    sql("DROP TABLE evolving")
    sql(f"CREATE TABLE evolving USING appendtable LOCATION '{table.uri}'")
    assert sql("SELECT * FROM evolving").columns == ["day", "id", "v", "country"]
    assert _count(sql, "SELECT count(*) FROM evolving WHERE country IS NULL") == 10
    # time travel to a snapshot of other columns: not "redefine it" (that cannot help), but how
    # to read that snapshot
    with pytest.raises(PySparkException, match=r"time-travel only to snapshots.*read_table") as e:
        sql("SELECT * FROM evolving WITH ('scan.snapshot-id' = '1')").collect()
    assert "DROP TABLE" not in str(e.value)
    old = appendtable_spark.read_table(spark_at, table.uri, snapshot_id=1)
    assert old.columns == ["day", "id", "v"] and old.count() == 10


def test_drop_table_never_deletes_data_and_unsupported_statements_change_nothing(
    sql: Any, spark_at: Any, tmp_path: Path
) -> None:
    warehouse = Path(spark_at.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    inside = warehouse / "dropped"  # where Spark would put a managed table of that name
    table = _events(inside)
    sql(f"CREATE TABLE dropped USING appendtable LOCATION '{inside}'")
    latest = table.latest_snapshot()
    for statement in (
        "DELETE FROM dropped WHERE id = 1",
        "UPDATE dropped SET v = 0",
        "MERGE INTO dropped t USING dropped s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "SELECT * FROM dropped VERSION AS OF 1",
        "INSERT OVERWRITE dropped PARTITION (day = 'mon') SELECT id, v FROM dropped",
    ):
        with pytest.raises(PySparkException):
            sql(statement).collect()
    assert table.latest_snapshot() == latest
    sql("DROP TABLE dropped")
    reopened = at.open_table(str(inside))
    assert reopened.scan().count() == 10
    assert reopened.latest_snapshot() == latest


def _session(metastore: Path, warehouse: Path, statements: list[str]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.spark.sql_app",
            str(metastore),
            str(warehouse),
            json.dumps(statements),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(statements), done.stderr[-3000:]
    return results


@pytest.mark.slow
def test_a_table_defined_in_one_session_is_used_from_a_new_one_with_a_hive_metastore(
    tmp_path: Path,
) -> None:
    metastore, warehouse = tmp_path / "metastore_db", tmp_path / "warehouse"
    table = _events(tmp_path / "events")
    first = _session(
        metastore,
        warehouse,
        [
            f"CREATE TABLE events USING appendtable LOCATION '{table.uri}'",
            "INSERT INTO events VALUES ('wed', 100, 1.0)",
            "SELECT count(*) FROM events",
        ],
    )
    assert first[2] == {"rows": [["11"]]}, first
    table.append(_rows(200, 3))
    second = _session(
        metastore,
        warehouse,
        [
            "SELECT count(*) FROM events",
            "SELECT count(*) FROM events WHERE day = 'wed'",
            "INSERT INTO events VALUES ('wed', 101, 2.0)",
            "SELECT day, count(*) FROM events GROUP BY day ORDER BY day",
            "DESCRIBE TABLE EXTENDED events",
            "DROP TABLE events",
        ],
    )
    assert second[0] == {"rows": [["14"]]}, second
    assert second[1] == {"rows": [["1"]]}
    assert second[3] == {"rows": [["mon", "6"], ["tue", "7"], ["wed", "2"]]}
    assert ["Type", "MANAGED", ""] in second[4]["rows"]  # as Spark records it; see docs
    assert "error" not in second[5]
    reopened = at.open_table(table.uri)
    assert reopened.scan().count() == 15
    assert [s.kind for s in reopened.snapshots()].count(at.CommitKind.APPEND) == 4
