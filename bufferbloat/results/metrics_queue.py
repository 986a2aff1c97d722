"""The bottleneck's queues: link-scope metrics of each AQM leaf in qdisc.csv (queue length,
queueing delay, drops, marks, utilization) and which link a leaf sends on.

Part of :func:`bufferbloat.results.metrics.compute_metrics`; the definitions (warm-up cut,
percentiles, units) are :mod:`bufferbloat.results.metrics`'.
"""

import math

import numpy as np

from bufferbloat.results.flowmetrics import NOT_LEAF_KINDS
from bufferbloat.results.records import bottleneck_dev_name
from bufferbloat.results.rows import Rows, counter_delta, counter_window


def queue_delay_ms(backlog_bytes, rate_mbit):
    """Time to drain ``backlog_bytes`` at ``rate_mbit``, ms: 8 B / R."""
    return np.asarray(backlog_bytes, dtype=float) * 8 / (rate_mbit * 1e6) * 1e3


def leaf_groups(run):
    """{(dev, handle, kind): mask} of the AQM leaf qdiscs in qdisc.csv (kinds other than
    htb/netem/...): the bottleneck egress's (``record['bottleneck_dev']``) first, then
    those of the other devices the sampler watched (the reverse AQM in the receiver when
    the bottleneck runs an AQM both ways, B's RRUL)."""
    if not run.has("qdisc"):
        return {}
    q = run.series("qdisc")
    n = len(q.get("t", []))
    dev = q.get("dev", np.array([""] * n))
    handle = q.get("handle", np.array([""] * n))
    kind = q.get("kind", np.array([""] * n))
    want_dev = run.bottleneck_dev
    out = {}
    keys = [k for k in dict.fromkeys(zip(dev.tolist(), handle.tolist(), kind.tolist()))
            if k[2] not in NOT_LEAF_KINDS]
    for key in sorted(keys, key=lambda k: bool(want_dev) and k[0] != want_dev):
        out[key] = (dev == key[0]) & (handle == key[1]) & (kind == key[2])
    return out


def link_direction(record, dev):
    """'up' for the bottleneck's egress (``record['bottleneck_dev']``, towards the
    receiver: what the senders send, B's uploads), 'down' for another device's AQM (the
    receiver's egress: what it sends back, B's downloads). ``dev`` may be a link
    metric's name (``dev:kind``)."""
    want = bottleneck_dev_name(record)
    dev = str(dev).split(":")[0]
    return "up" if not want or dev == want else "down"


def link_rate_mbit(run, dev):
    """The configured rate of the link ``dev`` sends on, Mbit/s: the bottleneck rate
    towards the receiver, ``reverse_mbit`` (default: the same) the other way."""
    fwd = run.bottleneck_mbit
    if link_direction(run.record, dev) == "up":
        return fwd
    return run.params.get("reverse_mbit") or fwd


#: the replay loop's series of each direction that can vary (bufferbloat.run.linkreplay)
_VARYING_SERIES = {"up": "link-trace", "down": "link-trace-up"}


def varying_rate_mbit(run, dev):
    """On a link whose rate varied (``link_trace``/``link_schedule``, or
    ``link_trace_up`` for the receiver's egress): a function of sample times giving the
    rate the replay loop had set at each, Mbit/s (the configured rate before its first
    change); None on a constant link."""
    name = _VARYING_SERIES[link_direction(run.record, dev)]
    if not run.has(name):
        return None
    s = run.series(name)
    ts, rates = s["t_s"], s["rate_bps"] / 1e6
    good = np.isfinite(ts) & np.isfinite(rates)
    ts, rates = ts[good], rates[good]
    if not ts.size:
        return None
    before = link_rate_mbit(run, dev)

    def at(t):
        i = np.searchsorted(ts, np.asarray(t, dtype=float), side="right") - 1
        return np.where(i >= 0, rates[np.clip(i, 0, None)], before)
    return at


def drain_at_s(run, when_s):
    """The longest time any AQM leaf's queue took to drain from ``when_s`` (its last
    sample at or before then), s; 0 without samples: its backlog at the link's rate, or
    on a link whose rate varied, at the rates the replay loop set from then on
    (:func:`varying_rate_mbit`; the last one past the loop's end). What a message sent
    then waits behind (iperf3's end-of-test exchange behind a full FIFO: 1000 packets at
    2 Mbit/s are 6 s)."""
    if not run.has("qdisc") or not math.isfinite(when_s):
        return 0.0
    q = run.series("qdisc")
    if "backlog_bytes" not in q:
        return 0.0
    worst = 0.0
    for (dev, _handle, _kind), mask in leaf_groups(run).items():
        t = q["t"][mask]
        before = np.nonzero(t <= when_s)[0]
        if not before.size:
            continue
        backlog = float(q["backlog_bytes"][mask][before[-1]])
        if not np.isfinite(backlog) or backlog <= 0:
            continue
        varying = varying_rate_mbit(run, dev)
        if varying is None:
            rate = link_rate_mbit(run, dev)
            if rate:
                worst = max(worst, backlog * 8 / (rate * 1e6))
            continue
        worst = max(worst, _drain_varying_s(varying, when_s, backlog))
    return worst


