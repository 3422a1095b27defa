"""Peak memory of one write, in a process of its own: ``python -m benchmarks.rss_probe CASE
INPUT.parquet WORKDIR`` prints JSON with the resident set size once the input is loaded and the
peak during the write (``ru_maxrss``, after resetting the peak through ``/proc/self/clear_refs``
where Linux allows it, so loading the input does not count). Memory the reader freed is handed
back to the OS before the loaded size is taken."""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

import appendtable as at

__all__ = ["CASES", "main", "peak_mb", "reset_peak", "rss_mb"]

BUCKETED = {"bucket": 8, "bucket-key": "key"}
#: The many-writers case: 1,600 (partition, bucket) groups, the default
#: buffer (256 MiB) and spilling, stated so the target's limit follows them.
PARTITIONED_BUFFER_MB = 256
PARTITIONED = {
    "bucket": 16,
    "bucket-key": "key",
    "write-buffer-size": f"{PARTITIONED_BUFFER_MB} MB",
    "write-buffer-spillable": "true",
}


def _plain(data: pa.Table, workdir: str) -> None:
    pq.write_table(data, os.path.join(workdir, "plain.parquet"), compression="zstd")


def _plain_partitioned(data: pa.Table, workdir: str) -> None:
    pq.write_to_dataset(data, workdir, partition_cols=["part"], compression="zstd")


def _table(
    options: Mapping[str, object], partition_by: list[str] | None = None
) -> Callable[[pa.Table, str], None]:
    def write(data: pa.Table, workdir: str) -> None:
        table = at.create_table(
            os.path.join(workdir, "table"), data.schema, partition_by=partition_by, options=options
        )
        table.append(data)

    return write


CASES: Mapping[str, Callable[[pa.Table, str], None]] = {
    "plain": _plain,
    "unaware": _table({}),
    "bucketed": _table(BUCKETED),
    "plain-partitioned": _plain_partitioned,
    "partitioned": _table(PARTITIONED, ["part"]),
}


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def peak_mb() -> float:
    """The peak resident set size (MB) since the last ``reset_peak``: Linux's ``VmHWM``.
    (``ru_maxrss`` is no substitute: it also counts the parent's resident set at the fork
    that started this process, so a probe started from a large benchmark process reports the
    parent's size.)"""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KiB on Linux


def main(argv: list[str]) -> int:
    case, source, workdir = argv
    data = pq.read_table(source)
    gc.collect()
    # Hand the reader's freed buffers back to the OS: otherwise the allocator keeps them and
    # the write reuses them unseen, so "above the loaded data" would understate the write.
    pa.default_memory_pool().release_unused()
    reset = reset_peak()
    loaded = rss_mb()
    CASES[case](data, workdir)
    print(
        json.dumps(
            {
                "case": case,
                "rows": data.num_rows,
                "data_mb": data.nbytes / 1e6,
                "loaded_rss_mb": loaded,
                "peak_rss_mb": peak_mb(),
                "peak_reset": reset,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
