"""Empirical CDFs of RTT (ping, TCP srtt) and of goodput (1 s bins of acknowledged bytes)."""

import numpy as np

from bufferbloat.plots.common import caption, legend, new_figure, series, takes_run
from bufferbloat.plots.palette import flow_color
from bufferbloat.plots.throughput import flow_rates, link_rate_of, sent_label
from bufferbloat.plots.web import warmup_cut_s
from bufferbloat.results.records import label_groups


def ecdf(values):
    """(sorted values, cumulative fraction) of the finite ``values``."""
    v = np.sort(np.asarray(values, float)[np.isfinite(np.asarray(values, float))])
    return v, np.arange(1, v.size + 1) / max(v.size, 1)


@takes_run
def draw(run):
    """Left: eCDF of the RTT (ms) of each ping probe (solid) and each TCP flow's srtt
    (dashed); right: eCDF of each flow's goodput per 1 s bin (Mbit/s, acknowledged bytes;
    a flow the sampler did not see: its sender's rate, labelled so). Only samples after
    the warm-up, as the metrics; each label says how many. None when the run has none of
    ping, tcp and iperf."""
    ping, tcp = series(run, "ping"), series(run, "tcp")
    rates = flow_rates(run)
    if ping is None and tcp is None and not rates:
        return None
    cut = warmup_cut_s(run)
    after = f" after the {run.warmup_s:g} s warm-up" if run.warmup_s else ""
    fig, (ax_r, ax_t) = new_figure(f"Distributions (eCDF){after}", caption(run), ncols=2,
                                   width=10.0, sharex=False)
    n = 0
    if ping is not None:
        for probe, mask in label_groups(ping, "probe").items():
            x, y = ecdf(ping["rtt_ms"][mask & (ping["t"] >= cut)])
            ax_r.step(x, y, where="post", color=flow_color(n),
                      label=f"{probe} ping ({x.size})", gid=f"probe:{probe}")
            n += 1
    flows = list(dict.fromkeys((list(label_groups(tcp, "flow")) if tcp is not None else [])
                               + list(rates)))
    colors = {f: flow_color(n + i) for i, f in enumerate(flows)}
    if tcp is not None:
        for flow, mask in label_groups(tcp, "flow").items():
            x, y = ecdf(tcp["srtt_us"][mask & (tcp["t"] >= cut)] / 1e3)
            ax_r.step(x, y, where="post", linestyle="--", color=colors[flow],
                      label=f"{flow} srtt ({x.size})", gid=f"srtt:{flow}")
    for flow, (t, mbit, source) in rates.items():
        x, y = ecdf(mbit[t - 0.5 >= cut])     # bins starting after the cut
        if source == "goodput":
            ax_t.step(x, y, where="post", color=colors[flow], label=f"{flow} ({x.size} s)",
                      gid=f"flow:{flow}")
        else:
            ax_t.step(x, y, where="post", linestyle="--", color=colors[flow],
                      label=sent_label(f"{flow} ({x.size} s)", x, link_rate_of(run, flow)),
                      gid=f"sent:{flow}")
    ax_r.set_xlabel("RTT (ms)")
    ax_t.set_xlabel("goodput per 1 s (Mbit/s)")
    for ax in (ax_r, ax_t):
        ax.set_ylabel("fraction of samples (CDF)")
        ax.set_ylim(0, 1.02)
        legend(ax, loc="lower right")
    return fig
