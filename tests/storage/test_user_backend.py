"""A storage backend registered from outside the library (``dict_backend``, ``dictmem://``):
what registration accepts and refuses, that no backend can skip the containment check, and a
table's whole life on it (the storage contract runs on it in test_contract.py, the
containment suite in tests/security/test_containment.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable.storage import open_storage
from tests.helpers.clock import past_every_file_ms
from tests.helpers.data import EVENTS, events, sorted_rows
from tests.storage import dict_backend
from tests.storage.dict_backend import SCHEME, DictStorage

FUTURE = 10**15  # an older-than cut-off after every snapshot
WRITE_ONLY = {"write-only": True}


@pytest.fixture
def name() -> Iterator[str]:
    """A fresh key prefix of the dict store, forgotten afterwards."""
    prefix = f"tables/{uuid.uuid4().hex}"
    yield prefix
    dict_backend.drop(f"{prefix}/")
    dict_backend.drop(f"{prefix}-")


def _expected(*batches: pa.Table) -> list[dict[str, object]]:
    return sorted_rows(pa.concat_tables(batches))


# ---- registration ---------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["", "Dict", "1x", "a b", "a/b", "x:", None])
def test_a_malformed_scheme_is_refused(scheme: Any) -> None:
    with pytest.raises(at.InvalidArgumentError, match="storage scheme must be"):
        at.register_storage(scheme, DictStorage.open)


def test_file_a_taken_scheme_and_a_non_callable_are_refused() -> None:
    with pytest.raises(at.InvalidArgumentError, match="'file' is local disk"):
        at.register_storage("file", DictStorage.open, replace=True)
    for taken in ("s3", "memory", SCHEME):
        with pytest.raises(at.InvalidArgumentError, match=f"'{taken}' is already served"):
            at.register_storage(taken, DictStorage.open)
    with pytest.raises(at.InvalidArgumentError, match="must be callable"):
        at.register_storage("notcallable", "DictStorage")  # type: ignore[arg-type]
    with pytest.raises(at.InvalidOptionError, match="register one with appendtable"):
        at.open_table("nosuchscheme://t")


def test_the_factory_gets_the_uri_and_the_storage_options(name: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def factory(uri: str, options: Mapping[str, Any]) -> at.Storage:
        calls.append((uri, dict(options)))
        return DictStorage(uri.replace("recorded://", f"{SCHEME}://", 1))

    at.register_storage("recorded", factory, replace=True)
    table = at.create_table(f"recorded://{name}", EVENTS, storage_options={"token": "t"})
    assert calls[0] == (f"recorded://{name}", {"token": "t"})
    table.append(events(0, 5))
    assert at.open_table(f"{SCHEME}://{name}").scan().count() == 5
    # replace=True serves the scheme with the new factory from then on
    at.register_storage("recorded", DictStorage.open, replace=True)
    with pytest.raises(at.InvalidOptionError, match="takes no storage options"):
        at.open_table(f"recorded://{name}", storage_options={"token": "t"})
    assert len(calls) == 1


class _OverridesRead(DictStorage):
    """Reads by its own path arithmetic, past the containment check."""

    def read(self, path: str) -> bytes:  # type: ignore[misc]
        return dict_backend.files()[f"{self.prefix}/{path}"]


class _OverridesTheCheck(DictStorage):
    def _contained(self, path: str, *, directory: bool = False) -> str:  # type: ignore[misc]
        return path


def _with_own_read(uri: str, options: Mapping[str, Any]) -> at.Storage:
    storage = DictStorage(uri)
    storage.read = lambda path: b"anything"  # type: ignore[method-assign]
    return storage


@pytest.mark.parametrize(
    ("factory", "named"),
    [
        (lambda uri, options: _OverridesRead(uri), "overrides read"),
        (lambda uri, options: _OverridesTheCheck(uri), "overrides _contained"),
        (_with_own_read, "overrides read"),
        (lambda uri, options: {"not": "a storage"}, "returned dict, not an appendtable Storage"),
    ],
    ids=["class-overrides-read", "class-overrides-the-check", "instance-read", "not-a-storage"],
)
def test_a_backend_cannot_skip_the_containment_check(name: str, factory: Any, named: str) -> None:
    dict_backend.put(f"{name}/victim", b"canary")
    at.register_storage("sneaky", factory, replace=True)
    with pytest.raises(at.InvalidArgumentError, match=named):
        open_storage(f"sneaky://{name}/t")
    with pytest.raises(at.InvalidArgumentError, match=named):
        at.create_table(f"sneaky://{name}/t", EVENTS)
    assert dict_backend.files(f"{name}/") == {f"{name}/victim": b"canary"}


# ---- a table's life on the registered backend --------------------------------------------------


def test_create_append_scan_time_travel_and_engines(name: str) -> None:
    uri = f"{SCHEME}://{name}"
    table = at.create_table(
        uri, EVENTS, partition_by=["day"], options={"bucket": 2, "bucket-key": "key"}
    )
    with pytest.raises(at.TableExistsError):
        at.create_table(uri, EVENTS)
    with pytest.raises(at.TableNotFoundError):
        at.open_table(f"{uri}-absent")
    with pytest.raises(at.TableExistsError, match="inside the table"):
        at.create_table(f"{uri}/day=x/inner", EVENTS)
    batches = [events(i * 50, 50, seed=i) for i in range(4)]
    for batch in batches:
        table.append(batch)
    reopened = at.open_table(uri)
    assert reopened.partition_by == ["day"] and reopened.bucket == 2
    assert sorted_rows(reopened.scan().to_arrow()) == _expected(*batches)
    assert sorted_rows(reopened.scan(snapshot_id=2).to_arrow()) == _expected(*batches[:2])
    key = batches[1]["key"][3].as_py()
    everything = pa.concat_tables(batches)
    wanted = everything.filter(pc.equal(everything["key"], key))
    assert sorted_rows(reopened.scan(filter=[("key", "=", key)]).to_arrow()) == sorted_rows(wanted)
    # pyarrow reads the files through the bridge Storage gives every backend
    scan = reopened.scan()
    assert sorted_rows(pa.table(scan)) == _expected(*batches)
    assert sorted_rows(scan.to_dataset().to_table()) == _expected(*batches)
    stored = {key[len(name) + 1 :] for key in dict_backend.files(f"{name}/")}
    assert set(reopened.files().column("path").to_pylist()) <= stored
    assert reopened.hadoop_uri("a/b.parquet") == f"{uri}/a/b.parquet"
    with pytest.raises(at.PathOutsideTableError):
        reopened.hadoop_uri("../other/b.parquet")


def test_appends_from_threads_all_land(name: str) -> None:
    uri = f"{SCHEME}://{name}"
    at.create_table(uri, EVENTS, options=WRITE_ONLY)
    batches = {(i, n): events(i * 100 + n * 10, 10) for i in range(4) for n in range(5)}

    def work(index: int) -> None:
        table = at.open_table(uri)
        for n in range(5):
            table.append(batches[index, n])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    table = at.open_table(uri)
    assert [s.id for s in table.snapshots()] == list(range(1, 21))
    assert sorted_rows(table.scan().to_arrow()) == _expected(*batches.values())


def test_racing_compactions_exactly_one_lands(name: str) -> None:
    uri = f"{SCHEME}://{name}"
    table = at.create_table(uri, EVENTS, options=WRITE_ONLY)
    batches = [events(i * 10, 10) for i in range(8)]
    for batch in batches:
        table.append(batch)
    compactors = [at.open_table(uri).compactor() for _ in range(2)]
    planned = [c.execute(c.plan(full=True).tasks) for c in compactors]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def commit(index: int) -> None:
        barrier.wait()
        try:
            compactors[index].commit(planned[index])
            outcomes.append("landed")
        except at.CommitConflictError:
            compactors[index].abort(planned[index])
            outcomes.append("conflict")

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict", "landed"]
    assert table.files().num_rows == 1
    assert sorted_rows(table.scan().to_arrow()) == _expected(*batches)


def test_expire_and_remove_orphans_touch_nothing_outside(name: str) -> None:
    uri = f"{SCHEME}://{name}"
    table = at.create_table(uri, EVENTS, options=WRITE_ONLY)
    batches = [events(i * 10, 10) for i in range(6)]
    for batch in batches:
        table.append(batch)
    originals = set(table.files().column("path").to_pylist())
    assert table.compact(full=True) is not None

    result = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert result.expired_snapshots == [1, 2, 3, 4, 5, 6]
    assert set(result.deleted_data_files) == originals
    stored = {key[len(name) + 1 :] for key in dict_backend.files(f"{name}/")}
    assert not originals & stored
    with pytest.raises(at.SnapshotExpiredError):
        table.scan(snapshot_id=1)

    writer = table.writer()  # a writer that died before committing
    writer.write(events(100, 10))
    abandoned = {f.path for m in writer.prepare_commit() for f in m.new_files}
    dict_backend.put(f"{name}/manifest/manifest-stray", b"x")
    neighbour = f"{name}-neighbour/manifest/manifest-stray"  # another table's, outside
    dict_backend.put(neighbour, b"keep")
    stray = abandoned | {"manifest/manifest-stray"}
    listed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=True)
    assert set(listed.files) == stray and listed.dry_run
    removed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert set(removed.files) == stray and removed.bytes > 0
    stored = {key[len(name) + 1 :] for key in dict_backend.files(f"{name}/")}
    assert not stray & stored and "schema/schema-0" in stored
    assert dict_backend.files(neighbour) == {neighbour: b"keep"}
    assert sorted_rows(table.scan().to_arrow()) == _expected(*batches)
