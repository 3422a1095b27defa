"""Streams read small files of later units ahead: what is delivered, its order and the position
are exactly those of reading unit by unit."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import appendtable as at
from tests.helpers.data import EVENTS, events
from tests.streaming.helpers import drain, rows_of, seqs


def _table(uri: str, commits: list[int], *, buckets: int = 3) -> at.Table:
    options: dict[str, object] = {"write-only": True}
    if buckets > 0:
        options.update({"bucket": buckets, "bucket-key": "key"})
    table = at.create_table(uri, EVENTS, options=options)
    start = 0
    for size in commits:
        table.append(events(start, size))
        start += size
    return table


@settings(
    deadline=None, max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(commits=st.lists(st.integers(1, 40), min_size=1, max_size=15), stop=st.integers(0, 60))
def test_iteration_delivers_what_unit_by_unit_reading_does(
    tmp_path_factory: object, commits: list[int], stop: int
) -> None:
    uri = str(tmp_path_factory.mktemp("t"))  # type: ignore[attr-defined]
    table = _table(uri, commits)
    one_by_one = table.stream(mode="from-snapshot", snapshot_id=1)
    expected = rows_of(one_by_one, drain(one_by_one))

    reader = table.stream(mode="from-snapshot", snapshot_id=1, consumer_id="c")
    got: list[dict[str, object]] = []
    for batch in reader.batches(timeout=0):
        got.extend(batch.to_pylist())
        if len(got) >= stop:
            break
    # Stopped mid-stream: the position is after the last unit taken whole, so a restart
    # delivers the rest (the unit being taken again), nothing lost and no unit skipped.
    reader.commit()
    resumed = at.open_table(uri).stream(consumer_id="c")
    rest: list[dict[str, object]] = []
    for batch in resumed.batches(timeout=0):
        rest.extend(batch.to_pylist())
    taken_whole = len(expected) - len(rest)
    assert 0 <= taken_whole <= len(got)
    assert got[:taken_whole] + rest == expected
    assert got == expected[: len(got)]  # the same rows in the same order


def test_catch_up_of_many_commits_keeps_each_bucket_in_write_order(uri: str) -> None:
    table = _table(uri, [7] * 120)
    reader = table.stream(mode="from-snapshot", snapshot_id=1)
    rows = [r for b in reader.batches(timeout=0) for r in b.to_pylist()]
    assert sorted(seqs(rows)) == list(range(7 * 120))
    for key in {r["key"] for r in rows}:
        in_key = [r["seq"] for r in rows if r["key"] == key]
        assert in_key == sorted(in_key)
    assert reader.position == at.StreamPosition(121, False)
    reader.close()
    table.append(events(10_000, 3))
    again = table.stream(mode="from-snapshot", snapshot_id=121)
    assert sorted(seqs([r for b in again.batches(timeout=0) for r in b.to_pylist()])) == [
        10_000,
        10_001,
        10_002,
    ]


def test_a_missing_file_fails_at_its_turn_after_everything_before_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = _table(uri, [5, 5, 5], buckets=-1)  # one file per commit
    before = {f.path for split in table.scan(snapshot_id=2).plan() for f in split.files}
    files = {f.path for split in table.scan().plan() for f in split.files}
    victim = next(iter(files - before))  # the file of snapshot 3 (read ahead of its turn)
    os.remove(os.path.join(uri, victim))
    reader = table.stream(mode="from-snapshot", snapshot_id=1)
    taken = []
    try:
        for batch in reader.batches(timeout=0):
            taken.append(batch)
    except at.ObjectNotFoundError as exc:
        assert victim in str(exc)
    else:
        raise AssertionError("the missing file must fail the stream")
    assert sum(b.num_rows for b in taken) == 10  # snapshots 1 and 2, whole
    assert reader.position == at.StreamPosition(3, False)
