"""The Parquet format of dataset reads (pyarrow.dataset), built on first use.

Every dataset read of data files, the table's own and the engines' (the Arrow hand-off), reads
INT96 timestamps of adopted Spark files in microseconds and checks every page against its CRC.

``pyarrow.dataset`` is imported only when the first such read runs: importing it imports pandas
(pyarrow builds a scalar while loading it, which loads its pandas shim), about a third of a
second of CPU that every process importing appendtable would otherwise pay, though most never
scan a dataset: the CLI, every worker, and each of the Python processes Spark starts to plan or
commit a query.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from appendtable.datafiles.file_columns import INT96_UNIT

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = ["datasets", "parquet_format"]


@functools.cache
def datasets() -> ModuleType:
    """The ``pyarrow.dataset`` module, imported on the first call."""
    return importlib.import_module("pyarrow.dataset")


@functools.cache
def parquet_format() -> ds.ParquetFileFormat:
    """The one Parquet format of dataset reads (immutable, shared by every thread)."""
    module = datasets()
    return module.ParquetFileFormat(
        read_options=module.ParquetReadOptions(coerce_int96_timestamp_unit=INT96_UNIT),
        default_fragment_scan_options=module.ParquetFragmentScanOptions(
            page_checksum_verification=True
        ),
    )
