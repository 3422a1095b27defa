"""A streaming query from an appendtable source into an appendtable sink whose driver can be
SIGKILLed at an exact point of a micro-batch. Run as a script by the restart tests:

    python restart_app.py '<json config>'

Config: ``source``, ``sink``, ``checkpoint`` (paths), ``options`` (the source's options),
``sink_kind`` (``foreach`` or ``format``), ``commit_user`` (or null), ``reuse`` (null, ``fail``
or ``continue``), ``trigger`` (``available-now`` or ``once``), ``kill``: null or
``[phase, batch]`` with phase one of

* ``plan``: while micro-batch N is planned (its end computed, ``offsets/N`` not yet written);
* ``offsets``: after ``offsets/N`` is written, when its partitions are planned;
* ``read``: in an executor task reading micro-batch N;
* ``sink-before``: in the sink, before the table commit of batch N;
* ``sink-after``: after the table commit, before Spark's ``commits/N``;
* ``committed``: after ``commits/N``, when Spark looks for the next micro-batch;
* ``fail``: not a kill: a task reading micro-batch N raises (the query fails).

Prints one JSON line: ``{"status": "ok"}`` or ``{"status": "failed", "error": ...}`` (the query
failed: the test checks the error is a named one). A kill ends the process with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from pyspark import TaskContext

import appendtable_spark
from appendtable_spark.source import AppendTableDataSource
from appendtable_spark.stream_source import StreamSource
from appendtable_spark.writer import StreamWriter
from tests.spark import restart_query
from tests.spark.driver_session import driver_session

KILL = os.environ.get("APPENDTABLE_KILL", "")
CHECKPOINT = os.environ.get("APPENDTABLE_CHECKPOINT", "")


def _kill_at(phase: str, batch: int) -> bool:
    if not KILL:
        return False
    wanted, number = KILL.split(":")
    return wanted == phase and int(number) == batch


def _die() -> None:
    """SIGKILL the whole driver: every process of this app's session (the JVM and Python
    workers, in process groups of their own), this one last."""
    session = os.getsid(0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.getsid(int(entry)) == session:
                os.kill(int(entry), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def _logged(kind: str) -> int:
    """How many batches Spark has in ``offsets/`` or ``commits/`` of the checkpoint."""
    path = os.path.join(CHECKPOINT, kind)
    if not os.path.isdir(path):
        return 0
    return sum(1 for name in os.listdir(path) if name.isdigit())


def _committed(batch: int) -> bool:
    return os.path.exists(os.path.join(CHECKPOINT, "commits", str(batch)))


class KillingStreamSource(StreamSource):
    def latestOffset(self, start: Any, limit: Any) -> Any:
        if KILL.startswith("committed:") and _committed(int(KILL.split(":")[1])):
            _die()  # Spark looks for the next batch once the previous one is committed
        end = super().latestOffset(start, limit)
        if end != start and _kill_at("plan", _logged("offsets")):
            _die()
        return end

    def partitions(self, start: Any, end: Any) -> Any:
        planned = super().partitions(start, end)
        if start != end and _kill_at("offsets", _logged("offsets") - 1):
            _die()
        return planned

    def read(self, partition: Any) -> Any:
        context = TaskContext.get()
        batch = context.getLocalProperty("streaming.sql.batchId") if context else None
        for rows in super().read(partition):
            if batch is not None and _kill_at("read", int(batch)):
                _die()
            if batch is not None and _kill_at("fail", int(batch)):
                raise ValueError(f"injected failure in micro-batch {batch}")
            yield rows


class KillingStreamWriter(StreamWriter):
    def commit(self, messages: Any, batchId: int) -> None:
        if _kill_at("sink-before", batchId):
            _die()
        super().commit(messages, batchId)
        if _kill_at("sink-after", batchId):
            _die()


class KillingSource(AppendTableDataSource):
    @classmethod
    def name(cls) -> str:
        return "appendtable_killing"

    def streamReader(self, schema: Any) -> StreamSource:
        reader = super().streamReader(schema)
        killing = KillingStreamSource.__new__(KillingStreamSource)
        killing.__dict__.update(reader.__dict__)
        return killing

    def streamWriter(self, schema: Any, overwrite: bool) -> StreamWriter:
        writer = super().streamWriter(schema, overwrite)
        killing = KillingStreamWriter.__new__(KillingStreamWriter)
        killing.__dict__.update(writer.__dict__)
        return killing


def _kill_around_sink(point: str, batch_id: int) -> None:
    if _kill_at(point, batch_id):
        _die()


def main() -> None:
    config = json.loads(sys.argv[1])
    spark = driver_session()
    appendtable_spark.register(spark)
    spark.dataSource.register(KillingSource)
    query = restart_query.start(
        spark, config, format_name=KillingSource.name(), hook=_kill_around_sink
    )
    print(json.dumps(restart_query.outcome(query)), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
