"""The one (de)serialiser of metadata files: a checksummed frame around JSON or MessagePack.

Every metadata file is a 20-byte header followed by the payload::

    offset size  field
    0      4     magic  b"ATBL"
    4      1     frame version (1)
    5      1     encoding: 1 = JSON, 2 = MessagePack
    6      1     kind (see ``Kind``): what the payload is
    7      1     reserved (0)
    8      8     payload length in bytes, little-endian unsigned
    16     4     CRC-32C (Castagnoli) of the payload, little-endian unsigned

Guarantees: decoding never returns a wrong value for damaged bytes. A truncated file, a flipped
byte (CRC mismatch), the wrong kind of file or an undecodable payload raises
:class:`CorruptMetadataError` naming the file; a newer frame or payload format version raises
:class:`UnsupportedFormatVersionError`. Encoding is deterministic (sorted map keys), so equal
objects give equal bytes.
"""

from __future__ import annotations

import enum
import gc
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import crcmod.predefined
import msgspec

from appendtable.errors import CorruptMetadataError, UnsupportedFormatVersionError

__all__ = [
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "MAGIC",
    "Kind",
    "crc32c",
    "decode",
    "encode",
    "packed_size",
]

T = TypeVar("T")

MAGIC = b"ATBL"
FRAME_VERSION = 1
#: The highest payload ``format_version`` this library reads (tables without deletes are
#: written at 2, tables with deleted rows at 3).
FORMAT_VERSION = 3
HEADER_SIZE = 20
_HEADER = struct.Struct("<4sBBBBQI")
_JSON = 1
_MSGPACK = 2
_GC_PAUSE_BYTES = 64 * 1024

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


class Kind(enum.IntEnum):
    """What a metadata file holds; a reader checks it so files cannot be confused."""

    SCHEMA = 1
    SNAPSHOT = 2
    MANIFEST_LIST = 3
    MANIFEST = 4
    COMMIT_USERS = 5
    CONSUMER = 6
    COMMIT_MESSAGE = 7
    SPLIT = 8
    WATERMARK_GROUP = 9
    COMPACTION_TASK = 10
    TAG = 11
    GROUP_GENERATION = 12
    GROUP_LEASE = 13
    GROUP_PROGRESS = 14
    DELETE_RECORD = 15
    EXPIRED_SNAPSHOTS = 16


#: Human-readable files use JSON; bulky ones MessagePack.
_ENCODING = {
    Kind.SCHEMA: _JSON,
    Kind.SNAPSHOT: _JSON,
    Kind.CONSUMER: _JSON,
    Kind.WATERMARK_GROUP: _JSON,
    Kind.TAG: _JSON,
    Kind.GROUP_GENERATION: _JSON,
    Kind.GROUP_LEASE: _JSON,
    Kind.GROUP_PROGRESS: _JSON,
    Kind.DELETE_RECORD: _MSGPACK,
    Kind.EXPIRED_SNAPSHOTS: _JSON,
    Kind.MANIFEST_LIST: _MSGPACK,
    Kind.MANIFEST: _MSGPACK,
    Kind.COMMIT_USERS: _MSGPACK,
    Kind.COMMIT_MESSAGE: _MSGPACK,
    Kind.SPLIT: _MSGPACK,
    Kind.COMPACTION_TASK: _MSGPACK,
}

_json_encoder = msgspec.json.Encoder(order="deterministic")
_msgpack_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoders: dict[tuple[int, type[Any]], msgspec.json.Decoder[Any] | msgspec.msgpack.Decoder[Any]]
_decoders = {}
_decoders_lock = threading.Lock()
_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = True


def packed_size(obj: msgspec.Struct) -> int:
    """The bytes ``obj`` takes inside a MessagePack metadata file (an element of a list,
    such as a manifest entry, takes exactly this much of its file)."""
    return len(_msgpack_encoder.encode(obj))


def encode(obj: msgspec.Struct, kind: Kind) -> bytes:
    """Frame and checksum ``obj`` as a metadata file of ``kind``."""
    encoding = _ENCODING[kind]
    payload = _json_encoder.encode(obj) if encoding == _JSON else _msgpack_encoder.encode(obj)
    header = _HEADER.pack(
        MAGIC, FRAME_VERSION, encoding, int(kind), 0, len(payload), crc32c(payload)
    )
    return header + payload


