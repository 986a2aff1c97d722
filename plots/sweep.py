"""A set of runs across which figures and tables are drawn: each run a :class:`Point`.

A set of runs comes from a sweep directory (``OUT/SCEN/sweep/index.json``), a results
tree (``OUT/index.json`` of ``run-all``), or any directory holding runs
(:func:`bufferbloat.results.records.find_runs`). Each run is a :class:`Point`: its overrides, the
subset that varies across the set (the swept parameters), its repetition, its Run and its
metric rows. Points with the same varied values are repetitions of one *sweep point*;
figures show their mean with error bars of one standard deviation over the repetitions
(population std; 0 for one repetition).

Here: loading a set (:func:`load_points`), grouping it (by scenario and setting, by
sweep point), a run's samples, and the titles, captions, x positions, lines and colours
that the set's figures share (:mod:`plots.sweep_figures`, :mod:`plots.study`); the
tables are :mod:`plots.sweep_tables`'.
"""

import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from bufferbloat.core.errors import UsageError, warn
from bufferbloat.core.params import format_param
from bufferbloat.core.uncertainty import mean_interval
from bufferbloat.plots.common import caption, metric_values, run_metrics, series
from bufferbloat.plots.palette import flow_color, qdisc_color, qdisc_kind
from bufferbloat.plots.throughput import aggregate_rate
from bufferbloat.results.health import NOT_MEASURED
from bufferbloat.results.metrics import traffic_start_s
from bufferbloat.results.metrics_flows import flow_directions
from bufferbloat.results.metrics_queue import link_direction
from bufferbloat.results.records import Run, find_runs, is_run_dir, load_run
from bufferbloat.run import identity
from bufferbloat.run.index import INDEX_FILE, read_index
from bufferbloat.scenarios import catalogue

#: Env: 1 puts degraded runs (the emulator fell behind) into means and figures too.
INCLUDE_DEGRADED_ENV = "BUFFERBLOAT_INCLUDE_DEGRADED"
#: key -> (scope, metric, axis label with unit). A run's value is the mean over the
#: scope's names (probes, links, flows); ``link`` is the bottleneck's egress (towards
#: the receiver: B's uploads), ``link:down`` the reverse AQM's (B's downloads).
KEY_METRICS = {
    "rtt_mean_ms": ("ping", "rtt_mean_ms", "ICMP ping RTT, mean (ms)"),
    "rtt_p95_ms": ("ping", "rtt_p95_ms", "ICMP ping RTT, p95 (ms)"),
    "udp_rtt_mean_ms": ("irtt", "rtt_mean_ms", "UDP (irtt) RTT, mean (ms)"),
    "udp_rtt_p95_ms": ("irtt", "rtt_p95_ms", "UDP (irtt) RTT, p95 (ms)"),
    "throughput_mbit": ("network", "aggregate_throughput_mbit",
                        "aggregate throughput (Mbit/s)"),
    "goodput_down_mbit": ("network", "goodput_down_mbit",
                          "download goodput, sum of flows (Mbit/s)"),
    "goodput_up_mbit": ("network", "goodput_up_mbit", "upload goodput, sum of flows (Mbit/s)"),
    "qdelay_p50_ms": ("link", "qdelay_p50_ms", "queueing delay, p50 (ms)"),
    "qdelay_down_p50_ms": ("link:down", "qdelay_p50_ms",
                           "queueing delay of the reverse AQM (downloads), p50 (ms)"),
    "aqm_delay_p50_ms": ("link", "aqm_delay_p50_ms", "AQM's delay estimate, p50 (ms)"),
    "drop_pct": ("link", "drop_pct", "drops (% of packets)"),
    "mark_drop_pct": ("link", "mark_drop_pct", "ECN marks + drops (% of packets)"),
    "utilization": ("link", "utilization", "link utilization (0-1)"),
    "jain_fairness": ("network", "jain_fairness", "Jain's fairness index (0-1)"),
    "srtt_mean_ms": ("flow", "srtt_mean_ms", "TCP srtt, mean over flows (ms)"),
    "web_total_mean_s": ("web", "total_mean_s", "web fetch time, mean (s)"),
}


@dataclass


