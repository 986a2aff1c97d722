"""The RRUL-like load's totals: download and upload (the sum and each flow) and the
latency of each kind of probe (ICMP ping, irtt's UDP) vs time.

The RRUL traffic labels its flows ``NAME-up-N`` / ``NAME-down-N`` and its ping
``NAME-ping`` (``bufferbloat.traffic``); the name defaults to ``rrul``. irtt's probes
are irtt.csv's.
"""

import re

import numpy as np

from bufferbloat.plots.common import (
    LINK_GID,
    caption,
    hline,
    legend,
    new_figure,
    series,
    takes_run,
    targets_crossed_line,
)
from bufferbloat.plots.palette import LINK_COLOR, flow_color
from bufferbloat.plots.throughput import (
    acked_rates,
    link_lines,
    link_rate_of,
    sent_label,
    sent_rates,
    spill_back,
)
from bufferbloat.results.records import label_groups

UP = re.compile(r"-up-\d+$")
DOWN = re.compile(r"-down-\d+$")


@takes_run
def rrul_flows(run):
    """(download flow labels, upload flow labels, ping probe labels) of the run (flows
    of iperf.csv or tcp.csv)."""
    labels = []
    for name, col in (("iperf", "flow"), ("tcp", "flow")):
        data = series(run, name)
        if data is not None:
            labels += list(label_groups(data, col))
    flows = list(dict.fromkeys(labels))
    ping = series(run, "ping")
    probes = [p for p in label_groups(ping, "probe") if p.endswith("-ping")] if ping is not None \
        else []
    return ([f for f in flows if DOWN.search(f)], [f for f in flows if UP.search(f)], probes)


def direction_rates(run, flows):
    """(bin centres, {flow: Mbit/s}, source) of ``flows`` over 1 s bins: their goodput
    from tcp.csv's bytes_acked when the sampler saw every one, else what iperf3's senders
    wrote (per flow on the same grid, source ``sent``)."""
    got = acked_rates(run, flows)
    if got is not None:
        return got[0], {f: spill_back(r, link_rate_of(run, f)) for f, r in got[1].items()}, \
            "goodput, bytes_acked"
    got = sent_rates(run, flows)
    if got is None:
        return None
    return got[0], got[1], "sent"


@takes_run
def draw(run):
    """Three panels over t (s): the download flows and the upload flows (Mbit/s, 1 s
    bins: each flow thin, their sum bold, gid ``total:download``/``total:upload``;
    goodput from bytes_acked; where the sampler did not see the flows, what iperf3's
    senders wrote, labelled so, gids ``sent:...``)
    with the link rate of that direction, and the RTT (ms) of each probe: the RRUL ping
    (ICMP) and irtt's UDP probes (gid ``probe:LABEL``), with base RTT + AQM target. None
    when the run has no ``*-up-N``/``*-down-N`` flows."""
    down, up, probes = rrul_flows(run)
    if not down and not up:
        return None
    fig, (ax_d, ax_u, ax_l) = new_figure("RRUL totals: download, upload, latency",
                                         caption(run), nrows=3, height=2.6)
    reverse = run.params.get("reverse_mbit") or run.bottleneck_mbit
    for ax, flows, what, color, rate in ((ax_d, down, "download", flow_color(0), reverse),
                                         (ax_u, up, "upload", flow_color(1), None)):
        got = direction_rates(run, flows) if flows else None
        if got is not None:
            t, per, source = got
            sent = source == "sent"
            for j, (f, mbit) in enumerate(per.items()):
                ax.plot(t, mbit, color=flow_color(2 + j), linewidth=0.7, alpha=0.7,
                        label=f"each flow ({len(per)})" if j == 0 else None,
                        gid=f"{'sent' if sent else 'flow'}:{f}")
            total = np.sum(list(per.values()), axis=0)
            label = f"{what}: sum of {len(flows)} flows"
            ax.plot(t, total, color=color, linewidth=2,
                    label=(sent_label(label, total, rate or run.bottleneck_mbit) if sent
                           else f"{label} ({source})"),
                    gid=f"{'sent:' if sent else ''}total:{what}")
        link_lines(ax, run, rate)
        ax.set_ylabel(f"{what} (Mbit/s)")
        ax.set_ylim(bottom=0)
        legend(ax, loc="center right")
    k = 0
    ping = series(run, "ping")
    for probe in probes:
        mask = ping["probe"] == probe
        ok = mask & np.isfinite(ping["rtt_ms"])
        ax_l.plot(ping["t"][ok], ping["rtt_ms"][ok], color=flow_color(2 + k), linewidth=1,
                  label=f"{probe} RTT (ICMP)", gid=f"probe:{probe}")
        k += 1
    udp = series(run, "irtt")
    for probe, mask in (label_groups(udp, "probe").items() if udp is not None else ()):
        ok = mask & np.isfinite(udp["rtt_ms"])
        ax_l.plot(udp["t"][ok], udp["rtt_ms"][ok], color=flow_color(2 + k), linewidth=1,
                  label=f"{probe} RTT (UDP, irtt)", gid=f"probe:{probe}")
        k += 1
    base = run.base_rtt_ms
    if base:
        hline(ax_l, base, f"base RTT {base:g} ms", LINK_GID, LINK_COLOR, ":")
    targets_crossed_line(ax_l, run)
    ax_l.set_ylabel("latency (ms)")
    ax_l.set_xlabel("time (s)")
    ax_l.set_ylim(bottom=0)
    legend(ax_l, loc="upper left")
    return fig
