"""Reading run directories: one run loaded and checked, and the runs of a tree.

Reading::

    run = load_run(run_dir)
    run.record["status"]; run.series("tcp")["srtt_us"]    # numpy arrays, NaN = empty

The directory's layout is :mod:`bufferbloat.results.records_layout`'s; the runner writes
it with :mod:`bufferbloat.results.records_writer`, and the series files are read by
:mod:`bufferbloat.results.records_csv`.
"""

import json
import math
import os
import re

from bufferbloat.core.errors import warn
from bufferbloat.core.series import STRING_COLUMNS
from bufferbloat.net.qdiscs import kind_of
from bufferbloat.results.records_csv import read_series_csv
from bufferbloat.results.records_layout import (
    METRICS_JSON,
    RAW_DIR,
    RESULT_FILE,
    SCHEMA_VERSION,
    SERIES_DIR,
    SERIES_NAME,
    STATUSES,
    ResultsError,
    check_filename,
    check_name,
)


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
        """The bottleneck rate, Mbit/s, or None when the record does not say; for a
        link that varied (link_trace, link_schedule) the mean of its capacity."""
        trace = self.record.get("link_trace")
        value = trace.get("mean_mbit") if isinstance(trace, dict) else None
        value = self.params.get("bottleneck_mbit") if value is None else value
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
        check_name(name, "series name")
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
                         if SERIES_NAME.match(str(n)) and not self.has(n))
        if missing and say:
            warn(f"{self.dir}: series listed in its record but not on disk: "
                 f"{', '.join(missing)}")
        return missing

    def raw(self, filename, binary=False):
        """The raw output ``raw/FILENAME`` (str, or bytes with ``binary``)."""
        check_filename(filename)
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


def load_json_object(path, error=ResultsError):
    """The JSON object (a dict) that the file ``path`` holds; ``error`` (a UsageError
    class: bad input, exit 2) naming the file when its text is not valid JSON (or not
    UTF-8) or not an object: a corrupt file is refused, never read in part. A missing or
    unreadable file raises OSError, as ``open`` does (the caller says what its absence
    means first)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except ValueError as exc:        # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise error(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: not a JSON object")
    return data


def load_run(run_dir):
    """Load the run in ``run_dir``. Raises ResultsError (a UsageError) when there is no
    result.json, it is not a JSON object, its schema is not the one this code reads
    (an older one: schema 1; a newer one), or it is corrupt (:func:`check_record`)."""
    path = os.path.join(str(run_dir), RESULT_FILE)
    if not os.path.exists(str(run_dir)):
        raise ResultsError(f"{run_dir}: no such run (the directory does not exist)")
    if not os.path.isfile(path):
        raise ResultsError(f"{run_dir}: not a run directory (no {RESULT_FILE})")
    record = load_json_object(path)
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
