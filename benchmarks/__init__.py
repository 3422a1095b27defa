"""Benchmarks of appendtable against plain ``pyarrow.parquet``, each case against its target.

Run ``python -m benchmarks.run [--quick] [--only NAME ...]`` from the repository root; results go
to ``benchmarks/README.md`` and ``benchmarks/results.json``.
"""
