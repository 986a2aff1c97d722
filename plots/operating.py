"""Mean operating point of each flow: mean throughput vs mean smoothed RTT."""

import numpy as np

from bufferbloat.plots.common import caption, new_figure, series, takes_run, xy_from_zero
from bufferbloat.plots.palette import cca_color, flow_color
from bufferbloat.plots.throughput import aggregate_rate, aggregate_source, flow_rates, link_lines
from bufferbloat.plots.web import warmup_cut_s
from bufferbloat.results.records import label_groups


@takes_run
def points(run):
    """[(flow, cca, srtt mean ms, srtt std ms, Mbit/s mean, Mbit/s std)] of tcp.csv's
    flows after the warm-up: srtt from tcp.csv, goodput from its 1 s bins of
    acknowledged bytes (the metrics' data)."""
    tcp = series(run, "tcp")
    rates = flow_rates(run)
    if tcp is None:
        return []
    cut = warmup_cut_s(run)
    out = []
    for flow, mask in label_groups(tcp, "flow").items():
        if flow not in rates or rates[flow][2] != "goodput":
            continue
        t, mbit, _ = rates[flow]
        mbit = mbit[(t - 0.5 >= cut) & np.isfinite(mbit)]
        srtt = tcp["srtt_us"][mask & (tcp["t"] >= cut)] / 1e3
        if not mbit.size or not np.isfinite(srtt).any():
            continue
        cca = str(tcp["cca"][mask][0]) if "cca" in tcp else ""
        out.append((flow, cca, float(np.nanmean(srtt)), float(np.nanstd(srtt)),
                    float(np.mean(mbit)), float(np.std(mbit))))
    return out


def joint_goodput(run):
    """The mean aggregate goodput (Mbit/s) of the flows over the bottleneck after the
    warm-up (:func:`plots.throughput.aggregate_rate`'s bins), or None. Not the sum of
    per-flow means: flows that do not all live the whole window would add up to more
    than the link carried."""
    agg = aggregate_rate(run)
    if agg is None or aggregate_source(run) != "goodput":
        return None
    t, mbit = agg
    keep = (t - 0.5 >= warmup_cut_s(run)) & np.isfinite(mbit)
    return float(np.mean(mbit[keep])) if keep.any() else None


@takes_run
def draw(run):
    """Each flow at (mean srtt ms, mean throughput Mbit/s) with 1-std error bars, the
    marker edge in its CCA's colour; the link rate; study E's reference points: the
    optimal one (base RTT, link rate / k: a fair share without a queue, gid ``optimal``)
    and the joint one (the flows' mean srtt, their aggregate goodput over the bottleneck,
    :func:`joint_goodput`, gid ``joint``).
    None without tcp.csv flows."""
    pts = points(run)
    if not pts:
        return None
    fig, (ax,) = new_figure("Mean operating point per flow", caption(run))
    for i, (flow, cca, rtt, rtt_sd, mbit, mbit_sd) in enumerate(pts):
        ax.errorbar([rtt], [mbit], xerr=[rtt_sd], yerr=[mbit_sd], marker="o",
                    color=flow_color(i), markeredgecolor=cca_color(cca), markeredgewidth=2,
                    capsize=3, label=f"{flow} ({cca})", gid=f"flow:{flow}")
    rate, base = run.bottleneck_mbit, run.base_rtt_ms
    if rate and base is not None:
        ax.plot([base], [rate / len(pts)], marker="*", markersize=14, linestyle="none",
                color="black", label=f"optimal (base RTT, rate / {len(pts)})", gid="optimal")
    joint = joint_goodput(run)
    if joint is not None:
        ax.plot([float(np.mean([p[2] for p in pts]))], [joint], marker="D", markersize=9,
                linestyle="none", color="0.45",
                label="joint (mean srtt, aggregate goodput over the bottleneck)", gid="joint")
    link_lines(ax, run)
    xy_from_zero(ax, "mean srtt (ms)", "mean goodput (Mbit/s)", loc="lower right")
    return fig
