"""Writing a run directory (its layout: :mod:`bufferbloat.results.records_layout`)::

    w = RunWriter(run_dir)
    t0 = w.start_clock()                       # t0, t0_realtime, realtime_minus_monotonic
    w.record.update(scenario=..., params=...)
    w.save()                                   # status "running"
    ping = w.series("ping", ["probe", "t", "seq", "rtt_ms"])
    ping.append({"probe": "h1", "t": 0.1, "seq": 1, "rtt_ms": 20.3})
    w.raw("ping-h1.txt", text)
    w.close("ok")                              # or "failed"/"interrupted", error=...

Rows reach the disk at least every ``flush_interval_s`` (0.5 s) and every
``flush_rows`` rows, so a run that is killed keeps what it recorded; ``result.json`` is
replaced atomically, so it is always a complete JSON document (the previous one or the
new one). Read back with :func:`bufferbloat.results.records.load_run`.
"""

import csv
import datetime
import math
import os
import threading
import time

import numpy as np

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.series import CellRows
from bufferbloat.results.records_csv import format_cell
from bufferbloat.results.records_layout import (
    FINAL_STATUSES,
    RAW_DIR,
    RESULT_FILE,
    SCHEMA_VERSION,
    SERIES_DIR,
    STATUSES,
    check_filename,
    check_name,
)


