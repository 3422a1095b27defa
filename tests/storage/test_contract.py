"""The storage contract, identical for every backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from appendtable.errors import ObjectNotFoundError
from appendtable.storage import Storage


def test_write_read_overwrite(storage: Storage) -> None:
    storage.write("a/b/c.bin", b"one")
    assert storage.read("a/b/c.bin") == b"one"
    storage.write("a/b/c.bin", b"two")
    assert storage.read("a/b/c.bin") == b"two"
    assert storage.exists("a/b/c.bin")
    assert not storage.exists("a/b/missing")


def test_missing_file_errors_name_the_path(storage: Storage) -> None:
    with pytest.raises(ObjectNotFoundError, match="nothing/here") as caught:
        storage.read("nothing/here")
    assert isinstance(caught.value, FileNotFoundError)
    with pytest.raises(ObjectNotFoundError):
        storage.info("nothing/here")


def test_put_if_absent_creates_once(storage: Storage) -> None:
    assert storage.atomic_create
    assert storage.put_if_absent("snap/s-1", b"first") is True
    assert storage.put_if_absent("snap/s-1", b"second") is False
    assert storage.read("snap/s-1") == b"first"


def _winners(attempt: Callable[[int], object], threads: int = 8) -> list[int]:
    """The indexes of the threads (started together) whose ``attempt(index)`` was truthy."""
    winners: list[int] = []
    barrier = threading.Barrier(threads)

    def race(index: int) -> None:
        barrier.wait()
        if attempt(index):
            winners.append(index)

    started = [threading.Thread(target=race, args=(i,)) for i in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return winners


def test_put_if_absent_under_thread_races(storage: Storage) -> None:
    winners = _winners(lambda index: storage.put_if_absent("race/key", f"w-{index}".encode()))
    assert len(winners) == 1
    assert storage.read("race/key") == f"w-{winners[0]}".encode()


def test_replace_if_unchanged_refuses_every_other_version(storage: Storage) -> None:
    assert storage.conditional_replace == (storage.backend in ("s3", "gcs", "azure"))
    assert storage.version("rec/c") is None
    first = storage.replace_if_unchanged("rec/c", b"one", None)
    assert first is not None and first == storage.version("rec/c")
    assert storage.replace_if_unchanged("rec/c", b"again", None) is None  # it exists now
    second = storage.replace_if_unchanged("rec/c", b"two", first)
    assert second is not None and second not in (first, None)
    assert second == storage.version("rec/c")
    # a request made on the first version and delivered after the second one: refused
    assert storage.replace_if_unchanged("rec/c", b"late", first) is None
    assert storage.read("rec/c") == b"two"
    storage.delete("rec/c")
    assert storage.replace_if_unchanged("rec/c", b"gone", second) is None
    assert not storage.exists("rec/c")


def test_conditional_replace_under_thread_races(storage: Storage) -> None:
    if not storage.conditional_replace:
        pytest.skip(f"{storage.backend}: the version is checked, then written (two steps)")
    version = storage.replace_if_unchanged("race/rec", b"start", None)
    winners = _winners(
        lambda index: storage.replace_if_unchanged("race/rec", f"w-{index}".encode(), version)
    )
    assert len(winners) == 1
    assert storage.read("race/rec") == f"w-{winners[0]}".encode()


def test_listing_and_walking(storage: Storage) -> None:
    for path in ["d/x", "d/y", "d/sub/z", "e/w"]:
        storage.write(path, b"." * 3)
    assert sorted(info.path for info in storage.listdir("d")) == ["d/x", "d/y"]
    assert storage.listdir("nowhere") == []
    assert sorted(info.path for info in storage.walk("d")) == ["d/sub/z", "d/x", "d/y"]
    assert sorted(info.path for info in storage.walk()) == ["d/sub/z", "d/x", "d/y", "e/w"]
    infos = {info.path: info for info in storage.walk()}
    assert infos["d/x"].size == 3
    now_ms = time.time() * 1000
    assert abs(infos["d/x"].mtime_ms - now_ms) < 120_000


def test_delete_is_idempotent(storage: Storage) -> None:
    storage.write("f", b"1")
    storage.delete("f")
    storage.delete("f")
    assert not storage.exists("f")


def test_streamed_output(storage: Storage) -> None:
    with storage.open_output("data/part-0") as out:
        out.write(b"hello ")
        out.write(b"world")
    storage.sync_file("data/part-0")
    assert storage.read("data/part-0") == b"hello world"
    assert storage.info("data/part-0").size == 11


def test_rename_moves_a_file_to_a_new_directory(storage: Storage) -> None:
    storage.write("staging/a/part-0.parquet", b"payload")
    storage.rename("staging/a/part-0.parquet", "k=1/bucket-0/data-0.parquet")
    storage.sync_names(["k=1/bucket-0/data-0.parquet"])
    assert storage.read("k=1/bucket-0/data-0.parquet") == b"payload"
    assert not storage.exists("staging/a/part-0.parquet")
    # a retry of a move that already happened succeeds; a move of nothing does not
    storage.rename("staging/a/part-0.parquet", "k=1/bucket-0/data-0.parquet")
    with pytest.raises(ObjectNotFoundError):
        storage.rename("staging/a/never", "k=1/bucket-0/data-1.parquet")


def test_delete_tree_removes_everything_below(storage: Storage) -> None:
    for path in ["staging/x/a", "staging/x/sub/.b.crc", "staging/x/_SUCCESS", "staging/y/c"]:
        storage.write(path, b"1")
    storage.delete_tree("staging/x")
    storage.delete_tree("staging/x")  # a missing directory is not an error
    assert [info.path for info in storage.walk("staging")] == ["staging/y/c"]
    storage.write("staging/x/again", b"2")  # the directory can be created anew
    assert storage.read("staging/x/again") == b"2"
