"""Self-describing run directories: a writer for the runner and a loader for everyone else.

A run directory (schema version 2, documented in ``docs/RESULTS.md``)::

    result.json        the record: scenario, params, machine, clock, status, series index
    series/NAME.csv    time series, one header row, comma separated, empty cell = n/a
    raw/FILE           each tool's raw output, as it printed it
    metrics.csv/.json  derived numbers (``bufferbloat.results.metrics.write_metrics``)

Writing::

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
new one).

Reading::

    run = load_run(run_dir)
    run.record["status"]; run.series("tcp")["srtt_us"]    # numpy arrays, NaN = empty
"""

import csv
import datetime
import io
import json
import math
import os
import re
import threading
import time
import warnings

import numpy as np

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.errors import UsageError, warn
from bufferbloat.core.series import STRING_COLUMNS, CellRows, float_cell
from bufferbloat.net.qdiscs import kind_of

SCHEMA_VERSION = 2
RESULT_FILE = "result.json"
SERIES_DIR = "series"
RAW_DIR = "raw"
METRICS_CSV = "metrics.csv"
METRICS_JSON = "metrics.json"
STATUSES = ("running", "ok", "failed", "interrupted")
FINAL_STATUSES = ("ok", "failed", "interrupted")


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class ResultsError(UsageError):
    """A run directory that cannot be read: missing, not a run, or from a newer suite."""


# ----------------------------------------------------------------------------- writing

def _json_safe(obj):
    """``obj`` with NaN/inf floats replaced by None (strict JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return _json_safe(obj.item())
    return obj


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


def _check_name(name, what):
    """A series name: letters, digits, '_', '.', '-', not starting with '.'."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"invalid {what} {name!r}: letters, digits, '_', '.', '-' only, "
                         "not starting with '.'")
    return name


def _check_filename(name):
    """A raw file name: one path component, no leading dot, no NUL, at most 255 bytes."""
    if (not isinstance(name, str) or not name or name.startswith(".") or "/" in name
            or "\\" in name or "\0" in name or len(name.encode("utf-8")) > 255):
        raise ValueError(f"invalid raw file name {name!r}: one file name, no path "
                         "separators, not starting with '.'")
    return name


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
        _check_name(name, "series name")
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
        _check_filename(filename)
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
            record = _json_safe(self.record)
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


# ----------------------------------------------------------------------------- reading

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


def bottleneck_dev_name(record):
    """The bottleneck egress device a record names (``bottleneck_dev``: a name, or an
    older record's (namespace, dev) pair), or None."""
    dev = record.get("bottleneck_dev")
    if isinstance(dev, (list, tuple)):
        dev = dev[-1] if dev else None
    return dev