class Point:
    """One run of a set: ``overrides`` (all --set values), ``varied`` (those that differ
    across the set), ``rep``, the loaded ``run`` and its metric ``rows``."""

    run: Run
    overrides: dict
    rep: int = 1
    varied: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)

    @property
    def scenario(self):
        return self.run.scenario_name

    @property
    def setting(self):
        """(profile, duration s, scaling factor): runs of different settings never share
        a table, a mean or a figure (:func:`by_scenario`)."""
        return identity.setting(self.run.record)

    @property
    def key(self):
        """The sweep point's label (its varied values), shared by its repetitions."""
        return ",".join(f"{k}={v}" for k, v in self.varied.items()) or "default"

    @property
    def degraded(self):
        """The run did not measure the network (bufferbloat/results/health.py): the
        emulator fell behind (degraded), or a part started before its due time (faulty)."""
        return self.run.verdict in NOT_MEASURED

    @property
    def averaged(self):
        """Whether the run enters means and figures: not when degraded, unless the
        environment says BUFFERBLOAT_INCLUDE_DEGRADED=1 (then it is still marked)."""
        return not self.degraded or os.environ.get(INCLUDE_DEGRADED_ENV) == "1"

    def value(self, key):
        """The run's value of KEY_METRICS ``key`` (mean over names), or None (also for a
        run left out of means: see :attr:`averaged`)."""
        if not self.averaged:
            return None
        scope, metric, _ = KEY_METRICS[key]
        scope, _, way = scope.partition(":")
        vals = metric_values(self.rows, metric, scope)
        if scope == "link":             # one direction's AQM (the bottleneck's by default)
            vals = {n: v for n, v in vals.items()
                    if link_direction(self.run.record, n) == (way or "up")}
        vals = list(vals.values())
        return float(np.mean(vals)) if vals else None

    def flow_values(self, direction):
        """Per-flow throughput (Mbit/s, the flow metric ``throughput_mbit``) of the
        run's flows going ``direction`` ('up' or 'down'); [] for a run left out of
        means."""
        if not self.averaged:
            return []
        ways = flow_directions(self.run)
        return [v for n, v in metric_values(self.rows, "throughput_mbit", "flow").items()
                if ways.get(n) == direction]


# ------------------------------------------------------------------------- loading


def _resolve(base, run_dir):
    """The run directory an index names, found relative to the index's directory first
    (the tree may have moved since: try the path's trailing components below ``base``),
    then as written."""
    parts = [p for p in str(run_dir).replace("\\", "/").split("/") if p]
    for i in range(len(parts)):
        candidate = os.path.join(base, *parts[i:])
        if is_run_dir(candidate):
            return candidate
    return run_dir if is_run_dir(run_dir) else None


def _rep_of(path):
    m = re.search(r"rep-(\d+)$", os.path.normpath(path))
    return int(m.group(1)) if m else 1


def load_points(path):
    """The runs under ``path`` as Points, varied keys filled in (per scenario). Uses
    ``path/index.json`` when present (its ``vary`` names the swept keys; its ``run_dir``
    entries are resolved relative to the index), else every run found under ``path``.
    Raises UsageError when ``path`` holds no run."""
    path = str(path)
    if not os.path.isdir(path):
        raise UsageError(f"{path}: not a directory")
    points, vary = [], None
    index = None if is_run_dir(path) else read_index(path)
    if index is not None:
        vary, entries = _index_fields(index, os.path.join(path, INDEX_FILE))
        seen, absent = set(), 0
        for entry in entries:
            found = _resolve(path, str(entry.get("run_dir", "")))
            if not found:
                absent += 1
            elif found not in seen:
                seen.add(found)
                run = load_run(found)
                points.append(Point(run, entry.get("overrides", run.overrides),
                                    entry.get("rep") or _rep_of(found)))
        if absent:
            warn(f"{os.path.join(path, INDEX_FILE)} lists {len(entries)} run(s); "
                 f"{absent} of them are not in this tree (moved or deleted): left out")
        # runs present but missing from the index (an interrupted index write)
        for found in find_runs(path):
            if found not in seen and os.path.abspath(found) not in map(os.path.abspath, seen):
                run = load_run(found)
                points.append(Point(run, run.overrides,
                                    _rep_of(found)))
    else:
        for found in find_runs(path):
            run = load_run(found)
            points.append(Point(run, run.overrides, _rep_of(found)))
    if not points:
        raise UsageError(f"{path}: no run directory (result.json) and no sweep or "
                         f"results index here")
    fill_varied(points, vary)
    for p in points:
        p.rows = run_metrics(p.run)
    return points


