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
