"""The containment rule at the storage boundary: no operation reads, writes, moves or deletes
anything outside the table root, on local disk (symbolic links included) and on fsspec stores;
and what becomes a path component (options, names, partition values) is checked first."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

import appendtable as at
from appendtable.storage import Storage, open_storage
from appendtable.storage.containment import check_contained, path_problem
from tests.storage import dict_backend

OUTSIDE = [
    "../victim",
    "a/../../victim",
    "/etc/passwd",
    "s3://bucket/victim",
    "C:victim",
    "file:///tmp/victim",
    "a//b",
    "./a",
    "a/./b",
    "a\x00b",
    "a\\..\\b",
    "",
]
INSIDE = [
    "a",
    "a/b",
    "snapshot/snapshot-1",
    "day=2024-01-01/bucket-0/data-x-0.parquet",
    "k=..%2F/bucket-0/f.parquet",
    ".hidden",
    "a..b",
    "_staging/x/part-0.parquet",
]


@pytest.mark.parametrize("path", OUTSIDE)
def test_the_rule_refuses_every_path_that_can_leave_the_root(path: str) -> None:
    assert path_problem(path) is not None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (None, "not a string (NoneType)"),
        (b"a", "not a string (bytes)"),
        ("", "empty"),
        ("a\x00b", "a NUL byte"),
        ("a\\b", "a backslash"),
        ("/a", "absolute"),
        ("s3://b/k", "a scheme or drive"),
        ("a/../b", "a '..' component"),
        ("./a", "a '.' component"),
        ("a//b", "an empty component"),
        ("a/", "an empty component"),
    ],
)
def test_the_rule_says_why(path: object, reason: str) -> None:
    assert path_problem(path) == reason
    with pytest.raises(at.PathOutsideTableError) as raised:
        check_contained(path, "/the/root")  # type: ignore[arg-type]
    assert raised.value.path == str(path)
    assert f"{path!r}" in str(raised.value) and "/the/root" in str(raised.value)
    assert reason in str(raised.value)


@pytest.mark.parametrize("path", INSIDE)
def test_the_rule_accepts_the_paths_a_table_uses(path: str) -> None:
    assert path_problem(path) is None


@pytest.fixture(params=["local", "memory", "registered"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Storage, Callable[[], bytes]]]:
    """A storage rooted at ``.../t`` and a function reading the canary ``.../victim``. The
    registered backend (``dict_backend``) resolves ``..`` like a file system and checks
    nothing itself: only ``Storage``'s own check stands between a path and the canary."""
    if request.param == "registered":
        name = f"containment/{uuid.uuid4().hex}"
        dict_backend.put(f"{name}/victim", b"canary")
        dict_backend.put(f"{name}/t/keep", b"x")
        yield (
            open_storage(f"{dict_backend.SCHEME}://{name}/t"),
            lambda: dict_backend.files(f"{name}/victim")[f"{name}/victim"],
        )
        dict_backend.drop(f"{name}/")
        return
    if request.param == "local":
        (tmp_path / "t").mkdir()
        (tmp_path / "victim").write_bytes(b"canary")
        yield open_storage(str(tmp_path / "t")), (tmp_path / "victim").read_bytes
        return
    base = f"memory://containment/{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    fs.pipe_file(f"{base}/victim", b"canary")
    fs.pipe_file(f"{base}/t/keep", b"x")
    yield open_storage(f"{base}/t"), lambda: fs.cat_file(f"{base}/victim")
    fs.rm(base, recursive=True)


