"""Study D's own outputs across runs (CCAs over paths with NetPerfMeter traffic):

* :func:`table_rows` / :func:`write_table` -- the study's table: per CCA x path x load x
  sender buffer, goodput, TCP RTT (srtt), the application's one-way delay and the number
  of ssthresh changes, means over the repetitions;
* :func:`draw_bag` -- a bag plot of RTT against one-way delay per CCA: every message's
  one-way delay paired with its flow's first srtt sample at or after its send time, over all runs
  of the CCA.

The bag is the bivariate analogue of a box: the median (coordinate-wise) marked, the
"bag" the convex hull of the half of the points closest to it and the "fence" that hull
inflated three times about the median, the points beyond it drawn as outliers. Closeness
is the Mahalanobis distance, a stand-in for Tukey's halfspace depth (exact depth costs
O(n^2 log n) per point; for the elliptical clouds these runs give, the orderings agree).
Degraded runs are left out as everywhere (:attr:`plots.sweep.Point.averaged`).
"""
import csv
import io

import numpy as np

from bufferbloat.plots.common import new_figure, write_csv_md, xy_from_zero
from bufferbloat.plots.palette import cca_color

#: (column, scope, metric)
COLUMNS = (("goodput_mbit", "network", "goodput_up_mbit"),
           ("rtt_mean_ms", "flow", "srtt_mean_ms"),
           ("rtt_p95_ms", "flow", "srtt_p95_ms"),
           ("owd_mean_ms", "flow", "owd_mean_ms"),
           ("owd_p95_ms", "flow", "owd_p95_ms"),
           ("ssthresh_changes", "flow", "ssthresh_changes"))
KEYS = ("cca", "variant", "load", "sndbuf_bytes")
#: at most this many (RTT, one-way delay) pairs per CCA in the bag plot
MAX_PAIRS = 4000


def _setting(point, key):
    rec = point.run.record
    for src in (point.overrides, rec.get("knobs") or {}, rec.get("params") or {}):
        if src.get(key) is not None:
            return src[key]
    return ""


def _metric(point, scope, metric):
    vals = [r["value"] for r in point.rows if r["scope"] == scope and r["metric"] == metric
            and r["name"] != "ping"]
    return float(np.mean(vals)) if vals else None


def table_rows(points):
    """One row per CCA x path x load x sender buffer: the repetitions' means of
    :data:`COLUMNS` (degraded runs left out, counted in ``degraded``)."""
    groups = {}
    for p in points:
        groups.setdefault(tuple(str(_setting(p, k)) for k in KEYS), []).append(p)
    out = []
    for key, reps in groups.items():
        row = dict(zip(KEYS, key), reps=len(reps), degraded=sum(p.degraded for p in reps))
        for col, scope, metric in COLUMNS:
            vals = [v for v in (_metric(p, scope, metric) for p in reps if p.averaged)
                    if v is not None]
            row[col] = float(np.mean(vals)) if vals else None
        out.append(row)
    return out


def write_table(points, out_dir, stem):
    """``STEM.csv`` and ``STEM.md`` of :func:`table_rows` in ``out_dir``; the paths."""
    rows = table_rows(points)
    if not rows:
        return []
    head = list(KEYS) + ["reps", "degraded"] + [c for c, _, _ in COLUMNS]

    def cell(v):
        return "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    for r in rows:
        w.writerow([cell(r.get(c)) for c in head])
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(cell(r.get(c)) for c in head) + " |" for r in rows]
    return write_csv_md(out_dir, stem, buf.getvalue(), "\n".join(md) + "\n")


def pairs(run):
    """(srtt ms, one-way delay ms) of every message of the run's NetPerfMeter flows: the
    message's delay and its flow's first srtt sample at or after its send time."""
    if not (run.has("npm_msg") and run.has("tcp")):
        return np.empty((0, 2))
    msg, tcp = run.series("npm_msg"), run.series("tcp")
    out = []
    for flow in dict.fromkeys(msg["flow"].tolist()):
        m, s = msg["flow"] == flow, tcp["flow"] == flow
        t, srtt = tcp["t"][s], tcp["srtt_us"][s] / 1e3
        ok = np.isfinite(t) & np.isfinite(srtt)
        if not ok.any():
            continue
        order = np.argsort(t[ok])
        t, srtt = t[ok][order], srtt[ok][order]
        idx = np.clip(np.searchsorted(t, msg["t_sent"][m]), 0, t.size - 1)
        owd = (msg["t_recv"][m] - msg["t_sent"][m]) * 1e3
        out.append(np.column_stack([srtt[idx], owd]))
    return np.concatenate(out) if out else np.empty((0, 2))


def _hull(xy):
    """Convex hull of 2-d points (Andrew's monotone chain), closed polygon."""
    pts = sorted(set(map(tuple, xy)))
    if len(pts) < 3:
        return np.array(pts + pts[:1])

    def half(seq):
        h = []
        for p in seq:
            while len(h) >= 2 and ((h[-1][0] - h[-2][0]) * (p[1] - h[-2][1])
                                   - (h[-1][1] - h[-2][1]) * (p[0] - h[-2][0])) <= 0:
                h.pop()
            h.append(p)
        return h
    lower, upper = half(pts), half(reversed(pts))
    ring = lower[:-1] + upper[:-1]
    return np.array(ring + ring[:1])


def bag(xy):
    """(median, bag polygon, fence polygon, outliers) of 2-d points (module docstring)."""
    xy = np.asarray(xy, float)
    med = np.median(xy, axis=0)
    cov = np.cov(xy.T) if len(xy) > 2 else np.eye(2)
    inv = np.linalg.pinv(cov)
    d = np.einsum("ij,jk,ik->i", xy - med, inv, xy - med)
    inner = xy[d <= np.median(d)]
    bag_poly = _hull(inner)
    fence_poly = med + 3 * (bag_poly - med)
    limit = 9 * np.median(d)       # the fence scales distances 3x: squared, 9x
    return med, bag_poly, fence_poly, xy[d > limit]


def draw_bag(points):
    """One bag per CCA of (srtt, one-way delay) over its runs; None without such pairs."""
    by_cca = {}
    for p in points:
        if p.averaged:
            xy = pairs(p.run)
            if len(xy):
                by_cca.setdefault(str(_setting(p, "cca")), []).append(xy)
    if not by_cca:
        return None
    fig, (ax,) = new_figure("RTT against one-way delay per CCA (bag plot)")
    rng = np.random.default_rng(0)
    for cca, parts in by_cca.items():
        xy = np.concatenate(parts)
        if len(xy) > MAX_PAIRS:
            xy = xy[rng.choice(len(xy), MAX_PAIRS, replace=False)]
        med, bag_poly, fence_poly, out = bag(xy)
        color = cca_color(cca)
        ax.fill(bag_poly[:, 0], bag_poly[:, 1], color=color, alpha=0.35, label=f"{cca} bag",
                gid=f"bag:{cca}")
        ax.plot(fence_poly[:, 0], fence_poly[:, 1], color=color, linestyle=":",
                linewidth=1, gid=f"fence:{cca}")
        ax.plot([med[0]], [med[1]], marker="*", markersize=12, color=color,
                linestyle="none", gid=f"median:{cca}")
        ax.plot(out[:, 0], out[:, 1], ".", markersize=2, color=color, gid=f"outliers:{cca}")
    xy_from_zero(ax, "TCP srtt (ms)", "one-way delay, NetPerfMeter's (send buffer "
                 "included, ms)", loc="upper left")
    return fig
