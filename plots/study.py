"""The studies' own figures, each with a one-line reading computed from the data.

A scenario names its study's figures as data (``Scenario.reproduce``: entries with a
``plot``); this module draws them for a set of runs of that scenario (``Point``s of
:mod:`plots.sweep`) and reads them out in one line ("queueing delay, mean:
buffer_pkts=20 98.3 ms, buffer_pkts=100 380 ms (theory 161-807 ms)"). Plot names:

================== ======================================================================
timeseries         cwnd, ping RTT and queue over time, one line per sweep point (A.1)
fetch              web fetch time, mean ± std per sweep point (A)
udp-effect         the TCP flow's throughput and RTT and the stream's one-way delay over
                   time, the stream's on period shaded, one line per point (A.5)
latency            latency under load and the AQM's delay against the swept parameter,
                   with the targets crossed + base RTT and the target (B)
queue-vs-load      mean queue (bytes) and queueing delay against the flows, one line per
                   variant, the PI reference (C)
cca                goodput and srtt per congestion control, a column per path (D)
compare-qdiscs     the qdiscs side by side (:func:`plots.sweep_figures.draw_comparison`, E)
metric:KEY:PARAM   :func:`plots.sweep_figures.draw_metric` (KEY of ``KEY_METRICS`` vs PARAM)
================== ======================================================================

A set whose scenario names none gets the ``timeseries`` overlay (2 to 6 points).
"""

import csv
import io
import math

import numpy as np

from bufferbloat.plots import overlay, sweep_figures
from bufferbloat.plots import study_c as _study_c
from bufferbloat.plots import study_d as _study_d
from bufferbloat.plots import sweep as _sweep
from bufferbloat.plots.common import legend, legend_beside, new_figure, series, write_csv_md
from bufferbloat.plots.palette import flow_color
from bufferbloat.plots.throughput import aggregate_rate
from bufferbloat.plots.web import warmup_cut_s
from bufferbloat.results import headline, theory
from bufferbloat.results.metrics import traffic_start_s
from bufferbloat.results.metrics_latency import web_fetches
from bufferbloat.run.scenario import study_file
from bufferbloat.scenarios import catalogue

#: at most this many sweep points are overlaid on one time-series figure
MAX_OVERLAY = 6


def _reps_by_key(points):
    """{point key: repetitions}, in the order of the points' values."""
    return _order(_sweep.by_key(points))


def _label(key):
    """A sweep point's label without the ``variant=`` noise."""
    return key.replace("variant=", "")


def representatives(points):
    """[(point label, Run)]: one run per sweep point (its first averaged repetition)."""
    out = []
    for key, reps in _reps_by_key(points).items():
        use = [p for p in reps if p.averaged] or reps
        out.append((_label(key), use[0].run))
    return out


def _values(reps, selector, agg="mean"):
    """The metric of each averaged repetition that has it."""
    vals = [headline.select(p.rows, selector, agg) for p in reps if p.averaged]
    return [v for v in vals if v is not None]


def _value(reps, selector, agg="mean"):
    vals = _values(reps, selector, agg)
    if not vals:
        return None, None
    return float(np.mean(vals)), float(np.std(vals))


# ----------------------------------------------------------------------- figures

def timeseries(points):
    """cwnd, RTT and queue over time, one line per sweep point."""
    pairs = representatives(points)[:MAX_OVERLAY]
    return overlay.timeseries(pairs, _sweep.title_of(points, "cwnd, RTT and queue over time"),
                              _sweep.caption_of(points))


def fetch_times(points):
    """[(point label, every successful fetch time of its runs after each run's warm-up,
    s)]: the fetches the metrics count (web:all:total_*_s,
    :func:`bufferbloat.results.metrics_latency.web_fetches`); a point whose runs fetched only
    in the warm-up has an empty array; points without web.csv are left out."""
    data = []
    for key, reps in _reps_by_key(points).items():
        times = []
        for p in reps:
            fetches = web_fetches(p.run, warmup_cut_s(p.run)) if p.averaged else None
            if fetches is not None:
                times.append(fetches["total_s"][fetches["ok"]])
        if times:
            times = np.concatenate(times)
            data.append((_label(key), times[np.isfinite(times)]))
    return data


