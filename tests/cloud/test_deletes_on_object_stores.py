"""Deletes (deletion vectors and copy-on-write), the reads that honour them, and a purge, on
memory:// and local disk (the ``uri`` fixture) and on every object store (``cloud``: S3 on
SeaweedFS, GCS on fake-gcs-server, Azure on Azurite). After the purge every object under the
table's location is read back over the wire and holds no byte of a deleted row."""

from __future__ import annotations

import datetime as dt
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from tests.cloud.conftest import CloudStore
from tests.helpers.deleted_bytes import MODES, find_values, marked_rows, marked_table


def _objects(fs: Any, root: str) -> dict[str, bytes]:
    flush_hints()
    fs.invalidate_cache()  # a listing cached before the purge would name removed objects
    return {name: fs.cat_file(name) for name in fs.find(root)}


def _ids(table: at.Table, **scan: Any) -> list[int]:
    return sorted(table.scan(**scan).to_arrow()["id"].to_pylist())


def _delete_read_purge(
    uri: str, storage_options: dict[str, Any], fs: Any, root: str, mode: str
) -> None:
    table = marked_table(uri, mode, storage_options=storage_options)
    appended = pa.concat_tables([marked_rows(range(s, s + 30)) for s in (0, 30, 60)])
    for start in (0, 30, 60):
        table.append(marked_rows(range(start, start + 30)))
    before = table.latest_snapshot()
    assert before is not None
    result = table.delete([[("id", "<", 8)], [("marker", "=", "m00000045z-row-payload")]])
    deleted = [*range(8), 45]
    assert result.rows == len(deleted)
    table.delete([("id", "in", [70, 71])])
    deleted += [70, 71]
    keep = appended.filter(pc.invert(pc.is_in(appended["id"], pa.array(deleted, pa.int64()))))
    reopened = at.open_table(uri, storage_options=storage_options)
    for handle in (table, reopened):
        assert _ids(handle) == sorted(keep["id"].to_pylist())
        assert handle.scan().count() == keep.num_rows
        assert _ids(handle, snapshot_id=before.id) == list(range(90))
        assert _ids(handle, filter=[("id", "<", 10)]) == [8, 9]
        assert handle.scan(filter=[("id", "<", 10)]).count() == 2
    handle_rows = reopened.scan().to_arrow_reader().read_all()
    assert sorted(handle_rows["id"].to_pylist()) == sorted(keep["id"].to_pylist())
    assert find_values(_objects(fs, root), deleted), "the test data must be findable before"
    purged = reopened.purge(older_than=dt.timedelta(0))
    assert (purged.files_rewritten > 0) == (mode == "dv")
    assert find_values(_objects(fs, root), deleted) == []
    assert _ids(at.open_table(uri, storage_options=storage_options)) == sorted(
        keep["id"].to_pylist()
    )


@pytest.mark.parametrize("mode", sorted(MODES))
def test_delete_and_purge_on_memory_and_local(uri: str, mode: str, tmp_path: Any) -> None:
    if uri.startswith("memory://"):
        _delete_read_purge(uri, {}, fsspec.filesystem("memory"), uri.split("://", 1)[1], mode)
    else:
        _delete_read_purge(uri, {}, fsspec.filesystem("file"), uri, mode)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_delete_and_purge_on_object_stores(cloud: CloudStore, mode: str) -> None:
    _delete_read_purge(
        cloud.uri, cloud.storage_options, cloud.filesystem(), cloud.path(cloud.uri), mode
    )
