"""Mean operating point of each flow: mean throughput vs mean smoothed RTT."""

import numpy as np

from bufferbloat.plots.common import caption, new_figure, series, takes_run, xy_from_zero
from bufferbloat.plots.palette import cca_color, flow_color
from bufferbloat.plots.throughput import link_lines
from bufferbloat.results.records import label_groups


@takes_run
def points(run):
    """[(flow, cca, srtt mean ms, srtt std ms, Mbit/s mean, Mbit/s std)] from tcp.csv's
    srtt and iperf.csv's intervals (flows present in both)."""
    tcp, iperf = series(run, "tcp"), series(run, "iperf")
    if tcp is None or iperf is None:
        return []
    out = []
    iflows = label_groups(iperf, "flow")
    for flow, mask in label_groups(tcp, "flow").items():
        if flow not in iflows:
            continue
        srtt = tcp["srtt_us"][mask] / 1e3
        mbit = iperf["bits_per_second"][iflows[flow]] / 1e6
        cca = str(tcp["cca"][mask][0]) if "cca" in tcp else ""
        out.append((flow, cca, float(np.nanmean(srtt)), float(np.nanstd(srtt)),
                    float(np.nanmean(mbit)), float(np.nanstd(mbit))))
    return out


@takes_run
def draw(run):
    """Each flow at (mean srtt ms, mean throughput Mbit/s) with 1-std error bars, the
    marker edge in its CCA's colour; the link rate; study E's reference points: the
    optimal one (base RTT, link rate / k: a fair share without a queue, gid ``optimal``)
    and the joint one (the flows' mean srtt, their summed throughput, gid ``joint``).
    None without tcp and iperf data."""
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
    ax.plot([float(np.mean([p[2] for p in pts]))], [float(sum(p[4] for p in pts))],
            marker="D", markersize=9, linestyle="none", color="0.45",
            label="joint (mean srtt, summed throughput)", gid="joint")
    link_lines(ax, run)
    xy_from_zero(ax, "mean srtt (ms)", "mean throughput (Mbit/s)", loc="lower right")
    return fig
