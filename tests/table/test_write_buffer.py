"""The writer's buffer with many open (partition, bucket) groups: the limit counts what is
really held (routed slices shared by many groups), spilling frees it, every row arrives once and
in order per bucket, and a failed write leaves no rows, no data files and no spill files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.datafiles.durability import DeferredSync
from appendtable.errors import StorageError
from appendtable.storage import LocalStorage, Storage
from appendtable.table import Table

SCHEMA = pa.schema([("p", pa.int32()), ("k", pa.int64()), ("seq", pa.int64()), ("s", pa.string())])
PARTITIONS, BUCKETS = 40, 8  # 320 groups: more than write-max-writers-to-spill (10)
BATCH_ROWS, BATCHES = 1_000, 24


def _batch(index: int) -> pa.Table:
    """Rows whose ``seq`` is the global write position."""
    rng = np.random.default_rng(index)
    seq = np.arange(index * BATCH_ROWS, (index + 1) * BATCH_ROWS, dtype=np.int64)
    return pa.table(
        {
            "p": pa.array(rng.integers(0, PARTITIONS, BATCH_ROWS), pa.int32()),
            "k": pa.array(rng.integers(0, 1_000, BATCH_ROWS)),
            "seq": pa.array(seq),
            "s": pa.array(seq % 101).cast(pa.string()),
        },
        schema=SCHEMA,
    )


def _create(uri: str, tmp_path: Path, **options: object) -> at.Table:
    if not (tmp_path / "spill").exists():
        (tmp_path / "spill").mkdir()
    return at.create_table(
        uri,
        SCHEMA,
        partition_by=["p"],
        options={
            "bucket": BUCKETS,
            "bucket-key": "k",
            "write-buffer-size": "128 KB",
            "write-buffer-spill.dir": str(tmp_path / "spill"),
            "write-only": True,
            **options,
        },
    )


def _write_all(table: at.Table) -> tuple[Any, list[Any]]:
    with table.writer() as writer:
        for index in range(BATCHES):
            writer.write(_batch(index))
        stats = writer.buffer_stats
        messages = writer.prepare_commit()
    return stats, messages


def _check_contents(uri: str) -> None:
    """Every row exactly once; each (partition, bucket) one file, read back in write order."""
    table = at.open_table(uri)
    files = table.files().to_pylist()
    pairs = {(f["partition"], f["bucket"]) for f in files}
    assert len(files) == len(pairs) == PARTITIONS * BUCKETS
    seen: list[int] = []
    for split in table.scan().plan():
        seqs: list[int] = []
        for batch in table.read(split):
            seqs.extend(batch.column("seq").to_pylist())
        assert seqs == sorted(seqs), "a bucket is out of write order"
        seen.extend(seqs)
    assert sorted(seen) == list(range(BATCHES * BATCH_ROWS))


def _spill_files(tmp_path: Path) -> list[str]:
    root = tmp_path / "spill"
    return [os.path.join(d, n) for d, _, names in os.walk(root) for n in names]


def test_spilling_keeps_the_buffer_under_its_limit_and_every_row_in_order(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    table = _create(uri, tmp_path)
    stats, messages = _write_all(table)
    table.committer("w").commit(messages)
    limit = 128 * 1024
    # every routed batch (about 30 KB) is shared by ~300 groups: counted once, and freed only
    # by spilling all of them
    assert stats.peak_buffered_bytes <= limit
    assert stats.spills >= 3
    assert stats.pressure_flushes == 0  # spilled, not written early as small row groups
    assert 0 < stats.spilled_rows < BATCHES * BATCH_ROWS
    _check_contents(uri)
    assert _spill_files(tmp_path) == []  # spill files deleted once written


def test_without_spilling_pressure_writes_groups_early_into_the_same_files(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    table = _create(uri, tmp_path, **{"write-buffer-spillable": False})
    stats, messages = _write_all(table)
    table.committer("w").commit(messages)
    assert stats.spills == 0
    assert stats.pressure_flushes > 0
    assert stats.peak_buffered_bytes <= 128 * 1024
    _check_contents(uri)


def test_buffer_statistics_are_deterministic(tmp_path: Path) -> None:
    first = _write_all(_create(str(tmp_path / "a"), tmp_path))[0]
    second = _write_all(_create(str(tmp_path / "b"), tmp_path))[0]
    assert first == second


class _FailingSync(LocalStorage):
    """Fsync of the ``fail_at``-th data file raises (a disk error at the end of a write)."""

    def __init__(self, root: str, fail_at: int) -> None:
        super().__init__(root)
        self.calls = 0
        self.fail_at = fail_at

    def sync_file(self, path: str) -> None:
        self.calls += 1  # on I/O threads: an approximate count is enough here
        if self.calls == self.fail_at:
            raise StorageError("I/O error", path=path, operation="fsync")
        super().sync_file(path)


def _table_on(storage: Storage, uri: str) -> Table:
    return Table(TableState(storage, at.open_table(uri)._state.schema))


def _data_files(uri: str) -> list[str]:
    """Data files under the table (every Parquet file: metadata is not Parquet)."""
    return [os.path.join(d, n) for d, _, names in os.walk(uri) for n in names if ".parquet" in n]


def test_a_failed_fsync_after_spilling_leaves_no_rows_no_files_no_spill(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _create(uri, tmp_path)
    table = _table_on(_FailingSync(uri, fail_at=50), uri)
    with pytest.raises(StorageError, match="I/O error"), table.writer() as writer:
        for index in range(BATCHES):
            writer.write(_batch(index))
        assert writer.buffer_stats.spills > 0
        writer.prepare_commit()
    assert at.open_table(uri).latest_snapshot() is None
    assert _data_files(uri) == []
    assert _spill_files(tmp_path) == []


def test_a_failed_spill_leaves_no_rows_no_files_no_spill(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    (tmp_path / "spill").write_text("a file where the spill directory should be")
    table = _create(uri, tmp_path)
    with pytest.raises(OSError), table.writer() as writer:
        for index in range(BATCHES):
            writer.write(_batch(index))
    assert at.open_table(uri).latest_snapshot() is None
    assert _data_files(uri) == []


def test_the_append_path_spills_and_commits_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = _create(uri, tmp_path)
    data = pa.concat_tables([_batch(i) for i in range(BATCHES)])
    table.append(data)  # one write() of 24,000 rows, routed in slices
    _check_contents(uri)
    assert _spill_files(tmp_path) == []


def test_deferred_sync_forwards_what_data_files_use(tmp_path: Path) -> None:
    """The writer's storage view: every hook goes to the inner storage's operation (its
    overrides included); ``sync_file`` only after ``wait``."""
    synced: list[str] = []

    class Recording(LocalStorage):
        def sync_file(self, path: str) -> None:
            synced.append(path)

    inner = Recording(str(tmp_path))
    view = DeferredSync(inner)
    hooks = {  # what a backend implements: every method Storage does not make final
        name
        for name, value in vars(Storage).items()
        if callable(value) and not name.startswith("__") and not getattr(value, "__final__", 0)
    }
    assert {"_read", "_put_if_absent", "_walk_tree", "_arrow_filesystem", "parent"} <= hooks
    for name in hooks:  # a new hook must be forwarded too
        assert name in vars(DeferredSync), f"DeferredSync does not forward {name}"
    view.ensure_parent("a/b/f")
    view.write("a/b/f", b"x")
    view.sync_file("a/b/f")
    view.wait()
    assert synced == ["a/b/f"]
    assert view.read("a/b/f") == b"x"
    assert view.local_path("a/b/f") == inner.local_path("a/b/f")
    view.close()


CRASHING_CHILD = """
import os, sys
import appendtable as at
from appendtable._state import TableState
from appendtable.storage import LocalStorage
from appendtable.table import Table
from tests.table.test_write_buffer import BATCHES, _batch

class KillAtSync(LocalStorage):
    calls = 0
    def sync_file(self, path):
        KillAtSync.calls += 1
        if KillAtSync.calls == 100:
            os._exit(9)  # dies like SIGKILL: no cleanup code runs
        super().sync_file(path)

uri = sys.argv[1]
table = Table(TableState(KillAtSync(uri), at.open_table(uri)._state.schema))
with table.writer() as writer:
    for index in range(BATCHES):
        writer.write(_batch(index))
    assert writer.buffer_stats.spills > 0
    table.committer("w").commit(writer.prepare_commit())
"""


def test_a_writer_killed_after_spilling_leaves_no_rows_and_no_spill_files(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    _create(uri, tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_CHILD, uri],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 9, done.stderr
    assert at.open_table(uri).latest_snapshot() is None
    assert at.open_table(uri).scan().count() == 0
    # spill files are anonymous: the kernel dropped them with the process
    assert os.listdir(tmp_path / "spill") == []
