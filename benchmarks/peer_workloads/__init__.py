"""Workloads run side by side on appendtable and its peers, each in its own interpreter.

``python -m benchmarks.peer_workloads.driver SYSTEM SPEC OUT`` runs one system's workload (the
modules here import only the standard library, pyarrow and that system), so each peer can live in
a virtualenv of its own with the pyarrow it pins.
"""

__all__ = ["Unsupported"]


class Unsupported(Exception):
    """The system has no equivalent of this operation (the message says so)."""
