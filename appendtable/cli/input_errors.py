"""Errors of the command line's own inputs (arguments, input files)."""

from __future__ import annotations

__all__ = ["CliError", "InputError", "UsageError"]


class CliError(Exception):
    """Printed as one ``error: ...`` line; the process exits with ``exit_code``."""

    exit_code = 1


class UsageError(CliError):
    """The command line itself is wrong: a malformed schema, filter, duration or option."""

    exit_code = 2


class InputError(CliError):
    """An input file is missing, unreadable or does not parse."""
