"""One metadata operation on a large table, in a process of its own, with its time and peak
memory: ``python -m benchmarks.scale_probe CASE URI`` prints JSON with the seconds taken, the
count the operation returned, the resident set size once the imports are done and the peak
during the operation (``ru_maxrss`` after resetting the peak, see ``benchmarks.rss_probe``).

A fresh process is the honest "cold": nothing of the table is in the process-wide metadata
caches. Cases: ``plan`` (``open_table`` + ``scan().plan()``: the count is the files planned)
and ``orphans`` (``remove_orphan_files(dry_run=True)`` with a cut-off of now: the count is the
orphans found)."""

from __future__ import annotations

import datetime as dt
import gc
import json
import sys
import time
from collections.abc import Callable, Mapping

import appendtable as at
from benchmarks.rss_probe import peak_mb, reset_peak, rss_mb

__all__ = ["CASES", "main", "run_probe"]


def _plan(uri: str) -> int:
    return sum(len(split.files) for split in at.open_table(uri).scan().plan())


def _orphans(uri: str) -> int:
    table = at.open_table(uri)
    return len(table.remove_orphan_files(older_than=dt.timedelta(0), dry_run=True).files)


CASES: Mapping[str, Callable[[str], int]] = {"plan": _plan, "orphans": _orphans}


def run_probe(case: str, operation: Callable[[], int]) -> dict[str, object]:
    """Time ``operation`` once, with the peak memory it reached (the peak is reset first)."""
    gc.collect()
    reset = reset_peak()
    loaded = rss_mb()
    start = time.perf_counter()
    count = operation()
    seconds = time.perf_counter() - start
    return {
        "case": case,
        "seconds": seconds,
        "count": count,
        "loaded_rss_mb": loaded,
        "peak_rss_mb": peak_mb(),
        "peak_reset": reset,
    }


def main(argv: list[str]) -> int:
    case, uri = argv
    print(json.dumps(run_probe(case, lambda: CASES[case](uri))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
