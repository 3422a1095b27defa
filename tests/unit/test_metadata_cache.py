"""The process-wide cache of decoded metadata files: an LRU bounded by weight, shared by handles."""

from __future__ import annotations

import shutil
from collections import OrderedDict
from pathlib import Path

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

import appendtable as at
from appendtable.commit.metadata_cache import MetadataCache

operations = st.lists(
    st.tuples(
        st.sampled_from(["put", "get", "discard"]),
        st.integers(0, 7),
        st.integers(0, 12),
    ),
    max_size=60,
)


@given(operations, st.integers(1, 20))
def test_cache_behaves_as_a_weighted_lru(ops: list[tuple[str, int, int]], limit: int) -> None:
    cache: MetadataCache[int] = MetadataCache(max_weight=limit)
    model: OrderedDict[tuple[str, str], tuple[int, int]] = OrderedDict()
    for op, name, weight in ops:
        key = ("root", str(name))
        if op == "put":
            cache.put(key, name * 100 + weight, weight)
            kept = max(weight, 1)
            if key not in model and kept <= limit:
                model[key] = (name * 100 + weight, kept)
                while sum(w for _, w in model.values()) > limit:
                    model.popitem(last=False)
        elif op == "get":
            found = model.get(key)
            assert cache.get(key) == (None if found is None else found[0])
            if found is not None:
                model.move_to_end(key)
        else:
            cache.discard(key)
            model.pop(key, None)
        assert len(cache) == len(model)
        assert sum(w for _, w in model.values()) <= limit


def _table(path: Path) -> at.Table:
    table = at.create_table(str(path), pa.schema([("x", pa.int64())]))
    for start in range(0, 30, 10):
        table.append(pa.table({"x": list(range(start, start + 10))}))
    return table


def test_a_new_handle_reads_no_manifest_another_handle_decoded(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    assert table.scan().count() == 30
    manifests = tmp_path / "t" / "manifest"
    saved = tmp_path / "saved"
    shutil.copytree(manifests, saved)
    for file in manifests.iterdir():
        if file.name.startswith("manifest-") and not file.name.startswith("manifest-list-"):
            file.unlink()  # only the cache can answer now
    fresh = at.open_table(str(tmp_path / "t"))
    assert sorted(fresh.scan().to_arrow()["x"].to_pylist()) == list(range(30))
    at.clear_metadata_caches()
    try:
        at.open_table(str(tmp_path / "t")).scan().to_arrow()
    except at.AppendTableError as exc:  # the files are gone and no longer cached
        assert "manifest-" in str(exc)
    else:
        raise AssertionError("planning without manifests or cache must fail")
    finally:
        for file in saved.iterdir():
            shutil.copy(file, manifests / file.name)
    assert at.open_table(str(tmp_path / "t")).scan().count() == 30


def test_tables_do_not_share_cached_files(tmp_path: Path) -> None:
    first = _table(tmp_path / "a")
    assert first.scan().count() == 30  # a's manifests are cached now
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # b: the same manifest names
    for file in (tmp_path / "b" / "manifest").iterdir():
        file.unlink()
    # b's manifests are gone: planning b must read them (and fail), not borrow a's entries.
    try:
        at.open_table(str(tmp_path / "b")).scan().count()
    except at.AppendTableError as exc:
        assert str(tmp_path / "b") in str(exc)
    else:
        raise AssertionError("table b must not be planned from table a's cached manifests")
    assert at.open_table(str(tmp_path / "a")).scan().count() == 30