def decode(data: bytes, type_: type[T], kind: Kind, path: str) -> T:
    """Verify the frame of ``data`` (read from ``path``) and decode it as ``type_``."""
    if len(data) < HEADER_SIZE:
        raise CorruptMetadataError(
            f"metadata file {path} is truncated ({len(data)} bytes, header needs {HEADER_SIZE})",
            path=path,
        )
    magic, version, encoding, file_kind, reserved, length, checksum = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptMetadataError(f"{path} is not an appendtable metadata file", path=path)
    if version > FRAME_VERSION:
        raise UnsupportedFormatVersionError(
            f"{path} uses metadata frame version {version}; this library reads up to "
            f"{FRAME_VERSION}: upgrade appendtable to read this table"
        )
    # The header is not covered by the CRC: values no writer produces mean a damaged header.
    if version == 0 or reserved != 0:
        raise CorruptMetadataError(
            f"metadata file {path} has a damaged header (frame version {version}, "
            f"reserved byte {reserved})",
            path=path,
        )
    if file_kind != kind:
        raise CorruptMetadataError(
            f"{path} holds a {_kind_name(file_kind)} file where a {kind.name.lower()} was expected",
            path=path,
        )
    payload = memoryview(data)[HEADER_SIZE:]
    if len(payload) != length:
        raise CorruptMetadataError(
            f"metadata file {path} is truncated or padded: payload is {len(payload)} bytes, "
            f"header says {length}",
            path=path,
        )
    if crc32c(payload) != checksum:
        raise CorruptMetadataError(f"checksum mismatch in metadata file {path}", path=path)
    _check_version(payload, encoding, path)
    decoder = _decoder(encoding, type_, path)
    try:
        if length >= _GC_PAUSE_BYTES:
            with _gc_paused():
                obj: T = decoder.decode(payload)
        else:
            obj = decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        # RecursionError: nesting deeper than the decoder's limit (only a damaged or hostile
        # payload nests that deep).
        raise CorruptMetadataError(f"cannot decode metadata file {path}: {exc}", path=path) from exc
    format_version = getattr(obj, "format_version", FORMAT_VERSION)
    if isinstance(format_version, int) and format_version > FORMAT_VERSION:
        raise UnsupportedFormatVersionError(
            f"{path} was written with table format version {format_version}; this library "
            f"supports up to {FORMAT_VERSION}: upgrade appendtable to read this table"
        )
    return obj


class _Versioned(msgspec.Struct):
    """Only the ``format_version`` of a JSON payload (other keys ignored)."""

    format_version: int = 0


_version_decoder = msgspec.json.Decoder(_Versioned)


def _check_version(payload: memoryview, encoding: int, path: str) -> None:
    """Refuse a JSON payload of a newer table format version before decoding it as a type:
    a newer version may use values this one cannot decode (a new snapshot kind), which must
    read as "upgrade", never as damage."""
    if encoding != _JSON:
        return
    try:
        found = _version_decoder.decode(payload).format_version
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return  # not an object with an integer version: the typed decode names the damage
    if found > FORMAT_VERSION:
        raise UnsupportedFormatVersionError(
            f"{path} was written with table format version {found}; this library "
            f"supports up to {FORMAT_VERSION}: upgrade appendtable to read this table"
        )


def _decoder(
    encoding: int, type_: type[T], path: str
) -> msgspec.json.Decoder[T] | msgspec.msgpack.Decoder[T]:
    key = (encoding, type_)
    found = _decoders.get(key)
    if found is None:
        if encoding not in (_JSON, _MSGPACK):
            raise CorruptMetadataError(f"{path} has unknown encoding {encoding}", path=path)
        with _decoders_lock:
            found = (
                msgspec.json.Decoder(type_) if encoding == _JSON else msgspec.msgpack.Decoder(type_)
            )
            _decoders[key] = found
    return found


def _kind_name(value: int) -> str:
    try:
        return Kind(value).name.lower()
    except ValueError:
        return f"unknown (kind {value})"


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while decoding large payloads: decoding is allocation-bound and the
    collector would otherwise run many times over freshly allocated, acyclic objects. Nested and
    concurrent pauses are counted; GC is re-enabled only if it was enabled before the first."""
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()
