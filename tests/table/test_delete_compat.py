"""Tables with deletes and everything that is not a plain scan: older readers (the code of the
main branch before deletes, run in a subprocess), the Iceberg mirror, snapshot expiration and
orphan removal: each either honours the deleted rows or refuses, never returns them."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable.metadata import codec
from appendtable.metadata.models import Manifest

SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string())])
#: This repository: the older library is taken from its history.
REPOSITORY = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPOSITORY), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def older(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The library as it was just before format version 3 (deletes) was introduced, extracted
    from this repository's history."""
    if not (REPOSITORY / ".git").exists():
        pytest.skip("needs the repository's git history (not a git checkout)")
    introduced = _git(
        "log",
        "--format=%H",
        "--reverse",
        "-G",
        "^FORMAT_VERSION = 3",
        "--",
        "appendtable/metadata/codec.py",
    ).splitlines()
    assert introduced, "no commit introduces FORMAT_VERSION = 3 in this history"
    target = tmp_path_factory.mktemp("older")
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", f"{introduced[0]}^", "appendtable"],
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True, timeout=120)
    found = subprocess.run(
        [sys.executable, "-c", "import appendtable.metadata.codec as c; print(c.FORMAT_VERSION)"],
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=target,
    )
    assert found.stdout.strip() == "2", found.stdout + found.stderr
    return target


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "kind": [f"k{i % 4}" for i in ids]}, schema=SCHEMA)


def older_reader(older: Path, uri: str) -> subprocess.CompletedProcess[str]:
    """Scan ``uri`` with the older library: prints the row count, or the error class."""
    code = (
        "import appendtable as at\n"
        "try:\n"
        f"    print('rows', at.open_table({uri!r}).scan().count())\n"
        "except at.AppendTableError as exc:\n"
        "    print('refused', type(exc).__name__, exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(older)}
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=older,  # (the working directory comes first on the path)
    )


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_an_older_reader_refuses_a_table_with_deletes(
    tmp_path: Path, vectors: str, older: Path
) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={"deletion-vectors.enabled": vectors})
    table.append(rows(0, 100))
    before = older_reader(older, uri)
    assert before.stdout.split() == ["rows", "100"], before.stderr
    table.delete([("kind", "=", "k1")])
    after_delete = older_reader(older, uri)
    # refused: the DELETE snapshot's kind does not even decode there (it decodes before it
    # checks the version); never a count with the deleted rows
    assert after_delete.stdout.startswith("refused"), after_delete.stdout + after_delete.stderr
    table.append(rows(100, 10))
    after_append = older_reader(older, uri)
    assert after_append.stdout.startswith("refused UnsupportedFormatVersionError")
    assert "format version 3" in after_append.stdout


def test_an_older_reader_reads_a_table_whose_expiration_left_records(
    tmp_path: Path, older: Path
) -> None:
    """Expiration records (snapshot/expired/) are new: the older library lists snapshot/ and
    must still find the snapshots, and read the rows."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={"write-only": "true"})
    for start in range(0, 50, 10):
        table.append(rows(start, 10))
    cut = int(time.time() * 1000) + 1000
    assert table.expire_snapshots(retain_min=1, older_than_ms=cut).expired_snapshots == [1, 2, 3, 4]
    assert (tmp_path / "t" / "snapshot" / "expired").is_dir()
    (tmp_path / "t" / "snapshot" / "LATEST").unlink()  # the older reader lists snapshot/
    found = older_reader(older, uri)
    assert found.stdout.split() == ["rows", "50"], found.stdout + found.stderr


def test_this_reader_refuses_a_newer_version_even_with_unknown_values(tmp_path: Path) -> None:
    """The version check runs before the typed decode (see codec), so a future kind reads as
    'upgrade' here."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, SCHEMA, options={"write-only": "true"})
    table.append(rows(0, 10))
    path = tmp_path / "t" / "snapshot" / "snapshot-1"
    data = path.read_bytes()
    payload = data[20:].replace(b'"format_version":2', b'"format_version":4')
    payload = payload.replace(b'"kind":"APPEND"', b'"kind":"FUTURE"')
    header = bytearray(data[:20])
    header[8:16] = len(payload).to_bytes(8, "little")
    header[16:20] = codec.crc32c(payload).to_bytes(4, "little")
    path.write_bytes(bytes(header) + payload)
    at.clear_metadata_caches()
    with pytest.raises(at.UnsupportedFormatVersionError, match="format version 4"):
        at.open_table(uri).scan().count()


