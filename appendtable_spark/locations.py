"""Table locations as Spark's Hadoop file systems name them (the core's backends know)."""

from __future__ import annotations

import appendtable as at

__all__ = ["spark_location"]


def spark_location(table: at.Table, path: str) -> str:
    """The Hadoop URI of ``path`` (relative to ``table``'s root): ``file://`` for local
    tables, ``s3a://`` for S3, the table's own scheme elsewhere."""
    return table.hadoop_uri(path)