def fetch(points):
    """Web fetch time (s), mean ± std of every successful fetch after the warm-up of the
    point's runs, the count in each bar's label."""
    data = fetch_times(points)
    if not data:
        return None
    fig, (ax,) = new_figure(_sweep.title_of(points, "Web fetch time per sweep point, after "
                                                  "the warm-up"),
                            _sweep.caption_of(points))
    for i, (label, times) in enumerate(data):
        ax.bar([i], [times.mean() if times.size else 0.0],
               yerr=[times.std() if times.size else 0.0], capsize=5, color=flow_color(i),
               gid=f"fetch:{label}", label=f"{label} ({times.size} fetches)")
    ax.set_xticks(range(len(data)))
    ax.set_xticklabels([d[0] for d in data], fontsize=8)
    ax.set_ylabel("fetch time, mean ± std (s)")
    ax.set_xlabel("sweep point")
    legend(ax, loc="upper left")
    return fig


def fetch_reading(points):
    """``web fetch time after the warm-up: buffer_pkts=20 0.98 ± 0.36 s (6 fetches),
    ...``."""
    data = fetch_times(points)
    return ("web fetch time after the warm-up: " + ", ".join(
        (f"{label} {headline.fmt(t.mean())} ± {headline.fmt(t.std(), 's')} ({t.size} "
         f"fetches)" if t.size else f"{label} n/a (0 fetches)") for label, t in data)
    ) if data else ""


def _stream_span(run):
    """(start, stop) s since the traffic started of the run's UDP stream, or None."""
    for spec in run.record.get("traffic") or []:
        if isinstance(spec, dict) and spec.get("kind") == "udp":
            d = float(run.record.get("duration_s") or 0)
            return float(spec.get("start", 0)) * d, float(spec.get("stop", 1)) * d
    return None


def udp_effect(points):
    """The TCP flow's throughput (top) and ping RTT (middle) and the UDP stream's
    one-way delay (bottom) over time, one line per point; the stream's on period
    shaded."""
    pairs = representatives(points)[:MAX_OVERLAY]
    if not any(series(run, "udp") is not None for _, run in pairs):
        return None
    fig, (ax_t, ax_r, ax_u) = new_figure(
        _sweep.title_of(points, "The UDP stream's effect on TCP over time"),
        _sweep.caption_of(points), nrows=3, height=2.6)
    for i, (label, run) in enumerate(pairs):
        color, t0 = flow_color(i), traffic_start_s(run)
        agg = aggregate_rate(run)
        if agg is not None:
            ax_t.plot(agg[0] - t0, agg[1], color=color, label=label, gid=f"tcp:{label}")
        ping = series(run, "ping")
        if ping is not None:
            ax_r.plot(ping["t"] - t0, ping["rtt_ms"], color=color, linewidth=1, label=label,
                      gid=f"rtt:{label}")
        udp = series(run, "udp")
        if udp is not None:
            ax_u.plot(udp["t_sent"] - t0, (udp["t_recv"] - udp["t_sent"]) * 1e3,
                      linestyle="none", marker=".", markersize=2, color=color, label=label,
                      gid=f"owd:{label}")
        span = _stream_span(run)
        if span and i == 0:
            for ax in (ax_t, ax_r, ax_u):
                ax.axvspan(*span, color="#dddddd", alpha=0.5, zorder=0,
                           label="UDP stream on" if ax is ax_t else None)
    ax_t.set_ylabel("TCP goodput (Mbit/s)")
    ax_r.set_ylabel("ping RTT (ms)")
    ax_u.set_ylabel("UDP one-way delay (ms)")
    ax_u.set_xlabel("time since the traffic started (s)")
    for ax in (ax_t, ax_r, ax_u):
        ax.set_ylim(bottom=0)
        legend(ax, loc="upper left")
    return fig


