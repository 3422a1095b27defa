"""The deletion-vector blob (Iceberg v3 ``deletion-vector-v1``), checked against an independent
implementation of Roaring's 64-bit portable format (CRoaring's, through pyroaring's
``BitMap64``), over positions drawn from the whole 64-bit domain; any damaged byte is refused."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from appendtable.datafiles.deletion_vectors import decode_blob, encode_blob
from appendtable.errors import CorruptDataFileError

positions = st.one_of(
    st.integers(0, 2**16),  # one container
    st.integers(0, 2**33),  # across a 32-bit high key
    st.integers(0, 2**64 - 1),  # anywhere
)
position_sets = st.sets(positions, max_size=300) | st.builds(
    lambda start, length: set(range(start, start + length)),  # runs
    st.integers(0, 2**40),
    st.integers(0, 5000),
)


@settings(max_examples=300, deadline=None)
@given(position_sets)
def test_the_blob_holds_the_positions_in_the_portable_format(found: set[int]) -> None:
    blob = encode_blob(np.array(sorted(found), dtype=np.uint64))
    (length,) = struct.unpack(">I", blob[:4])
    body = blob[4 : 4 + length]
    assert len(blob) == length + 8
    assert body[:4] == bytes([0xD1, 0xD3, 0x39, 0x64])
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(body)
    assert set(BitMap64.deserialize(body[4:])) == found  # an independent reader
    assert decode_blob(blob, "x").tolist() == sorted(found)
    reference = BitMap64(found)
    reference.run_optimize()
    assert body[4:] == reference.serialize()  # byte for byte what CRoaring writes


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(0, 2**34), min_size=1, max_size=50), st.data())
def test_a_damaged_byte_is_refused(found: set[int], data: st.DataObject) -> None:
    blob = bytearray(encode_blob(np.array(sorted(found), dtype=np.uint64)))
    index = data.draw(st.integers(0, len(blob) - 1))
    blob[index] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptDataFileError, match="deletion vector"):
        decode_blob(bytes(blob), "table/index/dv-1.puffin")


def test_truncated_and_padded_blobs_are_refused() -> None:
    blob = encode_blob(np.array([1, 2, 3], dtype=np.uint64))
    for damaged in (blob[:-1], blob + b"\0", blob[:5], b""):
        with pytest.raises(CorruptDataFileError):
            decode_blob(damaged, "x")
