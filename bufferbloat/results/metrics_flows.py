"""Per-flow metrics (flow scope, from iperf.csv and tcp.csv), the flows' directions, and
the network scope built on them (goodput per direction, Jain's fairness).

Part of :func:`bufferbloat.results.metrics.compute_metrics`; the definitions (warm-up cut,
percentiles, units) are :mod:`bufferbloat.results.metrics`'.
"""

import math

import numpy as np

from bufferbloat.core.stats import cov, jain_index
from bufferbloat.results.records import label_groups
from bufferbloat.results.rows import Rows, counter_delta, finite_values

#: the bins of a throughput's CoV, s
COV_BIN_S = 1.0


def binned_rates(t, counter, bin_s=COV_BIN_S, cutoff_s=-math.inf):
    """Per-bin rates (counter units per second) of a cumulative counter, in consecutive
    ``bin_s`` bins from max(cut, first sample) to the last sample (the counter linearly
    interpolated at bin edges)."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(counter, dtype=float)
    ok = ~(np.isnan(t) | np.isnan(v))
    t, v = t[ok], v[ok]
    if t.size < 2:
        return np.array([])
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    start = max(t[0], cutoff_s)
    n = int(math.floor((t[-1] - start) / bin_s + 1e-9))
    if n < 1:
        return np.array([])
    edges = start + bin_s * np.arange(n + 1)
    return np.diff(np.interp(edges, t, v)) / bin_s


def flow_metrics(run, cutoff_s=-math.inf):
    """Per-flow rows from iperf.csv and tcp.csv, and {flow: throughput_mbit} for the
    network scope (iperf's where present, else from bytes_acked).

    iperf.csv: ``throughput_mbit`` (bytes of the intervals starting at or after the cut /
    their span), ``throughput_cov`` (over the intervals' bits_per_second),
    ``retransmits``, ``fct_s`` (last t_end - first t_start, whole flow).
    tcp.csv: ``acked_throughput_mbit`` (bytes_acked delta / time), ``acked_throughput_cov``
    (over 1 s bins), ``srtt_{mean,p50,p95,p99}_ms``, ``cwnd_{...}_pkts``,
    ``retrans_pkts`` (retrans_total delta), ``fct_s`` when iperf has no such flow (last t -
    first t, whole flow).

    The per-flow throughput given to the network scope is the receiver's: bytes_acked
    (what the receiver acknowledged) wherever tcp.csv has the flow; iperf's intervals
    count bytes the *sender* wrote into its socket (a late flow's first interval fills
    a socket buffer in no time) and stand in only for flows the sampler did not see
    (UDP). Their iperf rate is kept as ``sent_throughput_mbit``.
    """
    rows, throughput, sent = Rows(), {}, {}
    if run.has("iperf"):
        ip = run.series("iperf")
        for flow, mask in label_groups(ip, "flow").items():
            t0s, t1s = ip["t_start"][mask], ip["t_end"][mask]
            rows.add("flow", flow, "fct_s", np.nanmax(t1s) - np.nanmin(t0s)
                     if np.isfinite(t1s).any() and np.isfinite(t0s).any() else None, "s")
            keep = t0s >= cutoff_s - 1e-9
            span = np.nansum(t1s[keep] - t0s[keep])
            if keep.any() and span > 0:
                mbit = np.nansum(ip["bytes"][mask][keep]) * 8 / span / 1e6
                sent[flow] = mbit
                rows.add("flow", flow, "sent_throughput_mbit", mbit, "Mbit/s")
                bps = finite_values(ip["bits_per_second"][mask][keep])
                if bps.size:
                    rows.add("flow", flow, "throughput_cov", cov(bps), "")
                retr = finite_values(ip["retransmits"][mask][keep])
                if retr.size:
                    rows.add("flow", flow, "retransmits", np.sum(retr), "pkts")
    if run.has("tcp"):
        tcp = run.series("tcp")
        for flow, mask in label_groups(tcp, "flow").items():
            t = tcp["t"][mask]
            if flow not in sent and np.isfinite(t).sum() >= 1:
                rows.add("flow", flow, "fct_s", np.nanmax(t) - np.nanmin(t), "s")
            dt, acked = counter_delta(t, tcp["bytes_acked"][mask], cutoff_s)
            if dt > 0:
                mbit = acked * 8 / dt / 1e6
                rows.add("flow", flow, "acked_throughput_mbit", mbit, "Mbit/s")
                throughput[flow] = mbit
            rates = binned_rates(t, tcp["bytes_acked"][mask], cutoff_s=cutoff_s)
            if rates.size:
                rows.add("flow", flow, "acked_throughput_cov", cov(rates), "")
            keep = t >= cutoff_s
            rows.stats("flow", flow, "srtt", "ms", tcp["srtt_us"][mask][keep] / 1e3)
            rows.stats("flow", flow, "cwnd", "pkts", tcp["cwnd_pkts"][mask][keep])
            if "ssthresh_pkts" in tcp:
                rows.add("flow", flow, "ssthresh_changes",
                         count_changes(tcp["ssthresh_pkts"][mask][keep]), "")
            if "retrans_total" in tcp and np.isfinite(tcp["retrans_total"][mask]).any():
                rows.add("flow", flow, "retrans_pkts",
                         counter_delta(t, tcp["retrans_total"][mask], cutoff_s)[1], "pkts")
            if "delivered_ce_pkts" in tcp and np.isfinite(tcp["delivered_ce_pkts"][mask]).any():
                # segments the receiver echoed as CE-marked (tcpi_delivered_ce)
                rows.add("flow", flow, "ce_delivered",
                         counter_delta(t, tcp["delivered_ce_pkts"][mask], cutoff_s)[1], "pkts")
    for flow, mbit in sent.items():          # flows the sampler did not see (UDP)
        throughput.setdefault(flow, mbit)
    for flow, mbit in throughput.items():
        rows.add("flow", flow, "throughput_mbit", mbit, "Mbit/s")
    return rows, throughput


def count_changes(values):
    """How many times a sampled value changes (NaN = not set yet, e.g. ssthresh while
    "infinite": NaN -> 42 is a change, NaN -> NaN is not). Family D's "number of ssthresh
    changes" (each one a congestion event the CCA reacted to, as far as 10 ms sampling
    sees them)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return 0
    a, b = v[:-1], v[1:]
    both_nan = np.isnan(a) & np.isnan(b)
    return int(np.sum((a != b) & ~both_nan))


def _receiver(run):
    """The topology's receiver host (h2 in the plain dumbbell), or None."""
    topo = (run.record.get("network") or {}).get("topology") or {}
    return topo.get("receiver")


def flow_directions(run):
    """{flow label: 'up' | 'down'} of the run's TCP flows: 'down' when the flow's sender
    is the topology's receiver (B's downloads, sent by h2), else 'up'. tcp.csv's flows
    (the sender is the sampled host), then iperf.csv's the sampler did not see (the
    sender from the record's traffic_results); UDP flows are left out."""
    receiver = _receiver(run)
    way = lambda sender: "down" if receiver and sender == receiver else "up"  # noqa: E731
    out = {}
    if run.has("tcp"):
        tcp = run.series("tcp")
        hosts = tcp.get("host", np.array([""] * len(tcp["t"])))
        for flow, mask in label_groups(tcp, "flow").items():
            out[flow] = way(hosts[mask][0] if mask.any() else "")
    if run.has("iperf"):
        senders, udp = {}, set()
        for entry in run.record.get("traffic_results") or []:
            for s in [entry] + list(entry.get("flows") or []):
                if not isinstance(s, dict) or "flow" not in s:
                    continue
                names = [s["flow"]] + list(s.get("streams") or [])
                if s.get("udp"):
                    udp.update(names)
                senders.update(dict.fromkeys(names, s.get("sender")))
        for flow in label_groups(run.series("iperf"), "flow"):
            if flow not in out and flow not in udp:
                out[flow] = way(senders.get(flow))
    return out


def delivered_goodput(run, cutoff_s=-math.inf):
    """{direction: Mbit/s} of what the receivers acknowledged over the run's common
    window: every TCP flow's bytes_acked delta after the cut, summed per direction, / the
    window from the cut (or the first sample) to the last sample of any flow. 'up' is
    towards the bottleneck's receiver, 'down' from it (sender = receiver host). This is
    the link-level goodput (never more than the link carried); a sum of per-flow rates
    is not, when flows do not all live the whole window."""
    if not run.has("tcp"):
        return {}
    tcp = run.series("tcp")
    t_all = finite_values(tcp["t"])
    if t_all.size < 2:
        return {}
    lo = max(float(t_all.min()), cutoff_s)
    span = float(t_all.max()) - lo
    if span <= 0:
        return {}
    directions = flow_directions(run)
    total = {}  # tcp.csv's flows only: what the receivers acknowledged
    for flow, mask in label_groups(tcp, "flow").items():
        _, acked = counter_delta(tcp["t"][mask], tcp["bytes_acked"][mask], cutoff_s)
        direction = directions[flow]
        total[direction] = total.get(direction, 0.0) + acked
    return {d: b * 8 / span / 1e6 for d, b in total.items()}


def network_metrics(throughput_mbit, goodput_mbit=None):
    """``flows`` and ``jain_fairness`` over the per-flow throughputs {flow: Mbit/s};
    ``goodput_{up,down}_mbit`` and ``aggregate_throughput_mbit`` (their sum) from
    :func:`delivered_goodput` when the run has tcp.csv, else the per-flow sum."""
    rows = Rows()
    if throughput_mbit:
        shares = list(throughput_mbit.values())
        rows.add("network", "all", "flows", len(shares), "")
        rows.add("network", "all", "jain_fairness", jain_index(shares), "")
    if goodput_mbit:
        for direction, mbit in sorted(goodput_mbit.items()):
            rows.add("network", "all", f"goodput_{direction}_mbit", mbit, "Mbit/s")
        rows.add("network", "all", "aggregate_throughput_mbit", sum(goodput_mbit.values()),
                 "Mbit/s")
    elif throughput_mbit:
        rows.add("network", "all", "aggregate_throughput_mbit", sum(throughput_mbit.values()),
                 "Mbit/s")
    return rows
