"""Self-describing run directories: a writer for the runner and a loader for everyone else.

A run directory (schema version 2, documented in ``docs/RESULTS.md``)::

    result.json        the record: scenario, params, machine, clock, status, series index
    series/NAME.csv    time series, one header row, comma separated, empty cell = n/a
    raw/FILE           each tool's raw output, as it printed it
    metrics.csv/.json  derived numbers (``bufferbloat.metrics.write_metrics``)

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
import tempfile
import threading
import time

import numpy as np

from .errors import UsageError

SCHEMA_VERSION = 2
RESULT_FILE = "result.json"
SERIES_DIR = "series"
RAW_DIR = "raw"
STATUSES = ("running", "ok", "failed", "interrupted")
FINAL_STATUSES = ("ok", "failed", "interrupted")

#: The standard series and their columns (docs/RESULTS.md). Other series may be written;
#: these are the ones the metrics know.
SERIES_COLUMNS = {
    "qdisc": ["t", "dev", "handle", "parent", "kind", "qlen_pkts", "backlog_bytes",
              "sent_bytes", "sent_pkts", "drops", "overlimits", "requeues", "marks",
              "early_drops", "prob", "delay_us", "maxq_pkts", "ctl_q_pkts",
              "ctl_q_old_pkts", "ctl_prob_prev", "ctl_updates"],
    "tcp": ["t", "flow", "host", "src", "sport", "dst", "dport", "cca", "state",
            "cwnd_pkts", "ssthresh_pkts", "srtt_us", "rttvar_us", "mss_bytes",
            "in_flight_pkts", "retrans_total", "bytes_acked", "delivery_rate_bps",
            "pacing_rate_bps", "bbr_bw_bps", "bbr_min_rtt_us", "ca_state",
            "delivered_ce_pkts", "min_rtt_us", "data_segs_out", "bytes_sent"],
    "ping": ["probe", "t", "seq", "rtt_ms"],
    "iperf": ["flow", "t_start", "t_end", "bytes", "bits_per_second", "retransmits",
              "snd_cwnd_bytes", "rtt_us"],
    "web": ["fetch", "t", "total_s", "connect_s", "ttfb_s", "size_bytes", "http_code", "ok"],
    "udp": ["stream", "seq", "t_sent", "t_recv", "size_bytes"],
    "npm": ["flow", "node", "t_start", "t_end", "sent_bytes", "received_bytes",
            "lost_bytes"],
    "npm_msg": ["flow", "seq", "t_sent", "t_recv", "size_bytes"],
}

#: Columns that are labels: always loaded as strings, even when they look like numbers.
STRING_COLUMNS = {
    "qdisc": {"dev", "handle", "parent", "kind"},
    "tcp": {"flow", "host", "src", "dst", "cca", "state"},
    "ping": {"probe"},
    "iperf": {"flow"},
    "web": {"fetch"},
    "udp": {"stream"},
    "npm": {"flow", "node"},
    "npm_msg": {"flow"},
}

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class ResultsError(UsageError):
    """A run directory that cannot be read: missing, not a run, or from a newer suite."""


# ----------------------------------------------------------------------------- writing

def write_json_atomic(path, data):
    """Write ``data`` as JSON to ``path`` so that ``path`` is never half-written.

    The document is serialized in memory first (a serialization error leaves the old file
    untouched and no temporary behind), written to a temporary file in the same
    directory, fsynced, then renamed over ``path`` (``os.replace`` is atomic on POSIX).
    """
    text = json.dumps(data, indent=1, default=str, allow_nan=False)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=directory)
    try:
        os.fchmod(fd, 0o644)   # results are for everyone to read (mkstemp makes 0600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


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
        value = float(value)
        if math.isnan(value):
            return ""
        return repr(value)  # round-trips exactly: full precision, no more digits
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
        """Append several rows, then flush."""
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
        """Write a tool's raw output (str or bytes) to ``raw/FILENAME``; returns its path."""
        _check_filename(filename)
        path = os.path.join(self.dir, RAW_DIR, filename)
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