def _swept(points, prefer=None):
    """The swept parameter to put on the x axis: ``prefer`` when swept, else the first
    numeric one, else the first."""
    params = _sweep.swept_params(points)
    if prefer in params:
        return prefer
    for param in params:
        if all(_sweep.as_number(p.varied.get(param)) is not None for p in points):
            return param
    return params[0] if params else None


#: past this many lines a metric figure's panel splits into one column per value of
#: another swept key, when one has 2 to MAX_COLUMNS values (:func:`_facet`)
MAX_LINES = 8
#: past this many lines (or when split in columns), the figure's legend goes beside the
#: panels, once for all
MAX_LEGEND_IN_PANEL = 5


#: the most columns a split figure has
MAX_COLUMNS = 4


def _values_of(points, key):
    """The values of swept ``key`` in ``points`` (as text): in the order of the
    scenario's own sweep when it lists them (D's paths: fiber, cellular, dsl), else in
    the order of the points' values."""
    found = list(dict.fromkeys(str(reps[0].varied.get(key))
                               for reps in _reps_by_key(points).values()))
    scn = _sweep.scenario_of(points[0].scenario)
    listed = [str(v) for v in ((getattr(scn, "sweep", None) or {}).get(key) or [])]
    return sorted(found, key=lambda v: (listed.index(v) if v in listed else len(listed),
                                        found.index(v)))


def _facet(points, param):
    """The swept key whose values get a column each, when one panel would draw more than
    MAX_LINES lines; among the other swept keys with 2 to MAX_COLUMNS values:
    ``variant`` (D's paths, whose scales differ) when its columns hold at most
    MAX_LINES lines each, else the key whose columns hold the fewest. None when the
    lines fit in one panel or no key splits them."""
    if len(_sweep.series_of(points, param)) <= MAX_LINES:
        return None
    best = None
    for key in _sweep.swept_params(points):
        values = _values_of(points, key) if key != param else []
        if not 2 <= len(values) <= MAX_COLUMNS:
            continue
        per_column = max(len(_sweep.series_of(
            [p for p in points if str(p.varied.get(key)) == v], param, key)) for v in values)
        if key == "variant" and per_column <= MAX_LINES:
            return key
        if best is None or (per_column, len(values)) < best[0]:
            best = ((per_column, len(values)), key)
    return best[1] if best else None


