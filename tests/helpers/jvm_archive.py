"""One JVM class-data archive (JDK AppCDS) for every JVM a test run starts.

The suite is bound by CPU on 2 cores, and a good part of the Spark tests' CPU is JVMs starting:
the local session, a driver process per restart or kill, a standalone cluster, Spark Connect.
A JVM that maps the classes Spark loads from an archive, already parsed and verified, starts
in about half the CPU (measured on 2 cores: a session, one query and a stop, 9-10 -> 5 CPU s;
four restart tests with their fresh drivers, 174 -> 125 CPU s).

The archive is dumped once per machine, Java and Spark (the key names them), from a short run
of what the tests do (tests/spark/jvm_warmup_app.py, 15-40 s; 105 s on a fresh virtualenv of a
machine whose Python runs half as fast), at the start of a test run
that selects Spark tests, under a lock (runs at once wait for one build). Every JVM then gets
``-XX:SharedArchiveFile`` through ``JAVA_TOOL_OPTIONS``; a JVM whose class path does not match
(spark-submit's launcher) starts as it would without it, silently (``-Xlog:cds=off``). What
the JVMs compute is unchanged: only where their class metadata comes from. Where Java or
PySpark is missing, or the build fails, the run goes on without an archive and its header
says why."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ArchiveOutcome", "prepare_archive", "with_archive"]

APP = Path(__file__).resolve().parents[1] / "spark" / "jvm_warmup_app.py"
ROOT = Path(__file__).resolve().parents[2]
#: Where archives are kept between runs (one per key; about 200 MB each).
CACHE = Path(tempfile.gettempdir()) / "appendtable-test-jvm-archives"
_STALE_AFTER_S = 86_400.0


@dataclass(frozen=True)
class ArchiveOutcome:
    """The archive the run uses (None: none) and what the report header says of it."""

    path: Path | None
    note: str


def with_archive(java_options: str, archive: Path) -> str:
    """``java_options`` plus the options that make a JVM map ``archive``, quietly."""
    return f"{java_options} -XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


def prepare_archive(java_options: str) -> ArchiveOutcome:
    """The archive for this machine's Java and Spark: found, or built now (under a lock)."""
    java = _java()
    if java is None:
        return ArchiveOutcome(None, "no archive: java not found")
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return ArchiveOutcome(None, "no archive: pyspark is not installed")
    key = _key(java, Path(spec.submodule_search_locations[0]), java_options)
    archive = CACHE / f"spark-{key}.jsa"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"spark-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            os.utime(archive)  # its mtime says when it was last used (see below)
            return ArchiveOutcome(archive, f"using {archive}")
        _remove_stale_archives()
        return _build(archive, java_options)


def _remove_stale_archives() -> None:
    """Remove the archives of other keys unused for a day (each fresh virtualenv has a key of
    its own, and each archive takes about 200 MB of a disk the object-store servers of the
    tests need free); an archive whose lock another run holds is left alone. A run still using
    a removed archive is unharmed: mapped files stay readable, and a JVM it starts after the
    removal starts without the archive."""
    cutoff = time.time() - _STALE_AFTER_S
    for other in CACHE.glob("spark-*.jsa"):
        lock_path = other.with_suffix(".lock")
        try:
            if other.stat().st_mtime > cutoff:
                continue
            with open(lock_path, "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                other.unlink(missing_ok=True)
                lock_path.unlink(missing_ok=True)
        except OSError:
            continue  # in use by another run, or already gone


def _build(archive: Path, java_options: str) -> ArchiveOutcome:
    started = time.monotonic()
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    work = Path(tempfile.mkdtemp(prefix="appendtable-jvm-warmup-"))
    env = {
        **os.environ,
        "JAVA_TOOL_OPTIONS": java_options,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    try:
        result = subprocess.run(
            [sys.executable, str(APP), str(work), str(partial)],
            env=env,
            capture_output=True,
            timeout=180,
            check=False,
        )
        if result.returncode != 0 or not partial.exists():
            tail = result.stderr.decode(errors="replace")[-600:]
            return ArchiveOutcome(None, f"no archive: the warm-up run failed ({tail!r})")
        os.replace(partial, archive)
    except subprocess.TimeoutExpired:
        return ArchiveOutcome(None, "no archive: the warm-up run took over 180 s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        partial.unlink(missing_ok=True)
    return ArchiveOutcome(archive, f"built {archive} in {time.monotonic() - started:.0f} s")


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _key(java: str, spark_home: Path, java_options: str) -> str:
    """What an archive depends on: the JVM (its version and binary), Spark's jars, the
    options every JVM runs with."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    version = subprocess.run([java, "-version"], env=env, capture_output=True, check=False).stderr
    digest = hashlib.sha256(version + os.path.realpath(java).encode() + java_options.encode())
    for jar in sorted((spark_home / "jars").glob("*.jar")):
        digest.update(f"{jar.name}:{jar.stat().st_size}:{jar.stat().st_mtime_ns}".encode())
    return digest.hexdigest()[:16]
