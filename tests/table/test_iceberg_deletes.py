"""Deletes through the Iceberg mirror, with pyiceberg as the oracle: after every step of a
sequence (appends, deletes by deletion vectors and by copy-on-write, a second delete of the
same files, compaction, expiration, orphan removal, a republish from scratch), pyiceberg reads
exactly the rows of ``table.scan()``, for the latest snapshot and every retained one. Deletion
vectors are published as an Iceberg v3 table whose delete manifests reference Puffin files of
``deletion-vector-v1`` blobs (copies of the table's own, naming each data file by its URI);
copy-on-write deletes replace the data files."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.table import StaticTable

import appendtable as at

pytestmark = pytest.mark.usefixtures("tables_stay_intact")

SCHEMA = pa.schema(
    [
        pa.field("day", pa.string()),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("x", pa.float64()),
    ]
)
#: write-only: no compaction after commits (it would race the checks); compact() is explicit.
MIRROR = {"metadata.iceberg.storage": "table-location", "write-only": "true"}
FOREVER = 2**62


def _rows(start: int, count: int, rng: random.Random) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "day": [rng.choice(["d1", "d2"]) for _ in ids],
            "id": ids,
            "kind": [rng.choice([None, "a", "b", "c", "d"]) for _ in ids],
            "x": [rng.uniform(-100, 100) for _ in ids],
        },
        schema=SCHEMA,
    )


def _ids(table: pa.Table) -> list[int]:
    return sorted(table["id"].to_pylist())


def _check(table: at.Table, model: pa.Table) -> None:
    """pyiceberg reads the rows of every retained snapshot as the table does, and the
    latest are the model's."""
    assert _ids(table.scan().to_arrow()) == _ids(model)
    location = table.iceberg_metadata_location()
    assert location is not None
    iceberg = StaticTable.from_metadata(location)
    assert _ids(iceberg.scan().to_arrow()) == _ids(model)
    for snapshot in (s.id for s in table.snapshots()):
        got = iceberg.scan(snapshot_id=snapshot).to_arrow()
        assert _ids(got) == _ids(table.scan(snapshot_id=snapshot).to_arrow()), snapshot
    filtered = iceberg.scan(row_filter="kind = 'b'").to_arrow()
    assert _ids(filtered) == _ids(model.filter(pc.equal(model["kind"], "b")))


def _delete(table: at.Table, model: pa.Table, column: str, op: str, value: object) -> pa.Table:
    hit = {
        "=": pc.equal,
        ">": pc.greater,
        "<": pc.less,
    }[op](model[column], value)
    result = table.delete([(column, op, value)])
    kept = model.filter(pc.invert(pc.fill_null(hit, False)))
    assert result.rows == model.num_rows - kept.num_rows
    return kept


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_pyiceberg_reads_the_tables_rows_after_every_step(tmp_path: Path, vectors: str) -> None:
    rng = random.Random(29)
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        partition_by=["day"],
        options={
            **MIRROR,
            "deletion-vectors.enabled": vectors,
            "bucket": "2",
            "bucket-key": "id",
        },
    )
    model = pa.concat_tables([_rows(0, 120, rng), _rows(120, 80, rng)])
    table.append(model.slice(0, 120))
    table.append(model.slice(120))
    _check(table, model)
    model = _delete(table, model, "kind", "=", "a")
    _check(table, model)
    model = _delete(table, model, "x", ">", 60.0)  # the same files again: the union
    _check(table, model)
    if vectors == "true":
        location = table.iceberg_metadata_location()
        assert location is not None
        assert StaticTable.from_metadata(location).metadata.format_version == 3
    more = _rows(200, 60, rng)
    table.append(more)
    model = pa.concat_tables([model, more])
    _check(table, model)
    assert table.compact(full=True) is not None  # applies the vectors
    _check(table, model)
    model = _delete(table, model, "id", "<", 40)
    _check(table, model)
    table.expire_snapshots(retain_min=1, retain_max=2, older_than_ms=FOREVER)
    _check(table, model)
    future = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    table.remove_orphan_files(older_than=future, dry_run=False)
    _check(table, model)  # the mirror's Puffin files are referenced, so kept
    table.publish_iceberg(rebuild=True)
    _check(table, model)


def test_turning_the_mirror_on_over_deletion_vectors(tmp_path: Path) -> None:
    rng = random.Random(3)
    table = at.create_table(
        str(tmp_path / "t"), SCHEMA, options={"deletion-vectors.enabled": "true"}
    )
    model = _rows(0, 150, rng)
    table.append(model.slice(0, 70))
    table.append(model.slice(70))
    model = _delete(table, model, "kind", "=", "c")
    table.set_options(MIRROR)
    _check(table, model)
    model = _delete(table, model, "kind", "=", "d")
    _check(table, model)
