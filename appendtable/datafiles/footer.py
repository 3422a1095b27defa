"""The checksum of a data file's footer.

Parquet protects page contents with per-page CRCs (written and verified on every read path),
but not its footer: the Thrift metadata that says where each column chunk lies, how many values
it holds and how it is encoded. A flipped byte there can still decode, into rows that are wrong
without any error. So every data file's *tail* (the footer, its 4-byte length and the closing
``PAR1``) has a CRC-32 recorded in its manifest entry (``DataFileMeta.footer_crc``), taken from
the bytes as written, and every read checks it before trusting the footer; a mismatch is
``CorruptDataFileError`` naming the file. Files without a recorded checksum (older writers) are
read as before.

Reading the tail here costs nothing extra where the footer is then parsed from it
(``metadata_of``); pyarrow would read the same bytes.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from appendtable.errors import CorruptDataFileError

__all__ = [
    "SMALL_FILE_BYTES",
    "TailKeeper",
    "metadata_of",
    "read_tail",
    "tail_crc",
    "verified_small_file",
    "verified_tail",
]

_MAGIC = b"PAR1"
#: Bytes read from the end of a file at first: most footers fit (one request on object stores).
_FIRST_READ = 64 * 1024
#: Files up to this size are read whole at once (``verified_small_file``).
SMALL_FILE_BYTES = _FIRST_READ
#: Bytes a writer keeps of what it wrote last, to checksum the footer without reading it back.
_KEPT = 1 << 20


def tail_crc(tail: bytes | memoryview) -> int:
    """CRC-32 (zlib's polynomial) of a file's tail."""
    return zlib.crc32(tail)


def _footer_length(end: bytes | memoryview, uri: str) -> int:
    if len(end) < 8 or end[-4:] != _MAGIC:
        raise CorruptDataFileError(
            f"data file {uri} is not readable Parquet (truncated, overwritten or damaged): it "
            "does not end with the Parquet magic bytes",
            path=uri,
        )
    return int.from_bytes(end[-8:-4], "little")


def read_tail(read_at: Callable[[int, int], bytes], size: int, uri: str) -> bytes:
    """The tail of a file of ``size`` bytes, read with ``read_at(count, offset)``."""
    first = min(size, _FIRST_READ)
    end = read_at(first, size - first)
    length = _checked_footer_length(end, size, uri)
    if length + 8 <= len(end):
        return end[len(end) - length - 8 :]
    return read_at(length + 8, size - length - 8)


def verified_tail(handle: pa.NativeFile, size: int, expected: int | None, uri: str) -> bytes:
    """The file's tail, checked against its recorded checksum (when there is one)."""
    tail = read_tail(handle.read_at, size, uri)
    _verify(tail, expected, uri)
    return tail


def verified_small_file(
    handle: pa.NativeFile, size: int, expected: int | None, uri: str
) -> bytes | None:
    """A small file's bytes (at most what reading its tail reads first anyway), its tail
    checked as ``verified_tail`` does; None for a larger file. Parsing the footer from the
    whole file, once, is what opening a tiny file costs least (reading its pages needs no
    further request)."""
    if size > _FIRST_READ:
        return None
    data: bytes = handle.read_at(size, 0)
    if len(data) != size:
        raise CorruptDataFileError(
            f"data file {uri} is not readable Parquet (truncated, overwritten or damaged): "
            f"{len(data)} of its {size} bytes could be read",
            path=uri,
        )
    whole = memoryview(data)
    _verify(whole[-(_checked_footer_length(whole, size, uri) + 8) :], expected, uri)
    return data


def _checked_footer_length(end: bytes | memoryview, size: int, uri: str) -> int:
    length = _footer_length(end, uri)
    if length + 8 > size:
        raise CorruptDataFileError(
            f"data file {uri} is not readable Parquet (truncated, overwritten or damaged): its "
            f"footer claims {length} bytes of a {size}-byte file",
            path=uri,
        )
    return length


def _verify(tail: bytes | memoryview, expected: int | None, uri: str) -> None:
    if expected is not None and tail_crc(tail) != expected:
        raise CorruptDataFileError(
            f"data file {uri} is damaged: its footer does not match the checksum recorded when "
            "it was written",
            path=uri,
        )


def metadata_of(tail: bytes) -> pq.FileMetaData:
    """The footer parsed from a tail (offsets in it stay those of the whole file)."""
    return pq.read_metadata(pa.BufferReader(tail))


class TailKeeper(io.RawIOBase):
    """A writable file that passes everything to ``raw`` and keeps the last bytes written, so
    that a writer can checksum the footer it just wrote without reading it back."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw
        self._kept = bytearray()
        self._written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        count = self._raw.write(data)
        self._kept += data
        if len(self._kept) > 2 * _KEPT:
            del self._kept[: len(self._kept) - _KEPT]
        self._written += len(data)
        return len(data) if count is None else int(count)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        if not self._raw.closed:
            self._raw.flush()

    def close(self) -> None:
        if not self.closed:
            super().close()  # flushes
            self._raw.close()

    def kept(self) -> tuple[bytes, int]:
        """The last bytes written (at least the last MiB, when there are that many) and the
        file offset of the first of them."""
        kept = bytes(self._kept)
        return kept, self._written - len(kept)

    def tail_crc(self, uri: str) -> int | None:
        """The checksum of the file's tail, or None if the footer is larger than what was
        kept (then it is not recorded)."""
        kept = bytes(self._kept)
        length = _footer_length(kept, uri)
        if length + 8 > len(kept):
            return None
        return tail_crc(kept[len(kept) - length - 8 :])
