"""Spark adapter for appendtable (built on PySpark's Python Data Source API)."""
