"""Did the emulator keep up? A health verdict for every run, from what the run recorded.

An emulator that falls behind still produces numbers: a link that holds a queue but
sends below its rate, a sampler that skips ticks, a flow that starts late. Those runs
measured the emulator, not the network. :func:`assess` reads a stored run (its record
and its series; it never asks the tools again) and returns::

    {"verdict": "healthy" | "degraded" | "faulty" | "unknown",
     "faults": ["1 part(s) started before their due time, a fault of the run (...)"],
     "problems": ["work conservation 0.62 on s0-eth2:pie (>= 0.95 required)", ...],
     "checks": {name: {"value": ..., "limit": ..., "ok": True | False | None, ...}}}

``ok`` None means the check could not be made (e.g. no backlogged time to judge work
conservation on); such a check does not make a run degraded. A failed check marked
``fault`` (a part that began before its due time) is the run's own fault, never the
emulator's: the run is ``faulty`` (listed in ``faults``), which a rerun does not clear.
The thresholds below are justified by measurements in docs/HEALTH.md.
"""

import math

import numpy as np

from bufferbloat.measure.departures import timing_summary
from bufferbloat.net.qdiscs import kind_of
from bufferbloat.results.flowmetrics import NOT_LEAF_KINDS
from bufferbloat.results.records import load_run

#: The bottleneck must send at >= this share of its configured rate whenever its leaf
#: holds a backlog. The host kernel (HTB, exact) and an unloaded TCG VM measure
#: 0.98-1.01 (docs/HEALTH.md); 0.95 leaves room for sampling edges, not for a CPU-starved
#: emulator (0.23-0.88 measured under overload).
MIN_WORK_CONSERVATION = 0.95
#: A sampler interval counts as backlogged when the leaf held at least this many bytes
#: (two full-size packets) at both of its ends, and at its start at least what the link
#: can send in the interval (see :func:`work_conservation`).
BACKLOG_BYTES = 3000
#: Less backlogged time than this is not enough to judge work conservation on.
MIN_BACKLOGGED_S = 1.0
#: Highest share of the sampler's ticks it may miss (10 ms series with gaps make queue
#: percentiles and drop rates wrong).
MAX_MISSED_TICKS = 0.05
#: A flow's client may be launched at most this late against its schedule (its server
#: listens before the schedule starts; the overloaded runs that prompted this were
#: 49-53 s late). iperf3's own time zero comes a few round trips after the launch (its
#: control exchange; behind a bloated queue, seconds): physics, recorded, not judged.
MAX_START_LATE_S = 2.0
#: A part may begin at most this long before its due time (the traffic's origin + its
#: start): an early start is a fault of the run, never the emulator's (see
#: :func:`check_early_starts`). Launches are stamped by our own clocks, read at the
#: launch (monotonic, or wall clock converted once per run: within milliseconds).
MAX_START_EARLY_S = 0.2
#: ... and by a tool's own clock (NetPerfMeter's ``first_on_s``): a pre-connected part's
#: active processes start their measurements within a tick or two of each other (its
#: passive side's 250 ms poll), and the origin waits for the last one, so the earlier
#: processes' flows begin that much before it (0.17 s measured at 40 flows, 0.27-0.49 s
#: at 60, netperfmeter.py's preconnect).
MAX_OWN_CLOCK_EARLY_S = 1.0
#: The idle RTT before traffic may exceed the configured base RTT by at most
#: max(IDLE_RTT_SLACK_MS, IDLE_RTT_SLACK_SHARE x base) at its median (TCG adds
#: 0.8-1.1 ms of its own and ~0.3 ms per netem stage).
IDLE_RTT_SLACK_MS = 3.0
IDLE_RTT_SLACK_SHARE = 0.10
#: ... and must not be below it by more than this (the delay emulation did not work).
IDLE_RTT_BELOW_MS = 0.5
#: Goodput above the link rate by more than this share is impossible (a measurement bug).
MAX_GOODPUT_SHARE = 1.02
#: The traffic phase may end at most this long after its scheduled end.
MAX_OVERRUN_S = 3.0

