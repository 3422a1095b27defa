"""Batch scans: one pinned snapshot, pruned by partition, bucket and statistics, read in order.

Pruning happens before any data file is opened: manifests are skipped by their partition ranges
and bucket ranges, files by partition values, bucket and column statistics. The exact row filter
is then applied while reading. Splits come in a deterministic order (see ``planning.splits``);
reading them in order yields each bucket's rows in write order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from appendtable import argument_checks, display, handoff
from appendtable._state import SchemaView, TableState
from appendtable.commit.tags import TagStore
from appendtable.datafiles.arrow_schema import empty_table
from appendtable.datafiles.expressions import to_expression
from appendtable.datafiles.projection import Projection
from appendtable.datafiles.reading import read_as, read_files_as
from appendtable.errors import InvalidFilterError, ObjectNotFoundError
from appendtable.index_pruning import index_probe, literal_array, prune_with_index
from appendtable.metadata import options as opt
from appendtable.metadata.models import ManifestEntry, ManifestFileMeta, Snapshot, Split, StatValue
from appendtable.planning.bucket import bucket_ids
from appendtable.planning.filters import Filter, parse_filter
from appendtable.planning.splits import group_files, pack_splits

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = ["Scan", "plan_entries", "read_split"]


def _bucket_function(view: SchemaView) -> Callable[[tuple[StatValue, ...]], int | None]:
    types = view.column_types
    key = view.options.bucket_key
    key_types = [types[column] for column in key]
    buckets = view.options.bucket

    def bucket_of(values: tuple[StatValue, ...]) -> int | None:
        arrays = []
        for value, type_spec in zip(values, key_types, strict=True):
            array = literal_array(value, type_spec)
            if array is None:
                return None  # e.g. 2.5 or 1000 on an int8 key: no row can equal it
            arrays.append(array)
        return int(bucket_ids(arrays, buckets)[0])

    return bucket_of


def plan_entries(
    state: TableState,
    snapshot: Snapshot,
    row_filter: Filter | None,
    *,
    projection: Projection,
    view: SchemaView,
    buckets: set[int] | None = None,
) -> list[ManifestEntry]:
    """Live entries of ``snapshot`` that may hold rows matching ``row_filter`` (on the columns
    of ``view``), restricted to ``buckets`` when given. File statistics are matched to the
    filter's columns by field id (``projection``): a file written before a column was added
    holds only nulls in it."""
    keys = view.schema.partition_keys
    truncate = view.options.stats_truncate
    wanted = buckets
    if row_filter is not None and view.options.bucket > 0:
        pinned = row_filter.buckets(view.options.bucket_key, _bucket_function(view))
        if pinned is not None:
            wanted = pinned if wanted is None else wanted & pinned

    def manifest_ok(manifest: ManifestFileMeta) -> bool:
        if wanted is not None and not any(
            manifest.min_bucket <= b <= manifest.max_bucket for b in wanted
        ):
            return False
        if row_filter is None or not keys:
            return True
        rows = manifest.num_added + manifest.num_deleted
        return any(
            all(
                p.may_match(
                    manifest.partition_min[keys.index(p.column)],
                    manifest.partition_max[keys.index(p.column)],
                    manifest.partition_null_counts[keys.index(p.column)],
                    rows,
                )
                for p in clause
                if p.column in keys and not p.path
            )
            for clause in row_filter.clauses
        )

    # A table has far fewer partitions than files: decide each partition once per plan.
    partition_ok: dict[tuple[StatValue, ...], bool] = {}

    def entry_ok(entry: ManifestEntry) -> bool:
        if wanted is not None and entry.bucket not in wanted:
            return False
        if row_filter is None:
            return True
        partition = entry.partition
        matches = partition_ok.get(partition)
        if matches is None:
            matches = partition_ok[partition] = row_filter.matches_partition(keys, partition)
        if not matches:
            return False
        layout = projection.layout(entry.file.schema_id)
        return row_filter.may_match_file(
            entry.file, layout.stats_positions, truncate, layout.field_ids
        )

    entries = state.manifests.live_files(snapshot, manifest_ok, entry_ok)
    if row_filter is None:
        return entries
    return prune_with_index(state.storage, entries, index_probe(view, row_filter))


def splits_of(
    view: SchemaView,
    snapshot: Snapshot,
    entries: Sequence[ManifestEntry],
    *,
    options: opt.Options | None = None,
) -> list[Split]:
    """The entries packed into splits that read as ``view``'s schema, planned with
    ``options`` (partition order, split sizes; the table's when None)."""
    planning = view.options if options is None else options
    groups = group_files(
        entries,
        sort_partitions=planning.get(opt.SCAN_PLAN_SORT_PARTITION),
        partition_types=view.partition_types,
    )
    return pack_splits(
        groups,
        snapshot_id=snapshot.id,
        partition_keys=view.schema.partition_keys,
        partition_types=view.partition_types,
        target_size=planning.get(opt.SPLIT_TARGET_SIZE),
        open_file_cost=planning.get(opt.SPLIT_OPEN_FILE_COST),
        schema_id=view.schema.id,
    )


def check_columns(view: SchemaView, columns: Sequence[str] | str | None) -> list[str] | None:
    columns = argument_checks.names(columns, "columns")
    if columns is None:
        return None
    names = view.schema.field_names()
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise InvalidFilterError(
            f"unknown column '{unknown[0]}' in the projection (columns: {', '.join(names)})"
        )
    return list(columns)


def read_split(
    state: TableState,
    split: Split,
    projection: Projection,
    *,
    columns: Sequence[str] | None = None,
    row_filter: Filter | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one split, file by file in order (so in write order within a bucket), as
    the projection's schema."""
    for file in split.files:
        yield from read_as(state.storage, file, projection, columns=columns, row_filter=row_filter)


def expiry_reported(
    state: TableState, split: Split, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``batches`` (the rows of ``split``), where a data file found missing because the split's
    snapshot expired since it was planned (no tag holds it) is reported as
    SnapshotExpiredError, not as a file deleted outside the table."""
    try:
        yield from batches
    except ObjectNotFoundError:
        tags = TagStore(state.storage).all().values()
        if all(tag.snapshot.id != split.snapshot_id for tag in tags):
            state.snapshots.check_retained(split.snapshot_id)
        raise


class Scan:
    """A read of one snapshot, fixed when the scan is created, in the schema that snapshot
    has (time travel returns the columns of its time; files written under other schema
    versions are read by field id).

    ``plan()`` lists the splits; ``to_arrow()`` / ``to_batches()`` / ``to_pandas()`` read them;
    ``count()`` answers from metadata alone when the filter allows it.

    Other engines take a scan as an Arrow stream (``to_arrow_reader()``, or the scan itself
    through the Arrow PyCapsule protocol: ``pa.table(scan)``, ``polars.DataFrame(scan)``,
    DuckDB), as a pyarrow dataset of its snapshot's files that they scan with their own
    filters (``to_dataset()``), or directly (``to_polars()``, ``to_duckdb()``).
    """

    def __init__(
        self,
        state: TableState,
        snapshot: Snapshot | None,
        *,
        columns: Sequence[str] | None = None,
        filter: object = None,
        from_tag: bool = False,
    ) -> None:
        self._state = state
        self.snapshot = snapshot
        #: A tag's snapshot stays readable after it leaves the log (the tag keeps its files).
        self._from_tag = from_tag
        self.view = state.view_at(snapshot) if snapshot is not None else state.view
        self._projection = state.projection(self.view)
        self.columns = check_columns(self.view, columns)
        self.filter = parse_filter(filter, self.view.column_types)
        self._splits: list[Split] | None = None

    def _check_retained(self) -> None:
        """Raise SnapshotExpiredError if the scanned snapshot has left the log since (another
        process expired it: its files may be gone), whatever this handle still caches."""
        snapshot = self.snapshot
        if snapshot is not None and not self._from_tag:
            self._state.snapshots.check_retained(snapshot.id)

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Around reads of metadata and data files: a file that went missing because the
        snapshot expired meanwhile is reported as SnapshotExpiredError."""
        try:
            yield
        except ObjectNotFoundError:
            self._check_retained()
            raise

    def plan(self) -> list[Split]:
        """The splits to read, in read order (computed once per scan)."""
        self._check_retained()
        if self._splits is None:
            if self.snapshot is None:
                self._splits = []
            else:
                with self._reading():  # its manifests go if the snapshot expires meanwhile
                    entries = plan_entries(
                        self._state,
                        self.snapshot,
                        self.filter,
                        projection=self._projection,
                        view=self.view,
                    )
                self._splits = splits_of(self.view, self.snapshot, entries)
        return self._splits

    @property
    def output_schema(self) -> pa.Schema:
        schema = self.view.arrow_schema
        if self.columns is None:
            return schema
        return pa.schema([schema.field(name) for name in self.columns])

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Record batches split by split, in read order."""
        splits = self.plan()
        with self._reading():
            for split in splits:
                yield from read_split(
                    self._state,
                    split,
                    self._projection,
                    columns=self.columns,
                    row_filter=self.filter,
                )

    def to_arrow(self) -> pa.Table:
        """All matching rows as one table, in read order (a multi-threaded scan of the planned
        files, which keeps their order)."""
        files = [file for split in self.plan() for file in split.files]
        if not files:
            return empty_table(self.output_schema)
        with self._reading():
            return read_files_as(
                self._state.storage,
                files,
                self._projection,
                columns=self.columns,
                row_filter=self.filter,
            )

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()

    def to_arrow_reader(self) -> pa.RecordBatchReader:
        """The matching rows as a ``pyarrow.RecordBatchReader`` in read order (the batches of
        ``to_batches()``): planned now (metadata only), each data file opened only when the
        consumer reaches it, so memory holds about one row group at a time, never the whole
        scan."""
        self.plan()
        return handoff.stream_of(self.output_schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream protocol: a new ``to_arrow_reader()`` per call, so
        ``pa.table(scan)``, ``polars.DataFrame(scan)`` and DuckDB read the scan without a
        copy, as often as they like (always the same snapshot)."""
        return self.to_arrow_reader().__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> object:
        """The Arrow PyCapsule schema protocol: ``output_schema`` (``pa.schema(scan)``)."""
        return self.output_schema.__arrow_c_schema__()

    def to_dataset(self) -> ds.Dataset:
        """A ``pyarrow.dataset.Dataset`` of the scan's snapshot (never a later commit), for
        engines that push their own projections and filters down (DuckDB, Polars'
        ``scan_pyarrow_dataset``, DataFusion).

        Its schema is ``output_schema``: the snapshot's schema, projected to the scan's
        columns. Its files are the planned ones, each with its partition values as a
        partition expression (an engine's filter on partition columns skips files unopened).
        A filter on partition keys only is applied exactly by that file selection; any other
        filter raises ``InvalidFilterError``, because a dataset cannot carry a row filter that
        every engine honours (filter in the engine instead, or read with
        ``to_arrow_reader()``). Files of older schema versions that cannot be read by column
        name (a renamed column, say) are read now, by field id, into an in-memory part of
        the dataset (compaction rewrites them in the current schema). A dataset has no row
        order; for the scan's order use ``to_arrow_reader()``."""
        keys = set(self.view.schema.partition_keys)
        if self.filter is not None and not self.filter.columns <= keys:
            others = sorted(self.filter.columns - keys)
            raise InvalidFilterError(
                f"to_dataset() cannot apply the scan's filter on {', '.join(others)}: a dataset "
                "has no row filter that every engine applies (only filters on partition keys "
                "select whole files); filter in the engine, or use to_arrow_reader() / "
                "to_duckdb() / to_polars(), which apply the scan's filter"
            )
        return handoff.dataset_of(
            self._state.storage, self._projection, self.plan(), self.output_schema
        )

    def to_polars(self) -> Any:
        """The matching rows as a ``polars.DataFrame`` (needs ``appendtable[polars]``)."""
        polars = handoff.optional_module("polars", "polars", "Scan.to_polars()")
        return polars.from_arrow(self.to_arrow())

    def to_duckdb(self, connection: Any = None) -> Any:
        """The matching rows as a DuckDB relation on ``connection`` (default: DuckDB's
        default connection; needs ``appendtable[duckdb]``). The relation reads the scan's
        snapshot lazily, every time it runs, through a dataset of its files with the scan's
        whole filter applied (any filter, unlike ``to_dataset()``, which takes filters on
        partition keys only), so DuckDB pushes its own filters and projections down too. On
        stores pyarrow reaches through a Python file system (``memory://``, Azure, GCS with
        other than default credentials) it reads the scan's own Arrow stream instead, a new
        one each run (DuckDB's dataset scan deadlocks on those); DuckDB then filters and
        projects after reading."""
        duckdb = handoff.optional_module("duckdb", "duckdb", "Scan.to_duckdb()")
        if connection is None:
            default = duckdb.default_connection  # a function since DuckDB 1.1, once an object
            connection = default() if callable(default) else default
        if handoff.bridged_filesystem(self._state.storage):
            # DuckDB 2 starts pyarrow's dataset scan holding the GIL, and pyarrow's reads through
            # a Python file system wait for it: they deadlock. The scan's own stream (a new
            # one each time the relation runs, through __arrow_c_stream__) does not.
            return connection.from_arrow(self)
        columns = self.output_schema.names
        needed = set(columns) | (self.filter.columns if self.filter is not None else set())
        names = [name for name in self.view.arrow_schema.names if name in needed]
        schema = pa.schema([self.view.arrow_schema.field(name) for name in names])
        dataset = handoff.dataset_of(
            self._state.storage, self._projection, self.plan(), schema, row_filter=self.filter
        )
        if self.filter is not None:
            dataset = dataset.filter(to_expression(self.filter))
        return handoff.duckdb_relation(connection, dataset, columns)

    def count(self) -> int:
        """The number of matching rows. Without a filter, or with one on partition keys only,
        this reads no data file."""
        splits = self.plan()
        keys = set(self.view.schema.partition_keys)
        if self.filter is None or self.filter.columns <= keys:
            return sum(split.row_count for split in splits)
        total = 0
        with self._reading():
            for split in splits:
                for file in split.files:
                    for batch in read_as(
                        self._state.storage,
                        file,
                        self._projection,
                        columns=[],
                        row_filter=self.filter,
                    ):
                        total += batch.num_rows
        return total

    def __repr__(self) -> str:
        return display.scan_repr(self.snapshot, self.columns, self.filter, self._splits)

    def _repr_html_(self) -> str:
        return display.scan_html(self.snapshot, self.columns, self.filter, self._splits)
