"""Study E's flow and network metrics (ns-3 ccperf style), from the stored series alone.

:func:`study_metrics` adds, to what :mod:`bufferbloat.results.metrics` computes, the metrics of
the study's tables that the suite did not have: per flow in-flight (mean, CoV), delivery
rate, estimated queueing delay, inter-departure time, network power, recovery time, RTO
count, utilities, utilization of the bandwidth and of the BDP, the sending rate at the
transport; per network the sums of in-flight, throughput and utilities and the entropy and
product fairness. Definitions: docs/reference/results.md ("Study E's metrics"). Every per-sample
quantity is averaged over the flow's samples after the warm-up cut (the mean of the
per-sample ratios, never a ratio of means).

:data:`ALIASES` maps the suite's metric names to the study's (``mean_srtt_l4``, ...), so
that a run's metrics and the study's tables compare column by column
(:func:`study_table`); metrics.json carries the mapping of the metrics it holds.

Every helper is pure (numbers in, numbers out) and tested on hand-made series
(tests/unit/test_flowmetrics.py).
"""

import math

import numpy as np

from bufferbloat.core.stats import cov
from bufferbloat.net.qdiscs import ROW_KINDS
from bufferbloat.results.records import label_groups as _groups
from bufferbloat.results.rows import Rows, counter_delta, counter_window

#: EWMA gain of the inter-departure time (per departing segment), as TCP's srtt (1/8).
INTERDEPARTURE_ALPHA = 1.0 / 8
#: tcpi_ca_state values of loss recovery: TCP_CA_Recovery (fast recovery) and TCP_CA_Loss
#: (after an RTO). Open (0), Disorder (1) and CWR (2, an ECN or local reduction) are not.
CA_RECOVERY, CA_LOSS = 3, 4
RECOVERY_STATES = (CA_RECOVERY, CA_LOSS)

#: (scope, suite metric) -> the study's metric name. l4: the transport (tcp_info), l7:
#: the application (the traffic tool's own counts), link: the bottleneck's qdisc,
#: net: the network (every flow).
ALIASES = {
    ("flow", "throughput_mbit"): "mean_throughput_l4",
    ("flow", "acked_throughput_cov"): "cov_throughput_l4",
    ("flow", "srtt_mean_ms"): "mean_srtt_l4",
    ("flow", "cwnd_mean_pkts"): "mean_cwnd_l4",
    ("flow", "inflight_mean_pkts"): "mean_inflight_l4",
    ("flow", "inflight_cov"): "cov_inflight_l4",
    ("flow", "delivery_rate_mean_mbit"): "mean_delivery_rate_l4",
    ("flow", "sending_rate_mbit"): "mean_sending_rate_l4",
    ("flow", "qdelay_est_mean_ms"): "mean_qdelay_l4",
    ("flow", "interdeparture_ewma_ms"): "mean_interdeparture_l4",
    ("flow", "power_mean"): "mean_power_l4",
    ("flow", "recovery_time_mean_ms"): "mean_recovery_time_l4",
    ("flow", "rto_count"): "num_rto_l4",
    ("flow", "retrans_pkts"): "num_retrans_l4",
    ("flow", "utility_pf"): "utility_pf_l4",
    ("flow", "utility_mpd"): "utility_mpd_l4",
    ("flow", "bw_utilization"): "util_bw_l4",
    ("flow", "bdp_utilization_mean"): "util_bdp_l4",
    ("flow", "fct_s"): "fct_l7",
    ("flow", "sent_throughput_mbit"): "mean_sending_rate_l7",
    ("flow", "app_throughput_mbit"): "mean_throughput_l7",
    ("flow", "app_sending_rate_mbit"): "mean_sending_rate_l7",
    ("flow", "owd_mean_ms"): "mean_owd_l7",
    ("link", "qdelay_mean_ms"): "mean_qdelay_link",
    ("link", "qlen_mean_pkts"): "mean_qlen_link",
    ("link", "drops"): "num_drops_link",
    ("link", "sending_rate_mbit"): "mean_sending_rate_link",
    ("link", "utilization"): "util_link",
    ("network", "inflight_sum_pkts"): "sum_inflight_net",
    ("network", "throughput_sum_mbit"): "sum_throughput_net",
    ("network", "utility_pf_sum"): "sum_utility_pf_net",
    ("network", "utility_mpd_sum"): "sum_utility_mpd_net",
    ("network", "bw_utilization"): "util_bw_net",
    ("network", "bdp_utilization"): "util_bdp_net",
    ("network", "jain_fairness"): "jain_fairness_net",
    ("network", "entropy_fairness"): "entropy_fairness_net",
    ("network", "product_fairness"): "product_fairness_net",
}


