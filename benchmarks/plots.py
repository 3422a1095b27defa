"""PNG plots of the scaling curves (matplotlib, Agg backend), drawn from the result rows so a
partial re-run (``--only``) redraws them from the merged results."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from benchmarks.harness import Result, nested_value

__all__ = ["Plot", "draw_plots"]

#: Colours and labels of the systems on the peer lines.
SYSTEM_STYLE: Mapping[str, tuple[str, str]] = {
    "appendtable": ("tab:blue", "appendtable (default options)"),
    "pypaimon": ("tab:orange", "pypaimon"),
    "deltalake": ("tab:green", "delta-rs"),
}


@dataclass(frozen=True)
class Plot:
    """One PNG, relative to the README, what it shows, and the benchmark group (README
    section) it belongs to."""

    path: str
    caption: str
    group: str = "scaling"


def _details(results: Sequence[Result], group: str, key: str) -> Any:
    """``details[key]`` of the first row of ``group`` that has it, or None."""
    for result in results:
        if result.group == group and key in result.details:
            return result.details[key]
    return None


def _peer_value(results: Sequence[Result], prefix: str, system: str) -> float | None:
    """A system's value on the peers row whose name starts with ``prefix``."""
    for result in results:
        if result.group == "peers" and result.benchmark.startswith(prefix):
            value = result.details.get("systems", {}).get(system)
            return None if value is None else float(value)
    return None


def _axes(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Any]:
    figure = Figure(figsize=(7.5, 4.5), dpi=100)
    axes = figure.subplots()
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, which="both", alpha=0.3)
    return figure, axes


def _save(figure: Figure, directory: Path, name: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(directory / name)
    return f"{directory.name}/{name}"


def _peer_lines(axes: Any, series: Mapping[str, Any], suffix: str) -> None:
    for system, points in series.items():
        if system not in SYSTEM_STYLE or not points:
            continue
        colour, label = SYSTEM_STYLE[system]
        pairs = sorted(
            (float(x), float(y))
            for x, y in (points.items() if isinstance(points, Mapping) else points)
        )
        xs, ys = zip(*pairs, strict=True)
        axes.plot(xs, ys, "--", marker=".", color=colour, label=f"{label}{suffix}")


@dataclass(frozen=True)
class _HistoryPlot:
    """appendtable's two history-curve metrics (solid) against the peers' curve (dashed)."""

    file: str
    title: str
    xlabel: str
    ylabel: str
    peers_key: str  # in the peers rows' details
    peer_suffix: str
    ours: tuple[tuple[str, str, str, str], ...]  # (curve key, marker, colour, label)
    caption: str


def _history_plot(spec: _HistoryPlot, results: Sequence[Result], directory: Path) -> Plot | None:
    curve = _details(results, "scaling", "history_curve")
    peers = _details(results, "peers", spec.peers_key)
    if not curve and not peers:
        return None
    figure, axes = _axes(spec.title, spec.xlabel, spec.ylabel)
    for key, marker, colour, label in spec.ours if curve else ():
        axes.plot(
            [p["snapshots"] for p in curve],
            [p[key] for p in curve],
            marker,
            color=colour,
            label=label,
        )
    if peers:
        _peer_lines(axes, peers, spec.peer_suffix)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.legend(fontsize=8)
    return Plot(_save(figure, directory, spec.file), spec.caption)


COMMIT_PLOT = _HistoryPlot(
    file="commit_latency.png",
    title="Commit latency p50 vs table history",
    xlabel="snapshots in the table",
    ylabel="milliseconds (p50)",
    peers_key="commit_window_p50_ms",
    peer_suffix=": 100-row append, p50 per 50 commits",
    ours=(
        ("commit_p50_ms", "o-", "navy", "appendtable commit only (write-only, fsync on)"),
        ("append_p50_ms", "s-", "tab:blue", "appendtable 1-row append: write + commit"),
    ),
    caption="Commit latency p50 against the number of snapshots. Solid: appendtable's own curve "
    "(one table grown to the largest size, fsync on). Dashed: the peers' small-commit "
    "workload (whole 100-row appends, default options, p50 of each window of 50 commits).",
)
PLANNING_PLOT = _HistoryPlot(
    file="planning.png",
    title="Scan planning vs table history",
    xlabel="snapshots (commits) in the table",
    ylabel="milliseconds",
    peers_key="plan_curve_ms",
    peer_suffix=": open + plan (after N 100-row commits)",
    ours=(
        (
            "plan_cold_ms",
            "o-",
            "navy",
            "appendtable cold (open_table + plan), one file per snapshot",
        ),
        ("plan_warm_ms", "s-", "tab:blue", "appendtable warm (same handle)"),
    ),
    caption="Planning a full scan against the number of commits. appendtable's solid lines use a "
    "write-only table (no compaction: one file per snapshot); the dashed peer lines use "
    "default options (appendtable compacts automatically there, delta-rs and pypaimon do not).",
)


def _poll_plot(results: Sequence[Result], directory: Path) -> Plot | None:
    curve = _details(results, "scaling", "history_curve")
    if not curve:
        return None
    figure, axes = _axes(
        "Streaming poll with no new snapshot", "snapshots in the table", "microseconds (median)"
    )
    axes.plot(
        [p["snapshots"] for p in curve],
        [p["idle_poll_ms"] * 1000 for p in curve],
        "o-",
        color="navy",
        label="appendtable StreamReader.poll()",
    )
    axes.set_xscale("log")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize=8)
    return Plot(
        _save(figure, directory, "idle_poll.png"),
        "Cost of one `poll()` that finds nothing new, against the table's history (median of "
        "200 polls on a reader positioned at the latest snapshot).",
    )


