"""Handing a scan to other engines: an Arrow stream, a pyarrow Dataset, Polars and DuckDB.

Two shapes, for two kinds of consumer:

* a **stream** (``pyarrow.RecordBatchReader``, also through the Arrow PyCapsule protocol) of
  the scan's own read: its snapshot, columns and filter, in its read order, one batch in memory
  at a time;
* a **dataset** (``pyarrow.dataset.Dataset``) over the data files of the scan's snapshot, which
  an engine scans with its own projection and filter pushed down. Partition columns are stored
  in every data file; each file also carries its partition values as the fragment's partition
  expression, so an engine's filter on them skips whole files unopened. Parquet columns are
  matched by name, so a file written under an older schema version that a dataset cannot read
  by name (a column renamed, or dropped and added again under its old name; a nested type
  changed) is read here instead, by field id, into an in-memory part of the dataset.

Polars and DuckDB are optional dependencies, imported on first use (``optional_module``).
"""

from __future__ import annotations

import decimal
import functools
import importlib
import operator
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from appendtable.datafiles.arrow_schema import arrow_type
from appendtable.datafiles.expressions import needs_exact_pass
from appendtable.datafiles.parquet_format import datasets, parquet_format
from appendtable.datafiles.projection import FileLayout, Projection
from appendtable.datafiles.reading import check_files, read_as
from appendtable.metadata.models import DataFileMeta, Split, StatValue
from appendtable.metadata.types import FieldSpec, TypeSpec
from appendtable.planning.filters import Filter
from appendtable.planning.schema_changes import same_fields
from appendtable.storage import Storage

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = [
    "dataset_of",
    "duckdb_relation",
    "optional_module",
    "quoted",
    "reads_by_name",
    "stream_of",
]


def optional_module(name: str, extra: str, needed_by: str) -> ModuleType:
    """The optional dependency ``name``, imported on first use, or an ``ImportError`` that
    says which extra installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"{needed_by} needs {name}, which is not installed: "
            f"pip install 'appendtable[{extra}]' (or pip install {name})",
            name=name,
        ) from exc


def stream_of(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> pa.RecordBatchReader:
    """A reader that pulls ``batches`` one at a time, as the consumer asks for them."""
    return pa.RecordBatchReader.from_batches(schema, batches)


def reads_by_name(projection: Projection, layout: FileLayout, names: Sequence[str]) -> bool:
    """Whether a file of ``layout`` gives the target's columns ``names`` when a dataset reads
    it by column name (casting a widened leaf type): no column renamed, none dropped and added
    again under its old name, no nested type changed."""
    if layout.native:
        return True
    targets = {f.name: f for f in projection.target.fields}
    stored = set(layout.arrow_schema.names)
    for name in names:
        source = layout.sources.get(name)
        if source is None:
            if name in stored:  # another column of that name: a dataset would read it
                return False
            continue  # added later: a dataset reads nulls, as the table does
        target = targets[name]
        if source.name != name:
            return False
        if (source.type.fields or target.type.fields) and not same_fields(
            [FieldSpec(name=name, type=source.type, nullable=target.nullable, id=target.id)],
            [target],
        ):
            return False
    return True


def _partition_expression(split: Split, names: Sequence[str]) -> pc.Expression | None:
    """What every row of the split's files holds in the partition columns among ``names``."""
    terms = []
    for key, value, type_spec in zip(
        split.partition_keys, split.partition_values, split.partition_types, strict=True
    ):
        if key not in names:
            continue
        if value is None:
            terms.append(pc.field(key).is_null())
            continue
        scalar = _partition_scalar(value, type_spec)
        if scalar is not None:
            terms.append(pc.field(key) == scalar)
    return functools.reduce(operator.and_, terms) if terms else None


def _partition_scalar(value: StatValue, type_spec: TypeSpec) -> pa.Scalar | None:
    """A stored partition value as an Arrow scalar of its column's type (dates are stored as
    days, timestamps and times as integers in their unit, decimals as strings)."""
    python: object = value
    if type_spec.kind == "decimal" and isinstance(value, str):
        python = decimal.Decimal(value)
    elif type_spec.kind == "date64" and isinstance(value, int):
        python = value * 86_400_000
    try:
        return pa.scalar(python, type=arrow_type(type_spec))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        # the files hold the value themselves: without the expression, an engine's filter
        # on this key opens the files instead of skipping them, and reads the same rows
        return None


def dataset_of(
    storage: Storage,
    projection: Projection,
    splits: Sequence[Split],
    schema: pa.Schema,
    *,
    row_filter: Filter | None = None,
) -> ds.Dataset:
    """A dataset of the rows of ``splits``' files, with ``schema`` (target columns of
    ``projection``). Files that read by name become fragments, with their partition values as
    partition expressions; the others are read now, by field id, filtered by ``row_filter``
    (the caller filters the dataset itself by it too), into an in-memory part. So are all
    files when ``row_filter`` has a predicate Arrow's row-group pruning decides wrongly
    (``!=`` / ``not in`` on a float, see ``datafiles.expressions``): a consumer filtering
    fragments with it would lose NaN rows of files written with float statistics.

    The fragments' files are checked now as every read checks them (``check_files``: the
    footer against its recorded checksum, or the columns): the engine that scans them later
    would cast or null-fill a file whose columns do not fit."""
    filesystem, root = storage.arrow_filesystem()
    names = schema.names
    module, parquet = datasets(), parquet_format()
    fragments: list[ds.Fragment] = []
    by_name: list[DataFileMeta] = []
    converted: list[DataFileMeta] = []
    read_now = needs_exact_pass(row_filter)
    for split in splits:
        expression = _partition_expression(split, names)
        for file in split.files:
            if (
                read_now
                or file.deletion is not None
                or not reads_by_name(projection, projection.layout(file.schema_id), names)
            ):
                converted.append(file)
                continue
            by_name.append(file)
            fragments.append(
                parquet.make_fragment(
                    f"{root}/{storage.checked(file.path)}",
                    filesystem=filesystem,
                    partition_expression=expression,
                    file_size=file.file_size,
                )
            )
    check_files(storage, by_name, schema)
    files = module.FileSystemDataset(fragments, schema, parquet, filesystem=filesystem)
    if not converted:
        return files
    batches = [
        batch
        for file in converted
        for batch in read_as(storage, file, projection, columns=names, row_filter=row_filter)
    ]
    memory = module.InMemoryDataset(pa.Table.from_batches(batches, schema=schema))
    if not fragments:
        return memory
    return module.UnionDataset(schema, [files, memory])


def quoted(name: str) -> str:
    """A column name as a SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def bridged_filesystem(storage: Storage) -> bool:
    """Whether pyarrow reaches the table's files through a Python file system (fsspec bridged:
    ``memory://``, Azure, GCS with other credentials), where every read needs the GIL."""
    filesystem, _ = storage.arrow_filesystem()
    return isinstance(filesystem, pafs.PyFileSystem)


def duckdb_relation(connection: Any, dataset: ds.Dataset, columns: Sequence[str]) -> Any:
    """A DuckDB relation of ``dataset`` on ``connection``, with ``columns`` only."""
    relation = connection.from_arrow(dataset)
    if list(columns) == dataset.schema.names:
        return relation
    return relation.project(", ".join(quoted(c) for c in columns))
