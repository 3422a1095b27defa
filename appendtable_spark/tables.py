"""Open tables cached per worker process (Spark reuses Python workers between tasks)."""

from __future__ import annotations

import json
import threading

import appendtable as at
from appendtable_spark.settings import Settings

__all__ = ["cached_table"]

_TABLES: dict[str, at.Table] = {}
_LOCK = threading.Lock()


def cached_table(settings: Settings) -> at.Table:
    """The table at ``settings.uri``. Safe to cache: splits and messages carry their files;
    handles only read schema and snapshot metadata, which is immutable."""
    key = json.dumps([settings.uri, settings.storage_options], sort_keys=True, default=str)
    with _LOCK:
        table = _TABLES.get(key)
    if table is None:
        table = settings.open()
        with _LOCK:
            _TABLES[key] = table
    return table
