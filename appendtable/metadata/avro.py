"""Avro object container files: the encoding Iceberg manifests and manifest lists use.

A writer of the Avro binary encoding (specification 1.11) for values described by an Avro
schema given as its JSON form (dicts, lists and type names), and a reader of such files (used
to check what was written). Supported: null, boolean, int, long, float, double, bytes, string,
record, array, map, union, fixed; the ``null`` and ``deflate`` codecs. Named types may be
referenced by name after their definition.

Encoding is deterministic for a given sync marker, so equal inputs give equal files.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from appendtable.errors import CorruptMetadataError, InvalidArgumentError

__all__ = ["read_container", "read_header", "write_container"]

MAGIC = b"Obj\x01"
_BLOCK_RECORDS = 4096


def _zigzag(value: int, out: bytearray) -> None:
    encoded = (value << 1) ^ (value >> 63)
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _encode_bytes(data: bytes, out: bytearray) -> None:
    _zigzag(len(data), out)
    out += data


class _Encoder:
    """Encodes values of one schema; named types are resolved as they are defined."""

    def __init__(self) -> None:
        self.named: dict[str, Any] = {}

    def encode(self, schema: Any, value: Any, out: bytearray) -> None:
        if isinstance(schema, str):
            self._primitive(schema, value, out)
        elif isinstance(schema, list):
            self._union(schema, value, out)
        else:
            kind = schema["type"]
            if kind == "record":
                self.named.setdefault(schema["name"], schema)
                for field in schema["fields"]:
                    self.encode(field["type"], value.get(field["name"]), out)
            elif kind == "array":
                items = list(value)
                if items:
                    _zigzag(len(items), out)
                    for item in items:
                        self.encode(schema["items"], item, out)
                _zigzag(0, out)
            elif kind == "map":
                if value:
                    _zigzag(len(value), out)
                    for key, item in value.items():
                        _encode_bytes(key.encode(), out)
                        self.encode(schema["values"], item, out)
                _zigzag(0, out)
            elif kind == "fixed":
                self.named.setdefault(schema["name"], schema)
                if len(value) != schema["size"]:
                    raise InvalidArgumentError(
                        f"records: fixed {schema['name']} needs {schema['size']} bytes"
                    )
                out += value
            else:
                self._primitive(kind, value, out)

    def _union(self, branches: list[Any], value: Any, out: bytearray) -> None:
        if value is None:
            _zigzag(branches.index("null"), out)
            return
        for index, branch in enumerate(branches):
            if branch != "null":
                _zigzag(index, out)
                self.encode(branch, value, out)
                return
        raise InvalidArgumentError("records: a union without a non-null branch holds a value")

    def _primitive(self, kind: str, value: Any, out: bytearray) -> None:
        if kind == "null":
            return
        if kind == "boolean":
            out.append(1 if value else 0)
        elif kind in ("int", "long"):
            _zigzag(int(value), out)
        elif kind == "float":
            out += struct.pack("<f", value)
        elif kind == "double":
            out += struct.pack("<d", value)
        elif kind == "bytes":
            _encode_bytes(bytes(value), out)
        elif kind == "string":
            _encode_bytes(str(value).encode(), out)
        elif kind in self.named:
            self.encode(self.named[kind], value, out)
        else:
            raise InvalidArgumentError(f"schema: unsupported Avro type {kind!r}")


def write_container(
    schema: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    *,
    metadata: Mapping[str, str] | None = None,
    sync: bytes = b"appendtable-sync",
    codec: str = "deflate",
) -> bytes:
    """An Avro object container file of ``records`` (dicts by field name) of ``schema``, with
    ``metadata`` (string values) in its header."""
    if len(sync) != 16:
        raise InvalidArgumentError("sync: the sync marker is 16 bytes")
    if codec not in ("null", "deflate"):
        raise InvalidArgumentError(f"codec: unsupported codec {codec!r}")
    header = bytearray(MAGIC)
    entries = {
        "avro.schema": json.dumps(schema, separators=(",", ":")).encode(),
        "avro.codec": codec.encode(),
        **{key: value.encode() for key, value in (metadata or {}).items()},
    }
    _zigzag(len(entries), header)
    for key, value in entries.items():
        _encode_bytes(key.encode(), header)
        _encode_bytes(value, header)
    _zigzag(0, header)
    header += sync
    out = io.BytesIO()
    out.write(header)
    encoder = _Encoder()
    block = bytearray()
    count = 0

    def flush() -> None:
        nonlocal block, count
        if not count:
            return
        data = bytes(block)
        if codec == "deflate":
            compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
            data = compressor.compress(data) + compressor.flush()
        prefix = bytearray()
        _zigzag(count, prefix)
        _zigzag(len(data), prefix)
        out.write(prefix)
        out.write(data)
        out.write(sync)
        block, count = bytearray(), 0

    for record in records:
        encoder.encode(schema, record, block)
        count += 1
        if count >= _BLOCK_RECORDS:
            flush()
    flush()
    return out.getvalue()


# ---- reading ----------------------------------------------------------------------------------


class _Malformed(ValueError):
    """Bytes that are not what the Avro schema says."""


class _Decoder:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.named: dict[str, Any] = {}

    def long(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise _Malformed("an Avro varint runs past the end of its block")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    def raw(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise _Malformed("an Avro value runs past the end of its block")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def decode(self, schema: Any) -> Any:
        if isinstance(schema, list):
            return self.decode(schema[self.long()])
        if isinstance(schema, dict):
            kind = schema["type"]
            if kind == "record":
                self.named.setdefault(schema["name"], schema)
                return {f["name"]: self.decode(f["type"]) for f in schema["fields"]}
            if kind == "array":
                return list(self._blocks(lambda: self.decode(schema["items"])))
            if kind == "map":
                return dict(
                    self._blocks(
                        lambda: (self.raw(self.long()).decode(), self.decode(schema["values"]))
                    )
                )
            if kind == "fixed":
                self.named.setdefault(schema["name"], schema)
                return self.raw(schema["size"])
            return self.decode(kind)
        if schema == "null":
            return None
        if schema == "boolean":
            return self.raw(1) != b"\x00"
        if schema in ("int", "long"):
            return self.long()
        if schema == "float":
            return struct.unpack("<f", self.raw(4))[0]
        if schema == "double":
            return struct.unpack("<d", self.raw(8))[0]
        if schema == "bytes":
            return self.raw(self.long())
        if schema == "string":
            return self.raw(self.long()).decode()
        if schema in self.named:
            return self.decode(self.named[schema])
        raise _Malformed(f"unsupported Avro type {schema!r}")

    def _blocks(self, item: Any) -> Iterator[Any]:
        while True:
            count = self.long()
            if count == 0:
                return
            if count < 0:
                count = -count
                self.long()  # the block's byte size
            for _ in range(count):
                yield item()


def read_container(data: bytes, path: str = "") -> tuple[dict[str, bytes], list[Any]]:
    """(header metadata, records) of an Avro object container file; CorruptMetadataError
    naming ``path`` if it is not one."""
    try:
        return _read(data)
    except (ValueError, KeyError, IndexError, struct.error, zlib.error) as exc:
        raise CorruptMetadataError(f"{path}: not a valid Avro file ({exc})", path=path) from exc


def read_header(data: bytes, path: str = "") -> dict[str, bytes]:
    """The header metadata of an Avro object container file, without decoding its records."""
    try:
        return _header(_decoder_after_magic(data))
    except (ValueError, KeyError, IndexError) as exc:
        raise CorruptMetadataError(f"{path}: not a valid Avro file ({exc})", path=path) from exc


def _decoder_after_magic(data: bytes) -> _Decoder:
    if not data.startswith(MAGIC):
        raise _Malformed("not an Avro object container file")
    decoder = _Decoder(data)
    decoder.pos = len(MAGIC)
    return decoder


def _header(decoder: _Decoder) -> dict[str, bytes]:
    """The header's metadata map (the decoder is left at the sync marker)."""
    return dict(
        decoder._blocks(lambda: (decoder.raw(decoder.long()).decode(), decoder.raw(decoder.long())))
    )


def _read(data: bytes) -> tuple[dict[str, bytes], list[Any]]:
    decoder = _decoder_after_magic(data)
    metadata = _header(decoder)
    sync = decoder.raw(16)
    schema = json.loads(metadata["avro.schema"])
    codec = metadata.get("avro.codec", b"null").decode()
    records: list[Any] = []
    while decoder.pos < len(data):
        count = decoder.long()
        size = decoder.long()
        block = decoder.raw(size)
        if decoder.raw(16) != sync:
            raise _Malformed("an Avro block does not end with the file's sync marker")
        if codec == "deflate":
            block = zlib.decompress(block, -15)
        elif codec != "null":
            raise _Malformed(f"unsupported Avro codec {codec!r}")
        inner = _Decoder(block)
        inner.named = decoder.named
        records.extend(inner.decode(schema) for _ in range(count))
    return metadata, records