#: An AQM whose controller runs on its own timer (the project's PI, sch_pi) must update
#: at no less than this share of its configured frequency: a softirq-starved guest
#: delays its hrtimer and the controller runs slower than the law it is tested on
#: (measured: 67 of 160 Hz in an overloaded TCG run; 160 Hz when the VM keeps up).
MIN_CONTROLLER_RATE_SHARE = 0.95

#: Departure timing (bufferbloat/measure/departures.py): while the leaf is backlogged, the
#: 99th percentile of |gap - ideal gap| between departures may exceed the shaper's
#: configured burst (as time at its rate: a token bucket may send that much at once, by
#: design) by at most this. The host kernel (HTB with tc's one-MTU burst, real-time
#: timers) measured a p99 of 0.045-0.052 ms at 1.5-100 Mbit/s (docs/HEALTH.md).
DEPARTURE_SLACK_MS = 1.0
#: Fewer backlogged gaps than this are not enough to judge the timing on.
MIN_DEPARTURE_GAPS = 100
#: Machines whose departure timing has been calibrated (docs/HEALTH.md): elsewhere the
#: value is recorded and shown, not judged, until it is. The TCG VM (20 ms burst)
#: measured 1.5-3.5 ms at the 99th percentile in healthy quick points of every family.
DEPARTURES_CALIBRATED = ("host", "tcg")

#: A greedy flow (a TCP flow without a rate cap, always on) must have had data to send
#: (the kernel's tcpi_busy_time: a non-empty write queue) for all but this share of
#: the judged window; more means its application did not keep its socket full (a
#: sender process starved of CPU looks like this) and the flow measured the emulator,
#: not TCP. Measured in docs/HEALTH.md ("Did the senders keep up?").
MAX_APP_LIMITED_SHARE = 0.05
#: the judged window: from the warm-up's end to this long before the traffic's end (a
#: flow's own end drains its queue), at least MIN_SENDER_WINDOW_S long
SENDER_END_MARGIN_S = 1.0
MIN_SENDER_WINDOW_S = 2.0
#: a socket has begun its data once it sent more than this (iperf3's data connection
#: sends a 37-byte cookie first): its first data after the judged window opened is a
#: late start, named as such (under TCG iperf3's control exchange can take seconds)
FIRST_DATA_BYTES = 1000

THRESHOLDS = {"work_conservation_min": MIN_WORK_CONSERVATION,
              "controller_rate_share_min": MIN_CONTROLLER_RATE_SHARE,
              "backlog_bytes": BACKLOG_BYTES, "min_backlogged_s": MIN_BACKLOGGED_S,
              "missed_ticks_max": MAX_MISSED_TICKS, "start_late_max_s": MAX_START_LATE_S,
              "start_early_max_s": MAX_START_EARLY_S,
              "start_early_own_clock_max_s": MAX_OWN_CLOCK_EARLY_S,
              "idle_rtt_slack_ms": IDLE_RTT_SLACK_MS,
              "idle_rtt_slack_share": IDLE_RTT_SLACK_SHARE,
              "goodput_share_max": MAX_GOODPUT_SHARE, "overrun_max_s": MAX_OVERRUN_S,
              "departure_slack_ms": DEPARTURE_SLACK_MS,
              "departure_min_gaps": MIN_DEPARTURE_GAPS,
              "app_limited_share_max": MAX_APP_LIMITED_SHARE}


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


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
    fwd = params.get("bottleneck_mbit")
    rev = params.get("reverse_mbit") or fwd
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
                   else f"not calibrated on {info.get('machine')} yet (docs/HEALTH.md)"
                   if info.get("machine", "host") not in DEPARTURES_CALIBRATED else None)
        ok = None if why_not or value is None else value <= limit
        out[f"departure_timing:{dev}:{leaf.get(dev, '?')}"] = {
            "value": value, "limit": f"<= {limit:.3f} ms", "ok": ok, **s,
            "rate_mbit": rate, "not_judged": why_not,
            "what": f"departures from {dev} at {rate:g} Mbit/s: p99 of the backlogged "
                    f"gaps' error against an ideal link"}
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