def test_the_iceberg_mirror_follows_deletion_vectors_and_copy_on_write(
    tmp_path: Path,
) -> None:
    """(The full sequence, with pyiceberg after every step: tests/table/test_iceberg_deletes.)"""
    mirror = {"metadata.iceberg.storage": "table-location"}
    dv = at.create_table(
        str(tmp_path / "dv"), SCHEMA, options={**mirror, "deletion-vectors.enabled": "true"}
    )
    dv.append(rows(0, 50))
    assert dv.delete([("kind", "=", "k1")]).rows > 0
    # turning the mirror on over vectors works too (write-only: no automatic maintenance
    # rewrites the mostly-deleted file before the mirror is turned on)
    plain = at.create_table(
        str(tmp_path / "plain"),
        SCHEMA,
        options={"deletion-vectors.enabled": "true", "write-only": "true"},
    )
    plain.append(rows(0, 52))
    plain.delete([("kind", "!=", "k1")])
    assert plain.files()["deleted_rows"].to_pylist() == [39]
    plain.set_options(mirror)
    assert plain.iceberg_metadata_location() is not None
    # a file with most of its rows deleted is rewritten alone, without them
    assert plain.compact() is not None
    assert plain.files()["rows"].to_pylist() == [13]
    # copy-on-write keeps the mirror exact: Iceberg readers see the rewritten files only
    cow = at.create_table(str(tmp_path / "cow"), SCHEMA, options=mirror)
    cow.append(rows(0, 50))
    cow.delete([("kind", "=", "k1")])
    pyiceberg = pytest.importorskip("pyiceberg.table")
    location = cow.iceberg_metadata_location()
    assert location is not None
    from pyiceberg.io.pyarrow import PyArrowFileIO

    metadata = pyiceberg.StaticTable.from_metadata(location)
    assert isinstance(metadata.io, PyArrowFileIO)
    mirrored = metadata.scan().to_arrow().sort_by("id")
    expected = rows(0, 50)
    expected = expected.filter(pc.not_equal(expected["kind"], "k1"))
    assert mirrored["id"].to_pylist() == expected["id"].to_pylist()


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_expiration_and_orphan_removal_keep_what_the_latest_snapshot_reads(
    tmp_path: Path, vectors: str
) -> None:
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={"deletion-vectors.enabled": vectors, "write-only": "true"},
    )
    table.append(rows(0, 100))
    for kind in ("k0", "k1", "k2"):
        table.delete([("kind", "=", kind)])
    table.append(rows(100, 8))
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)
    future = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    table.remove_orphan_files(older_than=future, dry_run=False)
    at.clear_metadata_caches()
    again = at.open_table(table.uri)
    got = sorted(again.scan().to_arrow()["id"].to_pylist())
    assert got == [i for i in range(108) if i % 4 == 3 or i >= 100]
    assert again.scan().count() == len(got)


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_a_rollback_to_before_a_delete_brings_the_rows_back_for_good(
    tmp_path: Path, vectors: str
) -> None:
    table = at.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        options={"deletion-vectors.enabled": vectors, "write-only": "true"},
    )
    table.append(rows(0, 40))
    before = table.latest_snapshot()
    assert before is not None
    table.delete([("kind", "in", ["k0", "k2"])])
    table.delete([("id", "<", 10)])
    assert table.scan().count() == 15
    table.rollback_to(before.id)
    table.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)
    future = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    table.remove_orphan_files(older_than=future, dry_run=False)
    at.clear_metadata_caches()
    again = at.open_table(table.uri)
    assert sorted(again.scan().to_arrow()["id"].to_pylist()) == list(range(40))
    again.delete([("kind", "=", "k3")])  # and deletes work on the restored files
    assert again.scan().count() == 30


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_deletes_on_memory_storage(vectors: str) -> None:
    uri = f"memory://deletes-{uuid.uuid4().hex}/t"
    table = at.create_table(uri, SCHEMA, options={"deletion-vectors.enabled": vectors})
    table.append(rows(0, 40))
    table.append(rows(40, 40))
    result = table.delete([("kind", "=", "k1")])
    assert result.rows == 20
    expected = [i for i in range(80) if i % 4 != 1]
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == expected
    assert sorted(pa.table(table.scan())["id"].to_pylist()) == expected
    assert table.scan().count() == 60


@pytest.mark.parametrize("where", ["../outside.puffin", "snapshot/snapshot-1", "/etc/passwd"])
def test_a_manifest_naming_a_vector_outside_the_index_is_refused(
    tmp_path: Path, where: str
) -> None:
    uri = str(tmp_path / "t")
    table = at.create_table(
        uri, SCHEMA, options={"deletion-vectors.enabled": "true", "write-only": "true"}
    )
    table.append(rows(0, 20))
    table.delete([("kind", "=", "k1")])
    tampered = 0
    for path in (tmp_path / "t" / "manifest").glob("manifest-*"):
        if path.name.startswith(("manifest-list-", "commit-users-")):
            continue
        manifest = codec.decode(path.read_bytes(), Manifest, codec.Kind.MANIFEST, str(path))
        entries = [
            msgspec.structs.replace(
                e,
                file=msgspec.structs.replace(
                    e.file, deletion=msgspec.structs.replace(e.file.deletion, path=where)
                ),
            )
            if e.file.deletion is not None
            else e
            for e in manifest.entries
        ]
        if entries != manifest.entries:
            path.write_bytes(codec.encode(Manifest(entries), codec.Kind.MANIFEST))
            tampered += 1
    assert tampered
    at.clear_metadata_caches()
    with pytest.raises(at.CorruptMetadataError, match="deletion vector file"):
        at.open_table(uri).scan().to_arrow()
