"""Deletion vectors: which rows of a data file are deleted, stored as Iceberg v3 does.

A vector is the set of deleted row positions of one data file (row ordinals from 0, in file
order), serialised as a ``deletion-vector-v1`` blob (the Iceberg v3 specification)::

    4 bytes   length of magic + vector, big-endian
    4 bytes   magic D1 D3 39 64
    n bytes   the positions as a Roaring bitmap, 64-bit portable serialisation: 8 bytes
              (little-endian) count of 32-bit bitmaps, then per bitmap its high 32 bits (4 bytes
              little-endian) and its 32-bit Roaring portable serialisation
    4 bytes   CRC-32 (zlib's) of magic + vector, big-endian

The blobs of one delete commit are written together in one Puffin file ``index/dv-<uuid>.puffin``
(magic ``PFA1``, the blobs, then the footer: magic, a JSON payload listing each blob's type,
offset, length and properties ``referenced-data-file`` and ``cardinality``, the payload's size,
flags, magic), created only if absent and never changed. A later delete of the same data file
writes a new vector holding the union. Guarantees: a vector that does not decode exactly
(length, magic, checksum, cardinality) raises ``CorruptDataFileError`` naming the file; a
missing vector file raises ``ObjectNotFoundError``; deleted rows are never returned instead.
"""

from __future__ import annotations

import array
import struct
import uuid
import zlib
from collections.abc import Mapping

import msgspec
import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from appendtable.errors import CorruptDataFileError, ObjectExistsError
from appendtable.metadata.layout import INDEX_DIR
from appendtable.metadata.models import DataFileMeta, DeletionVectorRef
from appendtable.storage import Storage

__all__ = [
    "decode_blob",
    "deleted_positions",
    "encode_blob",
    "keep_mask",
    "write_vectors",
]

PUFFIN_MAGIC = b"PFA1"
BLOB_MAGIC = b"\xd1\xd3\x39\x64"
BLOB_TYPE = "deletion-vector-v1"
_CREATED_BY = "appendtable"
Positions = npt.NDArray[np.uint64]


class _BlobMeta(msgspec.Struct, kw_only=True, rename="kebab"):
    type: str
    fields: list[int]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    properties: dict[str, str]


class _Footer(msgspec.Struct, kw_only=True):
    blobs: list[_BlobMeta]
    properties: dict[str, str]


