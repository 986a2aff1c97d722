"""Across runs: a sweep's metrics against the swept parameter, box plots, the qdiscs side
by side, and latency/throughput ellipses per sweep point, for a set of
:class:`plots.sweep.Point`s (:func:`draw_all`).
"""

import math

import numpy as np

from bufferbloat.plots import ellipsis as _ellipsis
from bufferbloat.plots.common import (
    LINK_GID,
    TARGET_GID,
    THEORY_GID,
    finish_axes,
    full_queue_rtt_ms,
    hline,
    legend,
    legend_beside,
    new_figure,
)
from bufferbloat.plots.palette import (
    LINK_COLOR,
    QDISC_COLORS,
    TARGET_COLOR,
    THEORY_COLOR,
    qdisc_color,
    qdisc_kind,
)
from bufferbloat.plots.sweep import (
    INTERVAL_TEXT,
    KEY_METRICS,
    as_number,
    by_key,
    caption_of,
    ci_half_width,
    line_color,
    qdisc_colors,
    samples,
    series_of,
    stats,
    swept_params,
    title_of,
    x_positions,
)

#: Mathis et al.'s constant for periodic loss with delayed ACKs off: sqrt(3/2).
MATHIS_C = math.sqrt(1.5)


def mathis_mbit(mss_bytes, rtt_ms, loss_pct, c=MATHIS_C):
    """Mathis et al.'s TCP throughput bound MSS / RTT x C / sqrt(p), Mbit/s
    (p = loss_pct / 100)."""
    p = loss_pct / 100.0
    if p <= 0 or rtt_ms <= 0:
        return math.inf
    return mss_bytes * 8 / (rtt_ms / 1e3) * c / math.sqrt(p) / 1e6


#: a metric-vs-parameter figure keeps its legend inside its panel up to this many lines
#: (beyond, :func:`bufferbloat.plots.common.legend_beside`: D's 24 lines)
LEGEND_IN_PANEL_AT_MOST = 8


