"""The series files' CSV format: a cell as it is written, and a file read back.

A cell is empty for None and NaN, ``1``/``0`` for a bool, and the shortest exact
representation of a float (:func:`format_cell`). A file reads back as {column: numpy
array}: numbers as floats (NaN for an empty cell), any other column as text
(:func:`read_series_csv`); a plain file (no quoting, complete) is parsed by numpy's
compiled reader, any other by the csv module.
"""

import csv
import io
import math
import warnings

import numpy as np

from bufferbloat.core.series import float_cell
from bufferbloat.results.records_layout import ResultsError


def format_cell(value):
    """One CSV cell: None/NaN -> empty; bool -> 1/0; float -> shortest exact repr."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (float, np.floating)):
        return float_cell(float(value))  # repr round-trips exactly: no more digits
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


def _parse_float(cell):
    return math.nan if cell == "" else float(cell)


def _is_number(cell):
    if cell == "":
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _fill_empty(body):
    """``body`` with every empty cell written ``nan`` (text operations, compiled)."""
    if ",," not in body and "\n," not in body and ",\n" not in body \
            and not body.startswith(","):
        return body
    # twice: ",,," holds two empty cells and one pass replaces every other one
    text = ("\n" + body).replace(",,", ",nan,").replace(",,", ",nan,")
    return text.replace("\n,", "\nnan,").replace(",\n", ",nan\n")[1:]


def _read_plain_csv(text, string_columns):
    """The same columns as :func:`read_series_csv` for a complete file with no quoting,
    parsed by numpy's compiled reader; None for any other file (the general reader
    then decides). Empty cells are read as NaN (written ``nan`` first); a column is
    read as text when ``string_columns`` names it or its first cell is not a number.
    Measured on the five quick points of bench/bench_overhead.py (qdisc.csv has empty
    cells, tcp.csv and npm_msg.csv text columns): 0.99 s in the general reader, 0.33 s
    here, on the host; under TCG every second here is ~13."""
    head, _, body = text.partition("\n")
    if not body or '"' in text or not text.endswith("\n"):
        return None
    header = head.rstrip("\r").split(",")
    first = body[:body.find("\n")].rstrip("\r").split(",")
    if len(first) != len(header):
        return None
    strings = [j for j, c in enumerate(header)
               if c in string_columns or not _is_number(first[j])]
    numeric = [j for j in range(len(header)) if j not in strings]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # a ragged or empty file: not ours
            nums = (np.loadtxt(io.StringIO(_fill_empty(body)), delimiter=",",
                               usecols=numeric, ndmin=2, dtype=float, comments=None)
                    if numeric else None)
            strs = (np.loadtxt(io.StringIO(body), delimiter=",", usecols=strings,
                               ndmin=2, dtype=str, comments=None) if strings else None)
    except (ValueError, UserWarning):
        return None
    out = {}
    for k, j in enumerate(numeric):
        out[header[j]] = nums[:, k].copy()
    for k, j in enumerate(strings):
        out[header[j]] = strs[:, k].copy()
    return {c: out[c] for c in header}


def read_series_csv(path, string_columns=()):
    """A series file as {column: numpy array}.

    A column whose every non-empty cell is a number is a float array (NaN = empty cell);
    any other column, and every column in ``string_columns``, is an array of str. A last
    line cut short by an interruption is ignored; a malformed line elsewhere is an error.
    """
    with open(path, newline="") as f:
        text = f.read()
    fast = _read_plain_csv(text, string_columns)
    if fast is not None:
        return fast
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise ResultsError(f"{path}: empty series file (no header row)")
    header, body = rows[0], rows[1:]
    if body and not text.endswith("\n"):
        body = body[:-1]  # the row being written when the run was interrupted
    for i, row in enumerate(body, 2):
        if len(row) != len(header):
            raise ResultsError(f"{path}:{i}: {len(row)} cells, header has {len(header)}")
    out = {}
    for j, col in enumerate(header):
        cells = [row[j] for row in body]
        if col not in string_columns:
            try:
                out[col] = np.array([_parse_float(c) for c in cells], dtype=float)
                continue
            except ValueError:
                pass
        out[col] = np.array(cells, dtype=str)
    return out