# ----------------------------------------------------------------------------- helpers

def _sorted(t, *cols):
    """``t`` and ``cols`` as float arrays sorted by t (stable), rows with a NaN t dropped."""
    t = np.asarray(t, dtype=float)
    ok = ~np.isnan(t)
    order = np.argsort(t[ok], kind="stable")
    return (t[ok][order],) + tuple(np.asarray(c, dtype=float)[ok][order] for c in cols)


def interval_rates(t, counter):
    """(t_end, rate): the rate of a cumulative counter over each interval between
    consecutive samples (counter units per second), the interval's end time; NaN samples
    skipped, zero-length intervals left out, a counter that went backwards (reset)
    counted from its new value."""
    t, v = _sorted(t, counter)
    ok = ~np.isnan(v)
    t, v = t[ok], v[ok]
    dt, dv = np.diff(t), np.diff(v)
    dv = np.where(dv >= 0, dv, v[1:])
    good = dt > 0
    return t[1:][good], dv[good] / dt[good]


def interdeparture_ewma_ms(t, segs_out, alpha=INTERDEPARTURE_ALPHA):
    """The mean, over the samples at which segments left, of the EWMA of the time between
    departing segments, ms.

    ``segs_out`` is tcpi_data_segs_out (cumulative). The n segments that left in an
    interval of length dt are taken as evenly spaced (gap dt / n); an interval in which
    none left adds its length to the next gap (an idle sender's next segment departs
    that much later). The EWMA takes every segment's gap with gain ``alpha``: after n
    equal gaps g it is g + (1 - alpha)^n (x - g); it starts at the first gap. NaN when
    no segment left."""
    t, v = _sorted(t, segs_out)
    ok = ~np.isnan(v)
    t, v = t[ok], v[ok]
    ewma, values, idle = None, [], 0.0
    for dt, n in zip(np.diff(t), np.diff(v)):
        if n <= 0:
            idle += dt
            continue
        gap = (dt + idle) / n
        idle = 0.0
        ewma = gap if ewma is None else gap + (1 - alpha) ** n * (ewma - gap)
        values.append(ewma)
    return float(np.mean(values)) * 1e3 if values else math.nan


def recovery_episodes_s(t, ca_state):
    """Lengths, s, of the loss-recovery episodes the samples saw: maximal runs of
    consecutive samples in Recovery or Loss (ca_state 3 or 4), each from its first sample
    to the first sample after it. Only whole episodes count: one already under way at the
    first sample or still open at the last is left out. The sampling period bounds the
    resolution (an episode shorter than it may be missed, or counted one period long)."""
    t, s = _sorted(t, ca_state)
    ok = ~np.isnan(s)
    t, s = t[ok], s[ok]
    inside = np.isin(s, RECOVERY_STATES)
    out, start = [], None
    for i in range(1, len(t)):
        if inside[i] and not inside[i - 1]:
            start = t[i]
        elif not inside[i] and inside[i - 1] and start is not None:
            out.append(float(t[i] - start))
            start = None
    return out