def encode_blob(positions: npt.NDArray[np.integer]) -> bytes:
    """The ``deletion-vector-v1`` blob of these (sorted or not, distinct) row positions."""
    ordered = np.unique(np.asarray(positions, dtype=np.uint64))
    highs = (ordered >> np.uint64(32)).astype(np.uint32)
    parts = [struct.pack("<Q", 0)]
    groups = 0
    for high in np.unique(highs):
        lows = (ordered[highs == high] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        bitmap = BitMap(array.array("I", lows.tobytes()))  # native order, as array reads it
        bitmap.run_optimize()
        parts.append(struct.pack("<I", int(high)))
        parts.append(bitmap.serialize())
        groups += 1
    parts[0] = struct.pack("<Q", groups)
    body = BLOB_MAGIC + b"".join(parts)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def decode_blob(data: bytes, where: str) -> Positions:
    """The sorted row positions of a ``deletion-vector-v1`` blob read from ``where``."""
    if len(data) < 12:
        raise _corrupt(where, f"{len(data)} bytes is too short for a deletion vector")
    (length,) = struct.unpack_from(">I", data)
    body = data[4 : 4 + length]
    if length != len(data) - 8 or body[:4] != BLOB_MAGIC:
        raise _corrupt(where, "bad length or magic")
    (crc,) = struct.unpack_from(">I", data, 4 + length)
    if zlib.crc32(body) != crc:
        raise _corrupt(where, "checksum mismatch")
    (groups,) = struct.unpack_from("<Q", body, 4)
    offset = 12
    chunks: list[Positions] = []
    for _ in range(groups):
        if offset + 4 > len(body):
            raise _corrupt(where, "truncated bitmap")
        (high,) = struct.unpack_from("<I", body, offset)
        offset += 4
        try:
            bitmap = BitMap.deserialize(body[offset:])
        except (ValueError, OverflowError) as exc:
            raise _corrupt(where, f"not a Roaring bitmap ({exc})") from exc
        offset += len(bitmap.serialize())  # deserialising keeps the containers as stored
        lows = np.frombuffer(bitmap.to_array(), dtype=np.uint32).astype(np.uint64)
        chunks.append(lows | (np.uint64(high) << np.uint64(32)))
    if offset != len(body):
        raise _corrupt(where, "trailing bytes after the bitmaps")
    if not chunks:
        return np.empty(0, dtype=np.uint64)
    result = np.concatenate(chunks)
    if len(result) > 1 and not bool(np.all(result[1:] > result[:-1])):
        raise _corrupt(where, "bitmaps out of order")
    return result


def write_vectors(
    storage: Storage, vectors: Mapping[str, npt.NDArray[np.integer]]
) -> dict[str, DeletionVectorRef]:
    """Write one Puffin file holding a vector for each data file path of ``vectors`` (its
    deleted positions), created only if absent under a new name; the reference of each."""
    name = f"{INDEX_DIR}/dv-{uuid.uuid4().hex}.puffin"
    body = bytearray(PUFFIN_MAGIC)
    blobs: list[_BlobMeta] = []
    refs: dict[str, DeletionVectorRef] = {}
    for data_path, positions in vectors.items():
        blob = encode_blob(positions)
        cardinality = len(np.unique(np.asarray(positions)))
        refs[data_path] = DeletionVectorRef(name, len(body), len(blob), cardinality)
        blobs.append(
            _BlobMeta(
                type=BLOB_TYPE,
                fields=[],
                snapshot_id=-1,
                sequence_number=-1,
                offset=len(body),
                length=len(blob),
                properties={"referenced-data-file": data_path, "cardinality": str(cardinality)},
            )
        )
        body += blob
    payload = msgspec.json.encode(_Footer(blobs=blobs, properties={"created-by": _CREATED_BY}))
    body += PUFFIN_MAGIC + payload + struct.pack("<I", len(payload)) + b"\0\0\0\0" + PUFFIN_MAGIC
    storage.ensure_parent(name)
    if not storage.put_if_absent(name, bytes(body)):  # a new random name: never taken
        raise ObjectExistsError(
            f"vector file {storage.uri(name)} exists already", path=name, operation="write"
        )
    return refs


def deleted_positions(storage: Storage, file: DataFileMeta) -> Positions | None:
    """The deleted row positions of ``file`` (sorted), or None when it has no vector."""
    ref = file.deletion
    if ref is None:
        return None
    positions = _read_vector(storage, storage.uri(ref.path), ref)
    if len(positions) != ref.cardinality or (
        len(positions) and int(positions[-1]) >= file.row_count
    ):
        raise _corrupt(
            f"{storage.uri(ref.path)} (vector of {file.path})",
            f"holds {len(positions)} positions, the manifest says {ref.cardinality} of "
            f"{file.row_count} rows",
        )
    return positions


def _read_vector(storage: Storage, uri: str, ref: DeletionVectorRef) -> Positions:
    return decode_blob(storage.read_range(ref.path, ref.offset, ref.length), uri)


def keep_mask(positions: Positions | None, row_count: int) -> npt.NDArray[np.bool_] | None:
    """A boolean mask over a file's rows: True for rows kept (None: all kept)."""
    if positions is None or len(positions) == 0:
        return None
    mask = np.ones(row_count, dtype=np.bool_)
    mask[positions.astype(np.int64)] = False
    return mask


def _corrupt(where: str, why: str) -> CorruptDataFileError:
    return CorruptDataFileError(f"deletion vector in {where} is damaged: {why}", path=where)
