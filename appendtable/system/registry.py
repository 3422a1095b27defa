"""Every system table by name: its declaration (``SystemTableInfo``) and how it is built."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping

import pyarrow as pa

from appendtable._state import TableState
from appendtable.errors import InvalidArgumentError
from appendtable.metadata.models import Snapshot
from appendtable.system.aggregates import BUCKETS, PARTITIONS, buckets_table, partitions_table
from appendtable.system.columns import SystemTableInfo
from appendtable.system.files import FILES, MANIFESTS, files_table, manifests_table
from appendtable.system.log import (
    CONSUMERS,
    OPTIONS,
    SCHEMAS,
    SNAPSHOTS,
    TAGS,
    consumers_table,
    options_table,
    schemas_table,
    snapshots_table,
    tags_table,
)

__all__ = [
    "SYSTEM_TABLE_NAMES",
    "build_system_table",
    "read_system_table",
    "system_table_info",
    "system_table_schema",
]

#: Builds a system table of a table; the snapshot is the one read (time travel), or None.
Builder = Callable[[TableState, Snapshot | None], pa.Table]

_TABLES: dict[str, tuple[SystemTableInfo, Builder]] = {
    info.name: (info, build)
    for info, build in (
        (SNAPSHOTS, snapshots_table),
        (SCHEMAS, schemas_table),
        (OPTIONS, options_table),
        (TAGS, tags_table),
        (CONSUMERS, consumers_table),
        (FILES, files_table),
        (MANIFESTS, manifests_table),
        (PARTITIONS, partitions_table),
        (BUCKETS, buckets_table),
    )
}

#: The names of the system tables, in the order the docs list them.
SYSTEM_TABLE_NAMES: tuple[str, ...] = tuple(_TABLES)


def system_table_info(name: object) -> SystemTableInfo:
    """The declaration of system table ``name``. InvalidArgumentError for an unknown name,
    with the closest known name and the list of names."""
    if isinstance(name, str) and name in _TABLES:
        return _TABLES[name][0]
    text = name if isinstance(name, str) else repr(name)
    close = difflib.get_close_matches(text.lower().lstrip("$"), SYSTEM_TABLE_NAMES, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise InvalidArgumentError(
        f"unknown system table {text!r}{hint} (system tables: {', '.join(SYSTEM_TABLE_NAMES)})"
    )


def system_table_schema(name: str) -> pa.Schema:
    """The Arrow schema of system table ``name`` (what every read of it returns, rows or
    not), without opening a table; each field's metadata ``doc`` describes it.
    InvalidArgumentError for an unknown name."""
    return system_table_info(name).schema


def build_system_table(state: TableState, name: str, snapshot: Snapshot | None) -> pa.Table:
    """System table ``name`` of the table of ``state`` (as of ``snapshot`` for the tables
    that time-travel; the latest when None)."""
    info = system_table_info(name)
    return _TABLES[info.name][1](state, snapshot)


def read_system_table(
    state: TableState,
    name: object,
    *,
    when: Mapping[str, object],
    pick: Callable[[], Snapshot | None],
) -> pa.Table:
    """What ``Table.system_table`` returns: system table ``name``, as of the snapshot ``pick``
    chooses from the time-travel arguments ``when`` (keyword: value, None when not given),
    which only the tables that time-travel accept. InvalidArgumentError otherwise."""
    info = system_table_info(name)
    if info.time_travel:
        return build_system_table(state, info.name, pick())
    given = [key for key, value in when.items() if value is not None]
    if given:
        travels = ", ".join(n for n, (i, _) in _TABLES.items() if i.time_travel)
        raise InvalidArgumentError(
            f"the {info.name} system table describes the table as it is now: {given[0]} "
            f"applies only to {travels}"
        )
    return build_system_table(state, info.name, None)
