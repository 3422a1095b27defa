"""A real Spark standalone cluster for tests: one master and one worker JVM on 127.0.0.1,
started from the installed pyspark package (``spark-class``), executors running this
virtualenv's Python. Killed whole (process groups) when stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent


class ClusterUnavailable(RuntimeError):
    """The cluster did not come up (no Java, ports, ...)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class SparkCluster:
    master_url: str
    ui_url: str
    work_dir: Path
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """The environment for a driver application of this cluster."""
        return {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }

    def executor_pids(self) -> list[int]:
        """The executor JVMs this cluster's worker runs now."""
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmdline and cwd.startswith(str(self.work_dir)):
                pids.append(int(entry))
        return pids

    def kill_executors(self) -> list[int]:
        """SIGKILL every executor JVM (with its Python workers' sockets gone, they exit)."""
        killed = []
        for pid in self.executor_pids():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        return killed

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=2) as response:
                state = json.load(response)
        except (OSError, urllib.error.URLError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=30)
        for pid in self.executor_pids():  # in case one outlived its worker
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.log_dir.glob("*.log"))
        )


def start_cluster(base: Path, *, cores: int = 2, memory: str = "2g") -> SparkCluster:
    """Start a master and a worker; raise ClusterUnavailable if they are not up in time."""
    work_dir, log_dir = base / "work", base / "logs"
    work_dir.mkdir(parents=True)
    log_dir.mkdir(parents=True)
    port, ui_port, worker_ui = _free_port(), _free_port(), _free_port()
    cluster = SparkCluster(
        master_url=f"spark://127.0.0.1:{port}",
        ui_url=f"http://127.0.0.1:{ui_port}",
        work_dir=work_dir,
        log_dir=log_dir,
    )
    env = {**cluster.env(), "SPARK_NO_DAEMONIZE": "1", "SPARK_WORKER_DIR": str(work_dir)}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    commands = {
        "master": [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
        ],
        "worker": [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            cluster.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--webui-port",
            str(worker_ui),
            "--work-dir",
            str(work_dir),
        ],
    }
    try:
        for name, command in commands.items():
            with open(log_dir / f"{name}.log", "wb") as log:
                cluster.processes.append(
                    subprocess.Popen(
                        command, env=env, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )  # fmt: skip
        deadline = time.monotonic() + 90
        while cluster.alive_workers() < 1:
            if time.monotonic() > deadline or any(p.poll() is not None for p in cluster.processes):
                raise ClusterUnavailable(f"the Spark cluster did not start:\n{cluster.logs()}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
    return cluster
