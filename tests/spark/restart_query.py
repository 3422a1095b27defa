"""The streaming query of the restart tests, built from a pipeline's config: in a driver of its
own (``restart_app.py``, which can be SIGKILLed) or in the test session (the runs that kill
nothing: a restart from the checkpoint is a new query on it in either)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.errors import StreamingQueryException

import appendtable_spark

#: Called around the foreachBatch sink's write of a micro-batch: (``"sink-before"`` or
#: ``"sink-after"``, batch id).
SinkHook = Callable[[str, int], None]


def _no_hook(point: str, batch_id: int) -> None:
    return None


def start(
    spark: Any, config: dict[str, Any], *, format_name: str, hook: SinkHook = _no_hook
) -> Any:
    """Start the query of ``config`` (see ``restart_app.py``), the source and the ``format``
    sink read and written as ``format_name``; trigger AvailableNow unless ``trigger`` is
    ``once``."""
    reader = spark.readStream.format(format_name)
    for key, value in config["options"].items():
        reader = reader.option(key, value)
    stream = reader.load(config["source"])
    if config["sink_kind"] == "format":
        writer = stream.writeStream.format(format_name)
        if config.get("commit_user"):
            writer = writer.option("commitUser", config["commit_user"])
        if config.get("reuse"):
            writer = writer.option("commitUserReuse", config["reuse"])
    else:
        settings = {"commit_user_reuse": config["reuse"]} if config.get("reuse") else {}
        write = appendtable_spark.foreach_batch_sink(
            config["sink"], commit_user=config.get("commit_user"), **settings
        )

        def sink(batch: Any, batch_id: int) -> None:
            hook("sink-before", batch_id)
            write(batch, batch_id)
            hook("sink-after", batch_id)

        writer = stream.writeStream.foreachBatch(sink)
    writer = writer.option("checkpointLocation", config["checkpoint"])
    if config.get("trigger") == "once":
        writer = writer.trigger(once=True)
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start(config["sink"]) if config["sink_kind"] == "format" else writer.start()


def outcome(query: Any) -> dict[str, Any]:
    """Wait for ``query`` to end: ``{"status": "ok"}``, or ``{"status": "failed", "error":
    ...}`` when the query failed (the test checks the error is a named one)."""
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        return {"status": "failed", "error": str(exc)}
    return {"status": "ok"}
