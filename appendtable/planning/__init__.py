"""Scan and write planning: partitions, buckets and file selection."""
