"""Metrics of a run, computed from what the run stored (a :class:`~bufferbloat.results.records.Run`).

Every metric is a row ``{scope, name, metric, value, unit}``: scope is ``flow``, ``link``,
``network``, ``web``, ``ping`` or ``udp``; name is the flow/link/probe/stream label. The
definitions (docs/reference/results.md, "Metrics"):

- percentiles are numpy's ``linear`` method (type 7: the q-th percentile of n sorted values
  interpolates linearly at rank (n - 1) * q / 100), CoV and Jain's index as
  :mod:`bufferbloat.core.stats` defines them;
- ``warmup_s`` excludes the first seconds of traffic: samples earlier than
  ``traffic start + warmup_s`` are left out, where traffic start is the record's
  ``traffic_start_s`` when present, else the earliest time in the traffic series (tcp,
  iperf, udp, web, ping). Cumulative counters (bytes_acked, retrans_total, the qdisc's
  sent/drops/marks) are differenced from their last sample at or before the cut, so a
  rate after warm-up covers exactly the kept span;
- throughputs are Mbit/s (1e6 bit/s), times in the unit their name ends with.

Each scope is computed in its own module: :mod:`~bufferbloat.results.metrics_flows` (flow
and network), :mod:`~bufferbloat.results.metrics_queue` (link: the bottleneck's queues),
:mod:`~bufferbloat.results.metrics_latency` (ping, irtt, udp, web) and
:mod:`~bufferbloat.results.flowmetrics` (the studies' flow metrics); here, the traffic's
window they are cut to, :func:`compute_metrics` that gathers them, and the rows stored,
read back and shown.

All functions are pure: they read the run and return numbers; only :func:`write_metrics`
writes (metrics.csv and metrics.json, into the run directory).
"""

import csv
import io
import math
import os

from bufferbloat.core.atomic import write_json_atomic, write_text_atomic
from bufferbloat.core.series import TRAFFIC_TIME_COLUMNS
from bufferbloat.results.flowmetrics import aliases_of, study_metrics
from bufferbloat.results.metrics_flows import delivered_goodput, flow_metrics, network_metrics
from bufferbloat.results.metrics_latency import (
    irtt_metrics,
    ping_metrics,
    udp_metrics,
    web_metrics,
)
from bufferbloat.results.metrics_queue import link_metrics
from bufferbloat.results.records import load_run
from bufferbloat.results.records_layout import METRICS_CSV, METRICS_JSON, SCHEMA_VERSION
from bufferbloat.results.rows import finite_values

FIELDS = ("scope", "name", "metric", "value", "unit")
#: The version of the code that computes metrics, stored in metrics.json: bump it when a
#: metric's definition changes, so stored metrics of older code are recomputed rather than
#: read (:func:`run_rows`; metrics.json without it: version 1, the code before it).
#: 2: web ``cut`` (a fetch still running at the run's end is not a failure).
#: 3: link metrics end with the traffic's asked time (:func:`traffic_end_s`): the qdisc
#: samples taken while the tools stop no longer dilute utilization and the queue's stats.
METRICS_VERSION = 3


# ------------------------------------------------------------------ the traffic's window

