"""Deletes racing compactions, other deletes and appends: never a lost delete, never a
resurrected row. In-process races are forced at exact points (a rival commits after the
delete planned); the multi-process test runs real rivals. The oracle is the rows appended
less those each delete's filter matched at its base (pyarrow compute)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable import deletes as deletes_module
from appendtable._state import TableState
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.errors import CommitConflictError
from appendtable.storage import LocalStorage
from appendtable.table import Table
from tests.helpers.processes import run_in_processes

SCHEMA = pa.schema([("user", pa.int64()), ("seq", pa.int64()), ("tag", pa.string())])
MODES = {"dv": "true", "cow": "false"}


def batch(start: int, count: int) -> pa.Table:
    seq = np.arange(start, start + count)
    return pa.table({"user": seq % 7, "seq": seq, "tag": [f"t{s % 5}" for s in seq]}, schema=SCHEMA)


def make(uri: str, mode: str, **options: str) -> at.Table:
    return at.create_table(
        uri,
        SCHEMA,
        options={
            "bucket": "2",
            "bucket-key": "user",
            "deletion-vectors.enabled": MODES[mode],
            "write-only": "true",
            **options,
        },
    )


def seqs(table: at.Table) -> list[int]:
    return sorted(table.scan().to_arrow()["seq"].to_pylist())


def rival_before_commit(monkeypatch: pytest.MonkeyPatch, rival: Any) -> list[int]:
    """Run ``rival()`` once, after the delete planned and wrote its files, before it commits;
    returns the list that counts the delete's attempts."""
    original = deletes_module._write_record
    attempts: list[int] = []

    def hooked(*args: Any, **kwargs: Any) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            rival()
        return original(*args, **kwargs)

    monkeypatch.setattr(deletes_module, "_write_record", hooked)
    return attempts


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_delete_re_plans_after_a_compaction_rewrote_its_files(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    table = make(uri, mode)
    for n in range(4):
        table.append(batch(n * 25, 25))
    rival = at.open_table(uri)
    attempts = rival_before_commit(monkeypatch, lambda: rival.compact(full=True))
    result = table.delete([("tag", "=", "t3")])
    assert len(attempts) == 2  # conflicted once, planned again on the compacted files
    assert result.rows == 20
    assert seqs(table) == [s for s in range(100) if s % 5 != 3]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_compaction_planned_before_a_delete_conflicts_instead_of_resurrecting_rows(
    tmp_path: Path, mode: str
) -> None:
    uri = str(tmp_path / "t")
    table = make(uri, mode)
    for n in range(4):
        table.append(batch(n * 25, 25))
    compactor = table.compactor()
    plan = compactor.plan(full=True)
    messages = compactor.execute(plan.tasks)  # rewrote the files as they were planned
    at.open_table(uri).delete([("tag", "=", "t1")])
    deleted_in = table.latest_snapshot()
    assert deleted_in is not None and deleted_in.kind == at.CommitKind.DELETE
    with pytest.raises(CommitConflictError) as conflict:
        compactor.commit(messages)
    # the message names the delete that changed the files first
    assert f"snapshot {deleted_in.id} (a DELETE)" in str(conflict.value)
    assert "compaction or overwrite" not in str(conflict.value)
    compactor.abort(messages, since_snapshot_id=plan.snapshot_id)
    assert seqs(table) == [s for s in range(100) if s % 5 != 1]
    table.compact(full=True)  # re-planned: applies the delete
    assert seqs(table) == [s for s in range(100) if s % 5 != 1]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_concurrent_deletes_of_the_same_file_both_apply(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    table = make(uri, mode)
    table.append(batch(0, 100))
    rival = at.open_table(uri)
    attempts = rival_before_commit(monkeypatch, lambda: rival.delete([("tag", "=", "t2")]))
    result = table.delete([("tag", "=", "t4")])
    assert len(attempts) == 3  # the rival's own attempt, then ours twice (a conflict)
    assert result.rows == 20
    assert seqs(table) == [s for s in range(100) if s % 5 not in (2, 4)]


def test_an_append_never_conflicts_with_a_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    table = make(uri, "dv")
    table.append(batch(0, 50))
    rival = at.open_table(uri)
    attempts = rival_before_commit(monkeypatch, lambda: rival.append(batch(50, 50)))
    result = table.delete([("tag", "=", "t0")])
    assert len(attempts) == 1 and result.rows == 10  # rows of its base only
    assert seqs(table) == [s for s in range(100) if s % 5 != 0 or s >= 50]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_compaction_of_files_with_vectors_keeps_each_bucket_in_write_order(
    tmp_path: Path, mode: str
) -> None:
    table = make(str(tmp_path / "t"), mode)
    appended = [batch(n * 40, 40) for n in range(5)]
    for rows in appended:
        table.append(rows)
    table.delete([("tag", "in", ["t1", "t3"])])
    table.delete([("seq", "<", 30)])
    table.compact(full=True)
    everything = pa.concat_tables(appended)
    kept = everything.filter(
        pc.invert(
            pc.or_(
                pc.is_in(everything["tag"], pa.array(["t1", "t3"])), pc.less(everything["seq"], 30)
            )
        )
    )
    assert all(f is None for f in _vectors(table))
    buckets = at.bucket_ids([kept["user"].combine_chunks()], 2)
    for split in table.scan().plan():
        got = list(table.read(split))
        seq = pa.Table.from_batches(got, SCHEMA)["seq"].to_pylist()
        expected = [
            s for s, b in zip(kept["seq"].to_pylist(), buckets, strict=True) if b == split.bucket
        ]
        assert seq == expected


def _vectors(table: at.Table) -> list[object]:
    return [f.deletion for split in table.scan().plan() for f in split.files]


# ---- processes -------------------------------------------------------------------------------

INITIAL = 600
RANGES = [(start, start + 37) for start in range(0, INITIAL, 50)]


def _deleter(uri: str, ranges: list[tuple[int, int]], results: Any) -> None:
    table = at.open_table(uri)
    counts = [table.delete([("seq", ">=", lo), ("seq", "<", hi)]).rows for lo, hi in ranges]
    results.put(("deleted", counts))


def _appender(uri: str, rounds: int, results: Any) -> None:
    table = at.open_table(uri)
    for n in range(rounds):
        table.append(batch(10_000 + n * 10, 10))
    results.put(("appended", rounds))


def _compactor(uri: str, rounds: int, results: Any) -> None:
    table = at.open_table(uri)
    done = 0
    for _ in range(rounds):
        try:
            if table.compact(full=True) is not None:
                done += 1
        except CommitConflictError:
            pass  # gave up within its budget: fine, it changes no rows
    results.put(("compacted", done))


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_deletes_appends_and_compactions_in_processes(tmp_path: Path, mode: str) -> None:
    """Two processes delete disjoint seq ranges of the initial rows (files shared between
    them), while a third appends and a fourth compacts: every delete applies once, whole,
    and no deleted row is visible afterwards, whatever order the commits took."""
    uri = str(tmp_path / "t")
    table = make(uri, mode, **{"commit.timeout": "120 s"})
    for n in range(6):
        table.append(batch(n * 100, 100))
    raced = _race(uri)
    deleted = sorted(count for kind, counts in raced if kind == "deleted" for count in counts)
    assert deleted == [37] * len(RANGES)  # each delete applied exactly once, whole
    expected = [s for s in range(INITIAL) if not any(lo <= s < hi for lo, hi in RANGES)]
    expected += list(range(10_000, 10_000 + 10 * 15))
    at.clear_metadata_caches()
    reopened = at.open_table(uri)
    assert seqs(reopened) == sorted(expected)
    assert reopened.scan().count() == len(expected)
    reopened.compact(full=True)
    assert seqs(reopened) == sorted(expected)


def _race(uri: str) -> list[Any]:
    return run_in_processes(
        _worker,
        [
            ("delete", uri, RANGES[0::2]),
            ("delete", uri, RANGES[1::2]),
            ("append", uri, 15),
            ("compact", uri, 6),
        ],
        timeout=600,
    )


def _worker(kind: str, uri: str, argument: Any, results: Any) -> None:
    if kind == "delete":
        _deleter(uri, argument, results)
    elif kind == "append":
        _appender(uri, argument, results)
    else:
        _compactor(uri, argument, results)


class _ReplacedAndExpiredOnRead(LocalStorage):
    """A deleter's storage: at its first read of a data file, another handle compacts every
    file and expires every older snapshot, so the files the delete planned on are gone."""

    def __init__(self, root: str, other: at.Table) -> None:
        super().__init__(root, fsync=False)
        self.other, self.armed, self.fired = other, False, False

    def checked(self, path: str) -> str:
        if self.armed and not self.fired and path.endswith(".parquet"):
            self.fired = True
            assert self.other.compact(full=True) is not None
            self.other.expire_snapshots(retain_min=1, older_than_ms=int(time.time() * 1000) + 1)
        return super().checked(path)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_delete_whose_files_were_replaced_and_expired_plans_again(
    tmp_path: Path, mode: str
) -> None:
    """Found by a docs-only hunt: a delete reading the files it planned on, which another
    handle's compaction replaced and an expiration removed meanwhile, failed with
    ObjectNotFoundError ('deleted outside the table?'); it now plans again on the new files."""
    uri = str(tmp_path / "t")
    other = make(uri, mode, **{"commit.fsync": "false"})
    for start in range(0, 40, 10):
        other.append(batch(start, 10))
    clear_metadata_caches()
    storage = _ReplacedAndExpiredOnRead(uri, other)
    deleter = Table(TableState(storage, other._state.schema))
    storage.armed = True
    result = deleter.delete([("seq", "in", [3, 25])])
    assert storage.fired and result.rows == 2
    assert sorted(at.open_table(uri).scan().to_arrow()["seq"].to_pylist()) == [
        s for s in range(40) if s not in (3, 25)
    ]


def test_a_file_missing_from_the_latest_snapshot_is_still_an_error(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = make(uri, "cow")
    table.append(batch(0, 10))
    victim = Path(uri) / table.files().column("path").to_pylist()[0]
    victim.unlink()
    with pytest.raises(at.ObjectNotFoundError, match="missing"):
        at.open_table(uri).delete([("seq", "=", 3)])
