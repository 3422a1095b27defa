"""Which snapshot a DataFrame reads, and in which schema version.

A batch DataFrame reads one snapshot, pinned when it is defined, in the schema that snapshot
had (time travel returns the columns of its time). Splits carry the schema version they are
read as; ``retarget`` reads one as the DataFrame's version, whatever the versions of its files
(the core matches their columns by field id).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pyarrow as pa

import appendtable as at
from appendtable_spark.settings import Settings

__all__ = ["ReadPin", "current_schema", "pin", "retarget"]


@dataclass(frozen=True)
class ReadPin:
    """What a batch DataFrame reads: one snapshot (None: the table had none), through a tag
    when one named it (a tagged snapshot stays readable after it expires), and the schema
    version its Spark schema is."""

    snapshot_id: int | None
    tag: str | None
    schema_id: int
    #: Why the snapshot could not be found (a stream's start options need not name one that
    #: a batch read could use): raised by ``scan``.
    missing: str | None = None

    def scan(self, table: at.Table, *, filter: object = None) -> at.Scan:
        """A scan of the pinned snapshot (SnapshotNotFoundError if it is gone, or if the tag
        now names another snapshot)."""
        if self.missing is not None:
            raise at.SnapshotNotFoundError(self.missing)
        if self.tag is None:
            return table.scan(snapshot_id=self.snapshot_id, filter=filter)
        scan = table.scan(tag=self.tag, filter=filter)
        found = scan.snapshot.id if scan.snapshot is not None else None
        if found != self.snapshot_id:
            raise at.SnapshotNotFoundError(
                f"tag '{self.tag}' now names snapshot {found}, not snapshot {self.snapshot_id} "
                "as when this DataFrame was defined: load it again"
            )
        return scan


def retarget(split: at.Split, schema_id: int | None) -> at.Split:
    """``split`` read as schema version ``schema_id`` (None: as planned)."""
    if schema_id is None or split.schema_id == schema_id:
        return split
    return msgspec.structs.replace(split, schema_id=schema_id)


def current_schema(table: at.Table) -> tuple[pa.Schema, int]:
    """The current schema and its id, read consistently."""
    while True:
        schema_id = table.schema_id
        schema = table.schema
        if table.schema_id == schema_id:
            return schema, schema_id


def pin(table: at.Table, settings: Settings) -> tuple[ReadPin, pa.Schema]:
    """The snapshot a batch read uses and the DataFrame's schema.

    Batch reads: the snapshot named by ``scan.snapshot-id``, ``scan.timestamp-millis`` or
    ``scan.tag-name`` (else the latest), in the schema it had. With ``scan.mode`` (options of a
    stream, whose start options say where it starts, not what it looks like) the schema is the
    current one, which a stream keeps, and a batch read maps that snapshot's rows onto it."""
    snapshot_id, timestamp, tag = settings.read_target()
    stream = bool(settings.format_options.get("scan.mode"))
    try:
        if tag is not None:
            scan = table.scan(tag=tag)
        else:
            scan = table.scan(snapshot_id=snapshot_id, timestamp_ms=timestamp)
    except (at.SnapshotNotFoundError, at.TagNotFoundError) as exc:
        if not stream:  # a stream's start options may name what is gone: a restart skips them
            raise
        schema, schema_id = current_schema(table)
        return ReadPin(None, None, schema_id, missing=str(exc)), schema
    snapshot = scan.snapshot
    pinned = snapshot.id if snapshot is not None else None
    if stream or snapshot is None:
        schema, schema_id = current_schema(table)
        return ReadPin(pinned, tag, schema_id), schema
    return ReadPin(pinned, tag, snapshot.schema_id), scan.output_schema