OPERATIONS: dict[str, Callable[[Storage, str], object]] = {
    "read": lambda s, p: s.read(p),
    "read_range": lambda s, p: s.read_range(p, 0, 3),
    "write": lambda s, p: s.write(p, b"evil"),
    "create": lambda s, p: s.create(p, b"evil"),
    "write_hint": lambda s, p: s.write_hint(p, b"evil"),
    "put_if_absent": lambda s, p: s.put_if_absent(p, b"evil"),
    "exists": lambda s, p: s.exists(p),
    "info": lambda s, p: s.info(p),
    "delete": lambda s, p: s.delete(p),
    "delete_tree": lambda s, p: s.delete_tree(p),
    "rename from": lambda s, p: s.rename(p, "stolen"),
    "rename to": lambda s, p: s.rename("keep", p),
    "open_output": lambda s, p: s.open_output(p).close(),
    "checked": lambda s, p: s.checked(p),
    "listdir": lambda s, p: s.listdir(p),
    "walk": lambda s, p: s.walk(p),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize("path", ["../victim", "x/../../victim"])
def test_every_storage_operation_refuses_a_path_out_of_the_root(
    store: tuple[Storage, Callable[[], bytes]], operation: str, path: str
) -> None:
    storage, canary = store
    if storage.backend == "local":
        Path(storage.root, "keep").write_bytes(b"x")
    with pytest.raises(at.PathOutsideTableError):
        OPERATIONS[operation](storage, path)
    assert canary() == b"canary"


def test_an_absolute_path_is_refused_even_when_it_is_inside_the_root(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "t"))
    storage.write("a", b"1")
    with pytest.raises(at.PathOutsideTableError, match="absolute"):
        storage.read(str(tmp_path / "t" / "a"))


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Storage, Path]:
    """A local table root whose ``snapshot`` and ``_staging/x`` are links to an outside
    directory holding ``LATEST`` and ``f.parquet``."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "LATEST").write_bytes(b"7")
    (outside / "f.parquet").write_bytes(b"canary")
    root = tmp_path / "t"
    (root / "_staging").mkdir(parents=True)
    os.symlink(outside, root / "snapshot")
    os.symlink(outside, root / "_staging" / "x")
    os.symlink(outside / "f.parquet", root / "file-link")
    return open_storage(str(root)), outside


@pytest.mark.parametrize(
    "operation",
    [
        lambda s: s.write_hint("snapshot/LATEST", b"9"),
        lambda s: s.write("snapshot/LATEST", b"9"),
        lambda s: s.read("snapshot/LATEST"),
        lambda s: s.read("file-link"),
        lambda s: s.delete("snapshot/LATEST"),
        lambda s: s.delete("_staging/x/f.parquet"),
        lambda s: s.delete_tree("_staging/x"),
        lambda s: s.delete_tree("snapshot"),
        lambda s: s.rename("_staging/x/f.parquet", "bucket-0/f.parquet"),
        lambda s: s.rename("file-link", "bucket-0/f.parquet"),
        lambda s: s.create("snapshot/new", b"9"),
        lambda s: s.put_if_absent("snapshot/snapshot-1", b"9"),
        lambda s: s.open_output("_staging/x/g.parquet").close(),
        lambda s: s.local_path("_staging/x/f.parquet"),
        lambda s: s.checked("_staging/x/f.parquet"),
        lambda s: s.walk("_staging/x"),
    ],
)
def test_local_storage_never_follows_a_symbolic_link(
    linked: tuple[Storage, Path], operation: Callable[[Storage], object]
) -> None:
    storage, outside = linked
    with pytest.raises(at.PathOutsideTableError, match="symbolic link"):
        operation(storage)
    assert sorted(os.listdir(outside)) == ["LATEST", "f.parquet"]
    assert (outside / "LATEST").read_bytes() == b"7"
    assert (outside / "f.parquet").read_bytes() == b"canary"


def test_a_whole_walk_lists_links_but_never_enters_them(linked: tuple[Storage, Path]) -> None:
    storage, _outside = linked
    assert storage.walk() == []
    listings = {listing.path: listing for listing in storage.walk_tree()}
    assert sorted(listings[""].links) == ["file-link", "snapshot"]
    assert listings["_staging"].links == ["x"]


SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])


@pytest.mark.parametrize("name", ["../../../../x", "..", ".", "a/b", "", "x\x00y", "/abs"])
def test_partition_default_name_is_validated_like_a_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(at.InvalidOptionError, match=r"partition\.default-name"):
        at.create_table(
            str(tmp_path / "t"),
            SCHEMA,
            partition_by=["k"],
            options={"partition.default-name": name},
        )
    assert not (tmp_path / "t" / "schema").exists()


def test_a_nul_byte_in_a_partition_value_is_a_schema_mismatch(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["k"])
    with pytest.raises(at.SchemaMismatchError, match="NUL") as raised:
        table.append(pa.table({"k": ["a\x00b"], "v": [1]}, schema=SCHEMA))
    assert raised.value.column == "k"
    assert table.scan().count() == 0


@pytest.mark.parametrize(
    "schema",
    [
        pa.schema([("a\x00b", pa.int64())]),
        pa.schema([("s", pa.struct([("x\x00", pa.int64())]))]),
    ],
)
def test_a_nul_byte_in_a_column_name_is_an_invalid_schema(
    tmp_path: Path, schema: pa.Schema
) -> None:
    with pytest.raises(at.InvalidSchemaError, match="NUL"):
        at.create_table(str(tmp_path / "t"), schema)


def test_a_nul_byte_in_an_added_column_is_refused(tmp_path: Path) -> None:
    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    with pytest.raises(at.InvalidSchemaError, match="NUL"), table.update_schema() as update:
        update.add_column("x\x00", pa.int64())
    assert table.schema == SCHEMA


def test_cli_reports_a_nul_partition_value_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from appendtable.cli import main

    at.create_table(str(tmp_path / "t"), SCHEMA, partition_by=["k"])
    data = tmp_path / "in.jsonl"
    data.write_text('{"k": "a\\u0000b", "v": 1}\n')
    assert main(["append", str(tmp_path / "t"), str(data)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "NUL" in err and "Traceback" not in err


def test_adopt_written_refuses_files_that_leave_the_area(tmp_path: Path) -> None:
    """A commit message naming ``_staging/<id>/../..`` paths (a forged or damaged message from
    a worker) is refused before any file moves."""
    import msgspec

    table = at.create_table(str(tmp_path / "t"), SCHEMA)
    (tmp_path / "victim.parquet").write_bytes(b"canary")
    area = table.staging_area()
    with area.writer() as writer:
        writer.write(pa.table({"k": ["a"], "v": [1]}, schema=SCHEMA))
        messages = writer.prepare_commit()
    good = messages[0].new_files[0]
    for forged in (
        f"{area.path}/../../victim.parquet",
        f"{area.path}/x/../../../../victim.parquet",
        f"{area.path}//x.parquet",
    ):
        bad = msgspec.structs.replace(good, path=forged)
        message = msgspec.structs.replace(messages[0], new_files=(good, bad))
        with pytest.raises(at.InvalidArgumentError, match=r"messages.*staging area"):
            area.adopt_written([message])
        assert (tmp_path / "t" / good.path).exists()  # nothing moved
    assert (tmp_path / "victim.parquet").read_bytes() == b"canary"
    table.committer().commit(area.adopt_written(messages))
    area.remove()
    assert table.scan().count() == 1


@pytest.mark.parametrize("inner", ["a//b", "a/./b", "a/../b", "a/..", "./a"])
def test_an_object_store_location_with_an_empty_or_dot_segment_is_refused(inner: str) -> None:
    """Object stores keep such names literally, their clients do not (see tests/cloud)."""
    prefix = f"/{uuid.uuid4().hex}"
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(at.InvalidOptionError, match=r"empty, '\.' or '\.\.' path segment"):
        at.create_table(f"memory://{prefix}/{inner}", schema)
    assert fsspec.filesystem("memory").find(prefix) == []
