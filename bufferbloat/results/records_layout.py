"""The run directory's layout, which the writer and the loader both follow.

A run directory (schema version 2, documented in ``docs/reference/results.md``)::

    result.json        the record: scenario, params, machine, clock, status, series index
    series/NAME.csv    time series, one header row, comma separated, empty cell = n/a
    raw/FILE           each tool's raw output, as it printed it
    metrics.csv/.json  derived numbers (``bufferbloat.results.metrics.write_metrics``)

Here: the schema version, the file and folder names, the record's statuses, the names
a series and a raw file may have, and the error a directory that cannot be read raises.
Written by :mod:`bufferbloat.results.records_writer`, read by
:mod:`bufferbloat.results.records`.
"""

import re

from bufferbloat.core.errors import UsageError

SCHEMA_VERSION = 2
RESULT_FILE = "result.json"
SERIES_DIR = "series"
RAW_DIR = "raw"
METRICS_CSV = "metrics.csv"
METRICS_JSON = "metrics.json"
STATUSES = ("running", "ok", "failed", "interrupted")
FINAL_STATUSES = ("ok", "failed", "interrupted")

#: A series name: letters, digits, '_', '.', '-', not starting with '.'.
SERIES_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class ResultsError(UsageError):
    """A run directory that cannot be read: missing, not a run, or from a newer suite."""


def check_name(name, what):
    """A series name: letters, digits, '_', '.', '-', not starting with '.'."""
    if not isinstance(name, str) or not SERIES_NAME.match(name):
        raise ValueError(f"invalid {what} {name!r}: letters, digits, '_', '.', '-' only, "
                         "not starting with '.'")
    return name


def check_filename(name):
    """A raw file name: one path component, no leading dot, no NUL, at most 255 bytes."""
    if (not isinstance(name, str) or not name or name.startswith(".") or "/" in name
            or "\\" in name or "\0" in name or len(name.encode("utf-8")) > 255):
        raise ValueError(f"invalid raw file name {name!r}: one file name, no path "
                         "separators, not starting with '.'")
    return name