def metrics_vs(points, param, panels, title):
    """One row of panels per (selector, y label, reference(run) -> value or None,
    reference label): the metric's mean over repetitions with its 95 % confidence
    interval (:func:`plots.sweep.ci_half_width`) against ``param``, one
    line per combination of the other swept keys (gid ``metric:SELECTOR:LINE``), the
    reference as markers (gid ``theory``). Past MAX_LINES lines the panels split into
    one column per value of :func:`_facet` (each with its own y range, said in the
    caption: paths differ by orders of magnitude; a line keeps its colour in every
    column); categories on x are dodged so that lines do not hide each other; split, or
    past MAX_LEGEND_IN_PANEL lines, one legend goes beside the panels (the lines, then
    the references)."""
    if param is None:
        return None
    xs, cats = _sweep.x_positions(points, param)
    facet = _facet(points, param)
    columns = ({None: points} if facet is None else
               {v: [p for p in points if str(p.varied.get(facet)) == v]
                for v in _values_of(points, facet)})
    names = list(_sweep.series_of(points, param, facet))
    outside = facet is not None or len(names) > MAX_LEGEND_IN_PANEL
    ncols = len(columns)
    cap = (_sweep.caption_of(points) + f" | {_sweep.INTERVAL_TEXT}"
           + (" | each column has its own y scale" if facet else ""))
    fig, axes = new_figure(_sweep.title_of(points, title), cap,
                           nrows=len(panels), ncols=ncols, height=2.8,
                           width=8.0 if ncols == 1 else 2.0 + 4.0 * ncols)
    drawn = False
    for row, (selector, ylabel, ref, ref_label) in enumerate(panels):
        for col, (value, col_points) in enumerate(columns.items()):
            ax = axes[row * ncols + col]
            refs = []
            for name, pts in _sweep.series_of(col_points, param, facet).items():
                i = names.index(name)
                shift = (i - (len(names) - 1) / 2) * min(0.6 / len(names), 0.15) \
                    if cats is not None else 0.0
                rows = []
                for key, reps in _reps_by_key(pts).items():
                    values = _values(reps, selector)
                    if values:
                        rows.append((xs[key] + shift, float(np.mean(values)),
                                     _sweep.ci_half_width(values)))
                        value_ref = ref(reps[0].run) if ref else None
                        if value_ref is not None:
                            refs.append((xs[key], value_ref))
                if not rows:
                    continue
                drawn = True
                rows.sort()
                full = ",".join(x for x in (
                    f"{facet}={value}" if facet else "", name) if x)
                ax.errorbar([r[0] for r in rows], [r[1] for r in rows],
                            yerr=[r[2] for r in rows], marker="o", capsize=4,
                            color=_sweep.line_color(points, pts, i),
                            label=_label(name) or ylabel.split(" (")[0],
                            linestyle="-" if cats is None else "none",
                            gid=f"metric:{selector}:{_label(full)}")
            if refs:
                refs = sorted(set(refs))
                mark, = ax.plot([r[0] for r in refs], [r[1] for r in refs],
                                linestyle="none", marker="_", markersize=20,
                                markeredgewidth=2, color="#000000", label=ref_label)
                mark.set_gid("theory")
            if col == 0:
                ax.set_ylabel(ylabel, fontsize=8)
            ax.set_ylim(bottom=0)
            if facet is not None and row == 0:
                ax.set_title(_label(f"{facet}={value}"), fontsize=9)
            if not outside:
                legend(ax)
            if cats is not None:
                ax.set_xticks(range(len(cats)))
                ax.set_xticklabels(cats, fontsize=8)
    for ax in axes[-ncols:]:
        ax.set_xlabel(param)
    if outside and drawn:
        legend_beside(fig, axes, last={ref_label for _, _, _, ref_label in panels})
    return fig if drawn else None


def latency(points):
    """B: latency under load and the AQM's delay against the swept AQM parameter."""
    param = next((p for p in _sweep.swept_params(points) if p.startswith("qdisc.")), None)
    return metrics_vs(points, _swept(points, param), [
        ("ping:rtt_mean_ms", "latency under load, mean (ms)", theory.targets_plus_base_ms,
         "the targets crossed + base RTT"),
        ("link:aqm_delay_mean_ms", "PIE's delay, mean (ms)", theory.target_ms, "target")],
        "Latency against the AQM's parameter")


def queue_vs_load(points):
    """C: mean queue and queueing delay against the number of flows, per variant."""
    return metrics_vs(points, _swept(points, "flows"), [
        ("link:backlog_mean_bytes", "queue, mean (bytes)", None, None),
        ("link:qdelay_mean_ms", "queueing delay, mean (ms)", theory.target_ms,
         "PI's reference (target)")], "Queue against load")


def cca(points):
    """D: goodput and srtt per congestion control: a column per path (past MAX_LINES
    lines), one line per load and send buffer."""
    return metrics_vs(points, _swept(points, "cca") if "cca" in _sweep.swept_params(points)
                      else None, [
        ("network:all:aggregate_throughput_mbit", "goodput (Mbit/s)",
         lambda run: theory.tcp_goodput_ceiling(run.bottleneck_mbit)
         if run.bottleneck_mbit else None, "goodput ceiling"),
        ("flow:srtt_mean_ms", "TCP srtt, mean (ms)", theory.base_rtt_ms, "base RTT")],
        "Congestion controls: goodput and RTT")


