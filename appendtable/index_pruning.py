"""Skipping data files with their bloom filters, after statistics pruning.

A scan (or stream) whose filter pins an indexed column with ``=`` or ``in`` in every clause
hashes its literals once (:func:`index_probe`) and drops the files whose filters prove that no
row matches (:func:`prune_with_index`). Filters kept in the manifest cost no I/O; the others
are probed in the data files themselves (bitsets up to 64 KiB read whole and cached
process-wide, larger ones one 32-byte read per probed block), concurrently across the files that
survived every other pruning on object stores. A file whose filters cannot be read is kept: an
index can only ever skip work, never rows. Entries keep their order.
"""

from __future__ import annotations

import decimal
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import msgspec
import pyarrow as pa

from appendtable._state import SchemaView
from appendtable.commit.metadata_cache import MetadataCache
from appendtable.datafiles.arrow_schema import arrow_type
from appendtable.errors import StorageError
from appendtable.metadata.models import BloomFilter, DataFileMeta, ManifestEntry, StatValue
from appendtable.metadata.types import TypeSpec
from appendtable.planning.file_index import IndexProbe, ProbeValues, probe_values
from appendtable.planning.filters import Filter, Predicate
from appendtable.planning.operators import filter_operator
from appendtable.planning.parquet_bloom import BLOCK_BYTES
from appendtable.storage import Storage

__all__ = ["index_probe", "literal_array", "prune_with_index"]

log = logging.getLogger("appendtable.scan")

_IO_THREADS = 16
#: Bitsets up to this size are read whole and cached (process-wide; a file never changes).
_CACHED_BITSET = 64 * 1024
_bitsets: MetadataCache[bytes] = MetadataCache(max_weight=64 * 1024 * 1024)


def literal_array(value: StatValue, type_spec: TypeSpec) -> pa.Array | None:
    """A one-element Arrow array of the column's type holding a filter literal (given in its
    stored form); None when no value of the column can equal it (2.5 on an int column)."""
    python: object = decimal.Decimal(str(value)) if type_spec.kind == "decimal" else value
    if type_spec.kind == "date64" and isinstance(value, int):
        python = value * 86_400_000
    try:
        return pa.array([python], type=arrow_type(type_spec))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


def index_probe(view: SchemaView, row_filter: Filter) -> IndexProbe | None:
    """What ``row_filter`` asks of bloom filters, with literals hashed as the columns' current
    types; None when no file could be skipped by an index."""
    fields = {f.name: f for f in view.schema.fields}
    partitions = set(view.schema.partition_keys)
    return IndexProbe.of(
        [_probe_values(p, None if p.path else fields[p.column].id, partitions) for p in clause]
        for clause in row_filter.clauses
    )


def _probe_values(
    predicate: Predicate, field_id: int | None, partitions: set[str]
) -> ProbeValues | None:
    pins = filter_operator(predicate.op).pins_values
    if field_id is None or not pins or predicate.column in partitions:
        return None
    data_type = arrow_type(predicate.type)
    values = []
    for value in predicate.values:
        array = literal_array(value, predicate.type)
        if array is not None:  # else no row of the column can equal it
            values.append(array[0])  # a scalar: exact where Python's types fall short
    return probe_values(field_id, values, data_type)


def prune_with_index(
    storage: Storage, entries: Sequence[ManifestEntry], probe: IndexProbe | None
) -> list[ManifestEntry]:
    """``entries`` without the files whose bloom filters prove no row matches ``probe``."""
    if probe is None:
        return list(entries)
    keep = [True] * len(entries)
    in_files: list[int] = []
    for position, entry in enumerate(entries):
        index = entry.file.file_index
        if not probe.concerns(index):
            continue
        assert index is not None
        if all(bloom.bits for bloom in index.blooms):
            keep[position] = probe.may_match(index)
        else:
            in_files.append(position)
    if in_files:
        files = [entries[p].file for p in in_files]
        if len(files) == 1 or storage.local_path(files[0].path) is not None:
            answers = [_probe_in_file(storage, file, probe) for file in files]  # no waiting
        else:
            with ThreadPoolExecutor(max_workers=min(_IO_THREADS, len(files))) as pool:
                answers = list(pool.map(lambda file: _probe_in_file(storage, file, probe), files))
        for position, answer in zip(in_files, answers, strict=True):
            keep[position] = answer
    return [entry for entry, kept in zip(entries, keep, strict=True) if kept]


def _probe_in_file(storage: Storage, file: DataFileMeta, probe: IndexProbe) -> bool:
    """``probe.may_match`` for a file whose bitsets are read from the data file itself: whole
    (and cached, they never change) up to ``_CACHED_BITSET`` bytes, else 32 bytes per probed
    block. A file that cannot be read is kept."""
    index = file.file_index
    assert index is not None
    root = storage.uri("")

    def bitset(bloom: BloomFilter) -> bytes:
        key = (root, f"{file.path}@{bloom.offset}")
        cached = _bitsets.get(key)
        if cached is None:
            cached = storage.read_range(file.path, bloom.offset, bloom.num_bytes)
            _bitsets.put(key, cached, len(cached))
        return cached

    def read_block(bloom: BloomFilter, block: int) -> bytes:
        start = bloom.offset + block * BLOCK_BYTES
        return storage.read_range(file.path, start, BLOCK_BYTES)

    try:
        small = [
            msgspec.structs.replace(bloom, bits=bitset(bloom))
            if not bloom.bits
            and bloom.num_bytes <= _CACHED_BITSET
            and bloom.field_id in probe.field_ids
            else bloom
            for bloom in index.blooms
        ]
        return probe.may_match(msgspec.structs.replace(index, blooms=tuple(small)), read_block)
    except StorageError as exc:
        log.warning("probing the bloom filters of %s failed (%s); reading it", file.path, exc)
        return True
