"""Per-flow and aggregate throughput vs time, with the link rate; per-flow shares with
Jain's index (the ``fairness`` figure).

Throughput here is goodput: what the receivers acknowledged (tcp.csv's bytes_acked), the
data :mod:`bufferbloat.results.metrics` computes goodput from. iperf3's per-interval rates
count what the sender wrote into its socket (a socket buffer fills in no time, so they
read above the link); they are drawn only for flows the sampler did not see, labelled as
the sender's rate and flagged when above the link.
"""

import numpy as np

from bufferbloat.core.stats import jain_index
from bufferbloat.plots.common import (
    LINK_GID,
    THEORY_GID,
    caption,
    finish_axes,
    hline,
    include_in_ylim,
    legend,
    metric_values,
    new_figure,
    run_metrics,
    series,
    spread_over_bins,
    takes_run,
)
from bufferbloat.plots.palette import LINK_COLOR, THEORY_COLOR, flow_color
from bufferbloat.results import theory
from bufferbloat.results.metrics_flows import flow_directions
from bufferbloat.results.records import label_groups

AGGREGATE_GID = "aggregate"


#: a sender's rate this far above the link rate is flagged on its figure
OVER_LINK_TOL = 0.05


def sent_rates(run, flows, bin_s=1.0):
    """(bin centres, {flow: Mbit/s}) of what iperf3's senders wrote (iperf.csv's interval
    bytes spread over whole ``bin_s`` s bins from the first interval's start), or None."""
    iperf = series(run, "iperf")
    if iperf is None or not flows:
        return None
    masks = {f: iperf["flow"] == f for f in flows}
    masks = {f: m for f, m in masks.items() if m.any()}
    if not masks:
        return None
    every = np.any(list(masks.values()), axis=0)
    t0, t1 = np.nanmin(iperf["t_start"][every]), np.nanmax(iperf["t_end"][every])
    # whole bins only: a last partial bin would read as a collapse of the rate
    n = int(np.floor((t1 - t0) / bin_s + 1e-9))
    edges = t0 + bin_s * np.arange(n + 1) if n >= 1 else np.array([t0, t1])
    width = np.diff(edges)
    out = {f: spread_over_bins(iperf["t_start"][m], iperf["t_end"][m], iperf["bytes"][m],
                               edges) * 8 / width / 1e6 for f, m in masks.items()}
    return (edges[:-1] + edges[1:]) / 2, out


def all_flows(run):
    """Every flow label of tcp.csv and iperf.csv, tcp.csv's first."""
    labels = []
    for name in ("tcp", "iperf"):
        data = series(run, name)
        if data is not None:
            labels += list(label_groups(data, "flow"))
    return list(dict.fromkeys(labels))


def acked_flows(run):
    """The flows whose acknowledged bytes tcp.csv holds (the sampler saw their sender)."""
    tcp = series(run, "tcp")
    return set(label_groups(tcp, "flow")) if tcp is not None else set()


def direction_flows(run, direction="up"):
    """The TCP flows going ``direction`` ('up': towards the bottleneck's receiver, over
    the bottleneck; 'down': back), as :func:`bufferbloat.results.metrics_flows.flow_directions`
    says; flows it does not know (UDP) count as 'up'."""
    ways = flow_directions(run)
    return [f for f in all_flows(run) if ways.get(f, "up") == direction]


@takes_run
def flow_rates(run, bin_s=1.0):
    """{flow: (bin centres, Mbit/s, source)} of every flow over whole ``bin_s`` s bins:
    its goodput, what its receiver acknowledged (tcp.csv's bytes_acked, source
    ``goodput``: the data the metrics use; a bin's excess over the link after a loss
    recovery moved back where the bytes arrived, :func:`spill_back`), or, for a flow the
    sampler did not see (UDP,
    a sender outside the sampled hosts), what iperf3's sender wrote (source ``sent``).
    A flow's bins outside its own samples are NaN. {} without either series."""
    flows = all_flows(run)
    acked = [f for f in flows if f in acked_flows(run)]
    out = {}
    got = acked_rates(run, acked, bin_s, outside=np.nan) if acked else None
    if got is not None:
        for f in acked:
            out[f] = (got[0], spill_back(got[1][f], link_rate_of(run, f)), "goodput")
    sent = sent_rates(run, [f for f in flows if f not in out], bin_s)
    if sent is not None:
        for f, mbit in sent[1].items():
            out[f] = (sent[0], mbit, "sent")
    return {f: out[f] for f in flows if f in out}


