"""Latency vs throughput: each run (or sweep point) as the mean and the covariance
ellipse of its (throughput, latency) samples, flent's "ellipsis" plot.

Samples are 1 s bins after the warm-up: the aggregate goodput of the bin (Mbit/s,
acknowledged bytes; the download flows' sum under the RRUL-like load) and the mean
ping RTT of the pings sent in it (ms). The ellipse is the 1-sigma contour of the samples'
2x2 covariance (axes along its eigenvectors, half-lengths the square roots of its
eigenvalues).
"""

import numpy as np
from matplotlib.patches import Ellipse

from bufferbloat.plots.common import (
    caption,
    legend,
    mean_per_bin,
    new_figure,
    series,
    takes_run,
)
from bufferbloat.plots.palette import flow_color, qdisc_color
from bufferbloat.plots.throughput import aggregate_rate, aggregate_source
from bufferbloat.plots.totals import rrul_flows
from bufferbloat.plots.web import warmup_cut_s

BIN_S = 1.0


@takes_run
def samples(run, bin_s=BIN_S):
    """(throughput Mbit/s, latency ms) arrays of the run's complete bins (both known);
    two empty arrays when the run lacks flows or ping data. Bins after the warm-up only
    (as the metrics). Throughput is the goodput (acknowledged bytes) of the flows over the
    bottleneck, or the sum of the download flows under the RRUL-like load (as flent's
    ellipsis plot does; their senders' rate when the sampler did not see them)."""
    down, _, _ = rrul_flows(run)
    agg = aggregate_rate(run, bin_s, flows=down or None)
    ping = series(run, "ping")
    if agg is None or ping is None:
        return np.array([]), np.array([])
    centers, mbit = agg
    edges = np.append(centers - bin_s / 2, centers[-1] + bin_s / 2)
    lat = mean_per_bin(ping["t"], ping["rtt_ms"], edges)
    ok = np.isfinite(mbit) & np.isfinite(lat) & (edges[:-1] >= warmup_cut_s(run) - 1e-9)
    return mbit[ok], lat[ok]


def ellipse(x, y, n_std=1.0):
    """(mean x, mean y, width, height, angle in degrees) of the ``n_std`` covariance
    ellipse of the points (x, y); None for fewer than 2 points."""
    if len(x) < 2:
        return None
    cov = np.cov(np.vstack([x, y]))
    vals, vecs = np.linalg.eigh(cov)
    vals = np.clip(vals, 0, None)
    angle = np.degrees(np.arctan2(vecs[1, 1], vecs[0, 1]))
    return (float(np.mean(x)), float(np.mean(y)), 2 * n_std * np.sqrt(vals[1]),
            2 * n_std * np.sqrt(vals[0]), float(angle))


def draw_groups(groups_, title, cap=None, colors=None,
                ylabel="goodput: sum of flows (Mbit/s)"):
    """One mean marker + ellipse per group {label: [(throughput, latency) arrays...]}:
    x latency (ms), y throughput (Mbit/s). Returns the Figure (None if no samples)."""
    fig, (ax,) = new_figure(title, cap)
    drawn = 0
    for i, (label, parts) in enumerate(groups_.items()):
        thr = np.concatenate([p[0] for p in parts]) if parts else np.array([])
        lat = np.concatenate([p[1] for p in parts]) if parts else np.array([])
        if thr.size == 0:
            continue
        color = (colors or {}).get(label, flow_color(i))
        ax.plot(lat, thr, linestyle="none", marker=".", markersize=3, alpha=0.3, color=color)
        ax.plot([np.mean(lat)], [np.mean(thr)], marker="o", color=color, linestyle="none",
                label=f"{label} (mean of {thr.size} s)", gid=f"mean:{label}")
        e = ellipse(lat, thr)
        if e:
            patch = Ellipse((e[0], e[1]), e[2], e[3], angle=e[4], facecolor=color,
                            alpha=0.25, edgecolor=color, gid=f"ellipse:{label}")
            ax.add_patch(patch)
        drawn += 1
    if not drawn:
        return None
    ax.set_xlabel("latency: ping RTT (ms)")
    ax.set_ylabel(ylabel)
    ax.autoscale_view()
    legend(ax, loc="best")
    return fig


@takes_run
def draw(run):
    """The run's samples with their mean and 1-sigma ellipse (None without iperf and
    ping data)."""
    thr, lat = samples(run)
    if thr.size == 0:
        return None
    kind, _ = run.qdisc
    down, _, _ = rrul_flows(run)
    sent = aggregate_source(run, down or None) == "sent"
    after = f", after the {run.warmup_s:g} s warm-up" if run.warmup_s else ""
    return draw_groups({run.label: [(thr, lat)]},
                       f"Latency vs throughput ({thr.size} samples of 1 s{after})",
                       caption(run), colors={run.label: qdisc_color(kind)},
                       ylabel=("sent: iperf3's senders' rate, not goodput (Mbit/s)" if sent
                               else "goodput: sum of flows (Mbit/s)"))
