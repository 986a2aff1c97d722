"""Empirical CDFs of RTT (ping, TCP srtt) and of throughput (iperf3 intervals)."""

import numpy as np

from bufferbloat.plots.common import caption, legend, new_figure, series, takes_run
from bufferbloat.plots.palette import flow_color
from bufferbloat.results.records import label_groups


def ecdf(values):
    """(sorted values, cumulative fraction) of the finite ``values``."""
    v = np.sort(np.asarray(values, float)[np.isfinite(np.asarray(values, float))])
    return v, np.arange(1, v.size + 1) / max(v.size, 1)


@takes_run
def draw(run):
    """Left: eCDF of the RTT (ms) of each ping probe (solid) and each TCP flow's srtt
    (dashed); right: eCDF of each flow's interval throughput (Mbit/s). None when the run
    has none of ping, tcp and iperf."""
    ping, tcp, iperf = series(run, "ping"), series(run, "tcp"), series(run, "iperf")
    if ping is None and tcp is None and iperf is None:
        return None
    fig, (ax_r, ax_t) = new_figure("Distributions (eCDF)", caption(run), ncols=2,
                                   width=10.0, sharex=False)
    n = 0
    if ping is not None:
        for probe, mask in label_groups(ping, "probe").items():
            x, y = ecdf(ping["rtt_ms"][mask])
            ax_r.step(x, y, where="post", color=flow_color(n), label=f"{probe} ping",
                      gid=f"probe:{probe}")
            n += 1
    flows = list(dict.fromkeys((list(label_groups(tcp, "flow")) if tcp is not None else [])
                               + (list(label_groups(iperf, "flow")) if iperf is not None else [])))
    colors = {f: flow_color(n + i) for i, f in enumerate(flows)}
    if tcp is not None:
        for flow, mask in label_groups(tcp, "flow").items():
            x, y = ecdf(tcp["srtt_us"][mask] / 1e3)
            ax_r.step(x, y, where="post", linestyle="--", color=colors[flow],
                      label=f"{flow} srtt", gid=f"srtt:{flow}")
    if iperf is not None:
        for flow, mask in label_groups(iperf, "flow").items():
            x, y = ecdf(iperf["bits_per_second"][mask] / 1e6)
            ax_t.step(x, y, where="post", color=colors[flow], label=flow, gid=f"flow:{flow}")
    ax_r.set_xlabel("RTT (ms)")
    ax_t.set_xlabel("throughput per interval (Mbit/s)")
    for ax in (ax_r, ax_t):
        ax.set_ylabel("fraction of samples (CDF)")
        ax.set_ylim(0, 1.02)
        legend(ax, loc="lower right")
    return fig
