"""Per-flow and aggregate throughput vs time (iperf.csv intervals), with the link rate;
per-flow shares with Jain's index (the ``fairness`` figure)."""

import numpy as np

from bufferbloat.core.stats import jain_index
from bufferbloat.plots.common import (
    LINK_GID,
    THEORY_GID,
    caption,
    finish_axes,
    hline,
    include_in_ylim,
    legend,
    new_figure,
    series,
    spread_over_bins,
    takes_run,
)
from bufferbloat.plots.palette import LINK_COLOR, THEORY_COLOR, flow_color
from bufferbloat.results import theory
from bufferbloat.results.records import label_groups

AGGREGATE_GID = "aggregate"


@takes_run
def flow_rates(run):
    """{flow: (t_mid, Mbit/s)} of iperf.csv's intervals, or {} without them."""
    iperf = series(run, "iperf")
    if iperf is None:
        return {}
    out = {}
    for flow, mask in label_groups(iperf, "flow").items():
        a, b = iperf["t_start"][mask], iperf["t_end"][mask]
        out[flow] = ((a + b) / 2, iperf["bits_per_second"][mask] / 1e6)
    return out


@takes_run
def aggregate_rate(run, bin_s=1.0, flows=None):
    """(bin centres, Mbit/s) of the sum of the iperf intervals of ``flows`` (all when
    None) on a common grid of whole ``bin_s`` s bins from the first interval's start
    (each interval's bytes spread uniformly over it); None without iperf intervals."""
    iperf = series(run, "iperf")
    if iperf is None:
        return None
    mask = np.ones(len(iperf["flow"]), bool) if flows is None else np.isin(
        iperf["flow"], list(flows))
    if not mask.any():
        return None
    a, b = iperf["t_start"][mask], iperf["t_end"][mask]
    t0, t1 = np.nanmin(a), np.nanmax(b)
    # whole bins only: a last partial bin would read as a collapse of the rate
    n = int(np.floor((t1 - t0) / bin_s + 1e-9))
    edges = t0 + bin_s * np.arange(n + 1) if n >= 1 else np.array([t0, t1])
    total = spread_over_bins(a, b, iperf["bytes"][mask], edges)
    width = np.diff(edges)
    return (edges[:-1] + edges[1:]) / 2, total * 8 / width / 1e6


@takes_run
def acked_rates(run, flows, bin_s=1.0):
    """(bin centres, {flow: Mbit/s}) of each flow's goodput, what its receiver
    acknowledged (tcp.csv's bytes_acked, interpolated at the edges of whole ``bin_s`` s
    bins on one grid from the first sample to the last of any of them; 0 outside a
    flow's own samples); None unless tcp.csv has every one of ``flows``."""
    tcp = series(run, "tcp")
    if tcp is None or not flows:
        return None
    masks = {f: tcp["flow"] == f for f in flows}
    if not all(m.any() for m in masks.values()):
        return None
    t_all = np.concatenate([tcp["t"][m] for m in masks.values()])
    t0, t1 = np.nanmin(t_all), np.nanmax(t_all)
    n = int(np.floor((t1 - t0) / bin_s + 1e-9))
    if n < 1:
        return None
    edges = t0 + bin_s * np.arange(n + 1)
    out = {}
    for f, m in masks.items():
        t, v = tcp["t"][m], tcp["bytes_acked"][m]
        ok = np.isfinite(t) & np.isfinite(v)
        order = np.argsort(t[ok], kind="stable")
        at = np.interp(edges, t[ok][order], v[ok][order])
        out[f] = np.clip(np.diff(at), 0, None) * 8 / bin_s / 1e6
    return (edges[:-1] + edges[1:]) / 2, out


def link_lines(ax, run, rate=None):
    """The link rate (gid ``link-rate``; default the bottleneck's) and the TCP goodput
    ceiling (gid ``theory``)."""
    rate = rate or run.bottleneck_mbit
    if rate:
        hline(ax, rate, f"link rate {rate:g} Mbit/s", LINK_GID, LINK_COLOR, "-.")
        ceiling = theory.tcp_goodput_ceiling(rate)
        hline(ax, ceiling, f"TCP goodput ceiling {ceiling:.3g} Mbit/s", THEORY_GID,
              THEORY_COLOR, ":")
    return rate


@takes_run
def draw(run):
    """Throughput (Mbit/s) of each iperf3 flow vs t (s) at its interval midpoints, the
    aggregate over 1 s bins when there are several flows (gid ``aggregate``), the link
    rate and TCP goodput ceiling. None without iperf intervals."""
    rates = flow_rates(run)
    if not rates:
        return None
    fig, (ax,) = new_figure("Throughput per flow", caption(run))
    for i, (flow, (t, mbit)) in enumerate(rates.items()):
        ax.plot(t, mbit, color=flow_color(i), linewidth=1, marker=".", markersize=3,
                label=flow, gid=f"flow:{flow}")
    if len(rates) > 1:
        t, mbit = aggregate_rate(run)
        ax.plot(t, mbit, color="black", linewidth=1.5, label="aggregate", gid=AGGREGATE_GID)
    rate = link_lines(ax, run)
    finish_axes(ax, "time (s)", "throughput (Mbit/s)", "lower right")
    include_in_ylim(ax, rate)
    return fig


@takes_run
def draw_fairness(run):
    """Mean throughput (Mbit/s) of each flow as bars (iperf3: bytes x 8 / interval
    time), the equal share link rate / n, and Jain's index in the title (ideal 1).
    None without iperf intervals."""
    iperf = series(run, "iperf")
    if iperf is None:
        return None
    names, shares = [], []
    for flow, mask in label_groups(iperf, "flow").items():
        span = float(np.nansum(iperf["t_end"][mask] - iperf["t_start"][mask]))
        if span > 0:
            names.append(flow)
            shares.append(float(np.nansum(iperf["bytes"][mask])) * 8 / span / 1e6)
    if not shares:
        return None
    jain = jain_index(shares)
    fig, (ax,) = new_figure(f"Per-flow throughput: Jain's index {jain:.3f} (ideal 1)",
                            caption(run))
    ax.bar(range(len(shares)), shares, color=[flow_color(i) for i in range(len(shares))],
           gid="shares")
    ax.set_xticks(range(len(shares)))
    ax.set_xticklabels(names, rotation=45 if len(names) > 6 else 0, fontsize=8)
    rate = run.bottleneck_mbit
    if rate:
        share = theory.tcp_goodput_ceiling(rate) / len(shares)
        hline(ax, share, f"equal share of the goodput ceiling {share:.3g} Mbit/s",
              THEORY_GID, THEORY_COLOR)
    ax.set_xlabel("flow")
    ax.set_ylabel("mean throughput (Mbit/s)")
    legend(ax, loc="upper right")
    return fig
