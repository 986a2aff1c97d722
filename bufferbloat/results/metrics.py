"""Metrics of a run, computed from what the run stored (a :class:`~bufferbloat.results.records.Run`).

Every metric is a row ``{scope, name, metric, value, unit}``: scope is ``flow``, ``link``,
``network``, ``web``, ``ping`` or ``udp``; name is the flow/link/probe/stream label. The
definitions (docs/RESULTS.md, "Metrics"):

- percentiles are numpy's ``linear`` method (type 7: the q-th percentile of n sorted values
  interpolates linearly at rank (n - 1) * q / 100), CoV and Jain's index as
  :mod:`bufferbloat.core.stats` defines them;
- ``warmup_s`` excludes the first seconds of traffic: samples earlier than
  ``traffic start + warmup_s`` are left out, where traffic start is the record's
  ``traffic_start_s`` when present, else the earliest time in the traffic series (tcp,
  iperf, udp, web, ping). Cumulative counters (bytes_acked, retrans_total, the qdisc's
  sent/drops/marks) are differenced from their last sample at or before the cut, so a
  rate after warm-up covers exactly the kept span;
- throughputs are Mbit/s (1e6 bit/s), times in the unit their name ends with.

All functions are pure: they read the run and return numbers; only :func:`write_metrics`
writes (metrics.csv and metrics.json, into the run directory).
"""

import csv
import io
import math
import os

import numpy as np

from bufferbloat.core.atomic import write_json_atomic, write_text_atomic
from bufferbloat.core.series import TRAFFIC_TIME_COLUMNS
from bufferbloat.core.stats import cov, jain_index, loss_figures
from bufferbloat.results.flowmetrics import NOT_LEAF_KINDS, aliases_of, study_metrics
from bufferbloat.results.records import bottleneck_dev_name, label_groups, load_run
from bufferbloat.results.records_layout import METRICS_CSV, METRICS_JSON, SCHEMA_VERSION
from bufferbloat.results.rows import Rows, counter_delta, counter_window, finite_values

FIELDS = ("scope", "name", "metric", "value", "unit")
PERCENTILES = (50, 95, 99)
COV_BIN_S = 1.0
#: The version of the code that computes metrics, stored in metrics.json: bump it when a
#: metric's definition changes, so stored metrics of older code are recomputed rather than
#: read (:func:`run_rows`; metrics.json without it: version 1, the code before it).
#: 2: web ``cut`` (a fetch still running at the run's end is not a failure).
#: 3: link metrics end with the traffic's asked time (:func:`traffic_end_s`): the qdisc
#: samples taken while the tools stop no longer dilute utilization and the queue's stats.
METRICS_VERSION = 3


# ----------------------------------------------------------------------------- helpers

def rfc3550_jitter(t_sent, t_recv):
    """RFC 3550 (section 6.4.1) interarrival jitter after the last packet, in the unit of
    the inputs. Packets are taken in arrival order; for each consecutive pair
    D = (R_j - R_i) - (S_j - S_i) and J += (|D| - J) / 16, from J = 0. Raises ValueError
    for no packets or mismatched lengths; 0 for one packet."""
    s = np.asarray(t_sent, dtype=float).ravel()
    r = np.asarray(t_recv, dtype=float).ravel()
    if s.size != r.size:
        raise ValueError(f"{s.size} send times but {r.size} receive times")
    keep = ~(np.isnan(s) | np.isnan(r))
    s, r = s[keep], r[keep]
    if s.size == 0:
        raise ValueError("jitter of no packets")
    order = np.argsort(r, kind="stable")
    transit = r[order] - s[order]
    jitter = 0.0
    for d in np.abs(np.diff(transit)):
        jitter += (d - jitter) / 16.0
    return float(jitter)


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


def queue_delay_ms(backlog_bytes, rate_mbit):
    """Time to drain ``backlog_bytes`` at ``rate_mbit``, ms: 8 B / R."""
    return np.asarray(backlog_bytes, dtype=float) * 8 / (rate_mbit * 1e6) * 1e3