def _index_fields(index, where):
    """(varied keys or None, entries) of an index, its fields of a wrong type left out,
    each said in a warning naming ``where``: a corrupted index is read as far as it can
    be (the runs found in the tree are reported anyway)."""
    vary = index.get("vary")
    if isinstance(vary, dict):
        vary = [str(k) for k in vary] or None
    elif vary is not None:
        warn(f"{where}: 'vary' is {type(vary).__name__}, expected an object; the varied "
             "keys are inferred from the runs")
        vary = None
    done = index.get("done") or []
    if not isinstance(done, list):
        warn(f"{where}: 'done' is {type(done).__name__}, expected a list; read as empty")
        done = []
    entries = []
    for i, entry in enumerate(done):
        if not isinstance(entry, dict):
            warn(f"{where}: done[{i}] is {type(entry).__name__}, expected an object; "
                 "left out")
            continue
        entry = dict(entry)
        overrides = entry.get("overrides")
        if overrides is not None and not (isinstance(overrides, dict) and not any(
                isinstance(v, (dict, list)) for v in overrides.values())):
            warn(f"{where}: done[{i}].overrides is not an object of values; the run's "
                 "own are read")
            del entry["overrides"]
        elif overrides is None:
            entry.pop("overrides", None)
        else:
            entry["overrides"] = dict(overrides)
        rep = entry.get("rep")
        if rep is not None and (isinstance(rep, bool) or not isinstance(rep, int)):
            warn(f"{where}: done[{i}].rep is {rep!r}, expected an integer; read from the "
                 "run's directory name")
            rep = None
        entry["rep"] = rep
        entries.append(entry)
    return vary, entries


def fill_varied(points, vary=None):
    """Set each point's ``varied``: the keys in ``vary``, else the override keys whose
    values differ among the points of the same scenario and setting, less the
    scenario's derived knobs that follow from them (:func:`_follows`: D's streams take
    ``bulk_goodput_mbit`` from their own repetition of the bulk point; a value set by
    hand that varies on its own stays a key). Runs whose varied values agree but whose
    recorded configurations differ (``config_key``, derived knobs masked: e.g. the
    scenario was edited in between) are told apart by a varied ``config`` (the
    parameters that differ, or the short key), so that they are never averaged as
    repetitions of one point."""
    for group in by_scenario(points).values():
        derived = _derived_knobs(group[0].scenario)
        keys = vary
        if keys is None:
            differ = [k for k in sorted({k for p in group for k in p.overrides})
                      if len({str(p.overrides.get(k)) for p in group}) > 1]
            plain = [k for k in differ if k not in derived]
            keys = [k for k in differ if k in plain or not _follows(group, k, plain)]
        plain = [k for k in keys if k not in derived]
        masked = {k for k in derived if k not in keys and _follows(group, k, plain)}
        for p in group:
            p.varied = {k: p.overrides.get(k) for k in keys}
        config = [_config_of(p, masked) for p in group]
        configs = {}
        for p, key in zip(group, config):
            configs.setdefault(p.key, set()).add(key)
        if any(len(c) > 1 for c in configs.values()):
            labels = _config_labels(group, config, configs, keys)
            for p, key in zip(group, config):
                p.varied["config"] = labels[key]


def scenario_of(name):
    """The catalogue's scenario ``name``, or None when it is unknown or the catalogue
    cannot be read (a broken scenario module must not stop a figure, a table or a
    report section of runs already recorded)."""
    try:
        return catalogue().get(name)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def _derived_knobs(name):
    """The knobs scenario ``name`` fills in from another point's result (its
    ``derived``), or none (:func:`scenario_of`)."""
    return set(getattr(scenario_of(name), "derived", None) or {})


