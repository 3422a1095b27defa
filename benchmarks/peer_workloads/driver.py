"""One system's side of the peer benchmarks: ``python -m benchmarks.peer_workloads.driver
SYSTEM SPEC.json OUT.json``. Standard library and pyarrow only (runs in the peers' virtualenvs).

SPEC holds the data files and sizes; OUT receives timings in seconds (lists of samples) and
counts. An operation a system does not have is reported as null with a note."""

from __future__ import annotations

import gc
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.peer_workloads import Unsupported

__all__ = ["Adapter", "main"]

#: Stop repeating an operation once its samples add up to this many seconds.
REPEAT_BUDGET_S = 20.0


class Adapter(Protocol):
    """What each system implements. Handles are whatever the system uses for an open table."""

    name: str
    version: str
    #: False for plain Parquet files: no commits, so no small-commit workload.
    transactional: bool

    def create(self, path: str, schema: pa.Schema, bucketed: bool) -> Any: ...

    def open(self, path: str) -> Any: ...

    def append(self, handle: Any, data: pa.Table) -> object:
        """One commit; returns a token naming it (for ``incremental``)."""
        ...

    def read(self, handle: Any, key: int | None = None) -> pa.Table:
        """The whole table, or the rows whose ``key`` equals ``key``."""
        ...

    def plan(self, handle: Any) -> int:
        """Plan a full scan; the number of data files it would read."""
        ...

    def incremental(self, handle: Any, first: object, commits: int) -> int:
        """Rows of the ``commits`` commits from the one named ``first`` on, read incrementally."""
        ...

    def compact(self, handle: Any) -> int:
        """Compact small files; the number of live files afterwards."""
        ...


def _timed(run: Callable[[], Any], collect: bool = True) -> tuple[float, Any]:
    """Seconds taken by ``run()`` (after a ``gc.collect()`` unless told not to), and what it
    returned."""
    if collect:
        gc.collect()
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def _repeat(
    run: Callable[[], Any], reps: int, check: Callable[[Any], None], warmup: bool
) -> list[float]:
    """Up to ``reps`` samples of ``run`` (after one warm-up if ``warmup`` and cheap), within
    the time budget."""
    samples: list[float] = []
    if warmup:
        warm_seconds, result = _timed(run)
        check(result)
        if warm_seconds * (reps + 1) > REPEAT_BUDGET_S:
            return [warm_seconds]  # too slow to repeat: its one run is the sample
    while len(samples) < reps and sum(samples) < REPEAT_BUDGET_S:
        seconds, result = _timed(run)
        check(result)
        samples.append(seconds)
    return samples