def traffic_start_s(run):
    """When traffic started, s since t0: the record's ``traffic_start_s``, else the
    earliest time in the traffic series, else 0."""
    value = run.record.get("traffic_start_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    firsts = [float(arr.min()) for arr in _traffic_times(run)]
    return min(firsts) if firsts else 0.0


def traffic_end_s(run):
    """When the traffic's asked time ended, s since t0: :func:`traffic_start_s` plus the
    record's ``duration_s`` (inf without one). The sampler goes on while the tools stop
    (NetPerfMeter's passive side uploads its results: 4-7 s), and the link idles then."""
    duration = _duration_s(run)
    return math.inf if duration is None else traffic_start_s(run) + duration


def _duration_s(run):
    """The record's ``duration_s`` as a float, or None when it is not a positive number."""
    duration = run.record.get("duration_s")
    if not isinstance(duration, (int, float)) or isinstance(duration, bool) or duration <= 0:
        return None
    return float(duration)


def _traffic_times(run):
    """The time column of each traffic series the run holds (non-empty, NaNs out)."""
    out = []
    for name, col in TRAFFIC_TIME_COLUMNS:
        if run.has(name):
            arr = finite_values(run.series(name).get(col, []))
            if arr.size:
                out.append(arr)
    return out


def series_cut(run, tolerance=0.1):
    """What cuts the run's traffic series short, or None: ``series end at 2.5 s of a
    20 s run`` when the latest time in them falls short of the traffic's end (its start
    plus the duration asked for) by more than ``tolerance`` of the duration (and 1 s)."""
    duration = _duration_s(run)
    if duration is None:
        return None
    lasts = [float(arr.max()) for arr in _traffic_times(run)]
    if not lasts:
        return None
    start = traffic_start_s(run)
    end = max(lasts) - start
    if end >= duration - max(1.0, tolerance * duration):
        return None
    return f"series end at {end:.3g} s of a {duration:g} s run (cut short)"


# ----------------------------------------------------------------------------- per scope

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
    :func:`traffic_end_s`, in :func:`compute_metrics`) are left out."""
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


def _truthy(values):
    """Booleans of an ``ok`` column: numbers (non-zero, not NaN) or words (1/true/yes)."""
    if values.dtype.kind == "f":
        return np.nan_to_num(values) != 0
    return np.isin(np.char.lower(values.astype(str)), ["1", "true", "yes", "ok"])


def web_fetches(run, cutoff_s=-math.inf):
    """The fetches of web.csv started at or after the cut, as a dict of arrays (``t``,
    ``total_s``, ``fetch``) and boolean masks: ``ok``, ``cut`` (still running when the run
    ended, so ended by it: neither a success nor a failure) and ``failed`` (the others);
    plus ``warmup`` (how many fetches the cut left out). None without web.csv rows.

    A fetch is cut when web.csv says so (its ``cut`` column), else, for runs recorded
    before that column, when it is one of the last ``incomplete`` failed fetches without
    an HTTP code of its fetcher (the count the record's traffic_results keeps)."""
    if not run.has("web"):
        return None
    w = run.series("web")
    t = np.asarray(w.get("t", []), dtype=float)
    if t.size == 0:
        return None
    names = w.get("fetch", np.array([""] * t.size)).astype(str)
    ok = _truthy(w["ok"]) if "ok" in w else np.ones(t.size, dtype=bool)
    if "cut" in w:
        cut = _truthy(w["cut"]) & ~ok
    else:
        cut = np.zeros(t.size, dtype=bool)
        code = w.get("http_code")
        no_code = (np.ones(t.size, dtype=bool) if code is None else
                   np.array([str(x) in ("", "nan") for x in code.tolist()], dtype=bool))
        for item in run.traffic_results:
            n = item.get("incomplete") if isinstance(item, dict) else None
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                continue
            mine = np.nonzero((names == str(item.get("fetch"))) & ~ok & no_code)[0]
            mine = mine[np.argsort(t[mine], kind="stable")]
            cut[mine[-n:]] = True
    keep = t >= cutoff_s
    return {"t": t[keep], "total_s": np.asarray(w["total_s"], dtype=float)[keep],
            "fetch": names[keep], "ok": ok[keep], "cut": cut[keep],
            "failed": ~ok[keep] & ~cut[keep], "warmup": int((~keep).sum())}


def web_metrics(run, cutoff_s=-math.inf):
    """Rows over every fetch of web.csv started at or after the cut (name ``all``):
    ``fetches`` (all of them), ``failures`` (ok == 0 and not cut), ``cut`` (still
    running when the run ended: :func:`web_fetches`), and
    ``total_{mean,std,p50,p95,p99}_s`` of the successful ones."""
    rows = Rows()
    f = web_fetches(run, cutoff_s)
    if f is None:
        return rows
    rows.add("web", "all", "fetches", f["t"].size, "")
    rows.add("web", "all", "failures", f["failed"].sum(), "")
    rows.add("web", "all", "cut", f["cut"].sum(), "")
    rows.stats("web", "all", "total", "s", f["total_s"][f["ok"]], std=True)
    return rows


def ping_metrics(run, cutoff_s=-math.inf):
    """Per probe of ping.csv: ``rtt_{mean,p50,p95,p99,max}_ms`` and ``loss_pct`` (rows with
    an empty rtt_ms / all rows)."""
    rows = Rows()
    if not run.has("ping"):
        return rows
    p = run.series("ping")
    for probe, mask in label_groups(p, "probe").items():
        keep = mask & (p["t"] >= cutoff_s)
        rtt = p["rtt_ms"][keep]
        if rtt.size == 0:
            continue
        rows.stats("ping", probe, "rtt", "ms", rtt, maximum=True)
        rows.add("ping", probe, "loss_pct", 100.0 * np.isnan(rtt).sum() / rtt.size, "%")
    return rows


def irtt_metrics(run, cutoff_s=-math.inf):
    """Per probe label of irtt.csv (probes sent at or after the cut):
    ``rtt_{mean,p50,p95,p99,max}_ms``, ``owd_up_{mean,p50,p95}_ms`` and
    ``owd_down_{...}_ms`` (one-way delays client -> server and back) over the answered
    probes; ``loss_pct`` (probes not answered / sent), ``loss_up_pct`` (requests lost /
    sent) and ``loss_down_pct`` (replies lost / requests known to have arrived: sent -
    lost up - lost in no known direction)."""
    rows = Rows()
    if not run.has("irtt"):
        return rows
    s = run.series("irtt")
    lost = s.get("lost")
    for probe, mask in label_groups(s, "probe").items():
        keep = mask & (s["t"] >= cutoff_s)
        if not keep.any():
            continue
        rows.stats("irtt", probe, "rtt", "ms", s["rtt_ms"][keep], maximum=True)
        for way in ("up", "down"):
            rows.stats("irtt", probe, f"owd_{way}", "ms", s[f"owd_{way}_ms"][keep],
                       pcts=(50, 95))
        marks = ([""] * int(keep.sum()) if lost is None
                 else ["" if x in ("", "nan") else x for x in lost[keep].astype(str)])
        figures = loss_figures(marks)
        for key in ("loss_pct", "loss_up_pct", "loss_down_pct"):
            rows.add("irtt", probe, key, figures[key], "%")
    return rows


def _udp_sent(run, stream):
    """Packets sent on ``stream``, if its summary in the record's ``traffic_results``
    says (the sender's own count)."""
    for item in run.traffic_results:
        if item.get("stream") == stream:
            sent = item.get("sent")
            if isinstance(sent, (int, float)) and not isinstance(sent, bool):
                return int(sent)
    return None


def udp_metrics(run, cutoff_s=-math.inf):
    """Per stream of udp.csv (one row per received packet; packets sent at or after the
    cut): ``throughput_mbit`` (bytes after the first arrival x 8 / arrival span),
    ``jitter_ms`` (RFC 3550), ``loss_pct`` (1 - distinct seqs received / expected;
    expected = the stream's ``sent`` in ``traffic_results`` without warm-up, else
    max seq - min seq + 1), ``owd_{mean,p50,p95,p99,max}_ms`` (t_recv - t_sent)."""
    rows = Rows()
    if not run.has("udp"):
        return rows
    u = run.series("udp")
    for stream, mask in label_groups(u, "stream").items():
        keep = mask & (u["t_sent"] >= cutoff_s)
        if not keep.any():
            continue
        ts, tr = u["t_sent"][keep], u["t_recv"][keep]
        order = np.argsort(tr, kind="stable")
        span = tr[order][-1] - tr[order][0]
        size = u["size_bytes"][keep][order]
        if span > 0:
            rows.add("udp", stream, "throughput_mbit", np.nansum(size[1:]) * 8 / span / 1e6,
                     "Mbit/s")
        rows.add("udp", stream, "jitter_ms", rfc3550_jitter(ts, tr) * 1e3, "ms")
        seqs = np.unique(finite_values(u["seq"][keep]))
        sent = _udp_sent(run, stream) if cutoff_s == -math.inf else None
        expected = sent if sent else (seqs[-1] - seqs[0] + 1 if seqs.size else 0)
        if expected:
            rows.add("udp", stream, "loss_pct",
                     100.0 * max(0.0, 1 - seqs.size / expected), "%")
        rows.stats("udp", stream, "owd", "ms", (tr - ts) * 1e3, maximum=True)
    return rows


# ----------------------------------------------------------------------------- the run

def compute_metrics(run, warmup_s=0.0):
    """Every metric of ``run`` (a Run or a run directory) as rows {scope, name, metric,
    value, unit}, leaving out samples of the first ``warmup_s`` seconds of traffic."""
    if isinstance(run, (str, os.PathLike)):
        run = load_run(run)
    if warmup_s < 0:
        raise ValueError(f"warmup_s must be >= 0, got {warmup_s!r}")
    cutoff = traffic_start_s(run) + warmup_s if warmup_s > 0 else -math.inf
    flows, throughput = flow_metrics(run, cutoff)
    rows = list(flows)
    rows += link_metrics(run, cutoff, end_s=traffic_end_s(run))
    rows += network_metrics(throughput, delivered_goodput(run, cutoff))
    rows += web_metrics(run, cutoff)
    rows += ping_metrics(run, cutoff)
    rows += irtt_metrics(run, cutoff)
    rows += udp_metrics(run, cutoff)
    rows += study_metrics(run, cutoff, throughput, rows)
    return rows


def write_metrics(run, rows, warmup_s=None):
    """Write ``rows`` as metrics.csv and metrics.json into the run directory (each
    atomically); returns the two paths."""
    run_dir = run if isinstance(run, (str, os.PathLike)) else run.dir
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, "value": repr(float(row["value"]))})
    csv_path = os.path.join(run_dir, METRICS_CSV)
    write_text_atomic(csv_path, buf.getvalue())
    json_path = os.path.join(run_dir, METRICS_JSON)
    write_json_atomic(json_path, {"schema_version": SCHEMA_VERSION,
                                  "metrics_version": METRICS_VERSION, "warmup_s": warmup_s,
                                  "metrics": [dict(r) for r in rows],
                                  "aliases": aliases_of(rows)})
    return csv_path, json_path


