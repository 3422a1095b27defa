"""Run the benchmarks: ``python -m benchmarks.run [--quick] [--only NAME ...] [--tmp DIR]
[--out DIR]``."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.cases import BENCHMARKS, OPT_IN
from benchmarks.harness import Result, cpu_stall_seconds, cpu_times
from benchmarks.plots import draw_plots
from benchmarks.report import (
    machine_info,
    merge_previous,
    read_json,
    write_json,
    write_readme,
)
from benchmarks.workspace import FULL, QUICK, Workspace

HERE = Path(__file__).resolve().parent


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="~1/10 sizes (a smoke test)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(BENCHMARKS),
        metavar="NAME",
        help=f"benchmarks to run (default: all but {', '.join(sorted(OPT_IN))})",
    )
    parser.add_argument("--tmp", default=None, help="parent of the temporary work directory")
    parser.add_argument(
        "--out", type=Path, default=HERE, help="where README.md and results.json go"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: redraw the plots and rewrite README.md from results.json",
    )
    return parser.parse_args(argv)


def _report(out: Path, meta: dict[str, Any], results: list[Result]) -> None:
    plots = draw_plots(results, out / "plots")
    write_readme(out / "README.md", meta, results, plots)


def _print_rows(results: Sequence[Result]) -> None:
    for result in results:
        baseline = "" if result.baseline is None else f"  baseline {result.baseline:.4g}"
        ratio = "" if result.ratio is None else f"  ratio {result.ratio:.3g}"
        print(
            f"  {result.verdict:<4}  {result.benchmark}: {result.value:.4g} {result.unit}"
            f"{baseline}{ratio}  (target {result.target})",
            flush=True,
        )


def _run_one(name: str, workspace: Workspace) -> tuple[list[Result], dict[str, object]]:
    """Run one benchmark; also how long it took and how contended the CPUs were meanwhile."""
    stall_before, ticks_before = cpu_stall_seconds(), cpu_times()
    start = time.perf_counter()
    rows = BENCHMARKS[name](workspace)
    seconds = time.perf_counter() - start
    stall_after, ticks_after = cpu_stall_seconds(), cpu_times()
    stall = steal = None
    if stall_before is not None and stall_after is not None:
        stall = round(100 * (stall_after - stall_before) / seconds, 1)
    if ticks_before is not None and ticks_after is not None:
        total = ticks_after[1] - ticks_before[1]
        steal = round(100 * (ticks_after[0] - ticks_before[0]) / max(1, total), 1)
    print(f"  ({seconds:.1f} s, CPU stall {stall} %, steal {steal} %)", flush=True)
    return rows, {
        "seconds": round(seconds, 1),
        "cpu_stall_percent": stall,
        "cpu_steal_percent": steal,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    if args.report_only:
        meta, previous = read_json(args.out / "results.json")
        _report(args.out, meta, previous)
        print(f"wrote {args.out / 'README.md'} from {args.out / 'results.json'}", flush=True)
        return 0
    config = QUICK if args.quick else FULL
    names = args.only or [name for name in BENCHMARKS if name not in OPT_IN]
    results: list[Result] = []
    started = time.perf_counter()
    with Workspace(config, args.tmp) as workspace:
        meta = machine_info(HERE.parent, config.mode, workspace.root)
        conditions: dict[str, dict[str, object]] = {}
        for name in names:
            print(f"[{time.perf_counter() - started:6.1f} s] {name} ...", flush=True)
            rows, conditions[name] = _run_one(name, workspace)
            _print_rows(rows)
            results.extend(rows)
        meta["conditions"] = conditions
    meta["total_seconds"] = round(time.perf_counter() - started, 1)
    # the rows of benchmarks that did not run (not named, or opt-in) are kept from before
    results = merge_previous(args.out / "results.json", meta, results)
    order = list(BENCHMARKS)
    results.sort(key=lambda result: order.index(result.group))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "results.json", meta, results)
    _report(args.out, meta, results)
    print(f"done in {meta['total_seconds']} s; wrote {args.out / 'README.md'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