class Workload:
    def __init__(self, adapter: Adapter, spec: dict[str, Any]) -> None:
        self.adapter = adapter
        self.spec = spec
        self.bulk = pq.read_table(spec["bulk_data"])
        self.small = pq.read_table(spec["small_data"])
        self.out: dict[str, Any] = {
            "system": adapter.name,
            "version": adapter.version,
            "notes": {},
            "seconds": {},
        }
        self._counter = 0

    def path(self, stem: str) -> str:
        self._counter += 1
        return os.path.join(self.spec["workdir"], f"{self.adapter.name}-{stem}-{self._counter}")

    def attempt(self, name: str, run: Callable[[], list[float] | None]) -> None:
        start = time.perf_counter()
        try:
            samples = run()
        except Unsupported as exc:
            self.out["notes"][name] = str(exc)
            samples = None
        self.out["seconds"][name] = samples
        self.out.setdefault("phase_seconds", {})[name] = round(time.perf_counter() - start, 2)

    def bulk_append(self, bucketed: bool) -> list[float]:
        paths: list[str] = []

        def run() -> object:
            paths.append(self.path("bulk"))
            handle = self.adapter.create(paths[-1], self.bulk.schema, bucketed)
            return self.adapter.append(handle, self.bulk)

        samples = _repeat(run, self.spec["reps"], lambda _: None, self.spec["warmup"])
        self.out.setdefault("bulk_tables", {})["bucketed" if bucketed else "unaware"] = paths[-1]
        return samples

    def full_read(self) -> list[float]:
        path = self.out["bulk_tables"]["unaware"]
        rows = self.bulk.num_rows

        def check(table: pa.Table) -> None:
            assert table.num_rows == rows, (table.num_rows, rows)

        return self.fresh(path, self.adapter.read, check)

    def point_query(self) -> list[float]:
        tables = self.out["bulk_tables"]
        path = tables.get("bucketed") or tables["unaware"]
        expected: dict[str, int] = self.spec["point_keys"]
        samples = []
        for key, rows in expected.items():
            seconds, table = _timed(
                lambda k=int(key): self.adapter.read(self.adapter.open(path), k)
            )
            assert table.num_rows == rows, (key, table.num_rows, rows)
            samples.append(seconds)
        self.out["point_table"] = "bucketed" if "bucketed" in tables else "unaware"
        return samples

    def small_commits(self) -> None:
        """Commit the small pieces one by one; plan at the curve points; then plan, scan,
        read incrementally and compact."""
        spec, adapter = self.spec, self.adapter
        path = self.path("commits")
        handle = adapter.create(path, self.small.schema, False)
        rows, commits = spec["small_rows"], spec["small_commits"]
        points = {p for p in spec["curve_points"] if p <= commits}
        latencies, tokens, plan_curve = [], [], {}
        for index in range(commits):
            seconds, token = _timed(
                lambda i=index: adapter.append(handle, self.small.slice(i * rows, rows)),
                collect=False,  # a collection per commit would cost more than the commit
            )
            latencies.append(seconds)
            tokens.append(token)
            if index + 1 in points:
                plan_curve[index + 1] = statistics.median(
                    _timed(lambda: adapter.plan(adapter.open(path)), collect=False)[0]
                    for _ in range(5)
                )
        finish = getattr(adapter, "finish", None)
        if finish is not None:  # background work the commits started (not timed)
            finish(handle)
        self.out["commit_latencies"] = latencies
        self.out["plan_curve"] = plan_curve
        self.out["files_after_commits"] = adapter.plan(adapter.open(path))
        total = commits * rows

        def check_scan(table: pa.Table) -> None:
            assert table.num_rows == total, (table.num_rows, total)

        self.attempt("plan_after_commits", lambda: self.fresh(path, adapter.plan, None))
        self.attempt("scan_after_commits", lambda: self.fresh(path, adapter.read, check_scan))
        last = spec["incremental_commits"]
        first = tokens[commits - last]

        def check_incremental(found: int) -> None:
            assert found == last * rows, (found, last * rows)

        self.attempt(
            "incremental",
            lambda: self.fresh(
                path, lambda handle: adapter.incremental(handle, first, last), check_incremental
            ),
        )

        def compact() -> list[float]:
            seconds, files = _timed(lambda: adapter.compact(adapter.open(path)))
            self.out["files_after_compact"] = files
            return [seconds]

        self.attempt("compact_after_commits", compact)

    def fresh(
        self, path: str, operation: Callable[[Any], Any], check: Callable[[Any], None] | None
    ) -> list[float]:
        """Samples of ``operation`` on a freshly opened handle (opening included)."""
        adapter = self.adapter
        return _repeat(
            lambda: operation(adapter.open(path)),
            self.spec["reps"],
            check or (lambda _: None),
            self.spec["warmup"],
        )

    def run(self) -> dict[str, Any]:
        self.attempt("bulk_append_unaware", lambda: self.bulk_append(False))
        self.attempt("bulk_append_bucketed", lambda: self.bulk_append(True))
        self.attempt("full_read", self.full_read)
        self.attempt("point_query", self.point_query)
        if self.adapter.transactional:
            self.attempt("small_commits", self.small_commits)
        return self.out


def main(argv: list[str]) -> int:
    system, spec_path, out_path = argv
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    module = importlib.import_module(f"benchmarks.peer_workloads.{system}_system")
    result = Workload(module.ADAPTER, spec).run()
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
