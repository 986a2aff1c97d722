"""Ping RTT vs time, with the theory: base RTT, FIFO full-queue RTT, base RTT + the AQM
targets the round trip crosses."""

import numpy as np

from bufferbloat.plots.common import (
    LINK_GID,
    THEORY_GID,
    caption,
    finish_axes,
    full_queue_rtt_ms,
    hline,
    include_in_ylim,
    new_figure,
    series,
    takes_run,
    targets_crossed_line,
)
from bufferbloat.plots.palette import LINK_COLOR, THEORY_COLOR, flow_color
from bufferbloat.results.records import label_groups


@takes_run
def draw(run):
    """RTT (ms) of each ping probe vs t (s), lost probes as crosses on the x axis.
    Reference lines: the base RTT (gid ``link-rate``), for a FIFO the full-queue RTT
    (gid ``theory``, :func:`plots.common.full_queue_rtt_ms`), for PIE/CoDel/FQ-CoDel
    the base RTT + the AQM target (gid ``target``). None without ping samples."""
    ping = series(run, "ping")
    if ping is None:
        return None
    fig, (ax,) = new_figure("Ping RTT", caption(run))
    for i, (probe, mask) in enumerate(label_groups(ping, "probe").items()):
        t, rtt = ping["t"][mask], ping["rtt_ms"][mask]
        ok = np.isfinite(rtt)
        ax.plot(t[ok], rtt[ok], color=flow_color(i), linewidth=1, marker=".",
                markersize=3, label=f"{probe} RTT", gid=f"probe:{probe}")
        if (~ok).any():
            ax.plot(t[~ok], np.zeros((~ok).sum()), linestyle="none", marker="x",
                    color=flow_color(i), label=f"{probe} lost ({(~ok).sum()})",
                    gid=f"lost:{probe}")
    base = run.base_rtt_ms
    if base:
        hline(ax, base, f"base RTT {base:g} ms", LINK_GID, LINK_COLOR, ":")
    full = full_queue_rtt_ms(run)
    if full is not None:
        hline(ax, full, f"full-queue RTT {full:.0f} ms (theory)", THEORY_GID, THEORY_COLOR)
    targets_crossed_line(ax, run)
    finish_axes(ax, "time (s)", "RTT (ms)", "upper left")
    include_in_ylim(ax, full)
    return fig
