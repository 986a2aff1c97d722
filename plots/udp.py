"""UDP streams (udp.csv): received throughput, one-way delay and loss per time bin."""

import numpy as np

from bufferbloat.plots.common import (
    bin_edges,
    caption,
    legend,
    new_figure,
    series,
    takes_run,
)
from bufferbloat.plots.palette import flow_color
from bufferbloat.results.records import label_groups

BIN_S = 1.0


@takes_run
def draw(run, bin_s=BIN_S):
    """Per stream, over bins of ``bin_s`` s of send time: received throughput (Mbit/s),
    one-way delay (ms, mean per bin; jitter shows as its spread) and loss (%: sequence
    numbers missing between the first and last received). None without udp.csv."""
    udp = series(run, "udp")
    if udp is None:
        return None
    fig, (ax_r, ax_d, ax_l) = new_figure("UDP streams: throughput, one-way delay, loss",
                                         caption(run), nrows=3, height=2.6)
    for i, (stream, mask) in enumerate(label_groups(udp, "stream").items()):
        ts, tr = udp["t_sent"][mask], udp["t_recv"][mask]
        seq, size = udp["seq"][mask], udp["size_bytes"][mask]
        edges = bin_edges(np.nanmin(ts), np.nanmax(ts), bin_s)
        centers = (edges[:-1] + edges[1:]) / 2
        idx = np.clip(np.digitize(ts, edges) - 1, 0, len(centers) - 1)
        nbytes = np.bincount(idx, weights=np.nan_to_num(size), minlength=len(centers))
        got = np.bincount(idx, minlength=len(centers)).astype(float)
        owd = (tr - ts) * 1e3
        mean_owd = np.bincount(idx, weights=owd, minlength=len(centers)) / np.maximum(got, 1)
        # expected packets per bin from the sequence numbers' range in the bin
        expected = np.array([np.ptp(seq[idx == k]) + 1 if (idx == k).any() else 0
                             for k in range(len(centers))], float)
        loss = np.where(expected > 0, 100 * (1 - got / np.maximum(expected, 1)), np.nan)
        color = flow_color(i)
        ax_r.plot(centers, nbytes * 8 / bin_s / 1e6, color=color, label=stream,
                  gid=f"stream:{stream}")
        ax_d.plot(ts, owd, linestyle="none", marker=".", markersize=2, color=color,
                  alpha=0.3, gid=f"owd:{stream}")
        ax_d.plot(centers, mean_owd, color=color, label=f"{stream} mean per bin")
        ax_l.plot(centers, loss, color=color, drawstyle="steps-mid", label=stream)
    ax_r.set_ylabel("received (Mbit/s)")
    ax_d.set_ylabel("one-way delay (ms)")
    ax_l.set_ylabel("loss (%)")
    ax_l.set_xlabel("send time (s)")
    for ax in (ax_r, ax_d, ax_l):
        ax.set_ylim(bottom=0)
        legend(ax, loc="upper left")
    return fig
