"""Damaged metadata raises CorruptMetadataError, a damaged data file CorruptDataFileError, each
naming the file: never a wrong answer, never a foreign exception."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import appendtable as at
from appendtable.metadata import codec
from appendtable.metadata.models import TableSchema
from tests.helpers.data import EVENTS, events


def _table(tmp_path: Path, rows: int = 100) -> tuple[str, at.Table]:
    uri = str(tmp_path / "t")
    table = at.create_table(uri, EVENTS, partition_by=["day"])
    table.append(events(0, rows))
    table.append(events(rows, rows))
    return uri, table


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("offset", [0, 5, 19, 25, -1])
def test_flipped_byte_in_snapshot(tmp_path: Path, offset: int) -> None:
    uri, _ = _table(tmp_path)
    target = tmp_path / "t" / "snapshot" / "snapshot-2"
    _flip(target, offset)
    with pytest.raises(at.CorruptMetadataError) as caught:
        at.open_table(uri).scan().to_arrow()
    assert caught.value.path.endswith("snapshot/snapshot-2")
    assert "snapshot-2" in str(caught.value)
    assert at.open_table(uri).scan(snapshot_id=1).count() == 100  # older history still reads


def test_flipped_byte_in_every_manifest_file(tmp_path: Path) -> None:
    uri, _ = _table(tmp_path)
    manifest_dir = tmp_path / "t" / "manifest"
    for name in sorted(os.listdir(manifest_dir)):
        path = manifest_dir / name
        original = path.read_bytes()
        _flip(path, len(original) // 2)
        # Decoded manifests are cached process-wide (they never change): a damaged file is
        # detected when it is read, which here needs an empty cache.
        at.clear_metadata_caches()
        with pytest.raises(at.CorruptMetadataError, match=name):
            fresh = at.open_table(uri)
            for snapshot_id in (1, 2):  # each file belongs to some snapshot
                fresh.scan(snapshot_id=snapshot_id).to_arrow()
        path.write_bytes(original)
    assert at.open_table(uri).scan().count() == 200


def test_truncated_schema_file(tmp_path: Path) -> None:
    uri, _ = _table(tmp_path)
    schema_file = tmp_path / "t" / "schema" / "schema-0"
    schema_file.write_bytes(schema_file.read_bytes()[:30])
    with pytest.raises(at.CorruptMetadataError, match="schema-0"):
        at.open_table(uri)


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    uri, _ = _table(tmp_path)
    schema_file = tmp_path / "t" / "schema" / "schema-0"
    schema = codec.decode(schema_file.read_bytes(), TableSchema, codec.Kind.SCHEMA, "schema-0")
    newer = msgspec.structs.replace(schema, format_version=codec.FORMAT_VERSION + 1)
    schema_file.write_bytes(codec.encode(newer, codec.Kind.SCHEMA))
    with pytest.raises(at.UnsupportedFormatVersionError, match="upgrade appendtable"):
        at.open_table(uri)


def test_damaged_hints_fall_back_to_listing(tmp_path: Path) -> None:
    uri, _ = _table(tmp_path)
    (tmp_path / "t" / "snapshot" / "LATEST").write_bytes(b"\x00garbage")
    assert at.open_table(uri).latest_snapshot().id == 2  # type: ignore[union-attr]
    (tmp_path / "t" / "snapshot" / "LATEST").write_bytes(b"1")  # stale
    assert at.open_table(uri).latest_snapshot().id == 2  # type: ignore[union-attr]
    os.unlink(tmp_path / "t" / "snapshot" / "LATEST")
    assert at.open_table(uri).latest_snapshot().id == 2  # type: ignore[union-attr]


def test_missing_data_file_names_it(tmp_path: Path) -> None:
    uri, table = _table(tmp_path)
    victim = table.files().column("path").to_pylist()[0]
    os.unlink(tmp_path / "t" / victim)
    with pytest.raises(at.ObjectNotFoundError, match=victim.split("/")[-1]):
        at.open_table(uri).scan().to_arrow()


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _overwrite(path: Path) -> None:
    path.write_bytes(b"not parquet at all " * 64)


def _drop_footer_magic(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-4] + b"XXXX")


def _stream_all(table: at.Table) -> list[object]:
    reader = table.stream(mode="latest-full")
    batches: list[object] = []
    while (unit := reader.poll()) is not None:
        batches.extend(reader.read(unit))
    return batches


def _replace_with_other_columns(path: Path) -> None:
    """A valid Parquet file whose ``seq`` column holds text (a file swapped outside the table)."""
    rows = pq.read_table(path)
    seq = pa.array([f"row {value}" for value in rows.column("seq").to_pylist()])
    pq.write_table(rows.set_column(rows.schema.get_field_index("seq"), "seq", seq), path)


READS: dict[str, Callable[[at.Table], object]] = {
    "to_arrow": lambda t: t.scan().to_arrow(),
    "to_arrow, filtered": lambda t: t.scan(filter=[("seq", ">=", 0)]).to_arrow(),
    "to_batches": lambda t: list(t.scan().to_batches()),
    "to_batches, filtered": lambda t: list(t.scan(filter=[("seq", ">=", 0)]).to_batches()),
    "projected": lambda t: list(t.scan(columns=["seq"]).to_batches()),
    "stream": _stream_all,
    "compact": lambda t: t.compact(full=True),
    "to_dataset": lambda t: t.scan().to_dataset().to_table(),
}


#: Rows per append: files a read takes whole at once (small), and files read by their footer
#: first (over the 64 KiB read first from a file's end).
SIZES = {"small": 100, "large": 30_000}


@pytest.mark.parametrize(
    "damage", [_truncate, _overwrite, _drop_footer_magic, _replace_with_other_columns]
)
@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("size", sorted(SIZES))
def test_damaged_data_file_names_it(
    tmp_path: Path, damage: Callable[[Path], None], read: str, size: str
) -> None:
    uri, table = _table(tmp_path, SIZES[size])
    victim = table.files().column("path").to_pylist()[-1]
    assert ((tmp_path / "t" / victim).stat().st_size > 64 * 1024) == (size == "large")
    damage(tmp_path / "t" / victim)
    with pytest.raises(at.CorruptDataFileError, match=victim.split("/")[-1]) as caught:
        READS[read](at.open_table(uri))
    assert caught.value.path.endswith(victim)
    assert len(at.open_table(uri).files()) == len(table.files())  # nothing was committed


def test_uri_that_is_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    with pytest.raises(at.TableNotFoundError, match="no table at"):
        at.open_table(str(tmp_path / "plain"))


#: compaction reads as to_batches; a dataset handed off is read by the engine, whose errors
#: about a damaged page are its own (to_dataset checks footers and columns when it is made)
@pytest.mark.parametrize("read", sorted(set(READS) - {"compact", "to_dataset"}))
def test_every_flipped_byte_of_a_data_file_is_detected_or_harmless(
    tmp_path: Path, read: str
) -> None:
    """Pages carry CRC-32 checksums, the footer a checksum in the manifest, and reads check
    the row count. A flipped byte anywhere in a data file gives CorruptDataFileError naming
    it, or (where the byte does not matter: statistics, padding) the exact original rows:
    never wrong rows, never another exception."""
    uri, table = _table(tmp_path)
    expected = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["seq"])
    victim = tmp_path / "t" / table.files().column("path").to_pylist()[-1]
    original = victim.read_bytes()
    detected = 0
    for offset in range(len(original)):  # every byte
        damaged = bytearray(original)
        damaged[offset] ^= 0x5A
        victim.write_bytes(bytes(damaged))
        try:
            got = READS[read](at.open_table(uri))
        except at.CorruptDataFileError as exc:
            assert exc.path is not None and exc.path.endswith(victim.name)
            detected += 1
            continue
        rows = got if isinstance(got, pa.Table) else pa.Table.from_batches(got)  # type: ignore[arg-type]
        wanted = [{c: r[c] for c in rows.column_names} for r in expected]
        assert sorted(rows.to_pylist(), key=lambda r: r["seq"]) == wanted, offset
    victim.write_bytes(original)
    assert detected > len(original) // 2  # most bytes of a file are data


def _footer_flip_plain_pyarrow_reads(data: bytes) -> bytes:
    """``data`` with one byte of its Parquet footer changed such that plain pyarrow still
    opens and reads the file (a statistics or metadata byte): only the footer checksum
    recorded at write time can tell."""
    length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - length
    for offset in range(start, len(data) - 8):
        damaged = bytearray(data)
        damaged[offset] ^= 0x01
        try:
            pq.ParquetFile(pa.BufferReader(bytes(damaged))).read()
        except (pa.ArrowException, OSError, ValueError):
            continue
        return bytes(damaged)
    raise AssertionError("no footer byte of the file can change without plain pyarrow failing")


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("size", sorted(SIZES))
def test_a_changed_footer_that_still_decodes_is_refused_by_its_checksum(
    tmp_path: Path, read: str, size: str
) -> None:
    """Small files (read whole, footer parsed from those bytes) and large ones (footer read
    first) alike: the footer is checked against the checksum its writer recorded."""
    uri, table = _table(tmp_path, SIZES[size])
    victim = tmp_path / "t" / table.files().column("path").to_pylist()[-1]
    victim.write_bytes(_footer_flip_plain_pyarrow_reads(victim.read_bytes()))
    with pytest.raises(at.CorruptDataFileError, match="checksum recorded") as caught:
        READS[read](at.open_table(uri))
    assert caught.value.path is not None and caught.value.path.endswith(victim.name)


GOLDEN_V1 = Path(__file__).resolve().parents[1] / "golden" / "format-v1-bucketed"
GOLDEN_READS: dict[str, Callable[[at.Table], object]] = {
    "to_arrow": lambda t: t.scan().to_arrow(),
    "to_arrow, filtered": lambda t: t.scan(filter=[("user_id", ">=", 0)]).to_arrow(),
    "to_batches": lambda t: list(t.scan().to_batches()),
    "to_batches, filtered": lambda t: list(t.scan(filter=[("user_id", ">=", 0)]).to_batches()),
    "stream": _stream_all,
    "to_dataset": lambda t: t.scan().to_dataset().to_table(),
}


@pytest.mark.parametrize("change", ["retyped", "missing"])
@pytest.mark.parametrize("read", sorted(GOLDEN_READS))
def test_a_file_without_a_footer_checksum_is_checked_column_by_column(
    tmp_path: Path, read: str, change: str
) -> None:
    """Files of older writers have no footer checksum (format v1): replaced by a valid Parquet
    file whose columns do not fit the table, they are refused by the column check, naming the
    column, before any row is returned."""
    copy = tmp_path / "t"
    shutil.copytree(GOLDEN_V1, copy)
    table = at.open_table(str(copy))
    victim = copy / table.files().column("path").to_pylist()[-1]
    rows = pq.read_table(victim)
    index = rows.schema.get_field_index("action")
    if change == "retyped":
        rows = rows.set_column(index, "action", pa.array(range(rows.num_rows), pa.int64()))
    else:
        rows = rows.remove_column(index)
    pq.write_table(rows, victim)
    with pytest.raises(at.CorruptDataFileError, match="does not match the table: column 'action'"):
        GOLDEN_READS[read](at.open_table(str(copy)))
