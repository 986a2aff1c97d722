"""The bottleneck queue: length in packets and bytes vs time (the AQM leaf of
qdisc.csv), and the queueing delay with the AQM's target."""

import numpy as np

from bufferbloat.plots.common import (
    TARGET_GID,
    caption,
    hline,
    include_in_ylim,
    leaf_groups,
    leaf_name,
    legend,
    new_figure,
    takes_run,
)
from bufferbloat.plots.palette import TARGET_COLOR, THEORY_COLOR, qdisc_color
from bufferbloat.results.metrics_queue import link_rate_mbit, queue_delay_ms


def _leaves(run):
    """(qdisc series, mask, name, kind, dev) of each AQM leaf (both directions' when the
    run sampled the reverse AQM: named with the way their packets go)."""
    leaves = leaf_groups(run)
    q = run.series("qdisc") if leaves else None
    several = len({dev for dev, _, _ in leaves}) > 1
    for (dev, handle, kind), mask in leaves.items():
        yield q, mask, leaf_name(run, dev, handle, kind, several), kind, dev


@takes_run
def draw(run):
    """Queue length of the AQM leaf (top: packets, bottom: bytes) vs t (s), one line per
    leaf (``dev:kind``, coloured by qdisc, dashed for the reverse direction's); the
    buffer limit as a dashed line (gid ``limit``). None without qdisc samples."""
    leaves = list(_leaves(run))
    if not leaves:
        return None
    fig, (ax_p, ax_b) = new_figure("Bottleneck queue length", caption(run), nrows=2,
                                   height=3.0)
    for i, (q, mask, name, kind, _) in enumerate(leaves):
        color, style = qdisc_color(kind), "-" if i == 0 else "--"
        ax_p.plot(q["t"][mask], q["qlen_pkts"][mask], color=color, linewidth=1, label=name,
                  linestyle=style, gid=f"leaf:{name}")
        ax_b.plot(q["t"][mask], q["backlog_bytes"][mask], color=color, linewidth=1,
                  linestyle=style, label=name, gid=f"leaf:{name}")
    # the buffer limit, when it is near the data (PIE's 1000 packets would flatten a
    # queue held at a few packets: then the limit is only named in the caption)
    _, params = run.qdisc
    peak = max(float(np.nanmax(q["qlen_pkts"][m], initial=0)) for q, m, _, _, _ in leaves)
    limit = params.get("limit_pkts") or run.params.get("buffer_pkts")
    if isinstance(limit, (int, float)) and limit <= 3 * peak + 10:
        hline(ax_p, limit, f"limit {limit:g} pkts", "limit", THEORY_COLOR)
    limit_b = params.get("limit_bytes") or run.params.get("buffer_bytes")
    if isinstance(limit_b, (int, float)):
        hline(ax_b, limit_b, f"limit {limit_b:g} B", "limit", THEORY_COLOR)
    ax_p.set_ylabel("queue (packets)")
    ax_b.set_ylabel("backlog (bytes)")
    ax_b.set_xlabel("time (s)")
    for ax in (ax_p, ax_b):
        ax.set_ylim(bottom=0)
        legend(ax, loc="upper left")
    return fig


@takes_run
def draw_qdelay(run):
    """Queueing delay (ms) vs t (s): backlog x 8 / rate of the link the leaf sends on
    (the bottleneck's, the reverse link's for the reverse AQM), and the AQM's own
    estimate (PIE's delay / CoDel's sojourn, ``delay_us``) when reported; the AQM target
    (``record['qdisc']['params']['target_ms']``) as a horizontal line (gid ``target``).
    One panel per direction when the reverse AQM was sampled too. None without qdisc
    samples or a known rate."""
    leaves = list(_leaves(run))
    if not leaves or not run.bottleneck_mbit:
        return None
    devs = list(dict.fromkeys(dev for _, _, _, _, dev in leaves))
    fig, axes = new_figure("Queueing delay at the bottleneck" if len(devs) == 1 else
                           "Queueing delay of each direction's AQM", caption(run),
                           nrows=len(devs), height=3.0 if len(devs) > 1 else 4.0)
    target = run.aqm_target_ms
    for q, mask, name, kind, dev in leaves:
        ax = axes[devs.index(dev)]
        color = qdisc_color(kind)
        rate = link_rate_mbit(run, dev)
        ax.plot(q["t"][mask], queue_delay_ms(q["backlog_bytes"][mask], rate), color=color,
                linewidth=1, label=f"{name}: backlog x 8 / rate", gid=f"qdelay:{name}")
        if "delay_us" in q and np.isfinite(q["delay_us"][mask]).any():
            ax.plot(q["t"][mask], q["delay_us"][mask] / 1e3, color=color, linestyle="--",
                    linewidth=1, alpha=0.8, label=f"{name}: AQM's own estimate",
                    gid=f"aqm_delay:{name}")
    for ax in axes:
        if target is not None:
            hline(ax, target, f"target {target:g} ms", TARGET_GID, TARGET_COLOR)
        ax.set_ylabel("queueing delay (ms)")
        ax.set_ylim(bottom=0)
        include_in_ylim(ax, target)
        legend(ax, loc="upper left")
    axes[-1].set_xlabel("time (s)")
    return fig
