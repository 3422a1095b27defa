"""The servers some benchmarks need: SeaweedFS (S3), fake-gcs-server (GCS), Azurite (Azure Blob)
and a local Spark session. A caller that already runs them (the test session's fixtures, see
``tests/test_benchmark_cases.py``) lends them through :class:`Servers`; otherwise each benchmark
starts its own and stops it when it is done."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from appendtable.commit.snapshots import flush_hints

if TYPE_CHECKING:  # not imported at run time: benchmarks.workspace, which member processes
    # import, stays as light as it was
    from tests.emulators import Emulator
    from tests.s3.seaweedfs import SeaweedFS

__all__ = ["Servers", "serving"]


@dataclass(frozen=True)
class Servers:
    """Running servers lent to the benchmarks (None: a benchmark starts its own). A lent server
    is left running; the benchmarks write under fresh prefixes of its bucket."""

    s3: SeaweedFS | None = None
    gcs: Emulator | None = None
    azure: Emulator | None = None
    spark: Any = None  # a pyspark.sql.SparkSession


class _Server(Protocol):
    def stop(self) -> None: ...


_S = TypeVar("_S", bound=_Server)


@contextmanager
def serving(lent: _S | None, start: Callable[[], _S]) -> Iterator[_S]:
    """``lent``, or a server ``start()`` starts and the block's end stops. Either way, the
    LATEST hints that commits write in the background are flushed when the block ends (before
    a started server goes)."""
    server = lent if lent is not None else start()
    try:
        yield server
    finally:
        flush_hints()
        if lent is None:
            server.stop()
