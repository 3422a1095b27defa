"""Offsets of the streaming source: positions, fixed once, that say which rows a batch holds.

A :class:`Position` is a point in the stream: the unit of snapshot ``snapshot`` (its whole
contents when ``full``, else the files it added), of which the first ``file`` data files in
write order (sequence number, then path: an order that no option changes) were delivered
already. ``floor``: the full unit of a ``from-file-creation-time`` start holds only the files
created at or after it. ``snapshot`` None stands for "the latest snapshot once there is one" (a
``latest-full`` start on an empty table).

Spark's offsets (JSON objects):

* the initial offset is a constant, ``{"initial": true}``: a query's start is resolved from
  its options when its first micro-batch is planned, never again;
* every micro-batch end is a :class:`BatchEnd`: the position after the batch, plus ``from``,
  the position the batch started at (for batch 0, the resolved start), and ``overwrite`` when
  OVERWRITE snapshots were read as rows. Spark writes the end to the checkpoint
  (``offsets/N``) before the batch runs, so a replay of any batch, the first one included,
  reads exactly the same rows, whatever the options of the restarted query.

Offsets of older versions (``{"snapshot", "full", "split"}``, without ``from``) are read at
split 0 (a unit boundary); a position inside a unit cannot be carried over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import appendtable as at

__all__ = ["INITIAL", "BatchEnd", "Position", "is_initial"]

#: The initial offset of every query (its start is resolved by its first micro-batch).
INITIAL: dict[str, Any] = {"initial": True}


def is_initial(offset: dict[str, Any]) -> bool:
    return bool(offset.get("initial"))


@dataclass(frozen=True)
class Position:
    """Where the stream continues (see the module docstring)."""

    snapshot: int | None
    full: bool
    file: int = 0
    floor: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"snapshot": self.snapshot, "full": self.full, "file": self.file}
        if self.floor is not None:
            data["floor"] = self.floor
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> Position:
        """A position, also from an offset of an older version (split 0 only)."""
        if "file" not in data and "snapshot" in data:
            return _legacy(data)
        try:
            snapshot, full = data["snapshot"], bool(data.get("full", False))
            position = Position(snapshot, full, int(data["file"]), data.get("floor"))
        except (KeyError, TypeError, ValueError) as exc:
            raise at.InvalidArgumentError(f"not an appendtable stream offset: {data!r}") from exc
        if position.file < 0 or (position.snapshot is not None and position.snapshot < 1):
            raise at.InvalidArgumentError(f"not an appendtable stream offset: {data!r}")
        return position

    @property
    def unit(self) -> at.StreamPosition:
        """The core's position of the unit this position is in."""
        return at.StreamPosition(self.snapshot, self.full)

    def describe(self) -> str:
        """For messages: ``snapshot 7 (all of it, after 3 files)``."""
        if self.snapshot is None:
            return "the latest snapshot (once there is one)"
        what = "all of it" if self.full else "the files it added"
        after = f", after {self.file} file(s)" if self.file else ""
        return f"snapshot {self.snapshot} ({what}{after})"


def _legacy(data: dict[str, Any]) -> Position:
    """``{"snapshot", "full", "split", "base"}`` of version 0.1: ``base`` resolved a null
    snapshot; ``split`` counted splits, whose sizes options can change."""
    snapshot, full = data["snapshot"], bool(data.get("full", False))
    if snapshot is None and data.get("base") is not None:
        snapshot, full = int(data["base"]), True
    if int(data.get("split", 0)) != 0:
        raise at.InvalidArgumentError(
            f"the checkpoint's offset {data!r} was written by an older appendtable_spark and "
            "points inside a snapshot, which this version cannot continue exactly: finish the "
            "query with the version that wrote it, or start a new checkpoint"
        )
    return Position(snapshot, full)


@dataclass(frozen=True)
class BatchEnd:
    """The end offset of a micro-batch: the rows from ``start`` up to ``end``."""

    start: Position
    end: Position
    #: OVERWRITE snapshots were read as rows (``streaming-read-append-overwrite``).
    overwrite: bool = False

    def to_json(self) -> dict[str, Any]:
        data = self.end.to_json()
        data["from"] = self.start.to_json()
        if self.overwrite:
            data["overwrite"] = True
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> BatchEnd | None:
        """The batch an end offset describes; None for an offset without ``from`` (older
        versions, or the initial offset)."""
        if is_initial(data) or "from" not in data:
            return None
        return BatchEnd(
            Position.from_json(data["from"]),
            Position.from_json(data),
            bool(data.get("overwrite", False)),
        )