def _follows(group, knob, keys):
    """Whether ``knob``'s value is one per combination of ``keys`` and repetition in
    ``group``: it adds no sweep point of its own."""
    seen = {}
    for p in group:
        at = (tuple(str(p.overrides.get(k)) for k in keys), p.rep)
        seen.setdefault(at, set()).add(str(p.overrides.get(knob)))
    return all(len(v) == 1 for v in seen.values())


#: what a masked derived value reads in a configuration compared across runs
MASKED = "<derived>"


def _config_of(p, masked=()):
    """The key of a run's recorded configuration (``config_key``), with the values of
    the ``masked`` knobs (and traffic fields holding one of them: a stream's rate) put
    aside when the record holds the configuration (``run_config``): two repetitions of
    one stream point differ only there."""
    cfg = p.run.record.get("run_config")
    if not masked or not isinstance(cfg, dict) or not isinstance(cfg.get("knobs"), dict):
        return p.run.config_key
    values = {cfg["knobs"][k] for k in masked
              if isinstance(cfg["knobs"].get(k), (int, float))
              and not isinstance(cfg["knobs"].get(k), bool)}
    knobs = {k: (MASKED if k in masked else v) for k, v in cfg["knobs"].items()}
    traffic = [{k: (MASKED if isinstance(v, (int, float)) and not isinstance(v, bool)
                    and v in values else v) for k, v in part.items()}
               if isinstance(part, dict) else part for part in cfg.get("traffic") or []]
    return identity.config_key(dict(cfg, knobs=knobs, traffic=traffic))


#: at most this many of the parameters told apart in a configuration's label
CONFIG_LABEL_PARAMS = 3


def _config_labels(group, config, configs, varied=()):
    """{config_key: label} of the group's configurations (``config``: each point's key,
    :func:`_config_of`; ``configs``: {point: its configuration keys}): the recorded
    parameters, other than the ``varied`` ones, whose
    values differ among them (a scenario whose defaults changed between runs: B's
    dumbbell before its testbed), so that the points of one configuration share a label
    and a reader sees what it is; the short key where no parameter differs (the
    scenario's code changed), or beside them where two configurations of one point
    would share a label."""
    params = {}
    for p, key in zip(group, config):
        params.setdefault(key, p.run.record.get("params") or {})
    names = sorted({k for rec in params.values() for k in rec} - set(varied))
    differ = [k for k in names
              if len({repr(rec.get(k)) for rec in params.values()}) > 1]
    more = len(differ) - CONFIG_LABEL_PARAMS
    labels = {key: ", ".join(f"{k}={format_param(rec.get(k), 'unset')}"
                             for k in differ[:CONFIG_LABEL_PARAMS])
              + (f", +{more}" if more > 0 else "") for key, rec in params.items()}
    clash = {key for keys in configs.values()
             if len({labels[k] for k in keys}) < len(keys) for key in keys}
    for key, label in labels.items():
        short = identity.short(key) or "?"
        if not label:
            labels[key] = short
        elif key in clash:
            labels[key] = f"{short} ({label})"
    return labels


def setting_slug(setting):
    """``quick-20s`` / ``full-120s-x0.2``: a setting in a file name."""
    profile, duration, factor = setting
    slug = f"{profile}-{duration:g}s" if isinstance(duration, (int, float)) else profile
    return slug + (f"-x{factor:.3g}" if factor is not None else "")


def by_scenario(points):
    """{set name: [points]} in order of appearance: the runs of one scenario and one
    setting (profile, duration, rate scaling). The name is the scenario's, followed by
    the setting (:func:`setting_slug`) when the scenario's runs have several."""
    groups = {}
    for p in points:
        groups.setdefault((p.scenario, p.setting), []).append(p)
    settings = {}
    for scn, setting in groups:
        settings.setdefault(scn, []).append(setting)
    return {(scn if len(settings[scn]) == 1 else f"{scn}-{setting_slug(setting)}"): pts
            for (scn, setting), pts in groups.items()}


def setting_label(points):
    """What the runs of a set share and a reader must know: ``quick profile, 20 s``."""
    labels = list(dict.fromkeys(identity.setting_label(p.setting) for p in points))
    return labels[0] if len(labels) == 1 else "MIXED: " + " / ".join(labels)


