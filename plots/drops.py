"""Drops and ECN marks at the bottleneck vs time: per-interval deltas of qdisc.csv's
cumulative counters, summed into bins; PIE's drop probability when reported."""

import numpy as np

from bufferbloat.plots.common import (
    bin_edges,
    caption,
    counter_increments,
    leaf_groups,
    leaf_name,
    legend,
    new_figure,
    takes_run,
)
from bufferbloat.plots.palette import qdisc_color

BIN_S = 0.5
#: counter -> (legend text, line style)
COUNTERS = {"drops": ("drops", "-"), "early_drops": ("AQM early drops", "--"),
            "marks": ("ECN marks", ":")}


def _binned(t, counter, edges):
    t_end, delta = counter_increments(t, counter)
    # each sample interval's increment is counted in the bin of its end
    counts = np.zeros(len(edges) - 1)
    idx = np.clip(np.digitize(t_end, edges) - 1, 0, len(counts) - 1)
    np.add.at(counts, idx, delta)
    return counts


@takes_run
def draw(run, bin_s=BIN_S):
    """Drops, AQM early drops and ECN marks per second (bins of ``bin_s`` s) of each
    AQM leaf (both directions' when the reverse AQM was sampled, the reverse lighter)
    vs t (s); a second axes with PIE's drop probability when qdisc.csv has ``prob``.
    None without qdisc samples."""
    leaves = leaf_groups(run)
    if not leaves:
        return None
    q = run.series("qdisc")
    has_prob = "prob" in q and any(np.isfinite(q["prob"][m]).any() for m in leaves.values())
    fig, axes = new_figure("Drops and marks at the bottleneck", caption(run),
                           nrows=2 if has_prob else 1, height=3.0 if has_prob else 4.0)
    ax = axes[0]
    several = len({dev for dev, _, _ in leaves}) > 1
    for i, ((dev, handle, kind), mask) in enumerate(leaves.items()):
        name = leaf_name(run, dev, handle, kind, several)
        alpha = 1.0 if i == 0 else 0.55        # the reverse direction's, lighter
        t = q["t"][mask]
        if not np.isfinite(t).any():
            continue
        edges = bin_edges(np.nanmin(t), np.nanmax(t), bin_s)
        centers = (edges[:-1] + edges[1:]) / 2
        for counter, (text, style) in COUNTERS.items():
            if counter in q and np.isfinite(q[counter][mask]).any():
                rate = _binned(t, q[counter][mask], edges) / bin_s
                ax.plot(centers, rate, color=qdisc_color(kind), linestyle=style,
                        drawstyle="steps-mid", linewidth=1, label=f"{name} {text}",
                        alpha=alpha, gid=f"{counter}:{name}")
        if has_prob:
            axes[1].plot(t, q["prob"][mask], color=qdisc_color(kind), linewidth=1,
                         alpha=alpha, label=f"{name} drop probability", gid=f"prob:{name}")
    ax.set_ylabel(f"packets/s ({bin_s:g} s bins)")
    ax.set_ylim(bottom=0)
    legend(ax, loc="upper left")
    if has_prob:
        axes[1].set_ylabel("drop probability (0-1)")
        axes[1].set_ylim(bottom=0)
        legend(axes[1], loc="upper left")
    axes[-1].set_xlabel("time (s)")
    return fig
