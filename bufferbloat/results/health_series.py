"""The health checks that the run's series answer: did the emulated link keep its rate
(work conservation, the departures' timing, the AQM controller's update rate, a goodput
the link can carry) and did the senders keep their sockets full.

Each check returns {name: {"value", "limit", "ok", "what", ...}} ({} when the run has no
data for it); :func:`bufferbloat.results.health.assess` gathers them into the verdict.
The thresholds are justified by measurements in docs/design/health.md.
"""

import numpy as np

from bufferbloat.measure.departures import timing_summary
from bufferbloat.net.qdiscs import kind_of
from bufferbloat.results.flowmetrics import NOT_LEAF_KINDS
from bufferbloat.results.health_record import is_finite_number

#: The bottleneck must send at >= this share of its configured rate whenever its leaf
#: holds a backlog. The host kernel (HTB, exact) and an unloaded TCG VM measure
#: 0.98-1.01 (docs/design/health.md); 0.95 leaves room for sampling edges, not for a CPU-starved
#: emulator (0.23-0.88 measured under overload).
MIN_WORK_CONSERVATION = 0.95
#: A sampler interval counts as backlogged when the leaf held at least this many bytes
#: (two full-size packets) at both of its ends, and at its start at least what the link
#: can send in the interval (see :func:`work_conservation`).
BACKLOG_BYTES = 3000
#: Less backlogged time than this is not enough to judge work conservation on.
MIN_BACKLOGGED_S = 1.0
#: Goodput above the link rate by more than this share is impossible (a measurement bug).
MAX_GOODPUT_SHARE = 1.02

#: An AQM whose controller runs on its own timer (the project's PI, sch_pi) must update
#: at no less than this share of its configured frequency: a softirq-starved guest
#: delays its hrtimer and the controller runs slower than the law it is tested on
#: (measured: 67 of 160 Hz in an overloaded TCG run; 160 Hz when the VM keeps up).
MIN_CONTROLLER_RATE_SHARE = 0.95

#: Departure timing (bufferbloat/measure/departures.py): while the leaf is backlogged, the
#: 99th percentile of |gap - ideal gap| between departures may exceed the shaper's
#: configured burst (as time at its rate: a token bucket may send that much at once, by
#: design) by at most this. The host kernel (HTB with tc's one-MTU burst, real-time
#: timers) measured a p99 of 0.045-0.052 ms at 1.5-100 Mbit/s (docs/design/health.md).
DEPARTURE_SLACK_MS = 1.0
#: Fewer backlogged gaps than this are not enough to judge the timing on.
MIN_DEPARTURE_GAPS = 100
#: Machines whose departure timing has been calibrated (docs/design/health.md): elsewhere the
#: value is recorded and shown, not judged, until it is. The TCG VM (20 ms burst)
#: measured 1.5-3.5 ms at the 99th percentile in healthy quick points of every family.
DEPARTURES_CALIBRATED = ("host", "tcg")

#: A greedy flow (a TCP flow without a rate cap, always on) must have had data to send
#: (the kernel's tcpi_busy_time: a non-empty write queue) for all but this share of
#: the judged window; more means its application did not keep its socket full (a
#: sender process starved of CPU looks like this) and the flow measured the emulator,
#: not TCP. Measured in docs/design/health.md ("Did the senders keep up?").
MAX_APP_LIMITED_SHARE = 0.05
#: the judged window: from the warm-up's end to this long before the traffic's end (a
#: flow's own end drains its queue), at least MIN_SENDER_WINDOW_S long
SENDER_END_MARGIN_S = 1.0
MIN_SENDER_WINDOW_S = 2.0
#: a socket has begun its data once it sent more than this (iperf3's data connection
#: sends a 37-byte cookie first): its first data after the judged window opened is a
#: late start, named as such (under TCG iperf3's control exchange can take seconds)
FIRST_DATA_BYTES = 1000