def by_key(points):
    """{point key: [repetitions]} in order of appearance."""
    out = {}
    for p in points:
        out.setdefault(p.key, []).append(p)
    return out


def swept_params(points):
    """The varied keys of the set, in order."""
    return list(dict.fromkeys(k for p in points for k in p.varied))


def as_number(value):
    """``value`` as a float, or None when it is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def stats(values):
    """(mean, population std, n) of the finite values; (None, None, 0) for none."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], float)
    if v.size == 0:
        return None, None, 0
    return float(v.mean()), float(v.std()), int(v.size)


#: figures that summarise repetitions draw this interval of the mean (the sweep table's)
INTERVAL_TEXT = "error bars: 95 % confidence interval of the mean (Student t; none for 1 run)"


def ci_half_width(values):
    """Half the 95 % confidence interval of the mean of the finite ``values`` (Student's
    t: :func:`bufferbloat.core.uncertainty.mean_interval`, as the sweep table's
    ``ci_low``/``ci_high``); 0.0 below two values."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    return mean_interval(v)["half_width"] or 0.0


def samples(run):
    """(ping RTTs ms, aggregate goodput Mbit/s per 1 s bin: acknowledged bytes of the flows
    over the bottleneck) after the record's warm-up."""
    cut = traffic_start_s(run) + run.warmup_s
    rtt = np.array([])
    ping = series(run, "ping")
    if ping is not None:
        keep = (ping["t"] >= cut) & np.isfinite(ping["rtt_ms"])
        rtt = ping["rtt_ms"][keep]
        if rtt.size == 0:        # a run shorter than its warm-up: use all of it
            rtt = ping["rtt_ms"][np.isfinite(ping["rtt_ms"])]
    thr = np.array([])
    agg = aggregate_rate(run)
    if agg is not None:
        t, mbit = agg
        thr = mbit[t >= cut] if (t >= cut).any() else mbit
    return rtt, thr


# ------------------------------------------------ what the set's figures share


def title_of(points, text):
    """A figure's title followed by the set's setting (profile, duration, scaling)."""
    return f"{text} ({setting_label(points)})"


def caption_of(points):
    """The first run's parameters (without its label) and the size of the set."""
    first = points[0].run
    reps = max(len(v) for v in by_key(points).values())
    return f"{setting_label(points)} | {caption(first).split(' | ', 1)[1]} | " \
           f"{len(by_key(points))} points x up to {reps} reps (first point's parameters)"


def x_positions(points, param):
    """{point key: x} along ``param``: its numeric value when every point has one, else
    the category's position; and the tick labels for categories (or None)."""
    groups = by_key(points)
    vals = {k: reps[0].varied.get(param) for k, reps in groups.items()}
    nums = {k: as_number(v) for k, v in vals.items()}
    if all(v is not None for v in nums.values()):
        return nums, None
    cats = list(dict.fromkeys(str(v) for v in vals.values()))
    return {k: float(cats.index(str(v))) for k, v in vals.items()}, cats


def series_of(points, param, facet=None):
    """{label of the other varied values: [points]}: one line per combination of the
    varied keys other than ``param`` (and ``facet``, the key a split figure gives a
    column each), in the order the points come."""
    out = {}
    for p in points:
        rest = ",".join(f"{k}={v}" for k, v in p.varied.items() if k not in (param, facet))
        out.setdefault(rest, []).append(p)
    return out


def qdisc_colors(points):
    """{point key: its qdisc's colour} when the set's points use several qdiscs, else
    None (then lines and ellipses take the flow palette in order)."""
    kinds = {k: reps[0].run.qdisc[0] for k, reps in by_key(points).items()}
    if len({qdisc_kind(v) for v in kinds.values()}) < 2:
        return None
    return {k: qdisc_color(v) for k, v in kinds.items()}


def line_color(points, line_points, i):
    """A line's colour: its qdisc's when the set compares qdiscs and the line has one,
    else the i-th of the flow palette."""
    kinds = {qdisc_kind(p.run.qdisc[0]) for p in line_points}
    if qdisc_colors(points) and len(kinds) == 1:
        return qdisc_color(kinds.pop())
    return flow_color(i)