def _drain_varying_s(rate_at, when_s, backlog, step_s=0.01, limit_s=600.0):
    """Seconds from ``when_s`` until ``backlog`` bytes have left at the rates
    ``rate_at`` gives (Mbit/s, 10 ms steps)."""
    steps = np.arange(when_s, when_s + limit_s, step_s)
    sent = np.cumsum(rate_at(steps) * 1e6 / 8 * step_s)
    i = int(np.searchsorted(sent, backlog))
    return min(limit_s, (i + 1) * step_s)


def link_metrics(run, cutoff_s=-math.inf, rate_mbit=None, end_s=math.inf):
    """Rows for each AQM leaf in qdisc.csv: queue length (``qlen_*_pkts``,
    ``backlog_*_bytes``), queueing delay (``qdelay_*_ms`` = backlog x 8 / bottleneck
    rate; ``aqm_delay_*_ms`` from delay_us when the qdisc reports it), ``drops``,
    ``drop_pct`` (drops / (sent + drops)), ``drops_per_s`` (mean) and
    ``drops_per_s_max`` (largest per-interval rate), ``marks``, ``early_drops`` and
    ``utilization`` (sent_bytes delta x 8 / time / rate). ``rate_mbit`` defaults to the
    rate of the link the leaf sends on (:func:`link_rate_mbit`: the bottleneck's, or the
    reverse rate for the reverse AQM); on a link whose rate varied, to the rate set at
    each sample (:func:`varying_rate_mbit`): the queue's delay is its drain time at the
    rate of the moment, the utilization is against the mean rate of the samples. Samples after ``end_s`` (the traffic's end,
    :func:`~bufferbloat.results.metrics.traffic_end_s`, in
    :func:`~bufferbloat.results.metrics.compute_metrics`) are left out."""
    rows = Rows()
    if not run.has("qdisc"):
        return rows
    q = run.series("qdisc")
    for (dev, handle, kind), mask in leaf_groups(run).items():
        mask = mask & (q["t"] <= end_s)   # not the idle link after the traffic's end
        rate = rate_mbit if rate_mbit is not None else link_rate_mbit(run, dev)
        name = ":".join(p for p in (dev, kind) if p) or handle or "leaf"
        t = q["t"][mask]
        keep = t >= cutoff_s
        col = lambda c: q[c][mask] if c in q else np.full(mask.sum(), np.nan)  # noqa: E731
        rows.stats("link", name, "qlen", "pkts", col("qlen_pkts")[keep], maximum=True)
        rows.stats("link", name, "backlog", "bytes", col("backlog_bytes")[keep], maximum=True)
        varying = varying_rate_mbit(run, dev) if rate_mbit is None else None
        if varying is not None:
            now = varying(t[keep])
            rows.stats("link", name, "qdelay", "ms",
                       queue_delay_ms(col("backlog_bytes")[keep], now), maximum=True)
            rate = float(np.mean(now)) if now.size else rate
        elif rate:
            rows.stats("link", name, "qdelay", "ms",
                       queue_delay_ms(col("backlog_bytes")[keep], rate), maximum=True)
        rows.stats("link", name, "aqm_delay", "ms", col("delay_us")[keep] / 1e3)
        dt, drops = counter_delta(t, col("drops"), cutoff_s)
        if dt > 0:
            rows.add("link", name, "drops", drops, "pkts")
            rows.add("link", name, "drops_per_s", drops / dt, "pkts/s")
            rates = _interval_rates(t, col("drops"), cutoff_s)
            if rates.size:
                rows.add("link", name, "drops_per_s_max", float(np.max(rates)), "pkts/s")
            _, sent_pkts = counter_delta(t, col("sent_pkts"), cutoff_s)
            if sent_pkts + drops > 0:
                rows.add("link", name, "drop_pct", 100.0 * drops / (sent_pkts + drops), "%")
        rows.stats("link", name, "prob", "", col("prob")[keep])
        counts = {}
        for counter, unit in (("marks", "pkts"), ("early_drops", "pkts")):
            if np.isfinite(col(counter)).any():
                counts[counter] = counter_delta(t, col(counter), cutoff_s)[1]
                rows.add("link", name, counter, counts[counter], unit)
        # per arriving packet (sent + dropped): the study's mark rate, drop rate and both
        _, arrived = counter_delta(t, col("sent_pkts"), cutoff_s)
        arrived += counter_delta(t, col("drops"), cutoff_s)[1]
        if arrived > 0:
            marks = counts.get("marks", 0.0)
            drops = counter_delta(t, col("drops"), cutoff_s)[1]
            rows.add("link", name, "mark_pct", 100.0 * marks / arrived, "%")
            rows.add("link", name, "mark_drop_pct", 100.0 * (marks + drops) / arrived, "%")
        dt, sent_bytes = counter_delta(t, col("sent_bytes"), cutoff_s)
        if dt > 0 and rate:
            rows.add("link", name, "utilization", sent_bytes * 8 / dt / (rate * 1e6), "")
    return rows


def _interval_rates(t, counter, cutoff_s):
    """Per-sample-interval rates of a cumulative counter, from the last sample at or
    before the cut."""
    t, v = counter_window(t, counter, cutoff_s)
    dt = np.diff(t)
    dv = np.diff(v)
    good = dt > 0
    return np.clip(dv[good], 0, None) / dt[good]
