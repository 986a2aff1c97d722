"""Several runs on one figure: ``bufferbloat compare`` and the studies' figures.

Every function takes ``pairs``: [(label, Run)], one line per pair, coloured in order
(:func:`plots.palette.flow_color`), with gid ``KIND:LABEL`` so that tests and readers
find each run's line. Time axes are seconds since the run's traffic started, so runs
recorded at different moments line up. A function returns None when no pair has the
data it draws.
"""

import numpy as np

from bufferbloat.plots.common import finish_axes, leaf_groups, legend, new_figure, series
from bufferbloat.plots.ecdf import ecdf
from bufferbloat.plots.palette import flow_color
from bufferbloat.plots.sweep import samples
from bufferbloat.plots.throughput import aggregate_rate, aggregate_source, sent_label
from bufferbloat.results.metrics import traffic_start_s
from bufferbloat.results.metrics_queue import queue_delay_ms
from bufferbloat.results.records import label_groups


def _t0(run):
    return traffic_start_s(run)


def _leaf(run):
    """(qdisc series, mask) of the run's (first) AQM leaf, or None."""
    leaves = leaf_groups(run)
    if not leaves:
        return None
    return run.series("qdisc"), next(iter(leaves.values()))


def rtt_cdf(pairs, title="Ping RTT (eCDF, after the warm-up)", cap=None):
    """eCDF of each run's ping RTT samples after its warm-up (gid ``cdf:LABEL``)."""
    data = [(label, samples(run)[0]) for label, run in pairs]
    data = [(label, rtt) for label, rtt in data if rtt.size]
    if not data:
        return None
    fig, (ax,) = new_figure(title, cap)
    for i, (label, rtt) in enumerate(data):
        x, y = ecdf(rtt)
        ax.step(x, y, where="post", color=flow_color(i), label=label, gid=f"cdf:{label}")
    ax.set_xlabel("ping RTT (ms)")
    ax.set_ylabel("fraction of probes (CDF)")
    ax.set_ylim(0, 1.02)
    ax.set_xscale("log" if _spread(data) > 20 else "linear")
    legend(ax, loc="lower right")
    return fig


def _spread(data):
    """max / min of the medians (> 1): a log axis when runs differ by orders."""
    meds = [float(np.median(v)) for _, v in data if v.size]
    meds = [m for m in meds if m > 0]
    return max(meds) / min(meds) if meds else 1.0


def queue_delay(pairs, title="Queueing delay at the bottleneck", cap=None):
    """Each run's queueing delay (backlog x 8 / rate, ms) vs time since its traffic
    started (gid ``queue:LABEL``)."""
    fig = ax = None
    for i, (label, run) in enumerate(pairs):
        leaf, rate = _leaf(run), run.bottleneck_mbit
        if leaf is None or not rate:
            continue
        if fig is None:
            fig, (ax,) = new_figure(title, cap)
        q, mask = leaf
        ax.plot(q["t"][mask] - _t0(run), queue_delay_ms(q["backlog_bytes"][mask], rate),
                color=flow_color(i), linewidth=1, label=label, gid=f"queue:{label}")
    if fig is None:
        return None
    finish_axes(ax, "time since the traffic started (s)", "queueing delay (ms)", "upper left")
    return fig


def throughput(pairs, title="Aggregate goodput over the bottleneck (1 s bins)", cap=None):
    """Each run's aggregate goodput over the bottleneck (Mbit/s per 1 s: acknowledged
    bytes of the flows going up, :func:`plots.throughput.aggregate_rate`) vs time since
    its traffic started (gid ``throughput:LABEL``; a run whose flows the sampler did not
    see: its senders' rate, labelled so, gid ``sent:LABEL``), with each link rate."""
    fig = ax = None
    rates = set()
    for i, (label, run) in enumerate(pairs):
        agg = aggregate_rate(run)
        if agg is None:
            continue
        if fig is None:
            fig, (ax,) = new_figure(title, cap)
        t, mbit = agg
        if aggregate_source(run) == "goodput":
            ax.plot(t - _t0(run), mbit, color=flow_color(i), linewidth=1.2, label=label,
                    gid=f"throughput:{label}")
        else:
            ax.plot(t - _t0(run), mbit, color=flow_color(i), linewidth=1.2, linestyle="--",
                    label=sent_label(label, mbit, run.bottleneck_mbit), gid=f"sent:{label}")
        if run.bottleneck_mbit:
            rates.add(run.bottleneck_mbit)
    if fig is None:
        return None
    for rate in sorted(rates):
        ax.axhline(rate, color="#444444", linestyle="-.", linewidth=1,
                   label=f"link rate {rate:g} Mbit/s").set_gid("link-rate")
    finish_axes(ax, "time since the traffic started (s)", "goodput (Mbit/s)", "lower right")
    return fig


def timeseries(pairs, title="cwnd, RTT and queue over time", cap=None):
    """Three panels over time since the traffic started: the cwnd of each run's first
    TCP flow (gid ``cwnd:LABEL``), its ping RTT (``rtt:LABEL``) and its bottleneck
    queue in packets (``qlen:LABEL``): A.1's figure of maxq 20 against maxq 100."""
    if not any(series(run, n) is not None for _, run in pairs for n in ("tcp", "ping",
                                                                          "qdisc")):
        return None
    fig, (ax_c, ax_r, ax_q) = new_figure(title, cap, nrows=3, height=2.6)
    for i, (label, run) in enumerate(pairs):
        color, t0 = flow_color(i), _t0(run)
        tcp = series(run, "tcp")
        if tcp is not None and "cwnd_pkts" in tcp:
            flow, mask = next(iter(label_groups(tcp, "flow").items()))
            ax_c.plot(tcp["t"][mask] - t0, tcp["cwnd_pkts"][mask], color=color,
                      linewidth=1, label=f"{label} ({flow})", gid=f"cwnd:{label}")
        ping = series(run, "ping")
        if ping is not None:
            ax_r.plot(ping["t"] - t0, ping["rtt_ms"], color=color, linewidth=1,
                      label=label, gid=f"rtt:{label}")
        leaf = _leaf(run)
        if leaf is not None:
            q, mask = leaf
            ax_q.plot(q["t"][mask] - t0, q["qlen_pkts"][mask], color=color, linewidth=1,
                      label=label, gid=f"qlen:{label}")
    ax_c.set_ylabel("cwnd (packets)")
    ax_r.set_ylabel("ping RTT (ms)")
    ax_q.set_ylabel("queue (packets)")
    ax_q.set_xlabel("time since the traffic started (s)")
    for ax in (ax_c, ax_r, ax_q):
        ax.set_ylim(bottom=0)
        legend(ax, loc="upper left")
    return fig


#: the overlays ``bufferbloat compare`` draws, in order
COMPARE = {"rtt-cdf": rtt_cdf, "queue": queue_delay, "throughput": throughput}