class Run:
    """One run directory, loaded: ``record`` (result.json as a dict), ``dir``,
    ``series(name)``, ``has(name)``, ``raw(filename)``, ``metrics()``."""

    def __init__(self, run_dir, record):
        self.dir = str(run_dir)
        self.record = record
        self.schema_version = record.get("schema_version")
        self._cache = {}
        #: metrics.json's ``metrics_version`` (1 when it has none), read by metrics()
        self.metrics_version = None
        #: set by bufferbloat.results.metrics.run_rows when stored metrics were stale
        self.metrics_recomputed = False

    def __repr__(self):
        return f"Run({self.dir!r}, status={self.record.get('status')!r})"

    @property
    def status(self):
        return self.record.get("status")

    @property
    def params(self):
        """The topology parameters as validated ({} when the record has none: a run
        that failed before its network was built)."""
        params = self.record.get("params")
        return params if isinstance(params, dict) else {}

    # -- what the record says: the one reading of result.json's layout for plots, reports,
    #    metrics and the health verdict
    @property
    def scenario(self):
        """The scenario as data, as the run recorded it ({} when the record has none)."""
        scn = self.record.get("scenario")
        return scn if isinstance(scn, dict) else {}

    @property
    def scenario_name(self):
        """The scenario's name ('?' when the record has none)."""
        scn = self.record.get("scenario")
        return scn.get("name", "?") if isinstance(scn, dict) else str(scn or "?")

    @property
    def error(self):
        """Why the run failed or was interrupted (None for a run that went well)."""
        return self.record.get("error")

    @property
    def config_key(self):
        """The key of the run's configuration (:mod:`bufferbloat.run.identity`), or None."""
        return self.record.get("config_key")

    @property
    def overrides(self):
        """The ``--set`` values the run was asked with."""
        return dict(self.record.get("overrides") or {})

    @property
    def label(self):
        """A short name of the run: scenario, then its overrides (``a1_fifo
        buffer_pkts=20``); the directory's name when the record names no scenario."""
        scn = self.record.get("scenario")
        name = scn.get("name") if isinstance(scn, dict) else (scn or os.path.basename(self.dir))
        extra = " ".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
        return f"{name} {extra}".strip()

    @property
    def qdisc(self):
        """(kind, params) of the bottleneck AQM as the record states it (``qdisc``, else
        the params' ``qdisc`` with no parameters)."""
        q = self.record.get("qdisc")
        if isinstance(q, dict):
            return str(q.get("kind") or ""), dict(q.get("params") or {})
        return str(self.params.get("qdisc") or ""), {}

    @property
    def aqm_target_ms(self):
        """The AQM's queueing-delay target, ms (its kind's ``target_ms``: PIE, CoDel,
        FQ-CoDel, CAKE), else None."""
        kind, params = self.qdisc
        info = kind_of(kind)
        try:
            value = info.target_ms(params) if info is not None else None
        except (TypeError, KeyError):
            return None
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def base_rtt_ms(self):
        """The propagation RTT of the path, ms: the record's ``base_rtt_ms``, else 4 x
        ``delay_ms`` (two links, both ways), else None."""
        value = self.record.get("base_rtt_ms")
        if isinstance(value, (int, float)):
            return float(value)
        delay = self.params.get("delay_ms")
        return 4.0 * float(delay) if isinstance(delay, (int, float)) else None

    @property
    def ping_interval_s(self):
        """The ping period of the run's (first) ping traffic, s, or None."""
        for spec in self.record.get("traffic") or []:
            if isinstance(spec, dict) and spec.get("kind") == "ping":
                value = spec.get("interval_s")
                if isinstance(value, (int, float)):
                    return float(value)
        return None

    @property
    def warmup_s(self):
        """Seconds of traffic left out of the statistics (0 when the record says none)."""
        value = self.record.get("warmup_s")
        return float(value) if isinstance(value, (int, float)) else 0.0

    @property
    def bottleneck_dev(self):
        """The bottleneck egress device the record names (``bottleneck_dev``: a name, or
        an older record's (namespace, dev) pair), or None."""
        return bottleneck_dev_name(self.record)

    @property
    def health(self):
        """The health verdict's record ({} when the run was not assessed)."""
        return self.record.get("health") or {}

    @property
    def verdict(self):
        """'healthy', 'degraded', 'faulty', or 'unknown' (not assessed)."""
        return self.health.get("verdict", "unknown")

    @property
    def traffic_results(self):
        """Every traffic tool's summary (result.json's ``traffic_results``)."""
        return [e for e in self.record.get("traffic_results") or [] if isinstance(e, dict)]

    @property
    def machine(self):
        """Where the run happened (host, kernel, in the project VM...)."""
        return self.record.get("machine") or {}

    @property
    def bottleneck_mbit(self):
        """The bottleneck rate, Mbit/s, or None when the record does not say."""
        value = self.params.get("bottleneck_mbit")
        try:
            return float(value) if value is not None else None
        except (TypeError, ValueError):
            return None

    def series_names(self):
        """Names of the series this run holds."""
        names = set()
        listed = self.record.get("series")
        if isinstance(listed, dict):
            names |= set(listed)
        sdir = os.path.join(self.dir, SERIES_DIR)
        if os.path.isdir(sdir):
            names |= {f[:-4] for f in os.listdir(sdir) if f.endswith(".csv")}
        return sorted(names)

    def _series_path(self, name):
        listed = self.record.get("series")
        if isinstance(listed, dict) and isinstance(listed.get(name), dict):
            rel = listed[name].get("file")
            if rel and ".." not in rel.split("/"):
                return os.path.join(self.dir, rel)
        return os.path.join(self.dir, SERIES_DIR, f"{name}.csv")

    def has(self, name):
        """Whether the run holds series ``name``."""
        return os.path.isfile(self._series_path(name))

    def series(self, name):
        """Series ``name`` as {column: numpy array} (floats with NaN for empty cells,
        label columns as str arrays). A KeyError names the series the run has."""
        _check_name(name, "series name")
        if name not in self._cache:
            if os.path.isfile(self._series_path(name)):
                self._cache[name] = read_series_csv(self._series_path(name),
                                                    STRING_COLUMNS.get(name, ()))
            else:
                raise KeyError(f"run {self.dir} has no series {name!r} "
                               f"(it has: {', '.join(self.series_names()) or 'none'})")
        return self._cache[name]

    def derived(self, key, make):
        """``make()``, computed once per run and ``key`` and kept with its series (which
        are read once per Run too): a value several metrics read (e.g. the bottleneck
        leaf's backlog, once per flow). ``key`` names everything the value depends on
        beyond the series (e.g. the device)."""
        slot = ("derived", key)
        if slot not in self._cache:
            self._cache[slot] = make()
        return self._cache[slot]

    def metrics(self):
        """The metric rows the run stored (metrics.json, written once when the run ended
        ok, or by ``show --recompute``), or None when it has none or they cannot be
        read."""
        path = os.path.join(self.dir, METRICS_JSON)
        if not os.path.exists(path):
            return None
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            problem = f"not readable JSON ({exc})"
        else:
            rows = data.get("metrics") if isinstance(data, dict) else data
            problem = _metric_rows_problem(rows)
            if problem is None:
                version = data.get("metrics_version") if isinstance(data, dict) else None
                self.metrics_version = version if isinstance(version, int) else 1
                return rows
        warn(f"{path}: {problem}; the metrics are recomputed from the series")
        return None

    def missing_series(self, say=False):
        """Series the record lists whose file is not on disk (deleted, or never
        written), sorted; with ``say``, said in a warning when there are any."""
        listed = self.record.get("series")
        missing = sorted(n for n in (listed if isinstance(listed, dict) else {})
                         if _NAME.match(str(n)) and not self.has(n))
        if missing and say:
            warn(f"{self.dir}: series listed in its record but not on disk: "
                 f"{', '.join(missing)}")
        return missing

    def raw(self, filename, binary=False):
        """The raw output ``raw/FILENAME`` (str, or bytes with ``binary``)."""
        _check_filename(filename)
        path = os.path.join(self.dir, RAW_DIR, filename)
        if not os.path.isfile(path):
            raise KeyError(f"run {self.dir} has no raw file {filename!r}")
        with open(path, "rb") as f:
            data = f.read()
        return data if binary else data.decode("utf-8", errors="replace")