def work_conservation(t, backlog, sent_bytes, rate_mbit, backlog_bytes=BACKLOG_BYTES):
    """(ratio, backlogged seconds): bytes the leaf sent over the sampler intervals during
    which it stayed backlogged, x 8 / (rate x their total length). (None, 0) when no
    interval was.

    An interval counts when the leaf held, at its start, at least what the link can send
    in it (rate x interval, and >= ``backlog_bytes``) and still >= ``backlog_bytes`` at
    its end: the link then had no reason to idle, whatever arrived. A fixed 3 kB at both
    ends is not enough for an AQM holding a few packets (PIE at 5 ms and 10 Mbit/s keeps
    ~6 kB): its queue can empty between two samples, and the link idle for a reason, so
    such intervals are not judged."""
    t = np.asarray(t, dtype=float)
    b = np.asarray(backlog, dtype=float)
    s = np.asarray(sent_bytes, dtype=float)
    ok = ~(np.isnan(t) | np.isnan(b) | np.isnan(s))
    t, b, s = t[ok], b[ok], s[ok]
    order = np.argsort(t, kind="stable")
    t, b, s = t[order], b[order], s[order]
    if t.size < 2 or not rate_mbit:
        return None, 0.0
    dt, ds = np.diff(t), np.diff(s)
    need = np.maximum(backlog_bytes, rate_mbit * 1e6 / 8 * dt)
    busy = (b[:-1] >= need) & (b[1:] >= backlog_bytes)
    busy &= (dt > 0) & (ds >= 0)         # a counter reset is not an interval to judge
    span = float(np.sum(dt[busy]))
    if span <= 0:
        return None, 0.0
    return float(np.sum(ds[busy])) * 8 / (span * rate_mbit * 1e6), span


def _leaf_rates(run):
    """{dev: rate Mbit/s} of every AQM device the sampler watched: the bottleneck's
    egress at its rate, the reverse AQM (receiver's egress) at the reverse rate."""
    params = run.params
    rev = params.get("reverse_mbit") or params.get("bottleneck_mbit")
    trace = run.record.get("link_trace")     # a varying link: at most its peak
    fwd = trace.get("max_mbit") if isinstance(trace, dict) else params.get("bottleneck_mbit")
    want = run.bottleneck_dev
    devs = (run.record.get("sampler") or {}).get("qdisc_devs") or ([want] if want else [])
    return {d: (fwd if d == want or want is None else rev) for d in devs}


def check_work_conservation(run):
    """One check per AQM leaf with enough backlogged time."""
    out = {}
    if not run.has("qdisc"):
        return out
    q = run.series("qdisc")
    rates = _leaf_rates(run)
    n = len(q.get("t", []))
    dev = q.get("dev", np.array([""] * n))
    kind = q.get("kind", np.array([""] * n))
    for key in dict.fromkeys(zip(dev.tolist(), kind.tolist())):
        if key[1] in NOT_LEAF_KINDS or (rates and key[0] not in rates):
            continue
        rate = rates.get(key[0]) if rates else run.bottleneck_mbit
        mask = (dev == key[0]) & (kind == key[1])
        if "sent_bytes" not in q or "backlog_bytes" not in q:
            continue
        ratio, span = work_conservation(q["t"][mask], q["backlog_bytes"][mask],
                                        q["sent_bytes"][mask], rate)
        judged = span >= MIN_BACKLOGGED_S and ratio is not None
        out[f"work_conservation:{key[0]}:{key[1]}"] = {
            "value": None if ratio is None else round(ratio, 4),
            "limit": f">= {MIN_WORK_CONSERVATION}", "backlogged_s": round(span, 3),
            "rate_mbit": rate, "ok": (ratio >= MIN_WORK_CONSERVATION) if judged else None,
            "what": f"bottleneck {key[0]} ({key[1]}) sent at this share of {rate:g} Mbit/s "
                    f"while backlogged" if rate else "no rate recorded"}
    return out


def departure_limit_ms(rate_mbit, burst_bytes):
    """The departure-timing limit, ms: the burst's time at the rate (one MTU, 1514 B,
    when the class has tc's default) plus DEPARTURE_SLACK_MS."""
    burst = burst_bytes or 1514
    return burst * 8 / (rate_mbit * 1e6) * 1e3 + DEPARTURE_SLACK_MS


