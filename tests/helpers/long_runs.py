"""The long variants of the slowest tests, behind ``APPENDTABLE_LONG_TESTS=1``.

By default ``make test`` runs each scenario of the slowest tests once, at a size that keeps the
whole suite practical on 2 cores (every kill point of a restart test, every sink kind, the
longest model and race runs are the long variants); ``APPENDTABLE_LONG_TESTS=1`` runs them
all, at full size (README, "Development")."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["LONG", "choose", "scaled"]

T = TypeVar("T")

#: Whether the long variants run.
LONG = os.environ.get("APPENDTABLE_LONG_TESTS", "").strip().lower() not in ("", "0", "false")


def choose(every: Sequence[T], default: Sequence[T]) -> list[T]:
    """``every`` variant with ``APPENDTABLE_LONG_TESTS``, else ``default`` (a subset of it)."""
    assert set(map(repr, default)) <= set(map(repr, every)), "default must be a subset"
    return list(every if LONG else default)


def scaled(long: int, default: int) -> int:
    """A count: ``long`` with ``APPENDTABLE_LONG_TESTS``, else ``default``."""
    return long if LONG else default