def metrics_stale(run):
    """True when ``run`` stored metrics that older code computed (metrics.json without
    the current :data:`METRICS_VERSION`): numbers the current code would not produce."""
    rows = run.metrics()
    return rows is not None and run.metrics_version != METRICS_VERSION


def run_rows(run):
    """The metric rows of ``run`` (a Run): the ones it stored (metrics.json) when the
    current code computed them (:data:`METRICS_VERSION`), else computed from its series
    with the record's warm-up, not written (a run that stored none, one that did not
    end ok, or one whose metrics older code computed: ``run.metrics_recomputed`` is then
    True); an odd record's warm-up falls back to none (a report must not stop at one
    run)."""
    rows = run.metrics()
    if rows is not None and run.metrics_version == METRICS_VERSION:
        return rows
    run.metrics_recomputed = rows is not None
    try:
        return compute_metrics(run, warmup_s=run.warmup_s)
    except Exception:  # noqa: BLE001 - an odd run must not stop a report
        return compute_metrics(run, warmup_s=0.0)


def metric_value(rows, metric, scope=None, name=None):
    """The value of the first row with ``metric`` (and ``scope``/``name`` when given),
    else None."""
    for row in rows:
        if row.get("metric") == metric and (scope is None or row.get("scope") == scope) \
                and (name is None or row.get("name") == name):
            value = row.get("value")
            return float(value) if value is not None else None
    return None


def metric_values(rows, metric, scope=None):
    """{name: value} of every row with ``metric`` (and ``scope``)."""
    return {row["name"]: float(row["value"]) for row in rows
            if row.get("metric") == metric and (scope is None or row.get("scope") == scope)
            and row.get("value") is not None}


def format_value(value):
    """A number for a table: integers as such, others to 4 significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def format_table(rows):
    """``rows`` as an aligned text table (scope, name, metric, value, unit)."""
    header = ("scope", "name", "metric", "value", "unit")
    body = [(r["scope"], r["name"], r["metric"], format_value(r["value"]), r["unit"])
            for r in rows]
    widths = [max(len(str(x[i])) for x in [header] + body) for i in range(len(header))]
    lines = []
    for n, line in enumerate([header] + body):
        cells = [str(c).rjust(w) if i == 3 and n else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
