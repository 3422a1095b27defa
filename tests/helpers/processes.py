"""Running test workers in separate processes, failing fast when one dies."""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import time
from collections.abc import Callable, Sequence
from typing import Any


def run_in_processes(
    target: Callable[..., None],
    arguments: Sequence[tuple[Any, ...]],
    *,
    timeout: float = 300,
) -> list[Any]:
    """Run ``target(*args, queue)`` once per argument tuple in spawned processes; each must put
    exactly one result on the queue. Raises as soon as a process exits without one."""
    context = multiprocessing.get_context("spawn")
    results_queue = context.Queue()
    processes = [context.Process(target=target, args=(*args, results_queue)) for args in arguments]
    for process in processes:
        process.start()
    results: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(results) < len(processes):
            try:
                results.append(results_queue.get(timeout=0.5))
                continue
            except queue_module.Empty:
                pass
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead:
                raise AssertionError(f"worker process exited with code {dead[0].exitcode}")
            if time.monotonic() > deadline:
                raise AssertionError(f"workers did not finish within {timeout} s")
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return results