def rto_count(ca_state):
    """Times the flow entered TCP_CA_Loss (4: the state a retransmission timeout puts a
    sender in) between consecutive samples (NaN samples skipped; the first sample is not
    an entry)."""
    s = np.asarray(ca_state, dtype=float)
    s = s[~np.isnan(s)]
    if s.size < 2:
        return 0
    return int(np.sum((s[1:] == CA_LOSS) & (s[:-1] != CA_LOSS)))


def utility_pf(throughput_mbit):
    """Proportional-fairness utility ln(x), x in Mbit/s (-inf for 0)."""
    x = float(throughput_mbit)
    return math.log(x) if x > 0 else -math.inf


def utility_mpd(throughput_mbit):
    """Minimum-potential-delay utility -1/x, x in Mbit/s (-inf for 0)."""
    x = float(throughput_mbit)
    return -1.0 / x if x > 0 else -math.inf


def entropy_fairness(xs):
    """Shannon entropy (natural log) of the shares x_i / sum x: ln k for k equal shares, 0
    when one flow has everything. Zero shares add nothing (0 ln 0 = 0). ValueError for no
    shares or a negative one; NaN when every share is 0."""
    arr = np.asarray(xs, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError("entropy of no shares")
    if np.isnan(arr).any() or (arr < 0).any():
        raise ValueError(f"entropy fairness needs non-negative numbers, got {arr.tolist()}")
    total = float(arr.sum())
    if total == 0:
        return math.nan
    p = arr[arr > 0] / total
    return float(-np.sum(p * np.log(p)))


def common_rates(series, start_s, end_s, step_s):
    """Per-interval rates of several flows on one grid: ``series`` is [(t, counter)] per
    flow; the grid runs from ``start_s`` to ``end_s`` in steps of ``step_s`` (the last
    partial step dropped); each counter is interpolated linearly at the grid times.
    Returns an array (intervals x flows), counter units per second (empty when the window
    holds no whole step)."""
    n = int(math.floor((end_s - start_s) / step_s + 1e-9))
    if n < 1 or not series:
        return np.empty((0, len(series)))
    grid = start_s + step_s * np.arange(n + 1)
    cols = []
    for t, v in series:
        t, v = _sorted(t, v)
        ok = ~np.isnan(v)
        cols.append(np.diff(np.interp(grid, t[ok], v[ok])) / step_s)
    return np.column_stack(cols)


def product_fairness(rates):
    """The mean over intervals of the product of the flows' rates (an intervals x flows
    array, e.g. :func:`common_rates` in Mbit/s): (Mbit/s)^k. NaN for no interval."""
    arr = np.asarray(rates, dtype=float)
    if arr.ndim != 2 or arr.shape[0] == 0:
        return math.nan
    return float(np.mean(np.prod(arr, axis=1)))


def sender_base_rtt_ms(record, host):
    """The propagation RTT between sender ``host`` and the receiver, ms, from the record's
    link descriptions (the sender's access link and the bottleneck, both directions);
    the record's ``base_rtt_ms`` when the links do not say; None when neither does."""
    topo = (record.get("network") or {}).get("topology") or {}
    links = topo.get("links") or []
    access = [link for link in links if link.get("a") == host and not link.get("bottleneck")]
    bottleneck = [link for link in links if link.get("bottleneck")]
    if access and bottleneck:
        total = 0.0
        for link in (access[0], bottleneck[0]):
            total += sum(float((link.get(d) or {}).get("delay_ms") or 0) for d in ("ab", "ba"))
        return total
    value = record.get("base_rtt_ms")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def bdp_pkts(rate_mbit, base_rtt_ms, mss_bytes):
    """The bandwidth-delay product in segments: rate x base RTT / MSS."""
    return rate_mbit * 1e6 / 8 * base_rtt_ms / 1e3 / np.asarray(mss_bytes, dtype=float)


# ----------------------------------------------------------------------------- the run

def _col(data, name, mask):
    return data[name][mask] if name in data else np.full(int(mask.sum()), np.nan)


def flow_rows(run, cutoff_s, throughput_mbit):
    """Study E's per-flow rows of every flow in tcp.csv, and {flow: {quantity: value}}
    for the network scope (``inflight``, ``bdp_utilization``)."""
    rows, per_flow = Rows(), {}
    if not run.has("tcp"):
        return rows, per_flow
    tcp = run.series("tcp")
    rate = run.bottleneck_mbit
    for flow, mask in _groups(tcp, "flow").items():
        t = tcp["t"][mask]
        keep = t >= cutoff_s
        mine = per_flow.setdefault(flow, {})
        inflight = _col(tcp, "in_flight_pkts", mask)[keep]
        if np.isfinite(inflight).any():
            mine["inflight"] = float(np.nanmean(inflight))
            rows.add("flow", flow, "inflight_mean_pkts", mine["inflight"], "pkts")
            rows.add("flow", flow, "inflight_cov", cov(inflight), "")
        dr = _col(tcp, "delivery_rate_bps", mask)[keep]
        if np.isfinite(dr).any():
            rows.add("flow", flow, "delivery_rate_mean_mbit", np.nanmean(dr) / 1e6, "Mbit/s")
        srtt = _col(tcp, "srtt_us", mask)
        min_rtt = _col(tcp, "min_rtt_us", mask)
        base = np.nanmin(min_rtt) if np.isfinite(min_rtt).any() else (
            np.nanmin(srtt) if np.isfinite(srtt).any() else None)
        if base is not None:
            rows.stats("flow", flow, "qdelay_est", "ms", (srtt[keep] - base) / 1e3)
        segs = _col(tcp, "data_segs_out", mask)
        sent = _col(tcp, "bytes_sent", mask)
        if np.isfinite(segs).any():
            t_segs, segs_kept = _from_cut(t, segs, cutoff_s)
            rows.add("flow", flow, "interdeparture_ewma_ms",
                     interdeparture_ewma_ms(t_segs, segs_kept), "ms")
        if np.isfinite(sent).any():
            dt, nbytes = counter_delta(t, sent, cutoff_s)
            if dt > 0:
                rows.add("flow", flow, "sending_rate_mbit", nbytes * 8 / dt / 1e6, "Mbit/s")
        t_ack, acked = _from_cut(t, tcp["bytes_acked"][mask], cutoff_s)
        t_end, thr_bps = interval_rates(t_ack, acked)
        if t_end.size:
            srtt_at = np.interp(t_end, *_finite(t, srtt)) if np.isfinite(srtt).any() \
                else np.full(t_end.size, np.nan)
            power = thr_bps * 8 / 1e6 / (srtt_at / 1e6)
            power = power[np.isfinite(power)]
            if power.size:
                rows.add("flow", flow, "power_mean", np.mean(power), "Mbit/s/s")
        ca = _col(tcp, "ca_state", mask)[keep]
        if np.isfinite(ca).any():
            episodes = recovery_episodes_s(t[keep], ca)
            rows.add("flow", flow, "recovery_episodes", len(episodes), "")
            if episodes:
                rows.add("flow", flow, "recovery_time_mean_ms", np.mean(episodes) * 1e3, "ms")
            rows.add("flow", flow, "rto_count", rto_count(ca), "")
        x = throughput_mbit.get(flow)
        if x is not None:
            rows.add("flow", flow, "utility_pf", utility_pf(x), "ln(Mbit/s)")
            rows.add("flow", flow, "utility_mpd", utility_mpd(x), "-1/(Mbit/s)")
            if rate:
                rows.add("flow", flow, "bw_utilization", x / rate, "")
        host = tcp["host"][mask][0] if "host" in tcp and mask.any() else ""
        base_rtt = sender_base_rtt_ms(run.record, host)
        mss = _col(tcp, "mss_bytes", mask)[keep]
        if rate and base_rtt and np.isfinite(inflight).any():
            util = inflight / bdp_pkts(rate, base_rtt, mss)
            util = util[np.isfinite(util)]
            if util.size:
                mine["bdp_utilization"] = float(np.mean(util))
                rows.add("flow", flow, "bdp_utilization_mean", mine["bdp_utilization"], "")
    return rows, per_flow


def _finite(t, v):
    ok = np.isfinite(t) & np.isfinite(v)
    order = np.argsort(t[ok], kind="stable")
    return t[ok][order], v[ok][order]


def _from_cut(t, values, cutoff_s):
    """(t, v) sorted, NaNs dropped, from the last sample at or before the cut on."""
    return counter_window(t, values, cutoff_s)


def network_rows(run, cutoff_s, throughput_mbit, per_flow):
    """Study E's network rows (name ``all``)."""
    rows = Rows()
    if not throughput_mbit:
        return rows
    xs = list(throughput_mbit.values())
    rows.add("network", "all", "throughput_sum_mbit", sum(xs), "Mbit/s")
    rows.add("network", "all", "entropy_fairness", entropy_fairness(xs), "nats")
    rows.add("network", "all", "utility_pf_sum", sum(map(utility_pf, xs)), "ln(Mbit/s)")
    rows.add("network", "all", "utility_mpd_sum", sum(map(utility_mpd, xs)), "-1/(Mbit/s)")
    rate = run.bottleneck_mbit
    if rate:
        rows.add("network", "all", "bw_utilization", sum(xs) / rate, "")
    inflight = [f["inflight"] for f in per_flow.values() if "inflight" in f]
    if inflight:
        rows.add("network", "all", "inflight_sum_pkts", sum(inflight), "pkts")
    bdp = [f["bdp_utilization"] for f in per_flow.values() if "bdp_utilization" in f]
    if bdp:
        rows.add("network", "all", "bdp_utilization", sum(bdp), "")
    if run.has("tcp"):
        tcp = run.series("tcp")
        groups = {f: m for f, m in _groups(tcp, "flow").items() if f in throughput_mbit}
        series = [(tcp["t"][m], tcp["bytes_acked"][m]) for m in groups.values()]
        if series and all(np.isfinite(t).sum() >= 2 for t, _ in series):
            start = max([cutoff_s] + [float(np.nanmin(t)) for t, _ in series])
            end = min(float(np.nanmax(t)) for t, _ in series)
            step = _sample_period_s(tcp["t"][next(iter(groups.values()))])
            if step and end > start:
                rates = common_rates(series, start, end, step) * 8 / 1e6
                rows.add("network", "all", "product_fairness", product_fairness(rates),
                         f"(Mbit/s)^{len(series)}")
    return rows


def _sample_period_s(t):
    """The median interval between a flow's samples (the socket sampler's period), s."""
    t = np.sort(np.asarray(t, dtype=float)[np.isfinite(t)])
    d = np.diff(t)
    d = d[d > 0]
    return float(np.median(d)) if d.size else None


def link_rows(run, rows):
    """``sending_rate_mbit`` of every link with a ``utilization`` row (what its leaf
    sent: utilization x the bottleneck rate)."""
    rate = run.bottleneck_mbit
    if not rate:
        return []
    return [{**r, "metric": "sending_rate_mbit", "value": r["value"] * rate,
             "unit": "Mbit/s"}
            for r in rows if r["scope"] == "link" and r["metric"] == "utilization"]


#: qdisc kinds that are never the AQM leaf: the shaper, delay emulation, hooks.
#: (and the extra rows a qdisc kind adds, e.g. CAKE's tins: bufferbloat.net.qdiscs)
NOT_LEAF_KINDS = {"htb", "netem", "ingress", "clsact", "tbf"} | ROW_KINDS

#: NetPerfMeter's stream starts with its 26-byte IDENTIFY message: a data message's end
#: in the TCP stream is 26 + its AbsBytes (docs/reference/one-way-delay.md; a D run's last AbsBytes
#: 107,794,912 against bytes_acked 107,794,939: the 26 and the FIN)
NPM_STREAM_OFFSET = 26


def _leaf_backlog(run):
    """(t, backlog bytes) of the bottleneck's AQM leaf, or None (computed once per run:
    every flow's delay parts read it)."""
    return run.derived(("leaf_backlog", str(run.bottleneck_dev)),
                       lambda: _read_leaf_backlog(run))


def _read_leaf_backlog(run):
    if not run.has("qdisc"):
        return None
    q = run.series("qdisc")
    dev = run.bottleneck_dev
    n = len(q.get("t", []))
    kind = q.get("kind", np.array([""] * n))
    m = (q.get("dev", np.array([""] * n)) == dev) & ~np.isin(kind, list(NOT_LEAF_KINDS))
    if "backlog_bytes" not in q or not m.any():
        return None
    t, b = q["t"][m], q["backlog_bytes"][m]
    ok = np.isfinite(t) & np.isfinite(b)
    order = np.argsort(t[ok], kind="stable")
    return t[ok][order], b[ok][order]


def delay_parts(run, flow, msg_mask):
    """The tool's per-message delay of ``flow`` split in three (ms arrays, NaN where a
    part cannot be told), docs/reference/one-way-delay.md: the wait in the sender's socket buffer
    (from the message's stamp to when TCP first sent its last byte: the flow's highest
    byte sent, bytes_sent - bytes_retrans, reaching 26 + AbsBytes), the path's one-way
    delay (half the sender's base RTT + the bottleneck's backlog / rate when that byte
    was queued + the message's own serialization) and the rest (loss recovery,
    head-of-line blocking, the receive buffer, the tool's loop). None when the run
    lacks what it needs (older runs: no abs_bytes or bytes_retrans)."""
    msg = run.series("npm_msg")
    if "abs_bytes" not in msg or not run.has("tcp"):
        return None
    tcp = run.series("tcp")
    if "bytes_retrans" not in tcp or "bytes_sent" not in tcp:
        return None
    m = tcp["flow"] == flow
    t, sent, retr = tcp["t"][m], tcp["bytes_sent"][m], tcp["bytes_retrans"][m]
    ok = np.isfinite(t) & np.isfinite(sent) & np.isfinite(retr)
    if ok.sum() < 2:
        return None
    order = np.argsort(t[ok], kind="stable")
    t, high = t[ok][order], (sent[ok] - retr[ok])[order]
    high = np.maximum.accumulate(high)        # the highest byte sent never goes back
    end = msg["abs_bytes"][msg_mask] + NPM_STREAM_OFFSET
    t_sent = msg["t_sent"][msg_mask]
    d = (msg["t_recv"][msg_mask] - t_sent) * 1e3
    # the first sample with the byte sent, interpolated back into the interval before
    i = np.searchsorted(high, end, side="left")
    inside = (i > 0) & (i < t.size)
    j = np.clip(i, 1, t.size - 1)
    h0, h1 = high[j - 1], high[j]
    frac = np.where(h1 > h0, (end - h0) / np.maximum(h1 - h0, 1e-9), 1.0)
    t2 = np.where(inside, t[j - 1] + np.clip(frac, 0, 1) * (t[j] - t[j - 1]), np.nan)
    wait = np.maximum(t2 - t_sent, 0.0) * 1e3
    host = next((str(h) for h in tcp["host"][m][:1]), None) if "host" in tcp else None
    base = sender_base_rtt_ms(run.record, host) if host else None
    rate = run.bottleneck_mbit
    backlog = _leaf_backlog(run)
    if base is None or not rate or backlog is None or not backlog[0].size:
        path = np.full(d.shape, np.nan)
    else:
        q = np.interp(t2, backlog[0], backlog[1], left=np.nan, right=np.nan)
        size = msg["size_bytes"][msg_mask]
        path = base / 2 + (q + size) * 8 / (rate * 1e6) * 1e3
    return wait, path, d - wait - path


def app_rows(run, cutoff_s):
    """The application's view of each flow, from a NetPerfMeter part's series:
    ``app_throughput_mbit`` (npm_msg.csv: bytes of the messages received after the cut
    x 8 / from the cut, or the first arrival, to the last arrival),
    ``app_sending_rate_mbit`` (npm.csv: the sending node's bytes written in the
    intervals starting at or after the cut / their length) and the one-way delay of
    every message sent after the cut, ``owd_{mean,p50,p95,p99,max}_ms`` (t_recv - t_sent:
    the sender's timestamp in the message to its arrival, socket buffers included: the
    tool's own delay, the one study D reports), and that delay in three parts
    (:func:`delay_parts`): ``sndbuf_wait_*_ms``, ``path_owd_*_ms``, ``owd_rest_*_ms``."""
    rows = Rows()
    if run.has("npm_msg"):
        msg = run.series("npm_msg")
        for flow, mask in _groups(msg, "flow").items():
            t_recv, t_sent = msg["t_recv"][mask], msg["t_sent"][mask]
            keep = t_recv >= cutoff_s
            if keep.sum() >= 2:
                t = t_recv[keep]
                lo = max(cutoff_s, float(np.min(t)))
                span = float(np.max(t)) - lo
                after = t > lo
                if span > 0:
                    rows.add("flow", flow, "app_throughput_mbit",
                             np.sum(msg["size_bytes"][mask][keep][after]) * 8 / span / 1e6,
                             "Mbit/s")
            sent_kept = t_sent >= cutoff_s
            rows.stats("flow", flow, "owd", "ms", (t_recv - t_sent)[sent_kept] * 1e3,
                       maximum=True)
            parts = delay_parts(run, flow, mask)
            if parts is not None:
                for stem, values in zip(("sndbuf_wait", "path_owd", "owd_rest"), parts):
                    rows.stats("flow", flow, stem, "ms", values[sent_kept], maximum=True)
    if run.has("npm"):
        iv = run.series("npm")
        for flow, mask in _groups(iv, "flow").items():
            best = None
            for node in ("active", "passive"):
                m = mask & (iv["node"] == node) & (iv["t_start"] >= cutoff_s - 1e-9)
                sent = np.nansum(iv["sent_bytes"][m])
                span = np.nansum(iv["t_end"][m] - iv["t_start"][m])
                if sent > 0 and span > 0 and (best is None or sent > best[0]):
                    best = (sent, span)
            if best:
                rows.add("flow", flow, "app_sending_rate_mbit", best[0] * 8 / best[1] / 1e6,
                         "Mbit/s")
    return rows


def study_metrics(run, cutoff_s, throughput_mbit, rows=()):
    """Every row this module adds to a run's metrics: flow, link (from the suite's
    ``rows`` computed so far) and network scopes."""
    flows, per_flow = flow_rows(run, cutoff_s, throughput_mbit)
    return (list(flows) + list(app_rows(run, cutoff_s)) + link_rows(run, rows)
            + list(network_rows(run, cutoff_s, throughput_mbit, per_flow)))


def aliases_of(rows):
    """{suite metric: study name} of the rows' metrics that have one (for metrics.json)."""
    return {r["metric"]: ALIASES[(r["scope"], r["metric"])] for r in rows
            if (r["scope"], r["metric"]) in ALIASES}


def study_table(rows):
    """{(scope, name): {study name: value}}: the run's metrics under the study's names,
    one entry per flow, link and the network, for a column-by-column comparison."""
    out = {}
    for r in rows:
        alias = ALIASES.get((r["scope"], r["metric"]))
        if alias:
            out.setdefault((r["scope"], r["name"]), {})[alias] = r["value"]
    return out