def read_series_csv(path, string_columns=()):
    """A series file as {column: numpy array}.

    A column whose every non-empty cell is a number is a float array (NaN = empty cell);
    any other column, and every column in ``string_columns``, is an array of str. A last
    line cut short by an interruption is ignored; a malformed line elsewhere is an error.
    """
    with open(path, newline="") as f:
        text = f.read()
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


class Run:
    """One run directory, loaded: ``record`` (result.json as a dict), ``dir``,
    ``series(name)``, ``has(name)``, ``raw(filename)``.

    Schema 1 runs (result.json with ``measurements``, no series/) are converted on load
    as far as the old record allows (ping, the bottleneck leaf's qdisc stats, iperf3
    intervals); see docs/RESULTS.md.
    """

    def __init__(self, run_dir, record):
        self.dir = str(run_dir)
        self.record = record
        self.schema_version = record.get("schema_version", 1)
        self._cache = {}
        self._v1 = _series_from_v1(record) if self.schema_version == 1 else {}

    def __repr__(self):
        return f"Run({self.dir!r}, status={self.record.get('status')!r})"

    @property
    def status(self):
        return self.record.get("status")

    @property
    def params(self):
        """The topology parameters as validated (schema 1: the scenario's params with
        the run's overrides)."""
        if isinstance(self.record.get("params"), dict):
            return self.record["params"]
        scn = self.record.get("scenario")
        params = dict(scn.get("params", {})) if isinstance(scn, dict) else {}
        for key, value in (self.record.get("overrides") or {}).items():
            if not key.startswith("qdisc."):
                params[key] = value
        return params

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
        names = set(self._v1)
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
        return name in self._v1 or os.path.isfile(self._series_path(name))

    def series(self, name):
        """Series ``name`` as {column: numpy array} (floats with NaN for empty cells,
        label columns as str arrays). A KeyError names the series the run has."""
        _check_name(name, "series name")
        if name not in self._cache:
            if name in self._v1:
                self._cache[name] = self._v1[name]
            elif os.path.isfile(self._series_path(name)):
                self._cache[name] = read_series_csv(self._series_path(name),
                                                    STRING_COLUMNS.get(name, ()))
            else:
                raise KeyError(f"run {self.dir} has no series {name!r} "
                               f"(it has: {', '.join(self.series_names()) or 'none'})")
        return self._cache[name]

    def raw(self, filename, binary=False):
        """The raw output ``raw/FILENAME`` (str, or bytes with ``binary``)."""
        _check_filename(filename)
        path = os.path.join(self.dir, RAW_DIR, filename)
        if not os.path.isfile(path):
            raise KeyError(f"run {self.dir} has no raw file {filename!r}")
        with open(path, "rb") as f:
            data = f.read()
        return data if binary else data.decode("utf-8", errors="replace")


def load_run(run_dir):
    """Load the run in ``run_dir``. Raises ResultsError (a UsageError) when there is no
    result.json, it is not a JSON object, or its schema is newer than this code."""
    path = os.path.join(str(run_dir), RESULT_FILE)
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
    if version > SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema_version {version} is newer than this suite "
                           f"reads (up to {SCHEMA_VERSION}): update the checkout")
    return Run(run_dir, record)


def find_runs(root):
    """Run directories under ``root`` (each holding a result.json), sorted; ``root``
    itself counts when it is one."""
    found = []
    for dirpath, dirnames, filenames in os.walk(str(root)):
        if RESULT_FILE in filenames:
            found.append(dirpath)
            dirnames[:] = []  # a run does not contain runs (series/, raw/)
        else:
            dirnames.sort()
    return sorted(found)


# ------------------------------------------------------------------ schema 1 conversion

def _columns(name, rows):
    """{column: array} of ``rows`` (dicts) for standard series ``name``."""
    strings = STRING_COLUMNS.get(name, set())
    out = {}
    for col in SERIES_COLUMNS[name]:
        values = [r.get(col) for r in rows]
        if col in strings:
            out[col] = np.array(["" if v is None else str(v) for v in values], dtype=str)
        else:
            out[col] = np.array([math.nan if v is None else float(v) for v in values],
                                dtype=float)
    return out


