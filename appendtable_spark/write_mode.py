"""What a write does to the table, decided once per write and carried to its commit.

Spark tells a data source only whether a write overwrites (``mode("append")`` or
``mode("overwrite")``, SQL ``INSERT INTO`` or ``INSERT OVERWRITE``, a streaming query's output
mode). Which rows an overwrite replaces comes from the write's options: ``overwritePartitions``
(static partitions) or ``partitionOverwriteMode`` = ``dynamic`` (the partitions the write has
rows in); ``write_table`` also takes ``partitions=`` and honours the session's
``spark.sql.sources.partitionOverwriteMode``. ``resolve`` makes one ``WriteMode`` of them;
``commit_files`` commits by it; ``format_write`` says it to the format again, as Spark's mode
and options, when ``write_table`` writes through ``df.write.format("appendtable")``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, assert_never, get_args

import appendtable as at
from appendtable_spark import options as registry

__all__ = [
    "SPARK_MODES",
    "Append",
    "OverwriteDynamic",
    "OverwritePartitions",
    "OverwriteTable",
    "SparkMode",
    "WriteMode",
    "commit_files",
    "format_write",
    "resolve",
]

#: The modes ``write_table(mode=...)`` takes: Spark's ``DataFrameWriter.mode`` values.
SparkMode = Literal["append", "overwrite"]
SPARK_MODES: tuple[SparkMode, ...] = get_args(SparkMode)


@dataclass(frozen=True)
class Append:
    """Add the rows: one APPEND snapshot."""


@dataclass(frozen=True)
class OverwriteTable:
    """Replace every row of the table: one OVERWRITE snapshot."""


@dataclass(frozen=True)
class OverwritePartitions:
    """Replace the rows of these static partitions (a row of any other partition fails the
    write, and nothing lands)."""

    partitions: tuple[dict[str, object], ...]


@dataclass(frozen=True)
class OverwriteDynamic:
    """Replace the rows of the partitions the write has rows in."""


WriteMode = Append | OverwriteTable | OverwritePartitions | OverwriteDynamic


def resolve(
    overwrite: bool, *, partitions: Sequence[dict[str, object]], dynamic: bool
) -> WriteMode:
    """The mode of a write Spark says appends or overwrites, with the options saying which
    partitions an overwrite replaces (only an overwrite reads them)."""
    if not overwrite:
        return Append()
    if partitions:
        return OverwritePartitions(tuple(partitions))
    if dynamic:
        return OverwriteDynamic()
    return OverwriteTable()


def commit_files(
    committer: at.TableCommit,
    messages: Iterable[at.CommitMessage],
    mode: WriteMode,
    *,
    base_snapshot_id: int | None,
    identifier: int | None,
    owner: str,
) -> at.Snapshot | None:
    """Commit the written files as ``mode`` says (None: this identifier had landed)."""
    match mode:
        case Append():
            return committer.commit(messages, identifier=identifier, owner=owner)
        case OverwriteTable():
            return committer.overwrite(
                messages, base_snapshot_id=base_snapshot_id, identifier=identifier, owner=owner
            )
        case OverwritePartitions(partitions=partitions):
            return committer.overwrite(
                messages,
                partitions=list(partitions),
                base_snapshot_id=base_snapshot_id,
                identifier=identifier,
                owner=owner,
            )
        case OverwriteDynamic():
            return committer.overwrite(
                messages,
                dynamic=True,
                base_snapshot_id=base_snapshot_id,
                identifier=identifier,
                owner=owner,
            )
        case _:
            assert_never(mode)


#: The options saying which partitions an overwrite replaces (``format_write`` sets them).
MODE_OPTIONS = (registry.OVERWRITE_PARTITIONS, registry.PARTITION_OVERWRITE_MODE)


def format_write(mode: WriteMode) -> tuple[SparkMode, dict[str, str]]:
    """``mode`` as Spark's mode and the format's options (of ``MODE_OPTIONS``) saying it."""
    match mode:
        case Append():
            return "append", {}
        case OverwriteTable():
            return "overwrite", {}
        case OverwritePartitions(partitions=partitions):
            specs = json.dumps(list(partitions), default=str)
            return "overwrite", {registry.OVERWRITE_PARTITIONS.name: specs}
        case OverwriteDynamic():
            return "overwrite", {registry.PARTITION_OVERWRITE_MODE.name: "dynamic"}
        case _:
            assert_never(mode)
