"""The files of consumer groups: where they live and what they hold (layer 1, pure).

::

    consumer/groups/<group>/generation-<n>       who is in the group and which units each reads
    consumer/groups/<group>/member-<member>      a member's lease (renewed by that member only)
    consumer/groups/<group>/progress/<unit>/<k>  the k-th progress record of one unit

A *unit* is what a group shares: a bucket of a bucketed table (across all partitions), or, for
a table with ``bucket = -1``, a file slot (each data file belongs to one slot, by its name).

Generations and progress records are immutable and created put-if-absent, like snapshots: a
change of membership is the next generation, a commit of a unit's progress is its next record.
They live under ``consumer/`` so that everything that protects consumers (orphan removal,
copies of a table's readers' state) protects groups too; ``consumer/consumer-<id>`` files are
never confused with them (a consumer id cannot contain ``/``).
"""

from __future__ import annotations

import msgspec

from appendtable.metadata.layout import CONSUMER_DIR, validate_consumer_id

__all__ = [
    "GROUPS_DIR",
    "GroupGeneration",
    "GroupMember",
    "MemberLease",
    "UnitProgress",
    "generation_id",
    "generation_path",
    "group_dir",
    "lease_member",
    "lease_path",
    "progress_dir",
    "progress_key",
    "progress_path",
    "unit_dir",
]

GROUPS_DIR = f"{CONSUMER_DIR}/groups"
GENERATION_PREFIX = "generation-"
LEASE_PREFIX = "member-"


class GroupMember(msgspec.Struct, frozen=True, kw_only=True):
    """One member in a generation: the process (``session``) that holds the name, and the
    units it reads in that generation."""

    session: str
    units: tuple[int, ...]


class GroupGeneration(msgspec.Struct, frozen=True, kw_only=True):
    """``generation-<n>``: the members of the group and the units each one reads.

    ``units`` and ``by_file`` are fixed when the group is created (bucket count, or file slots
    of an unbucketed table); ``start_snapshot``/``start_full`` is where a unit without any
    progress record starts. ``writer`` (the session that wrote it) makes the file's bytes
    unique, which the put-if-absent of object stores needs. ``incarnation`` is chosen when the
    group is created (generation 1) and kept by every later generation: a group deleted (or
    expired) and created again has another, which tells a member still following the old one
    that its group is gone even where the numbers meet again ('' in groups of versions before
    it was recorded)."""

    generation: int
    units: int
    by_file: bool
    start_snapshot: int
    start_full: bool
    members: dict[str, GroupMember]
    time_ms: int
    reason: str
    writer: str
    incarnation: str = ""

    def owner(self, unit: int) -> str | None:
        for name, member in self.members.items():
            if unit in member.units:
                return name
        return None


class MemberLease(msgspec.Struct, frozen=True, kw_only=True):
    """``member-<member>``: the member is alive while it renews this file within ``lease_ms``
    of ``renewed_ms`` (its own wall clock). Rewritten in place by that member only.
    ``generation`` is the newest generation it has acted on; ``polled_ms``/``committed_ms``
    when it last polled and last committed progress (0: never), for lag reports."""

    session: str
    generation: int
    renewed_ms: int
    lease_ms: int
    polled_ms: int = 0
    committed_ms: int = 0
    host: str = ""
    pid: int = 0


class UnitProgress(msgspec.Struct, frozen=True, kw_only=True):
    """``progress/<unit>-<seq>``: the unit's next position once records ``1..seq`` are applied.

    Record ``seq + 1`` can be created only once (put-if-absent), by the member that knows
    record ``seq``: so the records of a unit are one chain, and a member whose unit was claimed
    by another cannot append to it any more (fencing). ``claim`` marks the record a member
    writes when it takes the unit over (same position as the one before it)."""

    unit: int
    seq: int
    generation: int
    member: str
    session: str
    next_snapshot: int
    full: bool
    time_ms: int
    claim: bool = False


def group_dir(group: str) -> str:
    return f"{GROUPS_DIR}/{validate_consumer_id(group)}"


def generation_path(group: str, generation: int) -> str:
    return f"{group_dir(group)}/{GENERATION_PREFIX}{generation}"


def generation_id(name: str) -> int | None:
    """The number of a ``generation-<n>`` file name, None for anything else."""
    base = name.rsplit("/", 1)[-1]
    if not base.startswith(GENERATION_PREFIX):
        return None
    digits = base[len(GENERATION_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def lease_path(group: str, member: str) -> str:
    return f"{group_dir(group)}/{LEASE_PREFIX}{validate_consumer_id(member)}"


def lease_member(name: str) -> str | None:
    """The member of a ``member-<member>`` file name, None for anything else."""
    base = name.rsplit("/", 1)[-1]
    if not base.startswith(LEASE_PREFIX) or base.startswith("."):
        return None
    return base[len(LEASE_PREFIX) :] or None


def progress_dir(group: str) -> str:
    return f"{group_dir(group)}/progress"


def unit_dir(group: str, unit: int) -> str:
    return f"{progress_dir(group)}/{unit}"


def progress_path(group: str, unit: int, seq: int) -> str:
    return f"{unit_dir(group, unit)}/{seq}"


def progress_key(path: str) -> tuple[int, int] | None:
    """(unit, seq) of a progress record's path (``.../<unit>/<seq>``), None for anything else
    (temp files)."""
    parts = path.rsplit("/", 2)
    if len(parts) < 2 or not parts[-1].isdigit() or not parts[-2].isdigit():
        return None
    return int(parts[-2]), int(parts[-1])