def draw_metric(points, param, key):
    """KEY_METRICS ``key`` vs swept ``param``: mean over repetitions with error bars of
    its 95 % confidence interval (:func:`plots.sweep.ci_half_width`, the table's), one
    line per combination of the other varied keys (gid ``metric:LABEL``).
    Theory where it exists (gid ``theory``/``target``/``link-rate``): the FIFO
    full-queue RTT on RTT metrics, the AQM target on delay metrics, the link rate on
    throughput, the Mathis bound (MSS/RTT x C/sqrt(p), C = sqrt(3/2), RTT = the point's
    mean srtt, MSS 1448 B) when ``param`` is ``loss_pct``, Jain's ideal 1. None when no
    point has the metric."""
    scope, metric, ylabel = KEY_METRICS[key]
    if not any(p.value(key) is not None for p in points):
        return None
    xs, cats = x_positions(points, param)
    lines = series_of(points, param)
    beside = len(lines) > LEGEND_IN_PANEL_AT_MOST
    fig, (ax,) = new_figure(title_of(points, f"{ylabel.split(' (')[0]} vs {param}"),
                            f"{caption_of(points)} | {INTERVAL_TEXT}",
                            width=11.0 if beside else 8.0)
    theory_pts, target_pts = [], []
    for i, (label, pts) in enumerate(lines.items()):
        rows = []
        for k, reps in by_key(pts).items():
            values = [p.value(key) for p in reps]
            mean, _, _ = stats(values)
            if mean is not None:
                rows.append((xs[k], mean, ci_half_width(values), reps))
        rows.sort(key=lambda r: r[0])
        if not rows:
            continue
        color = line_color(points, [r[3][0] for r in rows], i)
        ax.errorbar([r[0] for r in rows], [r[1] for r in rows], yerr=[r[2] for r in rows],
                    marker="o", capsize=4, color=color, label=label or key,
                    linestyle="-" if cats is None else "none",   # no line across categories
                    gid=f"metric:{label or key}")
        for x, _, _, reps in rows:
            run = reps[0].run
            if key.startswith("rtt") and full_queue_rtt_ms(run) is not None:
                theory_pts.append((x, full_queue_rtt_ms(run)))
            if ("delay" in key) and run.aqm_target_ms is not None:
                target_pts.append((x, run.aqm_target_ms))
            if key == "throughput_mbit" and param == "loss_pct":
                srtt, _, _ = stats([p.value("srtt_mean_ms") for p in reps])
                loss = as_number(reps[0].varied.get(param))
                if srtt and loss:
                    theory_pts.append((x, min(mathis_mbit(1448, srtt, loss),
                                              run.bottleneck_mbit or math.inf)))
    for pts_, text, gid, color in ((theory_pts, "theory", THEORY_GID, THEORY_COLOR),
                                   (target_pts, "AQM target", TARGET_GID, TARGET_COLOR)):
        if pts_:
            pts_ = sorted(set(pts_))
            name = ("Mathis bound MSS/RTT x C/sqrt(p)" if param == "loss_pct" and
                    key == "throughput_mbit" else "full-queue RTT (theory)"
                    if gid == THEORY_GID else text)
            line, = ax.plot([p[0] for p in pts_], [p[1] for p in pts_],
                            linestyle="--" if cats is None else "none", marker="_",
                            markersize=20, markeredgewidth=2, color=color, label=name)
            line.set_gid(gid)
    first = points[0].run
    if key in ("throughput_mbit", "goodput_up_mbit", "goodput_down_mbit") and \
            first.bottleneck_mbit:
        fwd = first.bottleneck_mbit
        rev = first.params.get("reverse_mbit") or fwd
        both = any(p.value("goodput_down_mbit") for p in points) and \
            any(p.value("goodput_up_mbit") for p in points)
        if key == "goodput_down_mbit":
            rate, text = rev, f"link rate {rev:g} Mbit/s"
        elif key == "throughput_mbit" and both:     # the load runs both ways
            rate, text = fwd + rev, f"link rates both ways {fwd:g} + {rev:g} Mbit/s"
        else:
            rate, text = fwd, f"link rate {fwd:g} Mbit/s"
        hline(ax, rate, text, LINK_GID, LINK_COLOR, "-.")
    if key == "jain_fairness":
        hline(ax, 1.0, "ideal (1)", THEORY_GID, THEORY_COLOR, ":")
    if cats is not None:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats)
    if beside:
        ax.set_xlabel(param)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        legend_beside(fig, [ax], last={h.get_label() for h in ax.lines
                                       if h.get_gid() in (THEORY_GID, TARGET_GID, LINK_GID)})
    else:
        finish_axes(ax, param, ylabel)
    return fig


def draw_box(points, param=None):
    """Box plots per sweep point of the ping RTT samples (ms, top) and of the aggregate
    throughput per 1 s (Mbit/s, bottom), all repetitions pooled, after warm-up. Boxes
    coloured by the point's qdisc. None without samples."""
    groups = by_key(points)
    data = {k: [samples(p.run) for p in reps] for k, reps in groups.items()}
    rtts = [np.concatenate([d[0] for d in v]) for v in data.values()]
    thrs = [np.concatenate([d[1] for d in v]) for v in data.values()]
    if not any(r.size for r in rtts) and not any(t.size for t in thrs):
        return None
    fig, (ax_r, ax_t) = new_figure(title_of(points, "Latency and throughput per sweep point"),
                                   caption_of(points), nrows=2, height=3.2)
    labels = list(groups)
    colors = [qdisc_color(reps[0].run.qdisc[0]) for reps in groups.values()]
    for ax, vals, ylabel in ((ax_r, rtts, "ping RTT (ms)"),
                             (ax_t, thrs, "aggregate goodput per 1 s (Mbit/s)")):
        pos = [i for i, v in enumerate(vals) if v.size]
        if pos:
            box = ax.boxplot([vals[i] for i in pos], positions=pos, patch_artist=True,
                             widths=0.6)
            for i, patch in zip(pos, box["boxes"]):
                patch.set_facecolor(colors[i])
                patch.set_alpha(0.5)
                patch.set_gid(f"box:{labels[i]}")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
    ax_t.set_xticks(range(len(labels)))
    ax_t.set_xticklabels(labels, rotation=20 if len(labels) > 4 else 0, fontsize=8)
    ax_t.set_xlabel(f"sweep point ({param})" if param else "sweep point")
    rate = points[0].run.bottleneck_mbit
    if rate:
        hline(ax_t, rate, f"link rate {rate:g} Mbit/s", LINK_GID, LINK_COLOR, "-.")
        legend(ax_t, loc="lower right")
    return fig