#: plot name -> (draw(points) -> Figure or None, the selectors its reading reports, or
#: a function(points) -> the reading)
PLOTS = {
    "timeseries": (timeseries, ("link:qdelay_mean_ms", "ping:rtt_mean_ms")),
    "fetch": (fetch, fetch_reading),
    "udp-effect": (udp_effect, ("udp:owd_mean_ms", "udp:jitter_ms",
                                "network:all:aggregate_throughput_mbit")),
    "latency": (latency, ("ping:rtt_mean_ms", "link:aqm_delay_mean_ms")),
    "queue-vs-load": (queue_vs_load, ("link:backlog_mean_bytes", "link:qdelay_mean_ms")),
    # study C's own two (plots/study_c.py)
    "red-vs-pi-load": (_study_c.draw_load, ("link:qlen_mean_pkts", "link:mark_drop_pct",
                                            "link:utilization")),
    "red-vs-pi-queue": (_study_c.draw_queue_overlay, ("link:qlen_mean_pkts",)),
    "cca": (cca, ("network:all:aggregate_throughput_mbit", "flow:srtt_mean_ms")),
    # study D's own (plots/study_d.py)
    "srtt-owd-bag": (_study_d.draw_bag, ("flow:srtt_mean_ms", "flow:owd_mean_ms")),
    "compare-qdiscs": (sweep_figures.draw_comparison, ("network:all:aggregate_throughput_mbit",
                                                "network:all:jain_fairness",
                                                "link:qdelay_mean_ms")),
}


def plot_entry(name):
    """(draw, reading selectors) of plot ``name`` (``metric:KEY:PARAM`` too)."""
    if name.startswith("metric:"):
        _, key, param = name.split(":", 2)
        scope, metric, _ = _sweep.KEY_METRICS[key]
        return ((lambda points: sweep_figures.draw_metric(points, param, key)),
                (f"{scope}:{metric}",))
    return PLOTS[name]


def declared(points):
    """The study plots of a set: its scenario's ``reproduce`` entries with a ``plot``,
    else ``timeseries`` for 2 to :data:`MAX_OVERLAY` points (one point: its runs' own
    figures stand for it)."""
    scn = _sweep.scenario_of(points[0].scenario)
    names = [e["plot"] for e in (scn.reproduce if scn else ()) if e.get("plot")]
    if names:
        return names
    return ["timeseries"] if 1 < len(_reps_by_key(points)) <= MAX_OVERLAY else []


def file_name(name):
    """The figure's file stem: ``timeseries``, ``throughput_mbit-vs-loss_pct``."""
    return study_file(name)


def _order(groups):
    """Sweep points in the order of their values (numbers as numbers)."""
    def key(item):
        return [(0, float(v), "") if _sweep.as_number(v) is not None else (1, 0.0, str(v))
                for v in item[1][0].varied.values()]
    return dict(sorted(groups.items(), key=key))


#: a reading lists each sweep point's value up to this many points; beyond, it gives
#: the range and the points at its ends (the report's table lists every one)
READING_LISTS_AT_MOST = 6


