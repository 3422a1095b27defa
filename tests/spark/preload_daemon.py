"""Spark's Python daemon for the tests' session, with pyarrow and appendtable imported once.

Spark forks every Python worker from its daemon, and a worker whose task raised exits: the
worker forked to replace it imports pyarrow and appendtable again when it unpickles the
adapter's writer (about 0.8 s of CPU each, two per refused write on ``local[2]``). Forked from
this daemon, the workers start with those modules loaded; everything else is Spark's own
daemon (``pyspark.daemon.manager``), and the workers still run the worktree's code."""

from __future__ import annotations

import pyarrow.dataset  # noqa: F401
from pyspark import daemon

import appendtable_spark  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
