"""Lines of a CSV file, for error messages: pyarrow counts records, and a quoted field may span
several lines, so the n-th record is not the n-th line.

Only on the error path: the file is read again with the csv module up to the record named.
"""

from __future__ import annotations

import csv

__all__ = ["ragged_line", "record_line"]


def record_line(path: str, record: int, field: int) -> int | None:
    """The line of the file (1 = the first) holding field ``field`` of data record ``record``
    (0 = the first after the header), counting as pyarrow's reader does: an empty line is no
    record. None if the file cannot be read again (standard input) or parsed."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
            reader = csv.reader(handle)
            start = 1  # the line the next record starts on
            seen = -1  # records read, the header being record -1
            for row in reader:
                if row:
                    if seen == record:
                        return start + sum(_breaks(value) for value in row[:field])
                    seen += 1
                start = reader.line_num + 1
    except (OSError, csv.Error):
        return None
    return None


def ragged_line(path: str, columns: int) -> int | None:
    """The line (1 = the first) on which the first data record that does not have
    ``columns`` fields starts, skipping empty lines as pyarrow's reader does. None if the file
    cannot be read again or parsed, or every record has ``columns`` fields."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
            reader = csv.reader(handle)
            start, header = 1, True
            for row in reader:
                if row:
                    if not header and len(row) != columns:
                        return start
                    header = False
                start = reader.line_num + 1
    except (OSError, csv.Error):
        return None
    return None


def _breaks(value: str) -> int:
    """Line breaks inside a quoted value (CR LF counts once, as a lone CR or LF does)."""
    return value.count("\n") + value.count("\r") - value.count("\r\n")
