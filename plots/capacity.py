"""A varying bottleneck (link_trace, link_schedule): the capacity the trace offered
against the rate the link delivered (series/capacity.csv, bins of 100 ms), and the time
the queue then took to drain at the rate of the moment (the capacity loop's backlog)."""

import os

import numpy as np

from bufferbloat.plots.common import caption, legend, new_figure, takes_run
from bufferbloat.results import capacity

BIN_S = 0.1


def _read(run):
    series = os.path.join(run.dir, "series")
    path = os.path.join(series, capacity.CAPACITY_CSV)
    loop = os.path.join(series, "link-trace.csv")
    if not (os.path.exists(path) and os.path.exists(loop)):
        return None, None
    cap = np.genfromtxt(path, delimiter=",", names=True)
    return np.atleast_1d(cap), capacity.read_loop_rows(loop)


def _binned(t, values, edges):
    idx = np.clip(np.digitize(t, edges) - 1, 0, len(edges) - 2)
    out = np.zeros(len(edges) - 1)
    np.add.at(out, idx, values)
    return out


@takes_run
def draw(run, bin_s=BIN_S):
    """Capacity and delivered rate (Mbit/s, bins of ``bin_s``) and the queue's drain
    time (ms) vs t (s); None for a run whose link did not vary."""
    cap, rows = _read(run)
    if cap is None or not cap.size:
        return None
    fig, axes = new_figure("Varying bottleneck: capacity, delivered rate, queue delay",
                           caption(run), nrows=2, height=3.0)
    t = cap["t_s"]
    edges = np.arange(np.floor(t.min() / bin_s) * bin_s, t.max() + 2 * bin_s, bin_s)
    centers = (edges[:-1] + edges[1:]) / 2
    to_mbit = 8 / bin_s / 1e6
    ax = axes[0]
    ax.plot(centers, _binned(t, cap["capacity_bytes"], edges) * to_mbit, color="0.4",
            drawstyle="steps-mid", linewidth=1.2, label="capacity (trace)")
    ax.plot(centers, _binned(t, cap["delivered_bytes"], edges) * to_mbit, color="C0",
            drawstyle="steps-mid", linewidth=1, label="delivered")
    ax.set_ylabel("Mbit/s")
    legend(ax)
    ax = axes[1]
    tr = np.array([r["t"] for r in rows])
    delay = np.array(capacity.drain_delay_ms(rows))
    ax.plot(tr[:len(delay)], delay, color="C3", linewidth=0.8,
            label="queue drain time at the current rate")
    ax.set_ylabel("ms")
    ax.set_xlabel("time (s)")
    legend(ax)
    return fig