def check_sampler(record):
    """The sampler's missed-tick share and achieved period."""
    st = record.get("sampler") or {}
    samples, missed = st.get("samples"), st.get("missed_ticks")
    if not _num(samples) or not _num(missed) or samples + missed <= 0:
        return {}
    share = missed / (samples + missed)
    return {"sampler_missed_ticks": {
        "value": round(share, 4), "limit": f"<= {MAX_MISSED_TICKS}",
        "ok": share <= MAX_MISSED_TICKS, "missed": missed, "samples": samples,
        "period_ms": st.get("period_ms"), "period_p99_ms": st.get("period_p99_ms"),
        "cpu_share": st.get("cpu_share"),
        "what": f"the sampler missed {missed} of {samples + missed} ticks"}}


def scheduled_entries(record):
    """[(part name, entry)] of every ``traffic_results`` entry that has a schedule
    (``scheduled_s``): each tool's, and each flow nested in one (``flows``)."""
    out = []
    for s in record.get("traffic_results") or []:
        if not isinstance(s, dict):
            continue
        for e in [s] + [f for f in s.get("flows") or [] if isinstance(f, dict)]:
            if "scheduled_s" in e:
                out.append((s.get("name") or e.get("flow") or "?", e))
    return out


def entry_label(part, entry):
    """How an entry is named in a verdict: its part, and its flow (probe, fetch loop)
    when that is another name."""
    own = next((entry[k] for k in ("flow", "probe", "fetch", "stream") if entry.get(k)),
               None)
    return part if own in (None, part) else f"{part} ({own})"


def began_s(entry):
    """(when the entry began to send, run time s; the key it came from), or (None,
    None): by its tool's own clock when it has one (NetPerfMeter: its measurement's start
    + the flow's first "on", ``first_on_s``; the connecting before that is the tool's),
    else its launch (iperf3's client, ping, irtt's client, the first fetch, the UDP
    sender's first send: ``t_launch``; iperf3's handshake behind the queue is physics,
    see MAX_START_LATE_S), else its first transmission (``t_start``)."""
    return next(((entry[k], k) for k in ("first_on_s", "t_launch", "t_start")
                 if _num(entry.get(k))), (None, None))


def check_flows(record):
    """Every scheduled part (its flows, probes, fetch loops, streams) started no later
    than MAX_START_LATE_S after its due time; every flow started and moved data. A start
    before its due time is :func:`check_early_starts`' (a fault of the run)."""
    late, never, empty, total = [], [], [], 0
    worst = handshake = 0.0
    for part, s in scheduled_entries(record):
        total += 1
        name = s.get("flow") or entry_label(part, s)
        started, _ = began_s(s)
        if started is None:
            never.append(name)
            continue
        lag = started - s["scheduled_s"]
        if _num(s.get("t_start")):
            handshake = max(handshake, s["t_start"] - started)
        worst = max(worst, lag)
        if lag > MAX_START_LATE_S:
            late.append(f"{name} +{lag:.1f} s")
        moved = s.get("bytes_received") or s.get("bytes_sent")
        if "flow" in s and not moved:      # a flow carries data; a probe's are its rows
            empty.append(name)
    if not total:
        return {}
    ok = not (late or never or empty)
    parts = []
    if late:
        parts.append(f"{len(late)} started late ({', '.join(late[:4])}"
                     f"{', ...' if len(late) > 4 else ''})")
    if never:
        parts.append(f"{len(never)} never started ({', '.join(never[:4])})")
    if empty:
        parts.append(f"{len(empty)} carried no data ({', '.join(empty[:4])})")
    return {"flows_on_time": {
        "value": round(worst, 3), "limit": f"start <= {MAX_START_LATE_S} s late",
        "ok": ok, "flows": total, "late": len(late), "never_started": len(never),
        "no_data": len(empty), "time_zero_after_launch_max_s": round(handshake, 3),
        "what": "; ".join(parts) or f"all {total} flows started within "
                                    f"{MAX_START_LATE_S:g} s of their schedule"}}


