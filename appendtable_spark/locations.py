"""Table locations as Spark's Hadoop file systems name them."""

from __future__ import annotations

__all__ = ["spark_location"]


def spark_location(table_uri: str, path: str) -> str:
    """The Hadoop URI of ``path`` (relative to the table at ``table_uri``): ``file://`` for
    local tables, ``s3a://`` for S3."""
    if "://" not in table_uri:
        return f"file://{table_uri}/{path}"
    scheme, rest = table_uri.split("://", 1)
    scheme = "s3a" if scheme in ("s3", "s3a") else scheme
    return f"{scheme}://{rest}/{path}"
