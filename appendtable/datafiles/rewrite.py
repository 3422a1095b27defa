"""Rewriting data files: compaction workers and pre-commit merging.

A rewrite reads its input files in the given order and streams their rows into rolling output
files, so memory stays at about one row group. With ``keep_sequence`` the outputs take the input
files' sequence range: contiguous numbers from the first input's ``min_seq``, the last output
ending at the last input's ``max_seq`` (so a bucket's files stay ordered and disjoint).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import msgspec
import pyarrow as pa

from appendtable.datafiles.projection import Projection
from appendtable.datafiles.reading import read_as, read_files
from appendtable.datafiles.writing import FileWriteSpec, write_files
from appendtable.metadata.models import DataFileMeta, FileSource
from appendtable.storage import Storage

__all__ = ["read_tables", "rewrite_files"]

#: Files up to this size are read in runs of up to ``_RUN_BYTES`` (stored sizes).
_RUN_FILE_BYTES = 1 << 20
_RUN_BYTES = 16 << 20


def read_tables(
    storage: Storage, files: Sequence[DataFileMeta], projection: Projection
) -> Iterator[pa.Table]:
    """The rows of ``files`` in order, as the projection's target schema (files of older
    schema versions are converted by field id). Runs of small files in the target schema are
    read together by Arrow's scanner (its threads open them concurrently and it keeps their
    order: per-file set-up is what compacting many small files costs); other files are read
    one by one, a table per record batch. Deleted rows (deletion vectors) are left out."""
    run: list[DataFileMeta] = []
    run_bytes = 0
    for file in files:
        if file.file_size <= _RUN_FILE_BYTES and projection.layout(file.schema_id).native:
            run.append(file)
            run_bytes += file.file_size
            if run_bytes >= _RUN_BYTES:
                yield read_files(storage, run, schema=projection.arrow_schema)
                run, run_bytes = [], 0
            continue
        if run:
            yield read_files(storage, run, schema=projection.arrow_schema)
            run, run_bytes = [], 0
        for batch in read_as(storage, file, projection):
            yield pa.Table.from_batches([batch])
    if run:
        yield read_files(storage, run, schema=projection.arrow_schema)


def rewrite_files(
    storage: Storage,
    directory: str,
    files: Sequence[DataFileMeta],
    spec: FileWriteSpec,
    *,
    projection: Projection,
    source: FileSource,
    keep_sequence: bool,
    chunks: Iterator[pa.Table] | None = None,
    on_file: Callable[[str], None] | None = None,
) -> list[DataFileMeta]:
    """Rewrite ``files`` (or the given ``chunks`` holding their rows) into new files of the
    schema of ``spec``, which ``projection`` reads every input file as."""
    first = min(f.min_seq for f in files)
    outputs = write_files(
        storage,
        directory,
        chunks if chunks is not None else read_tables(storage, files, projection),
        spec,
        source=source,
        seq_start=first,
        on_file=on_file,
    )
    if keep_sequence and outputs:
        last = max(f.max_seq for f in files)
        outputs[-1] = msgspec.structs.replace(outputs[-1], max_seq=max(outputs[-1].max_seq, last))
    return outputs