@takes_run
def aggregate_rate(run, bin_s=1.0, flows=None):
    """(bin centres, Mbit/s) of the summed goodput of ``flows`` (default: the flows over
    the bottleneck, :func:`direction_flows` 'up') on one grid of whole ``bin_s`` s bins:
    acknowledged bytes (tcp.csv) when the sampler saw every one of them, else what their
    iperf3 senders wrote (:func:`aggregate_source` says which); None without data."""
    flows = list(flows) if flows is not None else direction_flows(run, "up")
    got = acked_rates(run, flows, bin_s)
    if got is not None:
        cap = max((link_rate_of(run, f) or 0 for f in flows), default=0)
        return got[0], spill_back(np.sum(list(got[1].values()), axis=0), cap)
    got = sent_rates(run, flows, bin_s)
    if got is None:
        return None
    return got[0], np.sum(list(got[1].values()), axis=0)


@takes_run
def aggregate_source(run, flows=None):
    """``goodput`` when :func:`aggregate_rate` of ``flows`` is acknowledged bytes, else
    ``sent`` (iperf3's senders' rate)."""
    flows = list(flows) if flows is not None else direction_flows(run, "up")
    return "goodput" if flows and set(flows) <= acked_flows(run) else "sent"


@takes_run
def acked_rates(run, flows, bin_s=1.0, outside=0.0):
    """(bin centres, {flow: Mbit/s}) of each flow's goodput, what its receiver
    acknowledged (tcp.csv's bytes_acked, interpolated at the edges of whole ``bin_s`` s
    bins on one grid from the first sample to the last of any of them; ``outside`` (0)
    in bins not within a flow's own samples); None unless tcp.csv has every one of
    ``flows``."""
    tcp = series(run, "tcp")
    if tcp is None or not flows:
        return None
    masks = {f: tcp["flow"] == f for f in flows}
    if not all(m.any() for m in masks.values()):
        return None
    t_all = np.concatenate([tcp["t"][m] for m in masks.values()])
    t0, t1 = np.nanmin(t_all), np.nanmax(t_all)
    n = int(np.floor((t1 - t0) / bin_s + 1e-9))
    if n < 1:
        return None
    edges = t0 + bin_s * np.arange(n + 1)
    out = {}
    for f, m in masks.items():
        t, v = tcp["t"][m], tcp["bytes_acked"][m]
        ok = np.isfinite(t) & np.isfinite(v)
        order = np.argsort(t[ok], kind="stable")
        ts, vs = t[ok][order], v[ok][order]
        at = np.interp(edges, ts, vs)
        rate = np.clip(np.diff(at), 0, None) * 8 / bin_s / 1e6
        if ts.size:
            rate[(edges[1:] <= ts[0]) | (edges[:-1] >= ts[-1])] = outside
        out[f] = rate
    return (edges[:-1] + edges[1:]) / 2, out


def spill_back(mbit, cap):
    """``mbit`` (rates of consecutive bins) with what exceeds ``cap`` in a bin moved into
    the bins before it (as far back as it takes, up to ``cap`` each): a cumulative ACK
    that ends a loss recovery acknowledges at once bytes the receiver got (and SACKed)
    while the hole was open, so a bin of acknowledged bytes can read above the link; the
    bytes arrived earlier. The total (the mean the metrics report) is unchanged; what
    no earlier bin can take stays where it is. NaN bins are left as they are."""
    out = np.array(mbit, dtype=float)
    if not cap:
        return out
    idx = np.nonzero(np.isfinite(out))[0]
    carry = 0.0
    for i in idx[::-1]:
        out[i] += carry
        carry = max(0.0, out[i] - cap)
        out[i] -= carry
    if carry > 0 and idx.size:
        out[idx[0]] += carry
    return out


def sent_label(label, mbit, rate):
    """A sender's-rate line's legend label: says it is the sender's, and flags it when it
    goes above the link rate ``rate``."""
    text = f"{label} (sent: iperf3's sender rate, not goodput)"
    top = np.nanmax(mbit) if np.size(mbit) and np.isfinite(mbit).any() else 0.0
    if rate and top > rate * (1 + OVER_LINK_TOL):
        text += f" - above the link rate ({top:.3g} > {rate:g} Mbit/s): bytes written, " \
                "not delivered"
    return text


