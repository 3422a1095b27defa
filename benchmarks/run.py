"""Run the benchmarks: ``python -m benchmarks.run [--quick] [--only NAME ...] [--tmp DIR]``."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.cases import BENCHMARKS
from benchmarks.harness import Result
from benchmarks.report import machine_info, merge_previous, write_json, write_readme
from benchmarks.workspace import FULL, QUICK, Workspace

HERE = Path(__file__).resolve().parent


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="~1/10 sizes (a smoke test)")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(BENCHMARKS), metavar="NAME", help="benchmarks to run"
    )
    parser.add_argument("--tmp", default=None, help="parent of the temporary work directory")
    return parser.parse_args(argv)


def _print_rows(results: Sequence[Result]) -> None:
    for result in results:
        baseline = "" if result.baseline is None else f"  baseline {result.baseline:.4g}"
        ratio = "" if result.ratio is None else f"  ratio {result.ratio:.3g}"
        print(
            f"  {result.verdict:<4}  {result.benchmark}: {result.value:.4g} {result.unit}"
            f"{baseline}{ratio}  (target {result.target})",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    config = QUICK if args.quick else FULL
    names = args.only or list(BENCHMARKS)
    results: list[Result] = []
    started = time.perf_counter()
    with Workspace(config, args.tmp) as workspace:
        meta = machine_info(HERE.parent, config.mode, workspace.root)
        for name in names:
            print(f"[{time.perf_counter() - started:6.1f} s] {name} ...", flush=True)
            rows = BENCHMARKS[name](workspace)
            _print_rows(rows)
            results.extend(rows)
    meta["total_seconds"] = round(time.perf_counter() - started, 1)
    if args.only:
        results = merge_previous(HERE / "results.json", meta, results)
    order = list(BENCHMARKS)
    results.sort(key=lambda result: order.index(result.group))
    write_json(HERE / "results.json", meta, results)
    write_readme(HERE / "README.md", meta, results)
    print(f"done in {meta['total_seconds']} s; wrote {HERE / 'README.md'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
