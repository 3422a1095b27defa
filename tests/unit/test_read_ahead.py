"""Reading ahead: the same batches in the same order as reading one by one, errors at the same
place, bounded memory, nothing left running after an early stop."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.datafiles.read_ahead import ReadAheadLimits, read_ahead, read_files_ahead
from appendtable.metadata.models import DataFileMeta

POOL = ThreadPoolExecutor(4)


class Boom(Exception):
    pass


def _file(name: str, size: int, rows: int) -> DataFileMeta:
    return DataFileMeta(
        path=name,
        file_size=size,
        row_count=rows,
        min_seq=0,
        max_seq=0,
        schema_id=0,
        creation_time_ms=0,
        source=0,
    )


def of_item(
    read: Callable[[DataFileMeta], Iterator[pa.RecordBatch]],
) -> Callable[[object, DataFileMeta], Iterator[pa.RecordBatch]]:
    """A reader of files as ``read_ahead`` calls it: with the item the file belongs to."""
    return lambda _item, file: read(file)


def test_each_file_is_read_with_the_item_it_belongs_to() -> None:
    units = {1: [_file("a", 1, 100), _file("b", 1, 100)], 2: [_file("c", 1, 100)]}
    queue = [1, 2]
    seen: list[tuple[object, str]] = []
    lock = threading.Lock()

    def read(item: object, file: DataFileMeta) -> Iterator[pa.RecordBatch]:
        with lock:
            seen.append((item, file.path))
        yield pa.record_batch({"label": [file.path]})

    limits = ReadAheadLimits(min_file_bytes=0)
    list(read_ahead(lambda block: queue.pop(0) if queue else None, units.get, read, POOL, limits))
    assert sorted(seen) == [(1, "a"), (1, "b"), (2, "c")]


class Reader:
    """Batches labelled by file and index; fails on the files named in ``failing``; tracks
    the bytes read but not yet handed out."""

    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.lock = threading.Lock()
        self.started: list[str] = []

    def __call__(self, file: DataFileMeta) -> Iterator[pa.RecordBatch]:
        with self.lock:
            self.started.append(file.path)
        if file.path in self.failing:
            raise Boom(file.path)
        for index in range(file.row_count):
            yield pa.record_batch({"label": [f"{file.path}#{index}"]})


items = st.lists(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), max_size=6),
    max_size=12,
)


@settings(deadline=None, max_examples=150)
@given(items, st.integers(1, 60), st.integers(0, 50), st.integers(1, 5), st.data())
def test_same_batches_in_the_same_order_as_reading_one_by_one(
    shape: list[list[tuple[int, int]]],
    budget: int,
    max_file: int,
    max_items: int,
    data: st.DataObject,
) -> None:
    units = [
        [_file(f"u{u}f{f}", size, rows) for f, (size, rows) in enumerate(files)]
        for u, files in enumerate(shape)
    ]
    names = [file.path for files in units for file in files]
    failing = set(data.draw(st.lists(st.sampled_from(names), max_size=1))) if names else set()
    expected: list[tuple[int, str | None]] = []
    expected_error = None
    for u, files in enumerate(units):
        for file in files:
            if file.path in failing:
                expected_error = file.path
                break
            expected.extend((u, f"{file.path}#{i}") for i in range(file.row_count))
        if expected_error:
            break
        expected.append((u, None))

    queue = list(range(len(units)))
    pulled_ahead = []

    def pull(block: bool) -> int | None:
        if not queue:
            return None
        pulled_ahead.append(block)
        return queue.pop(0)

    reader = Reader(failing)
    limits = ReadAheadLimits(
        budget_bytes=budget, min_file_bytes=0, max_file_bytes=max_file, max_items=max_items
    )
    got: list[tuple[int, str | None]] = []
    error = None
    try:
        for unit, batch in read_ahead(pull, lambda u: units[u], of_item(reader), POOL, limits):
            got.append((unit, None if batch is None else batch["label"][0].as_py()))
    except Boom as exc:
        error = str(exc)
    assert got == expected
    assert error == expected_error


class CountingPool(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(2)
        self.submitted = 0

    def submit(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.submitted += 1
        return super().submit(*args, **kwargs)


def test_reads_ahead_within_the_budget() -> None:
    units = [[_file(f"u{u}", 10, 1)] for u in range(20)]
    queue = list(range(20))
    pool = CountingPool()
    limits = ReadAheadLimits(budget_bytes=35, min_file_bytes=0, max_file_bytes=100, max_items=100)
    stream = read_ahead(
        lambda block: queue.pop(0) if queue else None,
        lambda u: units[u],
        of_item(Reader(set())),
        pool,
        limits,
    )
    assert next(stream)[0] == 0
    # 10-byte files in a 35-byte budget: units are pulled (and their files started) only while
    # there is room, which is checked before each: 4 of them.
    assert pool.submitted == 4
    assert 20 - len(queue) == 4
    rest = list(stream)
    assert [u for u, b in rest if b is None] == list(range(20))
    assert pool.submitted == 20


def test_large_files_are_read_in_place_at_their_turn() -> None:
    units = [[_file("small", 5, 1), _file("large", 500, 2), _file("after", 5, 1)]]
    queue = [0]
    order: list[str] = []

    def read(file: DataFileMeta) -> Iterator[pa.RecordBatch]:
        order.append(f"open {file.path}")
        yield pa.record_batch({"label": [file.path]})

    limits = ReadAheadLimits(budget_bytes=1000, min_file_bytes=0, max_file_bytes=100)
    stream = read_ahead(
        lambda block: queue.pop(0) if queue else None,
        lambda u: units[u],
        of_item(read),
        POOL,
        limits,
    )
    labels = [b["label"][0].as_py() for _, b in stream if b is not None]
    assert labels == ["small", "large", "after"]


def test_an_early_stop_cancels_what_has_not_started() -> None:
    units = [[_file(f"u{u}", 1, 1)] for u in range(50)]
    queue = list(range(50))
    blocker = threading.Event()
    started: list[str] = []
    one_worker = ThreadPoolExecutor(1)

    def read(file: DataFileMeta) -> Iterator[pa.RecordBatch]:
        started.append(file.path)
        if file.path != "u0":
            blocker.wait(5)
        yield pa.record_batch({"label": [file.path]})

    stream = read_ahead(
        lambda block: queue.pop(0) if queue else None,
        lambda u: units[u],
        of_item(read),
        one_worker,
        ReadAheadLimits(budget_bytes=100, min_file_bytes=0, max_items=100),
    )
    assert next(stream)[0] == 0
    stream.close()
    blocker.set()
    one_worker.shutdown(wait=True)
    assert len(started) <= 3  # u0, u1 (running when closed), maybe nothing else


def test_pull_blocks_only_when_nothing_is_left() -> None:
    units = [[_file("a", 1, 1)], [_file("b", 1, 1)]]
    calls: list[bool] = []
    queue = [0, 1]

    def pull(block: bool) -> int | None:
        calls.append(block)
        return queue.pop(0) if queue else None

    list(
        read_ahead(
            pull,
            lambda u: units[u],
            of_item(Reader(set())),
            POOL,
            ReadAheadLimits(min_file_bytes=0),
        )
    )
    assert calls[0] is True  # nothing pulled yet
    assert calls[1] is False  # one unit in hand: only asked to read ahead
    assert calls[-1] is True  # the end is asked for only once everything was handed out


@pytest.mark.parametrize("budget", [1, 1000])
def test_failure_of_a_file_read_ahead_surfaces_at_its_turn(budget: int) -> None:
    units = [[_file("ok", 1, 2)], [_file("bad", 1, 1)], [_file("later", 1, 1)]]
    queue = [0, 1, 2]
    stream = read_ahead(
        lambda block: queue.pop(0) if queue else None,
        lambda u: units[u],
        of_item(Reader({"bad"})),
        POOL,
        ReadAheadLimits(budget_bytes=budget, min_file_bytes=0),
    )
    got = []
    with pytest.raises(Boom, match="bad"):
        for unit, batch in stream:
            got.append((unit, batch is None))
    assert got == [(0, False), (0, False), (0, True)]


def _read_in_child() -> None:
    files = [_file(f"f{i}", 1, 1) for i in range(10)]
    limits = ReadAheadLimits(min_file_bytes=0)
    got = [b["label"][0].as_py() for b in read_files_ahead(files, Reader(set()), limits)]
    assert got == [f"f{i}#0" for i in range(10)]


def test_a_forked_child_reads_ahead_with_threads_of_its_own() -> None:
    """The parent's read threads do not exist after fork: the child must not queue work for
    them (it would wait forever)."""
    _read_in_child()  # the parent's pool has threads now
    child = multiprocessing.get_context("fork").Process(target=_read_in_child)
    child.start()
    child.join(60)
    assert child.exitcode == 0
