"""appendtable: Apache Paimon-style append tables in pure Python.

Tables without a primary key, insert only, stored as Parquet files plus immutable metadata:
atomic snapshots, time travel, pruned batch scans, ordered streaming reads and compaction.

    import appendtable, pyarrow as pa
    table = appendtable.create_table("/tmp/events", schema, partition_by=["day"],
                                     options={"bucket": 4, "bucket-key": "user_id"})
    table.append(batch)
    table.scan(filter=[("user_id", "=", 42)]).to_arrow()
"""

from appendtable.commit.discard import DiscardResult
from appendtable.commit.metadata_cache import clear_metadata_caches
from appendtable.compaction import CompactionPlan, CompactionProgress, Compactor
from appendtable.datafiles.table_write import TableWriter
from appendtable.deletes import DeleteResult
from appendtable.errors import (
    AppendTableError,
    AtomicCreateUnsupportedError,
    CommitConflictError,
    CommitError,
    CommitStateUnknownError,
    CommitUserReusedError,
    ConsumerFencedError,
    CorruptDataFileError,
    CorruptMetadataError,
    InvalidArgumentError,
    InvalidFilterError,
    InvalidOptionError,
    InvalidSchemaError,
    ObjectExistsError,
    ObjectNotFoundError,
    PathOutsideTableError,
    PurgeBlockedError,
    SchemaChangeError,
    SchemaMismatchError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    TagExistsError,
    TagNotFoundError,
    TransientStorageError,
    UnsupportedFormatVersionError,
)
from appendtable.group import ConsumerGroup, GroupReader
from appendtable.lag import LAG_SCHEMA
from appendtable.maintenance import ExpireResult, OrphanResult
from appendtable.metadata.models import (
    CommitKind,
    CommitMessage,
    CommitUserRecord,
    CompactionTask,
    DataFileMeta,
    Snapshot,
    Split,
)
from appendtable.metadata.options import option_keys
from appendtable.metadata.options import parse_options as check_options
from appendtable.planning.bucket import bucket_ids
from appendtable.planning.filters import filter_clauses
from appendtable.planning.operators import FilterOp, FilterOperands, FilterOperator, filter_operator
from appendtable.scan import Scan
from appendtable.schema_text import format_schema, format_type
from appendtable.schema_update import UpdateSchema
from appendtable.staging import StagingArea
from appendtable.storage import FileInfo, Storage, StorageFactory, register_storage
from appendtable.stream import END_OF_STREAM, StreamPosition, StreamReader, StreamUnit
from appendtable.system import (
    SYSTEM_TABLE_NAMES,
    SystemTableInfo,
    system_table_info,
    system_table_schema,
)
from appendtable.table import Table, create_table, open_table
from appendtable.table_commit import TableCommit

__version__ = "0.1.0"

__all__ = [
    "AppendTableError",
    "AtomicCreateUnsupportedError",
    "CommitConflictError",
    "CommitError",
    "CommitKind",
    "CommitMessage",
    "CommitStateUnknownError",
    "CommitUserRecord",
    "CommitUserReusedError",
    "CompactionPlan",
    "CompactionProgress",
    "CompactionTask",
    "Compactor",
    "ConsumerFencedError",
    "ConsumerGroup",
    "CorruptDataFileError",
    "CorruptMetadataError",
    "DataFileMeta",
    "DeleteResult",
    "DiscardResult",
    "END_OF_STREAM",
    "ExpireResult",
    "FileInfo",
    "FilterOp",
    "FilterOperands",
    "FilterOperator",
    "GroupReader",
    "LAG_SCHEMA",
    "InvalidArgumentError",
    "InvalidFilterError",
    "InvalidOptionError",
    "InvalidSchemaError",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "PathOutsideTableError",
    "PurgeBlockedError",
    "OrphanResult",
    "Scan",
    "SchemaChangeError",
    "SchemaMismatchError",
    "Snapshot",
    "SnapshotExpiredError",
    "SnapshotNotFoundError",
    "Split",
    "StagingArea",
    "Storage",
    "StorageError",
    "StorageFactory",
    "StreamPosition",
    "StreamReader",
    "StreamUnit",
    "SYSTEM_TABLE_NAMES",
    "SystemTableInfo",
    "Table",
    "TableCommit",
    "TableExistsError",
    "TableNotFoundError",
    "TableWriter",
    "TagExistsError",
    "TagNotFoundError",
    "TransientStorageError",
    "UnsupportedFormatVersionError",
    "UpdateSchema",
    "__version__",
    "bucket_ids",
    "check_options",
    "clear_metadata_caches",
    "create_table",
    "filter_clauses",
    "filter_operator",
    "format_schema",
    "format_type",
    "open_table",
    "option_keys",
    "register_storage",
    "system_table_info",
    "system_table_schema",
]