def link_lines(ax, run, rate=None):
    """The link rate (gid ``link-rate``; default the bottleneck's) and the TCP goodput
    ceiling (gid ``theory``)."""
    rate = rate or run.bottleneck_mbit
    if rate:
        hline(ax, rate, f"link rate {rate:g} Mbit/s", LINK_GID, LINK_COLOR, "-.")
        ceiling = theory.tcp_goodput_ceiling(rate)
        hline(ax, ceiling, f"TCP goodput ceiling {ceiling:.3g} Mbit/s", THEORY_GID,
              THEORY_COLOR, ":")
    return rate


def link_rate_of(run, flow):
    """The rate of the link ``flow`` crosses: the bottleneck's for flows going up, the
    reverse rate (default the same) for flows coming back."""
    rate = run.bottleneck_mbit
    if flow_directions(run).get(flow, "up") == "down":
        rate = run.params.get("reverse_mbit") or rate
    return rate


@takes_run
def draw(run):
    """Goodput (Mbit/s, 1 s bins of acknowledged bytes: tcp.csv's bytes_acked, what the
    metrics use) of each flow vs t (s) at the bins' centres (gid ``flow:FLOW``; a flow
    the sampler did not see: its sender's rate, labelled so, gid ``sent:FLOW``), the
    aggregate of the flows over the bottleneck when there are several (gid
    ``aggregate``), the link rate and TCP goodput ceiling. None without tcp.csv or
    iperf.csv flows."""
    rates = flow_rates(run)
    if not rates:
        return None
    fig, (ax,) = new_figure("Goodput per flow (acknowledged bytes, 1 s bins)", caption(run))
    for i, (flow, (t, mbit, source)) in enumerate(rates.items()):
        if source == "goodput":
            ax.plot(t, mbit, color=flow_color(i), linewidth=1, marker=".", markersize=3,
                    label=flow, gid=f"flow:{flow}")
        else:
            ax.plot(t, mbit, color=flow_color(i), linewidth=1, linestyle="--",
                    label=sent_label(flow, mbit, link_rate_of(run, flow)),
                    gid=f"sent:{flow}")
    up = direction_flows(run, "up")
    if len(up) > 1:
        agg = aggregate_rate(run, flows=up)
        if agg is not None:
            source = aggregate_source(run, up)
            label = (f"aggregate of {len(up)} flows" if source == "goodput" else
                     sent_label(f"aggregate of {len(up)} flows", agg[1], run.bottleneck_mbit))
            ax.plot(agg[0], agg[1], color="black", linewidth=1.5, label=label,
                    gid=AGGREGATE_GID if source == "goodput" else f"sent:{AGGREGATE_GID}")
    rate = link_lines(ax, run)
    finish_axes(ax, "time (s)", "goodput (Mbit/s)", "lower right")
    include_in_ylim(ax, rate)
    return fig


def flow_shares(run):
    """{flow: mean goodput Mbit/s after the warm-up}: the metrics' per-flow
    ``throughput_mbit`` (acknowledged bytes; a flow's sender rate only where the sampler
    did not see it), as :func:`bufferbloat.results.metrics.run_rows` gives them."""
    return {name: value for name, value in metric_values(run_metrics(run), "throughput_mbit",
                                                          "flow").items()}


@takes_run
def draw_fairness(run):
    """Mean goodput (Mbit/s, after the warm-up) of each flow as bars: the metrics'
    ``throughput_mbit`` (acknowledged bytes), the equal share of the goodput ceiling and
    Jain's index over the same numbers in the title (ideal 1). None without flows."""
    shares_by_flow = flow_shares(run)
    if not shares_by_flow:
        return None
    names, shares = list(shares_by_flow), list(shares_by_flow.values())
    jain = jain_index(shares)
    fig, (ax,) = new_figure(f"Per-flow goodput after the warm-up: Jain's index {jain:.3f} "
                            f"(ideal 1, {len(shares)} flows)", caption(run))
    ax.bar(range(len(shares)), shares, color=[flow_color(i) for i in range(len(shares))],
           gid="shares")
    ax.set_xticks(range(len(shares)))
    ax.set_xticklabels(names, rotation=45 if len(names) > 6 else 0, fontsize=8)
    rate = run.bottleneck_mbit
    if rate:
        share = theory.tcp_goodput_ceiling(rate) / len(shares)
        hline(ax, share, f"equal share of the goodput ceiling {share:.3g} Mbit/s",
              THEORY_GID, THEORY_COLOR)
    ax.set_xlabel("flow")
    ax.set_ylabel("mean goodput (Mbit/s)")
    legend(ax, loc="upper right")
    return fig
