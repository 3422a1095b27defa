"""Writing results: ``results.json`` (raw) and ``README.md`` (table + analysis)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import appendtable as at
from benchmarks.harness import Result
from benchmarks.plots import Plot
from benchmarks.sections import SECTIONS, Section, results_table

__all__ = ["machine_info", "merge_previous", "read_json", "write_json", "write_readme"]

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


def _loadavg() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


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
        "temp_dir": "the system temp directory"
        if Path(temp_root).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve())
        else "a directory given with --tmp",
        "loadavg": _loadavg(),
        "argv": sys.argv[1:],
    }


def merge_previous(path: Path, meta: dict[str, Any], results: list[Result]) -> list[Result]:
    """With ``--only``, keep the rows of the benchmarks not run from an earlier run of the
    same mode, so one benchmark can be re-run without losing the others."""
    if not path.exists():
        return results
    before, previous = read_json(path)
    if before.get("mode") != meta["mode"]:
        return results
    ran = {result.group for result in results}
    kept = [result for result in previous if result.group not in ran]
    if kept:
        earlier = {k: v for k, v in before.get("conditions", {}).items() if k not in ran}
        meta["conditions"] = {**earlier, **meta.get("conditions", {})}
        meta["earlier_runs"] = {
            name: seen.get("date", before.get("date")) for name, seen in earlier.items()
        }
    return kept + results


def read_json(path: Path) -> tuple[dict[str, Any], list[Result]]:
    """The meta and result rows of a ``results.json``."""
    payload = json.loads(path.read_text(encoding="utf-8"))
    return payload["meta"], [Result(**row) for row in payload["results"]]


_REPO = Path(__file__).resolve().parents[1]


def portable(value: Any) -> Any:
    """``value`` with no absolute path of this machine: paths in the repository become
    relative, temporary files their names (the output is committed and compared)."""
    if isinstance(value, str):
        if value.startswith(str(_REPO) + os.sep):
            return value[len(str(_REPO)) + 1 :]
        if value.startswith(tempfile.gettempdir() + os.sep):
            return "<tmp>/" + value.rsplit(os.sep, 1)[-1]
        return value.replace(str(_REPO) + os.sep, "")
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [portable(item) for item in value]
    return value


def write_json(path: Path, meta: dict[str, Any], results: Sequence[Result]) -> None:
    payload = portable({"meta": meta, "results": [result.to_json() for result in results]})
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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
## How the main results are measured

`python -m benchmarks.run [--quick] [--only NAME ...] [--out DIR]` (`make bench`,
`make bench-quick`) from the repository root; with `--only`, the rows of the other benchmarks
are kept from the previous run of the same mode; `--report-only` redraws the plots and rewrites
this file from `results.json` without running anything. Data is generated with numpy (seeded): an
int64 `key` with ~100 k distinct values, a random float64 `value` and a random 8 to 12
character string `text`. Everything runs in a temporary directory that is deleted afterwards.
Each measurement runs warm-up rounds, then N timed repetitions with `gc.collect()` before each
and `time.perf_counter()` around the operation; cases compared with each other are interleaved
round by round so drift on the shared machine hits both. Numbers are medians unless a
percentile is named.

* **baseline** is plain `pyarrow.parquet` on the same in-memory data: `pq.write_table(...,
  compression="zstd")`, `pq.read_table(path)`, `pq.read_table(path, filters=[("key", "=", v)])`;
  for commits it is the floor of one durable publish (write temp, fsync, `os.link`, fsync dir).
* **ratio** is baseline time / appendtable time (above 1: appendtable is faster), except for the
  files row, where it is files read / files in the table.
* appendtable runs with default options (so `commit.fsync` is on and data files are fsynced
  before the commit); plain Parquet writes are not fsynced. Before each write repetition the page
  cache is flushed (`os.sync()`, untimed) so no repetition pays for an earlier one's writeback.
* Reads and cold planning open a fresh `open_table` handle per repetition (no metadata cache).
* Commit latency: tables created with `commit.fsync` on (the default) and grown, with fsync on
  as well, by one-row appends to each history size, then sampled **interleaved**: one commit
  per table per round (rotating order) plus one floor publish per round, so machine drift hits
  every history size alike. Each table gets a fresh handle and 5 untimed commits first. The
  timed part is `TableCommit.commit(messages)` of an already written one-row file, no
  identifier (like `Table.append`). The targets are checked on `write-only` tables (the commit
  protocol alone); tables with default options also run compaction and snapshot expiration
  inside `commit()` after the snapshot lands, and are reported for information.
* Planning runs on the largest `write-only` history table (one file per snapshot); when run
  alone (`--only plan`) it builds that table itself, with fsync off to save time.
* Sample summaries (median, min, p99, max; CPU seconds per wall second for interleaved cases)
  are in `results.json`; the sections above say how each of them is measured.
"""


def _conditions(meta: dict[str, Any]) -> str:
    """Per benchmark: wall time and the share of it some task waited for a CPU."""
    lines = []
    for name, seen in meta.get("conditions", {}).items():
        stall, steal = seen.get("cpu_stall_percent"), seen.get("cpu_steal_percent")
        when = meta.get("earlier_runs", {}).get(name)
        run = f" (run of {when})" if when else ""
        lines.append(
            f"  * `{name}`: {seen['seconds']:g} s, CPU stall {_percent(stall)}, "
            f"steal {_percent(steal)}{run}\n"
        )
    if not lines:
        return ""
    return (
        f"* **load:** load average {meta.get('loadavg', '?')} at the start. Per benchmark: wall "
        "time, CPU stall (share of the time some task waited for a CPU, Linux PSI: high values "
        f"mean other work competed for the {meta['cpu_count']} CPUs) and steal (CPU time the "
        "hypervisor gave to other VMs):\n" + "".join(lines)
    )


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g} %"


def _section(section: Section, results: Sequence[Result], plots: Sequence[Plot]) -> str:
    rows = [r for r in results if r.group in section.groups]
    if not rows:
        return ""
    return f"## {section.title}\n\n{section.render(rows, plots)}\nHow: {section.method}\n"


def write_readme(
    path: Path, meta: dict[str, Any], results: Sequence[Result], plots: Sequence[Plot] = ()
) -> None:
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
    grouped = {group for section in SECTIONS for group in section.groups}
    main = [r for r in results if r.group not in grouped]
    sections = "".join(_section(section, results, plots) for section in SECTIONS)
    text = f"""# appendtable benchmarks

Performance against each case's target (its Target column), measured side by side with plain
Parquet.

* **date:** {meta["date"]}
* **mode:** {meta["mode"]}
* **machine:** {machine}
{_conditions(meta)}{quick_note}
## Results

{results_table(main)}

{sections}{_METHOD}
{ANALYSIS_HEADING}

{_previous_analysis(path)}"""
    path.write_text(text, encoding="utf-8")