def check_early_starts(record):
    """``starts_not_early``: no scheduled part began before its due time (beyond
    MAX_START_EARLY_S; MAX_OWN_CLOCK_EARLY_S for a tool's own clock). An early start is
    the run's fault, not the emulator's (an emulator that falls behind is late, never
    early): the part ran on another schedule than the traffic's origin (A.5's stream sent
    at the run's t0 + its start, 2.7-3.0 s early, issue 38). Each is named with its
    offset: how early, and its due time and start against the traffic's origin."""
    origin = record.get("traffic_start_s")
    origin = origin if _num(origin) else 0.0
    early, worst, total = [], 0.0, 0
    for part, s in scheduled_entries(record):
        started, key = began_s(s)
        if started is None:
            continue
        total += 1
        lag = started - s["scheduled_s"]
        worst = min(worst, lag)
        slack = MAX_OWN_CLOCK_EARLY_S if key == "first_on_s" else MAX_START_EARLY_S
        if lag < -slack:
            early.append(f"{entry_label(part, s)} {-lag:.2f} s early (due at origin + "
                         f"{s['scheduled_s'] - origin:.2f} s, began at origin + "
                         f"{started - origin:.2f} s)")
    if not total:
        return {}
    return {"starts_not_early": {
        "value": round(worst, 3), "ok": not early, "fault": True, "early": len(early),
        "parts": total,
        "limit": f"start >= {MAX_START_EARLY_S:g} s before its due time "
                 f"({MAX_OWN_CLOCK_EARLY_S:g} s by a tool's own clock)",
        "what": (f"{len(early)} part(s) started before their due time, a fault of the "
                 f"run ({'; '.join(early[:4])}{'; ...' if len(early) > 4 else ''})"
                 if early else f"none of {total} scheduled parts started early")}}


def idle_rtt_limits(base_ms):
    """(lowest, highest) acceptable median idle RTT for a configured base RTT, ms."""
    return (base_ms - IDLE_RTT_BELOW_MS,
            base_ms + max(IDLE_RTT_SLACK_MS, IDLE_RTT_SLACK_SHARE * base_ms))


def check_idle_rtt(record):
    """The RTT measured before the traffic against the configured base RTT."""
    idle = record.get("idle_rtt") or {}
    base = record.get("base_rtt_ms")
    p50 = idle.get("p50_ms")
    if not _num(base) or not _num(p50):
        return {}
    lo, hi = idle_rtt_limits(base)
    return {"idle_rtt": {
        "value": round(p50, 3), "limit": f"{lo:.2f} to {hi:.2f} ms (base {base:g} ms)",
        "ok": lo <= p50 <= hi, "base_rtt_ms": base, **{k: idle.get(k) for k in
                                                        ("min_ms", "p90_ms", "max_ms",
                                                         "samples")},
        "what": f"idle RTT p50 {p50:.2f} ms against a configured {base:g} ms"}}


def check_overrun(record, handshake_s=0.0):
    """The traffic phase ended within MAX_OVERRUN_S of its scheduled end, beyond the
    longest time a flow took from its launch to iperf3's time zero (``handshake_s``: its
    control exchange behind the queue; each flow's -t counts from there)."""
    over = record.get("traffic_overrun_s")
    if not _num(over):
        return {}
    excess = over - max(0.0, handshake_s or 0.0)
    return {"traffic_overrun": {
        "value": round(excess, 3), "limit": f"<= {MAX_OVERRUN_S} s",
        "ok": excess <= MAX_OVERRUN_S, "overrun_s": round(over, 3),
        "handshake_s": round(handshake_s or 0.0, 3),
        "what": f"the traffic ended {over:.1f} s after its scheduled end "
                f"({excess:.1f} s more than the flows' start-up behind the queue)"}}