def json_safe(obj):
    """``obj`` with NaN/inf floats replaced by None (strict JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return json_safe(obj.item())
    return obj


class SeriesWriter:
    """Appends rows to ``series/NAME.csv``. Thread-safe.

    Rows are dicts (missing keys -> empty cells; unknown keys are an error) or sequences
    of exactly ``len(columns)`` values. The file is flushed every ``flush_rows`` rows,
    on an append when the last flush is older than ``flush_interval_s``, and every
    ``flush_interval_s / 2`` by the owning :class:`RunWriter`'s background flusher.
    """

    def __init__(self, path, name, columns, flush_rows=100, flush_interval_s=0.5):
        columns = [str(c) for c in columns]
        if not columns or len(set(columns)) != len(columns) or "" in columns:
            raise ValueError(f"series {name!r}: columns must be non-empty and unique, "
                             f"got {columns!r}")
        self.path, self.name, self.columns = path, name, columns
        self.flush_rows, self.flush_interval_s = flush_rows, flush_interval_s
        self.rows = 0
        self.closed = False
        self._index = {c: i for i, c in enumerate(columns)}
        self._lock = threading.Lock()
        self._file = open(path, "w", newline="")
        self._csv = csv.writer(self._file, lineterminator="\n")
        self._csv.writerow(columns)
        self._pending = 0
        self._last_flush = time.monotonic()
        self._flush_locked(force=True)

    def _cells(self, row):
        if isinstance(row, dict):
            unknown = set(row) - set(self._index)
            if unknown:
                raise ValueError(f"series {self.name!r}: unknown column(s) "
                                 f"{sorted(unknown)} (columns: {self.columns})")
            return [format_cell(row.get(c)) for c in self.columns]
        row = list(row)
        if len(row) != len(self.columns):
            raise ValueError(f"series {self.name!r}: row has {len(row)} values, "
                             f"expected {len(self.columns)} ({self.columns})")
        return [format_cell(v) for v in row]

    def append(self, row):
        """Append one row (dict or sequence)."""
        cells = self._cells(row)
        with self._lock:
            if self.closed:
                raise ValueError(f"series {self.name!r} is closed")
            self._csv.writerow(cells)
            self.rows += 1
            self._pending += 1
            if (self._pending >= self.flush_rows
                    or time.monotonic() - self._last_flush >= self.flush_interval_s):
                self._flush_locked()

    __call__ = append

    def extend(self, rows):
        """Append several rows, then flush. A :class:`~bufferbloat.core.series.CellRows`
        is written as it is (its rows' lengths checked)."""
        if isinstance(rows, CellRows):
            n = len(self.columns)
            bad = next((r for r in rows if len(r) != n), None)
            if bad is not None:
                raise ValueError(f"series {self.name!r}: row has {len(bad)} cells, "
                                 f"expected {n} ({self.columns})")
            cells = rows
        else:
            cells = [self._cells(r) for r in rows]
        with self._lock:
            if self.closed:
                raise ValueError(f"series {self.name!r} is closed")
            self._csv.writerows(cells)
            self.rows += len(cells)
            self._pending += len(cells)
            self._flush_locked()

    def _flush_locked(self, force=False):
        if self._pending or force:
            self._file.flush()
            self._pending = 0
        self._last_flush = time.monotonic()

    def flush(self, if_older_than_s=None):
        """Write buffered rows to the file (only if the last flush is older than
        ``if_older_than_s``, when given)."""
        with self._lock:
            if self.closed:
                return
            if if_older_than_s is None or time.monotonic() - self._last_flush >= if_older_than_s:
                self._flush_locked()

    def close(self):
        """Flush, fsync and close. Idempotent."""
        with self._lock:
            if self.closed:
                return
            self._file.flush()
            try:
                os.fsync(self._file.fileno())
            except OSError:
                pass
            self._file.close()
            self.closed = True

    def describe(self):
        """The series' entry in result.json: {file, columns, rows}."""
        return {"file": f"{SERIES_DIR}/{self.name}.csv", "columns": list(self.columns),
                "rows": self.rows}


class RunWriter:
    """Creates and fills one run directory.

    ``record`` is the dict saved as result.json; the runner fills it (scenario, params,
    derived, machine, tools, sysctls, network, started, t0_realtime,
    realtime_minus_monotonic, duration_s, traffic, ...). ``schema_version``, ``status``,
    ``error``, ``series`` and ``raw`` are kept by the writer. Usable as a context manager:
    leaving the block closes the run as ok, failed (with the exception as ``error``) or
    interrupted (KeyboardInterrupt).
    """

    def __init__(self, run_dir, flush_rows=100, flush_interval_s=0.5):
        self.dir = str(run_dir)
        os.makedirs(os.path.join(self.dir, SERIES_DIR), exist_ok=True)
        os.makedirs(os.path.join(self.dir, RAW_DIR), exist_ok=True)
        self.flush_rows, self.flush_interval_s = flush_rows, flush_interval_s
        self.record = {"schema_version": SCHEMA_VERSION, "status": "running", "error": None,
                       "series": {}, "raw": []}
        self.t0 = None
        self._series = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flusher = None
        self.closed = False

    def start_clock(self):
        """Take the run's t0 now: ``time.monotonic()``, and record ``started`` (ISO),
        ``t0_realtime`` and ``realtime_minus_monotonic``. Returns t0 (monotonic s)."""
        mono, real = time.monotonic(), time.time()
        self.t0 = mono
        self.record["started"] = datetime.datetime.fromtimestamp(real).astimezone().isoformat()
        self.record["t0_realtime"] = real
        self.record["realtime_minus_monotonic"] = real - mono
        return mono

    def now(self):
        """Seconds since t0 (``start_clock()`` must have been called)."""
        if self.t0 is None:
            raise ValueError("start_clock() was not called")
        return time.monotonic() - self.t0

    @property
    def path(self):
        """Path of result.json."""
        return os.path.join(self.dir, RESULT_FILE)

    # -- series
    def series(self, name, columns):
        """The appender of ``series/NAME.csv`` (created on first use; asking again with
        the same columns returns the same appender)."""
        check_name(name, "series name")
        with self._lock:
            if self.closed:
                raise ValueError("run is closed")
            existing = self._series.get(name)
            if existing is not None:
                if list(existing.columns) != [str(c) for c in columns]:
                    raise ValueError(f"series {name!r} already has columns "
                                     f"{existing.columns}, not {list(columns)}")
                return existing
            writer = SeriesWriter(os.path.join(self.dir, SERIES_DIR, f"{name}.csv"), name,
                                  columns, self.flush_rows, self.flush_interval_s)
            self._series[name] = writer
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                                 name=f"flush {self.dir}")
                self._flusher.start()
            return writer

    def add_rows(self, name, columns, rows):
        """Append a batch of rows to series ``name`` (created if new) and flush."""
        writer = self.series(name, columns)
        writer.extend(rows)
        return writer

    def _flush_loop(self):
        # every half interval, whatever is buffered: a row reaches the file within
        # flush_interval_s of its append even when no further row follows
        while not self._stop.wait(self.flush_interval_s / 2):
            for writer in list(self._series.values()):
                writer.flush()

    # -- raw outputs
    def raw(self, filename, data):
        """Write a tool's raw output (str or bytes) to ``raw/FILENAME``; returns its path.
        ``data`` None: the tool wrote the file there itself (NetPerfMeter's vectors, 7 MB
        a minute at 15 Mbit/s): it is listed, not written again; it must exist."""
        check_filename(filename)
        path = os.path.join(self.dir, RAW_DIR, filename)
        if data is None:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"raw/{filename}: listed as written by its tool, "
                                        "but it is not there")
        else:
            if isinstance(data, str):
                data = data.encode("utf-8")
            with open(path, "wb") as f:
                f.write(bytes(data))
        with self._lock:
            if filename not in self.record["raw"]:
                self.record["raw"].append(filename)
        return path

    # -- the record
    def save(self):
        """Write result.json atomically with the series as they stand. Callable any
        number of times (e.g. once with status "running", once at the end)."""
        with self._lock:
            self.record["series"] = {n: w.describe() for n, w in self._series.items()}
            record = json_safe(self.record)
        if record.get("status") not in STATUSES:
            raise ValueError(f"invalid status {record.get('status')!r} (allowed: {STATUSES})")
        write_json_atomic(self.path, record)

    def close(self, status, error=None):
        """Close every series, set the final ``status`` (ok, failed, interrupted) and
        ``error``, and save. Idempotent in effect: a second close only re-saves."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"invalid final status {status!r} (allowed: {FINAL_STATUSES})")
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        for writer in list(self._series.values()):
            writer.close()
        self.record["status"] = status
        self.record["error"] = None if error is None else str(error)
        self.record.setdefault("finished", datetime.datetime.now().astimezone().isoformat())
        self.closed = True
        self.save()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.closed:
            return False
        if exc_type is None:
            self.close("ok")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("interrupted", "KeyboardInterrupt")
        else:
            self.close("failed", f"{exc_type.__name__}: {exc}")
        return False