def _metric_rows_problem(rows):
    """What makes ``rows`` (metrics.json's ``metrics``) unusable, or None: a list of
    objects, each with ``scope``, ``name``, ``metric`` (strings) and a finite number
    ``value``."""
    if not isinstance(rows, list):
        return f"'metrics' is {type(rows).__name__}, expected a list of rows"
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"row {i} is {type(row).__name__}, expected an object"
        for key in ("scope", "name", "metric"):
            if not isinstance(row.get(key), str):
                return f"row {i}'s {key!r} is {row.get(key)!r}, expected a string"
        value = row.get("value")
        if not isinstance(value, (int, float)) or isinstance(value, bool) \
                or not math.isfinite(value):
            return f"row {i}'s 'value' is {value!r}, expected a number"
    return None


_NUMBER = (int, float)
#: The JSON type of each field of a record that its readers use, checked when present
#: (None, JSON's null, stands for a number that was NaN, or a value not known); every
#: record has a status (a run that failed early may have little else).
RECORD_TYPES = {
    "status": str, "error": str, "series": dict, "raw": list, "scenario": dict,
    "overrides": dict, "params": dict, "qdisc": dict, "knobs": dict, "traffic": list,
    "machine": dict, "tools": dict, "network": dict, "sysctls": dict, "sampler": dict,
    "timings": dict, "summary": dict, "health": dict, "idle_rtt": dict,
    "run_config": dict, "scaling": dict, "traffic_results": list, "started": str,
    "finished": str, "profile": str, "bottleneck_dev": (str, list), "run_key": str,
    "config_key": str, "duration_s": _NUMBER, "warmup_s": _NUMBER,
    "base_rtt_ms": _NUMBER, "sample_period_s": _NUMBER, "t0_realtime": _NUMBER,
    "realtime_minus_monotonic": _NUMBER, "wall_s": _NUMBER,
    "traffic_start_s": _NUMBER, "traffic_overrun_s": _NUMBER, "phases_s": dict,
}
REQUIRED_FIELDS = ("status",)


