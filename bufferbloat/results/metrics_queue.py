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


def link_metrics(run, cutoff_s=-math.inf, rate_mbit=None, end_s=math.inf):
    """Rows for each AQM leaf in qdisc.csv: queue length (``qlen_*_pkts``,
    ``backlog_*_bytes``), queueing delay (``qdelay_*_ms`` = backlog x 8 / bottleneck
    rate; ``aqm_delay_*_ms`` from delay_us when the qdisc reports it), ``drops``,
    ``drop_pct`` (drops / (sent + drops)), ``drops_per_s`` (mean) and
    ``drops_per_s_max`` (largest per-interval rate), ``marks``, ``early_drops`` and
    ``utilization`` (sent_bytes delta x 8 / time / rate). ``rate_mbit`` defaults to the
    rate of the link the leaf sends on (:func:`link_rate_mbit`: the bottleneck's, or the
    reverse rate for the reverse AQM). Samples after ``end_s`` (the traffic's end,
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
        if rate:
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
