"""Timing primitives: cases measured side by side, sample statistics, and result rows."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["TIMES", "Case", "Result", "Timing", "measure", "timed"]

TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class Timing:
    """Samples of one measured operation, in seconds."""

    samples: tuple[float, ...]

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
        return {
            "n": len(self.samples),
            "median": self.median * scale,
            "min": self.min * scale,
            "p99": self.percentile(99) * scale,
            "max": max(self.samples) * scale,
        }


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


def timed(run: Callable[[], object]) -> tuple[float, object]:
    """Seconds taken by ``run()`` after a ``gc.collect()``, and what it returned."""
    gc.collect()
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


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
    samples: dict[str, list[float]] = {case.name: [] for case in cases}
    for round_index in range(warmup + reps):
        ordered = cases if round_index % 2 == 0 else list(reversed(cases))
        for case in ordered:
            context = case.setup()
            try:
                seconds, returned = timed(lambda case=case, context=context: case.run(context))
                if check is not None:
                    check(case.name, returned)
                del returned
            finally:
                case.teardown(context)
            if round_index >= warmup:
                samples[case.name].append(seconds)
    return {name: Timing(tuple(values)) for name, values in samples.items()}


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