def _num(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _v1_stat(qdisc, key):
    """A number of tc's JSON for a qdisc: at its top level or among its options."""
    opts = qdisc.get("options") if isinstance(qdisc.get("options"), dict) else {}
    for src in (qdisc, opts):
        if _num(src.get(key)) is not None:
            return src[key]
    return None


def _started_realtime(record):
    try:
        return datetime.datetime.fromisoformat(record["started"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return None


def _series_from_v1(record):
    """Series reconstructed from a schema 1 record's ``measurements``. Schema 1 kept no
    t0: times are seconds since ``started`` (ping, iperf3: their wall-clock stamps); the
    qdisc samples (monotonic stamps) are aligned so the first one is at the iperf3
    start (the poller started just before the client), else at the first ping."""
    meas = record.get("measurements")
    if not isinstance(meas, dict):
        return {}
    out = {}
    t0_real = _started_realtime(record)
    ping = meas.get("ping") or {}
    probes = [p for p in ping.get("probes") or [] if len(p) >= 3]
    if probes:
        base = t0_real if t0_real is not None else probes[0][0]
        seqs = np.array([p[1] for p in probes], dtype=float)
        ts = np.array([p[0] - base for p in probes], dtype=float)
        rows = [{"probe": "ping", "t": t, "seq": int(s), "rtt_ms": p[2]}
                for t, s, p in zip(ts, seqs, probes)]
        sent = int(ping.get("sent") or 0)
        got = {int(s) for s in seqs}
        for seq in range(1, sent + 1):  # lost probes: time interpolated from neighbours
            if seq not in got:
                rows.append({"probe": "ping", "t": float(np.interp(seq, seqs, ts)),
                             "seq": seq, "rtt_ms": None})
        rows.sort(key=lambda r: r["seq"])
        out["ping"] = _columns("ping", rows)
    iperf_start = None
    iperf = meas.get("iperf3")
    if isinstance(iperf, dict) and iperf.get("intervals"):
        start = iperf.get("start") or {}
        ts = (start.get("timestamp") or {}).get("timesecs")
        offset = ts - t0_real if (ts is not None and t0_real is not None) else 0.0
        iperf_start = offset
        rows = []
        for iv in iperf["intervals"]:
            total = iv.get("sum") or {}
            streams = iv.get("streams") or []
            one = streams[0] if len(streams) == 1 else {}
            if total.get("omitted"):
                continue
            rows.append({"flow": "iperf3", "t_start": offset + total.get("start", 0.0),
                         "t_end": offset + total.get("end", 0.0), "bytes": total.get("bytes"),
                         "bits_per_second": total.get("bits_per_second"),
                         "retransmits": total.get("retransmits"),
                         "snd_cwnd_bytes": one.get("snd_cwnd"), "rtt_us": one.get("rtt")})
        out["iperf"] = _columns("iperf", rows)
    leaf = [s for s in meas.get("bottleneck_leaf") or [] if len(s) == 2]
    if leaf:
        # the poller started just before the iperf3 client, after the pings
        if iperf_start is not None:
            origin = iperf_start
        else:
            origin = float(out["ping"]["t"][0]) if "ping" in out else 0.0
        t_first = leaf[0][0] - origin
        rows = []
        for t, q in leaf:
            stat = lambda key, q=q: _v1_stat(q, key)  # noqa: E731
            rows.append({"t": t - t_first, "dev": "", "handle": q.get("handle", ""),
                         "parent": q.get("parent", ""), "kind": q.get("kind", ""),
                         "qlen_pkts": stat("qlen"), "backlog_bytes": stat("backlog"),
                         "sent_bytes": stat("bytes"), "sent_pkts": stat("packets"),
                         "drops": stat("drops"), "overlimits": stat("overlimits"),
                         "requeues": stat("requeues"), "marks": stat("ecn_mark"),
                         "early_drops": None, "prob": stat("prob"), "delay_us": None,
                         "maxq_pkts": stat("maxq")})
        out["qdisc"] = _columns("qdisc", rows)
    return out