def _grid_plot(results: Sequence[Result], directory: Path) -> Plot | None:
    grid = _details(results, "scaling", "write_grid")
    if not grid:
        return None
    figure, axes = _axes(
        "Write throughput vs partitions x buckets", "buckets (-1: unbucketed)", "M rows / s"
    )
    partitions = sorted({g["partitions"] for g in grid})
    settings = sorted({g["buckets"] for g in grid if g["buckets"] is not None})
    positions = {b: i for i, b in enumerate(settings)}
    for count in partitions:
        points = [g for g in grid if g["partitions"] == count]
        ours = [g for g in points if g["buckets"] is not None]
        line = axes.plot(
            [positions[g["buckets"]] for g in ours],
            [g["rows_per_s"] / 1e6 for g in ours],
            "o-",
            label=f"appendtable, {count} partition{'s' if count > 1 else ''}",
        )
        plain = [g for g in points if g["buckets"] is None]
        if plain:
            axes.axhline(
                plain[0]["rows_per_s"] / 1e6,
                linestyle=":",
                color=line[0].get_color(),
                label=f"pyarrow write_to_dataset, {count} partition(s)",
            )
    axes.set_xticks(range(len(settings)), [str(b) for b in settings])
    axes.set_yscale("log")
    axes.legend(fontsize=7)
    return Plot(
        _save(figure, directory, "write_grid.png"),
        "Rows per second of one append into P partitions x B buckets (every partition gets "
        "every bucket, so P x B files). Dotted: pyarrow's `write_to_dataset` partitioned the "
        "same way (it has no buckets).",
    )