def check_departures(run):
    """One ``departure_timing:DEV:KIND`` check per traced leaf: the p99 gap error while
    backlogged against the burst's time plus slack; not judged when the trace lost
    events, shared its kernel with other namespaces, saw too few backlogged gaps, or
    ran on a machine kind not calibrated yet."""
    info = run.record.get("departures") or {}
    if not info.get("traced") or not run.has("departures"):
        return {}
    d = run.series("departures")
    leaf = {}
    if run.has("qdisc"):
        q = run.series("qdisc")
        for dev, kind in zip(q.get("dev", []).tolist(), q.get("kind", []).tolist()):
            if kind not in NOT_LEAF_KINDS:
                leaf.setdefault(dev, kind)
    out = {}
    for dev in info.get("devs") or []:
        rate = (info.get("rates_mbit") or {}).get(dev)
        mask = d["dev"] == dev
        s = timing_summary(d["t"][mask], d["len_bytes"][mask], d["sojourn_ms"][mask],
                           d["backlogged"][mask], rate)
        if s is None:
            continue
        limit = departure_limit_ms(rate, (info.get("burst_bytes") or {}).get(dev))
        value = s.get("gap_error_ms_p99")
        why_not = (f"the reader failed ({info['reader_error']})" if info.get("reader_error")
                   else f"the trace lost {info['lost_events']} events"
                   if info.get("lost_events")
                   else "the kernel's trace was shared with other namespaces"
                   if info.get("shared_kernel")
                   else f"{s['backlogged_gaps']} backlogged gaps (< {MIN_DEPARTURE_GAPS})"
                   if s["backlogged_gaps"] < MIN_DEPARTURE_GAPS
                   else f"not calibrated on {info.get('machine')} yet (docs/design/health.md)"
                   if info.get("machine", "host") not in DEPARTURES_CALIBRATED else None)
        ok = None if why_not or value is None else value <= limit
        out[f"departure_timing:{dev}:{leaf.get(dev, '?')}"] = {
            "value": value, "limit": f"<= {limit:.3f} ms", "ok": ok, **s,
            "rate_mbit": rate, "not_judged": why_not,
            "what": f"departures from {dev} at {rate:g} Mbit/s: p99 of the backlogged "
                    f"gaps' error against an ideal link"}
    return out


def check_controller_rate(run):
    """The timer-driven AQM controller's update rate against its configured frequency
    (qdisc.csv's ``ctl_updates`` over the sampled span; the PI qdisc's freq_hz)."""
    out = {}
    if not run.has("qdisc"):
        return out
    q = run.series("qdisc")
    if "ctl_updates" not in q:
        return out
    topo = (run.record.get("network") or {}).get("topology") or {}
    qd = topo.get("qdisc") or {}
    info = kind_of(qd.get("kind"))
    freq = info.controller_freq_hz(qd.get("params") or {}) if info is not None else None
    if not freq:
        return out
    ctl = info.tc_kind
    n = len(q["t"])
    kind = q.get("kind", np.array([""] * n))
    dev = q.get("dev", np.array([""] * n))
    for d in dict.fromkeys(dev[kind == ctl].tolist()):
        mask = (kind == ctl) & (dev == d) & np.isfinite(q["ctl_updates"])
        t, u = q["t"][mask], q["ctl_updates"][mask]
        if t.size < 2 or t[-1] - t[0] < MIN_BACKLOGGED_S:
            continue
        rate = float(u[-1] - u[0]) / float(t[-1] - t[0])
        share = rate / freq
        out[f"controller_rate:{d}:{ctl}"] = {
            "value": round(share, 4), "limit": f">= {MIN_CONTROLLER_RATE_SHARE}",
            "ok": share >= MIN_CONTROLLER_RATE_SHARE, "rate_hz": round(rate, 2),
            "freq_hz": freq,
            "what": f"the {ctl} controller on {d} updated at {rate:.1f} Hz of {freq} Hz"}
    return out


def greedy_labels(record):
    """The tcp.csv labels of the flows meant to send all the time (their summaries say
    ``greedy``; an iperf3 part's parallel streams are labelled NAME-1..N)."""
    out = set()
    for s in record.get("traffic_results") or []:
        if not isinstance(s, dict):
            continue
        for f in [s] + [f for f in s.get("flows") or [] if isinstance(f, dict)]:
            if f.get("greedy") and f.get("flow"):
                out.add(str(f["flow"]))
                out.update(str(x) for x in f.get("streams") or [])
    return out


def sender_shares(t, busy_us, rwnd_us, sndbuf_us, lo, hi):
    """(window s, app-limited share, rwnd-limited share, sndbuf-limited share) of one
    socket's cumulative chrono counters over its samples within [lo, hi]; None when the
    samples there span less than MIN_SENDER_WINDOW_S or lack the counters."""
    t = np.asarray(t, dtype=float)
    b = np.asarray(busy_us, dtype=float)
    keep = (t >= lo) & (t <= hi) & np.isfinite(b)
    if keep.sum() < 2:
        return None
    t, b = t[keep], b[keep]
    span = float(t[-1] - t[0])
    if span < MIN_SENDER_WINDOW_S:
        return None

    def share(x):
        x = np.asarray(x, dtype=float)[keep]
        if not np.isfinite(x[[0, -1]]).all():
            return None
        return float(np.clip((x[-1] - x[0]) / 1e6 / span, 0, 1))
    busy = share(busy_us)
    return span, 1.0 - busy, share(rwnd_us), share(sndbuf_us)