def traffic_start_s(run):
    """When traffic started, s since t0: the record's ``traffic_start_s``, else the
    earliest time in the traffic series, else 0."""
    value = run.record.get("traffic_start_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    firsts = [float(arr.min()) for arr in _traffic_times(run)]
    return min(firsts) if firsts else 0.0


def traffic_end_s(run):
    """When the traffic's asked time ended, s since t0: :func:`traffic_start_s` plus the
    record's ``duration_s`` (inf without one). The sampler goes on while the tools stop
    (NetPerfMeter's passive side uploads its results: 4-7 s), and the link idles then."""
    duration = _duration_s(run)
    return math.inf if duration is None else traffic_start_s(run) + duration


def _duration_s(run):
    """The record's ``duration_s`` as a float, or None when it is not a positive number."""
    duration = run.record.get("duration_s")
    if not isinstance(duration, (int, float)) or isinstance(duration, bool) or duration <= 0:
        return None
    return float(duration)


def _traffic_times(run):
    """The time column of each traffic series the run holds (non-empty, NaNs out)."""
    out = []
    for name, col in TRAFFIC_TIME_COLUMNS:
        if run.has(name):
            arr = finite_values(run.series(name).get(col, []))
            if arr.size:
                out.append(arr)
    return out


def series_cut(run, tolerance=0.1):
    """What cuts the run's traffic series short, or None: ``series end at 2.5 s of a
    20 s run`` when the latest time in them falls short of the traffic's end (its start
    plus the duration asked for) by more than ``tolerance`` of the duration (and 1 s)."""
    duration = _duration_s(run)
    if duration is None:
        return None
    lasts = [float(arr.max()) for arr in _traffic_times(run)]
    if not lasts:
        return None
    start = traffic_start_s(run)
    end = max(lasts) - start
    if end >= duration - max(1.0, tolerance * duration):
        return None
    return f"series end at {end:.3g} s of a {duration:g} s run (cut short)"


# ----------------------------------------------------------------------------- the run

def compute_metrics(run, warmup_s=0.0):
    """Every metric of ``run`` (a Run or a run directory) as rows {scope, name, metric,
    value, unit}, leaving out samples of the first ``warmup_s`` seconds of traffic."""
    if isinstance(run, (str, os.PathLike)):
        run = load_run(run)
    if warmup_s < 0:
        raise ValueError(f"warmup_s must be >= 0, got {warmup_s!r}")
    cutoff = traffic_start_s(run) + warmup_s if warmup_s > 0 else -math.inf
    flows, throughput = flow_metrics(run, cutoff)
    rows = list(flows)
    rows += link_metrics(run, cutoff, end_s=traffic_end_s(run))
    rows += network_metrics(throughput, delivered_goodput(run, cutoff))
    rows += web_metrics(run, cutoff)
    rows += ping_metrics(run, cutoff)
    rows += irtt_metrics(run, cutoff)
    rows += udp_metrics(run, cutoff)
    rows += study_metrics(run, cutoff, throughput, rows)
    return rows


def write_metrics(run, rows, warmup_s=None):
    """Write ``rows`` as metrics.csv and metrics.json into the run directory (each
    atomically); returns the two paths."""
    run_dir = run if isinstance(run, (str, os.PathLike)) else run.dir
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, "value": repr(float(row["value"]))})
    csv_path = os.path.join(run_dir, METRICS_CSV)
    write_text_atomic(csv_path, buf.getvalue())
    json_path = os.path.join(run_dir, METRICS_JSON)
    write_json_atomic(json_path, {"schema_version": SCHEMA_VERSION,
                                  "metrics_version": METRICS_VERSION, "warmup_s": warmup_s,
                                  "metrics": [dict(r) for r in rows],
                                  "aliases": aliases_of(rows)})
    return csv_path, json_path


def metrics_stale(run):
    """True when ``run`` stored metrics that older code computed (metrics.json without
    the current :data:`METRICS_VERSION`): numbers the current code would not produce."""
    rows = run.metrics()
    return rows is not None and run.metrics_version != METRICS_VERSION


def run_rows(run):
    """The metric rows of ``run`` (a Run): the ones it stored (metrics.json) when the
    current code computed them (:data:`METRICS_VERSION`), else computed from its series
    with the record's warm-up, not written (a run that stored none, one that did not
    end ok, or one whose metrics older code computed: ``run.metrics_recomputed`` is then
    True); an odd record's warm-up falls back to none (a report must not stop at one
    run)."""
    rows = run.metrics()
    if rows is not None and run.metrics_version == METRICS_VERSION:
        return rows
    run.metrics_recomputed = rows is not None
    try:
        return compute_metrics(run, warmup_s=run.warmup_s)
    except Exception:  # noqa: BLE001 - an odd run must not stop a report
        return compute_metrics(run, warmup_s=0.0)


def metric_value(rows, metric, scope=None, name=None):
    """The value of the first row with ``metric`` (and ``scope``/``name`` when given),
    else None."""
    for row in rows:
        if row.get("metric") == metric and (scope is None or row.get("scope") == scope) \
                and (name is None or row.get("name") == name):
            value = row.get("value")
            return float(value) if value is not None else None
    return None


def metric_values(rows, metric, scope=None):
    """{name: value} of every row with ``metric`` (and ``scope``)."""
    return {row["name"]: float(row["value"]) for row in rows
            if row.get("metric") == metric and (scope is None or row.get("scope") == scope)
            and row.get("value") is not None}


def format_value(value):
    """A number for a table: integers as such, others to 4 significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def format_table(rows):
    """``rows`` as an aligned text table (scope, name, metric, value, unit)."""
    header = ("scope", "name", "metric", "value", "unit")
    body = [(r["scope"], r["name"], r["metric"], format_value(r["value"]), r["unit"])
            for r in rows]
    widths = [max(len(str(x[i])) for x in [header] + body) for i in range(len(header))]
    lines = []
    for n, line in enumerate([header] + body):
        cells = [str(c).rjust(w) if i == 3 and n else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
