"""The measured floor of the Python Data Source API: a data source that
reads and writes plain Parquet files with pyarrow and does nothing else.

It is what any Python data source pays on this machine to move the same rows between the JVM
and Python workers as Arrow batches: the format's reads and writes are compared with it, so
what the format adds on top (snapshots, statistics, checksums, commits) shows separately from
the cost of the API itself.

* Read: option ``files`` (a JSON list of Parquet files); one task per file, each file read
  with ``pyarrow.parquet.ParquetFile.iter_batches`` and yielded as Arrow batches (relabelled
  with the Arrow schema Spark expects, no cast).
* Write: option ``path`` (a directory); one file per task, written with ``ParquetWriter``
  (zstd level 1, row groups of up to 1 Mi rows: the table's defaults), no checksums, no
  statistics of its own, no fsync; ``commit`` only collects the file names.

Registered in the benchmark's session as format ``parquet-floor``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

__all__ = ["FLOOR_FORMAT", "FloorDataSource"]

FLOOR_FORMAT = "parquet-floor"
_BATCH_ROWS = 64 * 1024
_ROW_GROUP_ROWS = 1024 * 1024


@dataclass
class FilePartition(InputPartition):  # type: ignore[misc]
    """One task: one Parquet file."""

    path: str


@dataclass
class WrittenFile(WriterCommitMessage):  # type: ignore[misc]
    """What one task wrote (no file for a task without rows)."""

    names: list[str] = field(default_factory=list)


class FloorReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, files: list[str], schema: StructType) -> None:
        self._files = files
        self._schema = schema

    def partitions(self) -> list[FilePartition]:
        return [FilePartition(path) for path in self._files]

    def read(self, partition: FilePartition) -> Iterator[pa.RecordBatch]:
        target = to_arrow_schema(self._schema, timezone="UTC")
        source = pq.ParquetFile(partition.path)
        for batch in source.iter_batches(batch_size=_BATCH_ROWS, columns=target.names):
            yield pa.RecordBatch.from_arrays(batch.columns, schema=target)


class FloorWriter(DataSourceArrowWriter):  # type: ignore[misc]
    def __init__(self, directory: str) -> None:
        self._directory = directory
        self.committed: list[str] = []

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFile:
        name = f"part-{uuid.uuid4().hex}.parquet"
        writer: pq.ParquetWriter | None = None
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch in iterator:
            pending.append(batch)
            rows += batch.num_rows
            if rows >= _ROW_GROUP_ROWS:
                writer = _flush(writer, pending, os.path.join(self._directory, name))
                pending, rows = [], 0
        if pending:
            writer = _flush(writer, pending, os.path.join(self._directory, name))
        if writer is None:
            return WrittenFile()
        writer.close()
        return WrittenFile([name])

    def commit(self, messages: list[WrittenFile | None]) -> None:
        self.committed = [name for m in messages if m is not None for name in m.names]

    def abort(self, messages: list[WrittenFile | None]) -> None:
        for message in messages:
            for name in message.names if message is not None else []:
                os.remove(os.path.join(self._directory, name))


def _flush(
    writer: pq.ParquetWriter | None, batches: list[pa.RecordBatch], path: str
) -> pq.ParquetWriter:
    table = pa.Table.from_batches(batches)
    if writer is None:
        writer = pq.ParquetWriter(path, table.schema, compression="zstd", compression_level=1)
    writer.write_table(table, row_group_size=table.num_rows)
    return writer


class FloorDataSource(DataSource):  # type: ignore[misc]
    """``format("parquet-floor")``: option ``files`` (JSON list) to read, ``path`` to write."""

    @classmethod
    def name(cls) -> str:
        return FLOOR_FORMAT

    def _files(self) -> list[str]:
        files = json.loads(self.options["files"])
        assert isinstance(files, list)
        return [str(path) for path in files]

    def schema(self) -> StructType:
        from_arrow = pq.read_schema(self._files()[0])
        return StructType.fromJson(_spark_json(from_arrow))

    def reader(self, schema: StructType) -> FloorReader:
        return FloorReader(self._files(), schema)

    def writer(self, schema: StructType, overwrite: bool) -> FloorWriter:
        directory = str(self.options["path"])
        os.makedirs(directory, exist_ok=True)
        return FloorWriter(directory)


def _spark_json(schema: pa.Schema) -> dict[str, object]:
    """The Spark schema (as JSON) of the flat Arrow schemas the benchmark uses."""
    names = {
        pa.int64(): "long",
        pa.int32(): "integer",
        pa.float64(): "double",
        pa.string(): "string",
        pa.large_string(): "string",
    }
    return {
        "type": "struct",
        "fields": [
            {"name": f.name, "type": names[f.type], "nullable": True, "metadata": {}}
            for f in schema
        ],
    }