def check_goodput(run, metrics_rows=None):
    """Goodput per direction can not exceed the link's rate."""
    if metrics_rows is None:
        return {}
    params = run.params
    fwd = params.get("bottleneck_mbit")
    rev = params.get("reverse_mbit") or fwd
    out = {}
    for r in metrics_rows:
        if r["scope"] != "network" or not r["metric"].startswith("goodput_") \
                or not r["metric"].endswith("_mbit"):
            continue
        direction = r["metric"][len("goodput_"):-len("_mbit")]
        rate = rev if direction == "down" else fwd
        if not _num(rate):
            continue
        share = r["value"] / rate
        out[f"goodput_possible:{direction}"] = {
            "value": round(share, 4), "limit": f"<= {MAX_GOODPUT_SHARE}",
            "ok": share <= MAX_GOODPUT_SHARE, "goodput_mbit": round(r["value"], 4),
            "rate_mbit": rate,
            "what": f"{direction} goodput {r['value']:.2f} Mbit/s on a {rate:g} Mbit/s link"}
    return out


def assess(run, metrics_rows=None):
    """The health verdict of ``run`` (a Run or a run directory); see the module doc."""
    if not hasattr(run, "record"):
        run = load_run(run)
    rec = run.record
    checks = {}
    checks.update(check_work_conservation(run))
    checks.update(check_controller_rate(run))
    checks.update(check_departures(run))
    checks.update(check_senders(run))
    checks.update(check_sampler(rec))
    checks.update(check_flows(rec))
    checks.update(check_early_starts(rec))
    checks.update(check_idle_rtt(rec))
    checks.update(check_overrun(rec, checks.get("flows_on_time", {}).get(
        "time_zero_after_launch_max_s", 0.0)))
    checks.update(check_goodput(run, metrics_rows))
    failed = {name: f"{c['what']}: {c['value']} (required {c['limit']})"
              for name, c in checks.items() if c["ok"] is False}
    faults = [line for name, line in failed.items() if checks[name].get("fault")]
    problems = [line for name, line in failed.items() if not checks[name].get("fault")]
    judged = [c for c in checks.values() if c["ok"] is not None]
    verdict = ("faulty" if faults else "degraded" if problems
               else "healthy" if judged else "unknown")
    return {"verdict": verdict, "faults": faults, "problems": problems, "checks": checks,
            "thresholds": THRESHOLDS}


#: Verdicts of runs that did not measure the network: left out of means and figures.
NOT_MEASURED = ("degraded", "faulty")


def verdict_of(record):
    """The verdict a record holds ('healthy', 'degraded', 'faulty', 'unknown'),
    'unknown' if none."""
    h = record.get("health") if isinstance(record, dict) else None
    return (h or {}).get("verdict", "unknown")


def headline(health):
    """One line for a terminal: 'healthy (work conservation 0.99, ...)' or the problems."""
    if not health:
        return "health: unknown (not assessed)"
    checks = health.get("checks", {})
    figs = []
    for name, c in checks.items():
        if c.get("value") is None:
            continue
        short = name.split(":")[0].replace("_", " ")
        figs.append(f"{short} {c['value']}" + (" (not judged)" if c.get("ok") is None
                                                else ""))
    line = f"health: {health['verdict']}"
    if figs:
        line += f" ({', '.join(figs[:6])})"
    if health.get("faults"):
        line += ("\n  a fault of the run (its schedule, not the emulator):\n    "
                 + "\n    ".join(health["faults"]))
    if health.get("problems"):
        line += "\n  the emulator fell behind:\n    " + "\n    ".join(health["problems"])
    return line
