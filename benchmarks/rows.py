"""Result rows shared by the benchmark modules: comparisons, limits, information and skips."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.harness import TIMES, Result, Timing

__all__ = ["count_row", "limit_row", "skipped_row", "speed_row"]


def speed_row(
    group: str,
    benchmark: str,
    ours: Timing,
    baseline: Timing,
    *,
    unit: str,
    target_ratio: float | None,
    details: Mapping[str, Any] | None = None,
    target_label: str = "plain",
) -> Result:
    """A row comparing two timings by median; ratio = baseline / appendtable."""
    scale = 1000.0 if unit == "ms" else 1.0
    ratio = baseline.median / ours.median
    return Result(
        group=group,
        benchmark=benchmark,
        value=ours.median * scale,
        unit=unit,
        baseline=baseline.median * scale,
        ratio=ratio,
        target="—" if target_ratio is None else f"≥ {target_ratio:g}{TIMES} {target_label}",
        passed=None if target_ratio is None else ratio >= target_ratio,
        details={
            "appendtable": ours.summary(scale),
            "baseline": baseline.summary(scale),
            **(details or {}),
        },
    )


def limit_row(
    group: str,
    benchmark: str,
    value_ms: float,
    *,
    limit_ms: float | None,
    baseline_ms: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> Result:
    """A row checking a latency against an absolute limit; ratio = baseline / appendtable."""
    return Result(
        group=group,
        benchmark=benchmark,
        value=value_ms,
        unit="ms",
        baseline=baseline_ms,
        ratio=None if baseline_ms is None else baseline_ms / value_ms,
        target="—" if limit_ms is None else f"≤ {limit_ms:g} ms",
        passed=None if limit_ms is None else value_ms <= limit_ms,
        details=dict(details or {}),
    )


def count_row(
    group: str,
    benchmark: str,
    value: float,
    unit: str,
    *,
    baseline: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> Result:
    """An information row (no target) holding a count or size, e.g. files or MB."""
    return Result(
        group=group,
        benchmark=benchmark,
        value=value,
        unit=unit,
        baseline=baseline,
        ratio=None,
        target="—",
        passed=None,
        details=dict(details or {}),
    )


def skipped_row(group: str, reason: str) -> Result:
    """The one row of a benchmark that could not run here (``reason`` says why)."""
    return Result(
        group=group,
        benchmark=f"{group}: skipped",
        value=0.0,
        unit="skipped",
        baseline=None,
        ratio=None,
        target="—",
        passed=None,
        details={"skipped": reason},
    )