COMPARE_KEYS = ("rtt_mean_ms", "throughput_mbit", "qdelay_p50_ms", "drop_pct")


def draw_comparison(points, keys=COMPARE_KEYS):
    """Side by side per qdisc (FIFO, PIE, RED, CoDel, FQ-CoDel, in that order): one panel
    per metric, one bar per qdisc in its palette colour (gid ``bar:QDISC``), mean over
    its runs with 1-std error bars. None unless the runs use two or more qdiscs."""
    by_kind = {}
    for p in points:
        by_kind.setdefault(qdisc_kind(p.run.qdisc[0]), []).append(p)
    if len(by_kind) < 2:
        return None
    order = [k for k in QDISC_COLORS if k in by_kind] + sorted(set(by_kind) - set(QDISC_COLORS))
    keys = [k for k in keys if any(p.value(k) is not None for p in points)]
    fig, axes = new_figure(title_of(points, "Qdiscs side by side"), caption_of(points),
                           ncols=len(keys), width=3.2 * len(keys), sharex=False)
    for ax, key in zip(axes, keys):
        for i, kind in enumerate(order):
            mean, sd, n = stats([p.value(key) for p in by_kind[kind]])
            if mean is None:
                continue
            ax.bar([i], [mean], yerr=[sd], capsize=4, color=qdisc_color(kind),
                   gid=f"bar:{kind}", label=kind)
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels(order, rotation=30, fontsize=8)
        ax.set_xlabel("qdisc")
        ax.set_ylabel(KEY_METRICS[key][2], fontsize=8)
    fig.subplots_adjust(wspace=0.45, bottom=0.25)
    return fig


def draw_ellipsis(points):
    """Latency vs throughput, one mean + 1-sigma ellipse per sweep point (its
    repetitions' 1 s samples pooled; :mod:`plots.ellipsis`)."""
    groups = {k: [_ellipsis.samples(p.run) for p in reps] for k, reps in by_key(points).items()}
    groups = {k: [s for s in v if s[0].size] for k, v in groups.items()}
    return _ellipsis.draw_groups({k: v for k, v in groups.items() if v},
                                 title_of(points, "Latency vs throughput per sweep point"),
                                 caption_of(points),
                                 colors=qdisc_colors(points))


def draw_all(points):
    """{name: Figure} for a set of runs of one scenario: each key metric vs each swept
    parameter (``metric-KEY-vs-PARAM``), the box plots, the qdisc comparison and the
    ellipsis plot, as far as the data allow."""
    out = {}
    for param in swept_params(points):
        for key in KEY_METRICS:
            fig = draw_metric(points, param, key)
            if fig is not None:
                out[f"{key}-vs-{param}"] = fig
    for name, fig in (("box", draw_box(points, ",".join(swept_params(points)) or None)),
                      ("compare-qdiscs", draw_comparison(points)),
                      ("ellipsis", draw_ellipsis(points))):
        if fig is not None:
            out[name] = fig
    return out
