"""Writing results: ``results.json`` (raw) and ``README.md`` (table + analysis)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import appendtable as at
from benchmarks.harness import TIMES, Result

__all__ = ["machine_info", "merge_previous", "write_json", "write_readme"]

ANALYSIS_HEADING = "## Analysis"
ANALYSIS_PLACEHOLDER = "_To be written after looking at the numbers above._\n"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_revision(root: Path) -> str:
    try:
        revision = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{revision}{' (with uncommitted changes)' if dirty else ''}" or "unknown"


def machine_info(root: Path, mode: str, temp_root: str) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": mode,
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
        "appendtable": at.__version__,
        "git": _git_revision(root),
        "temp_dir": temp_root,
        "argv": sys.argv[1:],
    }


def merge_previous(path: Path, meta: dict[str, Any], results: list[Result]) -> list[Result]:
    """With ``--only``, keep the rows of the benchmarks not run from an earlier run of the
    same mode, so one benchmark can be re-run without losing the others."""
    if not path.exists():
        return results
    previous = json.loads(path.read_text(encoding="utf-8"))
    if previous.get("meta", {}).get("mode") != meta["mode"]:
        return results
    ran = {result.group for result in results}
    kept = [Result(**row) for row in previous.get("results", []) if row["group"] not in ran]
    return kept + results


def write_json(path: Path, meta: dict[str, Any], results: Sequence[Result]) -> None:
    payload = {"meta": meta, "results": [result.to_json() for result in results]}
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _quantity(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "files":
        return f"{value:g} files"
    if unit == "x":
        return f"{value:.2f}{TIMES}"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"


def _ratio(result: Result) -> str:
    if result.ratio is None:
        return "—"
    if result.unit == "files":
        return f"1/{1 / result.ratio:.0f}"
    return f"{result.ratio:.2f}"


def _table(results: Sequence[Result]) -> str:
    lines = [
        "| benchmark | appendtable | baseline | ratio | target | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for r in results:
        cells = [
            r.benchmark,
            _quantity(r.value, r.unit),
            _quantity(r.baseline, "ms" if r.unit == "x" else r.unit),
            _ratio(r),
            r.target,
            f"**{r.verdict}**" if r.verdict == "MISS" else r.verdict,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _previous_analysis(path: Path) -> str:
    """The Analysis section of an existing README (kept across runs), or the placeholder."""
    if not path.exists():
        return ANALYSIS_PLACEHOLDER
    text = path.read_text(encoding="utf-8")
    start = text.find(ANALYSIS_HEADING + "\n")
    if start < 0:
        return ANALYSIS_PLACEHOLDER
    body = text[start + len(ANALYSIS_HEADING) + 1 :]
    end = body.find("\n## ")
    return (body if end < 0 else body[: end + 1]).strip("\n") + "\n"


_METHOD = """\
## How it is measured

`python -m benchmarks.run [--quick] [--only NAME ...]` (`make bench`, `make bench-quick`) from
the repository root. Data is generated with numpy (seeded): an int64 `key` with ~100 k distinct
values, a random float64 `value` and a random 8 to 12 character string `text`. Everything runs in a
temporary directory that is deleted afterwards. Each measurement runs warm-up rounds, then N
timed repetitions with `gc.collect()` before each and `time.perf_counter()` around the operation;
cases compared with each other are interleaved round by round so drift on the shared machine hits
both. Numbers are medians unless a percentile is named.

* **baseline** is plain `pyarrow.parquet` on the same in-memory data: `pq.write_table(...,
  compression="zstd")`, `pq.read_table(path)`, `pq.read_table(path, filters=[("key", "=", v)])`;
  for commits it is the floor of one durable publish (write temp, fsync, `os.link`, fsync dir).
* **ratio** is baseline time / appendtable time (above 1: appendtable is faster), except for the
  files row, where it is files read / files in the table.
* appendtable runs with default options (so `commit.fsync` is on and data files are fsynced
  before the commit); plain Parquet writes are not fsynced. Before each write repetition the page
  cache is flushed (`os.sync()`, untimed) so no repetition pays for an earlier one's writeback.
* Reads and cold planning open a fresh `open_table` handle per repetition (no metadata cache).
* Commit latency: one table created with `commit.fsync` on (the default) is grown with one-row
  appends to each history size; at each size a fresh handle makes 5 untimed commits, then the
  timed ones. The timed part is `committer.commit(messages)` of an already written one-row file
  (no identifier, like `Table.append`); "whole append" adds writing that file. A floor publish is
  timed after each commit.
* Raw samples summaries (median, min, p99, max) are in `results.json`.
"""


def write_readme(path: Path, meta: dict[str, Any], results: Sequence[Result]) -> None:
    machine = (
        f"{meta['cpu_count']} CPUs ({meta['cpu_model']}), {meta['platform']}, "
        f"Python {meta['python']}, pyarrow {meta['pyarrow']}, numpy {meta['numpy']}, "
        f"appendtable {meta['appendtable']} (git {meta['git']})"
    )
    quick_note = (
        "\n> Quick mode: about 1/10 of the sizes and fewer snapshots; a smoke test, not a "
        "measurement against the targets.\n"
        if meta["mode"] == "quick"
        else ""
    )
    text = f"""# appendtable benchmarks

Performance against the targets of DESIGN.md §12, measured side by side with plain Parquet.

* **date:** {meta["date"]}
* **mode:** {meta["mode"]}
* **machine:** {machine}
{quick_note}
## Results

{_table(results)}

{_METHOD}
{ANALYSIS_HEADING}

{_previous_analysis(path)}"""
    path.write_text(text, encoding="utf-8")
