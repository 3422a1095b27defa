"""The test suite's cache of JVM class-data archives (tests/helpers/jvm_archive.py) keeps the
disk free: an archive unused for a day is removed when another is built, unless a run holds its
lock; archives in use are kept."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from tests.helpers import jvm_archive


def _archive(cache: Path, key: str, age_s: float) -> Path:
    path = cache / f"spark-{key}.jsa"
    path.write_bytes(b"archive")
    (cache / f"spark-{key}.lock").touch()
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def test_archives_unused_for_a_day_are_removed_unless_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm_archive, "CACHE", tmp_path)
    stale = _archive(tmp_path, "stale", 2 * 86_400)
    recent = _archive(tmp_path, "recent", 3_600)
    locked = _archive(tmp_path, "locked", 2 * 86_400)
    with open(tmp_path / "spark-locked.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        jvm_archive._remove_stale_archives()
    assert not stale.exists() and not (tmp_path / "spark-stale.lock").exists()
    assert recent.exists() and locked.exists()