def check_record(path, record):
    """ResultsError (exit 2) naming ``path`` and the field when a record lacks a field
    every record has, or holds a field of the wrong type: a corrupt record is bad input,
    refused as a whole rather than read in part."""
    for key in REQUIRED_FIELDS:
        if key not in record:
            raise ResultsError(f"{path}: corrupt record: no {key!r} field")
    for key, kind in RECORD_TYPES.items():
        value = record.get(key)
        if value is None:
            if key in REQUIRED_FIELDS:
                raise ResultsError(f"{path}: corrupt record: {key!r} is null")
            continue
        if isinstance(value, bool) or not isinstance(value, kind):
            names = " or ".join(t.__name__ for t in (kind if isinstance(kind, tuple)
                                                      else (kind,)))
            names = names.replace("dict", "object").replace("list", "array") \
                .replace("str", "text").replace("int or float", "number")
            raise ResultsError(f"{path}: corrupt record: {key!r} is "
                               f"{type(value).__name__} {value!r:.40}, not {names}")
    if record["status"] not in STATUSES:
        raise ResultsError(f"{path}: corrupt record: status {record['status']!r} (one of "
                           f"{', '.join(STATUSES)})")
    bad = [k for k, v in (record.get("series") or {}).items() if not isinstance(v, dict)]
    if bad:
        raise ResultsError(f"{path}: corrupt record: series {bad[0]!r} is not an object")
    scn = record.get("scenario")
    if scn is not None and not isinstance(scn.get("name", ""), str):
        raise ResultsError(f"{path}: corrupt record: scenario name "
                           f"{scn.get('name')!r} is not text")
    return record


def load_run(run_dir):
    """Load the run in ``run_dir``. Raises ResultsError (a UsageError) when there is no
    result.json, it is not a JSON object, its schema is not the one this code reads
    (an older one: schema 1; a newer one), or it is corrupt (:func:`check_record`)."""
    path = os.path.join(str(run_dir), RESULT_FILE)
    if not os.path.exists(str(run_dir)):
        raise ResultsError(f"{run_dir}: no such run (the directory does not exist)")
    if not os.path.isfile(path):
        raise ResultsError(f"{run_dir}: not a run directory (no {RESULT_FILE})")
    try:
        with open(path) as f:
            record = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ResultsError(f"{path}: not a JSON object")
    version = record.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ResultsError(f"{path}: invalid schema_version {version!r}")
    if version < SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema_version {version} (a run of the first runner, "
                           f"without series) is no longer read; schema {SCHEMA_VERSION} "
                           f"runs are")
    if version > SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema_version {version} is newer than this suite "
                           f"reads (up to {SCHEMA_VERSION}): update the checkout")
    return Run(run_dir, check_record(path, record))


def is_run_dir(path):
    """Whether ``path`` is a run directory (holds a result.json)."""
    return os.path.isfile(os.path.join(str(path), RESULT_FILE))


def label_groups(data, key):
    """{label: boolean mask} of a loaded series ``data`` by its label column ``key``
    (e.g. tcp's ``flow``), in order of first appearance; {} without that column."""
    labels = data.get(key)
    if labels is None or len(labels) == 0:
        return {}
    return {str(label): labels == label for label in dict.fromkeys(labels.tolist())}


#: A recorded run a fix made obsolete, kept beside its point under this suffix: reports
#: and sweeps no longer read it (:func:`superseded_why`, :func:`find_runs`).
SUPERSEDED_SUFFIX = re.compile(r"\.superseded-\d+$")


def superseded_why(record):
    """Why a recorded run no longer measures what its configuration says (a fix changed
    what the same configuration runs, so its key stayed the same), or None. A sweep runs
    such a point again and keeps the old run aside (``rep-N.superseded-K``).

    * A UDP stream recorded without ``t_launch`` (before 2026-11-28) began at the run's
      t0 + its start: 2-4 s before its time in the traffic (a.5's stream at 7-8 s of a
      30 s run, not 10 s)."""
    for entry in (record or {}).get("traffic_results") or []:
        if isinstance(entry, dict) and entry.get("kind") == "UdpStream" \
                and "t_launch" not in entry:
            return ("its UDP stream began 2-4 s before its time (at the run's t0 + its "
                    "start, not the traffic's; fixed 2026-11-28)")
    return None


def find_runs(root):
    """Run directories under ``root`` (each holding a result.json), sorted; ``root``
    itself counts when it is one. A run set aside as superseded is not one of them."""
    found = []
    for dirpath, dirnames, filenames in os.walk(str(root)):
        if SUPERSEDED_SUFFIX.search(os.path.normpath(dirpath)):
            dirnames[:] = []
            continue
        if RESULT_FILE in filenames:
            found.append(dirpath)
            dirnames[:] = []  # a run does not contain runs (series/, raw/)
        else:
            dirnames.sort()
    return sorted(found)
