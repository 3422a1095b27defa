"""Benchmarks of appendtable against plain ``pyarrow.parquet`` (DESIGN.md §12).

Run ``python -m benchmarks.run [--quick] [--only NAME ...]`` from the repository root; results go
to ``benchmarks/README.md`` and ``benchmarks/results.json``.
"""
