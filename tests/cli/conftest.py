"""Helpers for command-line tests: run ``appendtable`` in-process or as a real process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from appendtable.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str


def console_script() -> str:
    """The ``appendtable`` entry point installed next to this interpreter."""
    candidate = Path(sys.executable).parent / "appendtable"
    found = str(candidate) if candidate.exists() else shutil.which("appendtable")
    if found is None:
        pytest.skip("the appendtable console script is not installed (pip install -e .)")
    return found


def run_process(
    *args: str, script: bool = False, timeout: float = 60, cwd: Path | None = None
) -> Result:
    """Run the CLI in a new process: the console script, or ``python -m appendtable.cli``."""
    command = [console_script()] if script else [sys.executable, "-m", "appendtable.cli"]
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run the CLI in this process (fast); returns exit code, stdout and stderr."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse usage errors, --help, --version
            code = int(exit_.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