def check_senders(run):
    """``sender_kept_up``: every greedy flow's socket had data to send for all but
    MAX_APP_LIMITED_SHARE of the judged window (tcp.csv's ``busy_us``); the receive
    window's and the send buffer's limited shares recorded beside it (limits of the
    path or of the configuration: physics, not judged)."""
    rec = run.record
    if not run.has("tcp"):
        return {}
    tcp = run.series("tcp")
    if "busy_us" not in tcp or not np.isfinite(tcp["busy_us"]).any():
        return {}
    greedy = greedy_labels(rec)
    if not greedy:
        return {}
    start = rec.get("traffic_start_s") or 0.0
    lo = start + (run.warmup_s or 0.0)
    hi = start + (rec.get("duration_s") or 0.0) - SENDER_END_MARGIN_S
    flows, worst, bad = [], 0.0, []
    n = len(tcp["t"])
    sport = tcp.get("sport", np.full(n, np.nan))
    for label in sorted(set(tcp["flow"].tolist()) & greedy):
        for port in dict.fromkeys(sport[tcp["flow"] == label].tolist()):
            m = (tcp["flow"] == label) & (sport == port)
            got = sender_shares(tcp["t"][m], tcp["busy_us"][m],
                                tcp.get("rwnd_limited_us", np.full(n, np.nan))[m],
                                tcp.get("sndbuf_limited_us", np.full(n, np.nan))[m], lo, hi)
            if got is None:
                continue
            span, app, rwnd, sndbuf = got
            first = _first_data_s(tcp, m, start)
            flows.append({"flow": label, "sport": None if np.isnan(port) else int(port),
                          "window_s": round(span, 3), "app_limited_share": round(app, 4),
                          "rwnd_limited_share": None if rwnd is None else round(rwnd, 4),
                          "sndbuf_limited_share": None if sndbuf is None
                          else round(sndbuf, 4),
                          "first_data_s": None if first is None else round(first, 3)})
            worst = max(worst, app)
            if app > MAX_APP_LIMITED_SHARE:
                # late: the time before its first data is at least half its idle time
                late = first is not None and start + first - lo >= 0.5 * app * span
                bad.append(f"{label} {app:.1%}" + (f", its first data {first:.1f} s after "
                                                   "the start: a late start" if late else ""))
    if not flows:
        return {}
    return {"sender_kept_up": {
        "value": round(worst, 4), "limit": f"<= {MAX_APP_LIMITED_SHARE}",
        "ok": not bad, "flows": flows, "judged": len(flows),
        "what": (f"{len(bad)} greedy flow(s) had nothing to send for part of the time "
                 f"({', '.join(bad[:4])}{', ...' if len(bad) > 4 else ''})" if bad else
                 f"all {len(flows)} greedy flows had data to send all the time"
                 " (worst: its largest idle share)")}}


def _first_data_s(tcp, mask, start):
    """When a socket's data began, s after the traffic's start (tcp.csv ``bytes_sent``
    past FIRST_DATA_BYTES); None without the column or before any data."""
    sent = tcp.get("bytes_sent")
    if sent is None:
        return None
    t = tcp["t"][mask]
    began = np.nonzero(np.asarray(sent[mask], dtype=float) > FIRST_DATA_BYTES)[0]
    return float(t[began[0]] - start) if began.size else None


def check_goodput(run, metrics_rows=None):
    """Goodput per direction can not exceed the link's rate."""
    if metrics_rows is None:
        return {}
    params = run.params
    rev = params.get("reverse_mbit") or params.get("bottleneck_mbit")
    trace = run.record.get("link_trace")     # a varying link: at most its peak
    fwd = trace.get("max_mbit") if isinstance(trace, dict) else params.get("bottleneck_mbit")
    out = {}
    for r in metrics_rows:
        if r["scope"] != "network" or not r["metric"].startswith("goodput_") \
                or not r["metric"].endswith("_mbit"):
            continue
        direction = r["metric"][len("goodput_"):-len("_mbit")]
        rate = rev if direction == "down" else fwd
        if not is_finite_number(rate):
            continue
        share = r["value"] / rate
        out[f"goodput_possible:{direction}"] = {
            "value": round(share, 4), "limit": f"<= {MAX_GOODPUT_SHARE}",
            "ok": share <= MAX_GOODPUT_SHARE, "goodput_mbit": round(r["value"], 4),
            "rate_mbit": rate,
            "what": f"{direction} goodput {r['value']:.2f} Mbit/s on a {rate:g} Mbit/s link"}
    return out