def _compaction_plot(results: Sequence[Result], directory: Path) -> Plot | None:
    curve = _details(results, "scaling", "compaction_curve")
    if not curve:
        return None
    figure, axes = _axes(
        "Compaction time vs number of small files", "one-row files compacted", "milliseconds"
    )
    xs = [p["files"] for p in curve]
    axes.plot(
        xs,
        [p["compact_ms"] for p in curve],
        "o-",
        color="navy",
        label="appendtable compact(full=True)",
    )
    axes.plot(
        xs,
        [p["plain_ms"] for p in curve],
        "s:",
        color="gray",
        label="pyarrow: pq.read_table(files) + pq.write_table",
    )
    files = (_details(results, "peers", "files_after_commits") or {}).get("deltalake")
    delta = _peer_value(results, "compact after", "deltalake")
    if files and delta is not None:
        colour, label = SYSTEM_STYLE["deltalake"]
        axes.plot(
            [files],
            [delta],
            "D",
            color=colour,
            label=f"{label} optimize.compact, {files} files of 100 rows",
        )
    axes.axhline(70, linestyle="--", color="red", alpha=0.5, label="target: 500 files ≤ 70 ms")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.legend(fontsize=8)
    return Plot(
        _save(figure, directory, "compaction.png"),
        "Time to compact N one-row files into one (a copy of a write-only table per point), "
        "against pyarrow reading the same files and writing one file.",
    )


#: The panels of the million-file plot: (title, unit, value path in a series point, target).
MILLION_PANELS: tuple[tuple[str, str, tuple[str, ...], float | None], ...] = (
    ("commit p99 (one-file commit)", "ms", ("commit", "p99_ms"), 10.0),
    ("plan, partition filter, cold", "ms", ("filtered_plan", "ms"), 50.0),
    ("full plan, cold (fresh process)", "ms", ("full_plan", "ms"), 3000.0),
    ("full plan: peak RSS", "MB", ("full_plan", "peak_mb"), 500.0),
    ("idle stream poll", "ms", ("poll", "ms"), 1.0),
    ("orphan removal (dry run, listing)", "ms", ("orphans", "ms"), None),
    ("orphan removal: peak RSS", "MB", ("orphans", "peak_mb"), 500.0),
    ("expire 10,000 snapshots (fewer below 1 M files)", "ms", ("expire", "ms"), 10_000.0),
    ("building the table (metadata only)", "s", ("build_s",), None),
)


def _million_plot(results: Sequence[Result], directory: Path) -> Plot | None:
    series = _details(results, "million", "million_series")
    if not series:
        return None
    figure = Figure(figsize=(13, 10), dpi=90)
    panels = figure.subplots(3, 3)
    for axes, (title, unit, keys, target) in zip(panels.flat, MILLION_PANELS, strict=True):
        axes.set_title(title, fontsize=10)
        axes.set_xlabel("live data files", fontsize=8)
        axes.set_ylabel(unit, fontsize=8)
        axes.grid(True, which="both", alpha=0.3)
        for system, marker, colour, label in (
            ("appendtable", "o-", "navy", "appendtable"),
            ("deltalake", "s--", SYSTEM_STYLE["deltalake"][0], "delta-rs"),
        ):
            pairs = [
                (point["files"], value)
                for point in series
                if (value := nested_value(point.get(system), keys)) is not None
            ]
            if pairs:
                xs, ys = zip(*pairs, strict=True)
                axes.plot(xs, ys, marker, color=colour, label=label)
        if target is not None:
            axes.axhline(target, linestyle=":", color="red", alpha=0.6, label="target")
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.legend(fontsize=7)
    return Plot(
        _save(figure, directory, "million_files.png"),
        "The million-file tables: each measure against the number of live data files (100 "
        "files a partition, 10 a snapshot), appendtable and delta-rs (built up to 100,000 "
        "files), with the target (dotted red).",
    )


PLOTTERS: Sequence[Callable[[Sequence[Result], Path], Plot | None]] = (
    partial(_history_plot, COMMIT_PLOT),
    partial(_history_plot, PLANNING_PLOT),
    _poll_plot,
    _grid_plot,
    _compaction_plot,
    _million_plot,
)


def draw_plots(results: Sequence[Result], directory: Path) -> list[Plot]:
    """Draw every plot whose data is in ``results``; returns them in README order."""
    return [plot for plotter in PLOTTERS if (plot := plotter(results, directory)) is not None]
