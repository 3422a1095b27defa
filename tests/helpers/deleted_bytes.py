"""Rows with distinctive byte patterns, and a scan of every stored file for them.

``marked_rows`` gives each row a unique string marker (``m<k>:<tag>``, long enough that even a
16-character truncated statistic still holds the unique part) and a unique 64-bit ``secret``
whose encodings (little- and big-endian 8 bytes as Parquet and MessagePack store it, decimal
text as JSON does) are improbable elsewhere. ``find_values`` looks for those in the raw bytes
of every file, in the values of every Parquet file (read with pyarrow, whatever its encoding or
compression) and in the decoded payload of every metadata file (generic MessagePack / JSON
decode after the 20-byte frame header), independently of the library under test."""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

import appendtable as at
from appendtable.commit.snapshots import flush_hints

MARKER_SCHEMA = pa.schema(
    [("id", pa.int64()), ("secret", pa.int64()), ("marker", pa.string()), ("day", pa.string())]
)
_SECRET_BASE = 0x3A5C_7E00_0000_0000
#: The delete modes by name: the value of option ``deletion-vectors.enabled``.
MODES = {"dv": "true", "cow": "false"}


def marked_table(
    uri: str,
    mode: str,
    *,
    compression: str = "none",
    storage_options: Mapping[str, object] | None = None,
) -> at.Table:
    """A table of ``MARKER_SCHEMA`` rows: partitioned by day, 2 buckets on id, write-only (no
    maintenance the test did not ask for), uncompressed unless told, deleting in ``mode``."""
    return at.create_table(
        uri,
        MARKER_SCHEMA,
        partition_by=["day"],
        options={
            "bucket": "2",
            "bucket-key": "id",
            "deletion-vectors.enabled": MODES[mode],
            "file.compression": compression,
            "write-only": "true",
        },
        storage_options=dict(storage_options or {}),
    )


def marker(k: int) -> str:
    """The unique marker of row ``k``: its unique part comes first (``m00000123z``)."""
    return f"m{k:08d}z-row-payload"


def marker_key(k: int) -> bytes:
    return f"m{k:08d}z".encode()


def secret(k: int) -> int:
    return _SECRET_BASE + k * 7919


def marked_rows(ks: Iterable[int]) -> pa.Table:
    keys = list(ks)
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "secret": pa.array([secret(k) for k in keys], pa.int64()),
            "marker": [marker(k) for k in keys],
            "day": [f"d{k % 2}" for k in keys],
        },
        schema=MARKER_SCHEMA,
    )


def _patterns(k: int) -> list[bytes]:
    value = secret(k)
    return [
        marker_key(k),
        struct.pack("<q", value),
        struct.pack(">q", value),
        str(value).encode(),
    ]


def local_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones included), by relative path, once the LATEST
    hints written in the background have landed (their temp files come and go)."""
    flush_hints()
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def find_values(files: Mapping[str, bytes], deleted: Iterable[int]) -> list[str]:
    """Where any deleted row's marker or secret is found (``path: what``), [] if nowhere."""
    keys = list(deleted)
    patterns = {p: k for k in keys for p in _patterns(k)}
    markers = {marker_key(k).decode(): k for k in keys}
    secrets = {secret(k): k for k in keys}
    found: list[str] = []
    for path, data in files.items():
        for pattern, k in patterns.items():
            if pattern in data:
                found.append(f"{path}: raw bytes of row {k}")
        for value in _decoded_values(path, data):
            if isinstance(value, str):
                hits = [k for m, k in markers.items() if m in value]
                found.extend(f"{path}: decoded marker of row {k}" for k in hits)
            elif isinstance(value, int) and value in secrets:
                found.append(f"{path}: decoded secret of row {secrets[value]}")
            elif isinstance(value, bytes):
                found.extend(
                    f"{path}: decoded bytes of row {k}" for p, k in patterns.items() if p in value
                )
    return found


def _decoded_values(path: str, data: bytes) -> Iterator[object]:
    if path.endswith(".parquet") and data[:4] == b"PAR1":
        table = pq.read_table(io.BytesIO(data))
        for column in table.columns:
            yield from column.to_pylist()
        return
    if data[:4] == b"ATBL" and len(data) >= 20:
        payload = data[20:]
        decoder = msgspec.json.decode if data[5] == 1 else msgspec.msgpack.decode
        try:
            yield from _walk(decoder(payload))
        except msgspec.DecodeError:
            return


def _walk(value: object) -> Iterator[object]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _walk(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk(item)
    else:
        yield value
