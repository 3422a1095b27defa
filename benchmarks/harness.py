"""Timing primitives: cases measured side by side, sample statistics, and result rows."""

from __future__ import annotations

import gc
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

__all__ = [
    "TIMES",
    "Case",
    "Result",
    "Timing",
    "cpu_stall_seconds",
    "cpu_times",
    "cycle_setup",
    "measure",
    "median_call_ms",
    "nested_value",
    "sync_then",
    "timed",
]

TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class Timing:
    """Samples of one measured operation, in seconds."""

    samples: tuple[float, ...]
    #: CPU seconds of this process per sample (all threads), when recorded.
    cpu: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile, ``q`` in (0, 100]."""
        ordered = sorted(self.samples)
        rank = max(1, math.ceil(q / 100 * len(ordered)))
        return ordered[rank - 1]

    def summary(self, scale: float = 1.0) -> dict[str, float | int]:
        """Median, min, p99 and max, multiplied by ``scale`` (1000 for milliseconds)."""
        summary: dict[str, float | int] = {
            "n": len(self.samples),
            "median": self.median * scale,
            "min": self.min * scale,
            "p99": self.percentile(99) * scale,
            "max": max(self.samples) * scale,
        }
        if self.cpu:
            ratios = [cpu / wall for cpu, wall in zip(self.cpu, self.samples, strict=True)]
            summary["cpu_per_wall"] = statistics.median(ratios)
        return summary


def _no_setup() -> None:
    return None


def _no_teardown(_context: Any) -> None:
    return None


@dataclass(frozen=True)
class Case:
    """One operation to time: ``setup`` (untimed) gives a context, ``run(context)`` is timed,
    ``teardown(context)`` (untimed) cleans up."""

    name: str
    run: Callable[[Any], object]
    setup: Callable[[], Any] = _no_setup
    teardown: Callable[[Any], None] = _no_teardown


def sync_then(make: Callable[[], Any]) -> Callable[[], Any]:
    """A setup that first flushes dirty pages, so no rep pays for an earlier rep's writeback."""

    def setup() -> Any:
        os.sync()
        return make()

    return setup


def cycle_setup(values: Sequence[Any]) -> Callable[[], Any]:
    """A setup handing out ``values`` round-robin."""
    iterator = itertools.cycle(values)
    return lambda: next(iterator)


def median_call_ms(
    call: Callable[[], object], times: int, check: Callable[[object], object] = lambda _: None
) -> float:
    """The median time of ``times`` calls of ``call``, in ms, back to back (no collection in
    between: for calls of microseconds); ``check`` sees each result, outside the timing."""
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        result = call()
        samples.append(time.perf_counter() - start)
        check(result)
    return statistics.median(samples) * 1000


def nested_value(point: Mapping[str, Any] | None, keys: Sequence[str]) -> float | None:
    """``point[keys[0]][keys[1]]...`` as a float, None where a level is missing."""
    value: Any = point
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return float(value)


def timed(run: Callable[[], object]) -> tuple[float, object]:
    """Seconds taken by ``run()`` after a ``gc.collect()``, and what it returned."""
    seconds, _cpu, result = _timed_with_cpu(run)
    return seconds, result


def _timed_with_cpu(run: Callable[[], object]) -> tuple[float, float, object]:
    gc.collect()
    cpu_start = time.process_time()
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    return seconds, time.process_time() - cpu_start, result


def measure(
    cases: Sequence[Case],
    *,
    reps: int,
    warmup: int = 1,
    check: Callable[[str, object], None] | None = None,
) -> dict[str, Timing]:
    """Time each case ``reps`` times after ``warmup`` untimed rounds. Cases are interleaved
    round by round (in alternating order) so that drift on a shared machine hits all of them
    alike. ``check(name, returned)`` may validate what a run returned."""
    samples: dict[str, list[tuple[float, float]]] = {case.name: [] for case in cases}
    for round_index in range(warmup + reps):
        ordered = cases if round_index % 2 == 0 else list(reversed(cases))
        for case in ordered:
            context = case.setup()
            try:
                seconds, cpu, returned = _timed_with_cpu(partial(case.run, context))
                if check is not None:
                    check(case.name, returned)
                del returned
            finally:
                case.teardown(context)
            if round_index >= warmup:
                samples[case.name].append((seconds, cpu))
    return {
        name: Timing(tuple(s for s, _ in pairs), tuple(c for _, c in pairs))
        for name, pairs in samples.items()
    }


@dataclass
class Result:
    """One row of the results table.

    ``ratio`` is baseline / appendtable for timings (above 1: appendtable is faster) and
    planned / total files for pruning. ``passed`` is None for rows without a target."""

    group: str
    benchmark: str
    value: float
    unit: str
    baseline: float | None
    ratio: float | None
    target: str
    passed: bool | None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "info"
        return "PASS" if self.passed else "MISS"


def cpu_stall_seconds() -> float | None:
    """Seconds (since boot) during which some runnable task waited for a CPU (Linux PSI), or
    None where PSI is unavailable. Its growth over a benchmark shows CPU contention."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as handle:
            some = handle.readline().split()
    except OSError:
        return None
    fields = dict(item.split("=", 1) for item in some[1:])
    return int(fields["total"]) / 1e6


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) CPU ticks of the whole machine since boot, or None off Linux. Steal is
    time the hypervisor gave this VM's virtual CPUs to someone else."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            ticks = [int(value) for value in handle.readline().split()[1:]]
    except OSError:
        return None
    steal = ticks[7] if len(ticks) > 7 else 0
    return steal, sum(ticks[:8])
