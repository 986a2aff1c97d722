"""The RRUL-like load's totals: download sum, upload sum and latency vs time.

The RRUL traffic labels its flows ``NAME-up-N`` / ``NAME-down-N`` and its ping
``NAME-ping`` (``bufferbloat.traffic``); the name defaults to ``rrul``.
"""

import re

import numpy as np

from bufferbloat.results import label_groups

from .common import (LINK_GID, TARGET_GID, caption, hline, legend, new_figure, series,
                     takes_run)
from .palette import LINK_COLOR, TARGET_COLOR, flow_color
from .throughput import aggregate_rate, link_lines

UP = re.compile(r"-up-\d+$")
DOWN = re.compile(r"-down-\d+$")


@takes_run
def rrul_flows(run):
    """(download flow labels, upload flow labels, ping probe labels) of the run."""
    iperf = series(run, "iperf")
    flows = list(label_groups(iperf, "flow")) if iperf is not None else []
    ping = series(run, "ping")
    probes = [p for p in label_groups(ping, "probe") if p.endswith("-ping")] if ping is not None \
        else []
    return ([f for f in flows if DOWN.search(f)], [f for f in flows if UP.search(f)], probes)


@takes_run
def draw(run):
    """Three panels over t (s): the sum of the download flows and of the upload flows
    (Mbit/s, 1 s bins) with the link rate, and the RRUL ping's RTT (ms) with base RTT
    + AQM target. None when the run has no ``*-up-N``/``*-down-N`` flows."""
    down, up, probes = rrul_flows(run)
    if not down and not up:
        return None
    fig, (ax_d, ax_u, ax_l) = new_figure("RRUL totals: download, upload, latency",
                                         caption(run), nrows=3, height=2.6)
    for ax, flows, what, color in ((ax_d, down, "download", flow_color(0)),
                                   (ax_u, up, "upload", flow_color(1))):
        if flows:
            t, mbit = aggregate_rate(run, flows=flows)
            ax.plot(t, mbit, color=color, label=f"{what}: sum of {len(flows)} flows",
                    gid=f"total:{what}")
        link_lines(ax, run)
        ax.set_ylabel(f"{what} (Mbit/s)")
        ax.set_ylim(bottom=0)
        legend(ax, loc="lower right")
    ping = series(run, "ping")
    for i, probe in enumerate(probes):
        mask = ping["probe"] == probe
        ok = mask & np.isfinite(ping["rtt_ms"])
        ax_l.plot(ping["t"][ok], ping["rtt_ms"][ok], color=flow_color(2 + i), linewidth=1,
                  label=f"{probe} RTT", gid=f"probe:{probe}")
    base = run.base_rtt_ms
    if base:
        hline(ax_l, base, f"base RTT {base:g} ms", LINK_GID, LINK_COLOR, ":")
    target = run.aqm_target_ms
    if target is not None:
        hline(ax_l, (base or 0) + target, f"base RTT + target ({(base or 0) + target:g} ms)",
              TARGET_GID, TARGET_COLOR)
    ax_l.set_ylabel("latency (ms)")
    ax_l.set_xlabel("time (s)")
    ax_l.set_ylim(bottom=0)
    legend(ax_l, loc="upper left")
    return fig
