"""Time helpers for tests that depend on file modification times.

File mtimes come from the clock of whatever serves the file system (a host-shared volume, an
object store), which may run ahead of this process's clock by a few milliseconds. A test that
means "every unreferenced file counts as an orphan" must therefore not use a cut-off of *now*.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from appendtable.commit.snapshots import flush_hints

SKEW_MARGIN_MS = 10 * 60 * 1000


def past_every_file_ms() -> int:
    """An epoch-ms cut-off later than the mtime of every file written so far, with a margin
    for clock skew between this process and the file system."""
    return int(time.time() * 1000) + SKEW_MARGIN_MS


def age(paths: Iterable[Path], *, seconds: float) -> None:
    """Set the access and modification times of ``paths`` to ``seconds`` ago."""
    then = time.time() - seconds
    for path in paths:
        os.utime(path, (then, then))


def age_tree(root: str | Path, *, seconds: float) -> None:
    """Age every file under ``root`` by ``seconds``, once the LATEST hints written in the
    background have landed: a hint is written to a temporary file and renamed, so a walk
    beside it can list a file that is gone when its time is set."""
    flush_hints()
    age([Path(d, n) for d, _, names in os.walk(root) for n in names], seconds=seconds)
