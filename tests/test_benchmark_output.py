"""The committed benchmark output names no absolute path of the machine it ran on."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.report import portable

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_benchmark_output_has_no_absolute_paths() -> None:
    for name in ("README.md", "results.json"):
        text = (ROOT / "benchmarks" / name).read_text(encoding="utf-8")
        assert str(ROOT) not in text, name
        assert tempfile.gettempdir() + "/" not in text, name


def test_portable_makes_paths_relative_or_anonymous() -> None:
    python = str(ROOT / ".venv" / "bin" / "python")
    scratch = f"{tempfile.gettempdir()}/appendtable-bench-x/peer-bulk-1.parquet"
    assert portable({"a": [python, f"venv ({python})", scratch, 3]}) == {
        "a": [".venv/bin/python", "venv (.venv/bin/python)", "<tmp>/peer-bulk-1.parquet", 3]
    }
