"""Skipping data files with their bloom filters, after statistics pruning.

A scan (or stream) whose filter pins an indexed column with ``=`` or ``in`` in every clause
hashes its literals once (:func:`index_probe`) and drops the files whose filters prove that no
row matches (:func:`prune_with_index`). Filters kept in the manifest cost no I/O; sidecar
filters are read concurrently, only for the files that survived every other pruning. A sidecar
that cannot be read (missing, damaged) keeps its file: an index can only ever skip work, never
rows. Entries keep their order.
"""

from __future__ import annotations

import decimal
import logging
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from appendtable._state import SchemaView
from appendtable.datafiles.arrow_schema import arrow_type
from appendtable.errors import CorruptMetadataError, StorageError
from appendtable.metadata import codec, layout
from appendtable.metadata.models import FileIndex, ManifestEntry, StatValue
from appendtable.metadata.types import TypeSpec
from appendtable.planning.file_index import IndexProbe, ProbeValues, hash_type_of, value_hashes
from appendtable.planning.filters import Filter, Predicate
from appendtable.storage import Storage

__all__ = ["index_probe", "literal_array", "prune_with_index"]

log = logging.getLogger("appendtable.scan")

_SIDECAR_THREADS = 16
_EQUALITY = frozenset({"=", "==", "in"})


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
        [_probe_values(p, fields[p.column].id, partitions) for p in clause]
        for clause in row_filter.clauses
    )


def _probe_values(
    predicate: Predicate, field_id: int | None, partitions: set[str]
) -> ProbeValues | None:
    if field_id is None or predicate.op not in _EQUALITY or predicate.column in partitions:
        return None
    hash_type = hash_type_of(arrow_type(predicate.type))
    if hash_type is None:
        return None
    arrays = []
    for value in predicate.values:
        if isinstance(value, float) and math.isnan(value):
            return None  # NaN semantics differ between = and in: leave it to the reader
        array = literal_array(value, predicate.type)
        if array is not None:
            arrays.append(array)
    hashes = value_hashes(pa.chunked_array(arrays, type=arrow_type(predicate.type)))
    return ProbeValues(field_id=field_id, hash_type=hash_type, hashes=hashes)


def prune_with_index(
    storage: Storage, entries: Sequence[ManifestEntry], probe: IndexProbe | None
) -> list[ManifestEntry]:
    """``entries`` without the files whose bloom filters prove no row matches ``probe``."""
    if probe is None:
        return list(entries)
    keep = [True] * len(entries)
    sidecars: list[int] = []
    for position, entry in enumerate(entries):
        index = entry.file.file_index
        if not probe.concerns(index):
            continue
        assert index is not None
        if index.sidecar_size:
            sidecars.append(position)
        else:
            keep[position] = probe.may_match(index)
    if sidecars:
        paths = [entries[p].file.path for p in sidecars]
        if len(paths) == 1:
            loaded = [_read_sidecar(storage, paths[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(_SIDECAR_THREADS, len(paths))) as pool:
                loaded = list(pool.map(lambda path: _read_sidecar(storage, path), paths))
        for position, index in zip(sidecars, loaded, strict=True):
            keep[position] = index is None or probe.may_match(index)
    return [entry for entry, kept in zip(entries, keep, strict=True) if kept]


def _read_sidecar(storage: Storage, data_path: str) -> FileIndex | None:
    path = layout.index_path(data_path)
    try:
        data = storage.read(path)
        return codec.decode(data, FileIndex, codec.Kind.FILE_INDEX, storage.uri(path))
    except (StorageError, CorruptMetadataError) as exc:
        log.warning("reading the index of %s without it: %s", data_path, exc)
        return None