def reading(points, selectors):
    """One line: each selector's label and value per sweep point (mean over its
    repetitions), with theory's range where the scenario declares one (``selectors``
    may be a function of the points that returns the line). Over more than
    :data:`READING_LISTS_AT_MOST` points: the lowest and highest value and their points."""
    degraded = "every run degraded (the emulator fell behind): no reading"
    if callable(selectors):
        return selectors(points) or ("" if any(p.averaged for p in points) else degraded)
    def scope_metric(selector):
        scope, _, metric = headline.parse_selector(selector)
        return scope, metric
    entries = {scope_metric(e["metric"]): e for p in points[:1]
               for e in headline.declared(p.run, catalogue())}
    parts = []
    groups = _reps_by_key(points)
    for selector in selectors:
        vals = [(key, _value(reps, selector)[0]) for key, reps in groups.items()]
        vals = [(k, v) for k, v in vals if v is not None]
        if not vals:
            continue
        unit = next((headline.unit_of(p.rows, selector) for p in points
                     if headline.unit_of(p.rows, selector)), "")
        entry = entries.get(scope_metric(selector), {})
        label = entry.get("label") or selector.split(":")[-1]
        if len(vals) > READING_LISTS_AT_MOST:
            (k_lo, lo), (k_hi, hi) = min(vals, key=lambda kv: kv[1]), max(vals, key=lambda kv: kv[1])
            text = (f"{headline.fmt(lo)}-{headline.fmt(hi, unit)} over {len(vals)} "
                    f"configurations (lowest {_label(k_lo)}; highest {_label(k_hi)})")
        else:
            text = ", ".join(f"{_label(k)} {headline.fmt(v, unit)}" if len(groups) > 1
                             else headline.fmt(v, unit) for k, v in vals)
        if entry.get("theory"):
            th = [headline.theory_value(entry["theory"], reps[0].run, reps[0].rows)[0]
                  for reps in groups.values()]
            th = sorted({round(t, 3) for t in th if t is not None and math.isfinite(t)})
            if th:
                rng = headline.fmt(th[0]) if len(th) == 1 else \
                    f"{headline.fmt(th[0])}-{headline.fmt(th[-1])}"
                text += f" (theory {f'{rng} {unit}'.strip()})"
        parts.append(f"{label}: {text}")
    if not parts and not any(p.averaged for p in points):
        return degraded
    return "; ".join(parts)


def draw(points, names=None):
    """{plot name: (Figure, reading)} of the set's study plots (``names``: default
    :func:`declared`); plots without data are left out."""
    out = {}
    for name in names if names is not None else declared(points):
        fn, selectors = plot_entry(name)
        fig = fn(points)
        if fig is not None:
            out[name] = (fig, reading(points, selectors))
    return out


# ----------------------------------------------------------------------- the table

def headline_rows(points):
    """One row per sweep point: ``point``, ``reps`` (averaged / all) and, per headline
    metric of the set's scenario, (mean, std over repetitions, theory, unit)."""
    entries = headline.declared(points[0].run, catalogue())
    rows = []
    for key, reps in _reps_by_key(points).items():
        row = {"point": _label(key), "reps": f"{sum(p.averaged for p in reps)}/{len(reps)}",
               "values": []}
        for entry in entries:
            mean, sd = _value(reps, entry["metric"], entry.get("agg", "mean"))
            th = (headline.theory_value(entry["theory"], reps[0].run, reps[0].rows)[0]
                  if entry.get("theory") else None)
            unit = next((headline.unit_of(p.rows, entry["metric"]) for p in reps
                         if headline.unit_of(p.rows, entry["metric"])), "")
            row["values"].append((mean, sd, th, unit))
        rows.append(row)
    return entries, rows


def cell(mean, sd, th, unit):
    """``442 ± 12 ms (theory 751)``."""
    if mean is None:
        return ""
    text = headline.fmt(mean) + (f" ± {headline.fmt(sd)}" if sd else "")
    text += f" {unit}".rstrip()
    return text + (f" (theory {headline.fmt(th)})" if th is not None else "")


def write_headline_table(points, out_dir, stem):
    """``STEM.csv`` and ``STEM.md``: the headline metrics per sweep point (mean, std,
    theory); returns the two paths."""
    entries, rows = headline_rows(points)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["point", "reps"] + [f"{e['metric']}{suffix}" for e in entries
                                    for suffix in ("", ":std", ":theory")])
    for r in rows:
        w.writerow([r["point"], r["reps"]] + ["" if x is None else f"{x:.6g}"
                                              for m, sd, th, _ in r["values"]
                                              for x in (m, sd, th)])
    md = ["| point | reps | " + " | ".join(e["label"] for e in entries) + " |",
          "|" + "---|" * (len(entries) + 2)]
    md += ["| " + " | ".join([r["point"], r["reps"]] + [cell(*v) for v in r["values"]])
           + " |" for r in rows]
    return write_csv_md(out_dir, stem, buf.getvalue(), "\n".join(md) + "\n")
