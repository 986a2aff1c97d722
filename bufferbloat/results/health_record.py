"""The health checks that the run's record alone answers: did the sampler keep its ticks,
did every scheduled part start on time (late: the emulator fell behind; early: a fault
of the run), was the idle RTT the configured one, did the traffic end on time.

Each check takes the record (result.json as a dict) and returns {name: {"value",
"limit", "ok", "what", ...}} ({} when the record does not say);
:func:`bufferbloat.results.health.assess` gathers them into the verdict. The thresholds
are justified by measurements in docs/design/health.md.
"""

import math

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
#: at 60, the netperfmeter kind's preconnect).
MAX_OWN_CLOCK_EARLY_S = 1.0
#: The idle RTT before traffic may exceed the configured base RTT by at most
#: max(IDLE_RTT_SLACK_MS, IDLE_RTT_SLACK_SHARE x base) at its median (TCG adds
#: 0.8-1.1 ms of its own and ~0.3 ms per netem stage).
IDLE_RTT_SLACK_MS = 3.0
IDLE_RTT_SLACK_SHARE = 0.10
#: ... and must not be below it by more than this (the delay emulation did not work).
IDLE_RTT_BELOW_MS = 0.5
#: The traffic phase may end at most this long after its scheduled end, beyond the
#: flows' start-up and CLOSING_TRIPS x the queue's drain.
MAX_OVERRUN_S = 3.0
#: How many times iperf3's closing exchange crosses the forward queue before the client
#: may exit: its TEST_END, then its results (the server answers on the way back); the
#: flow's unsent data keeps the queue as full as it was meanwhile. Measured: f1's FIFO
#: on a square wave ended 5.0 s late with 1.8 s of queue at its scheduled end.
CLOSING_TRIPS = 2


def is_finite_number(x):
    """Whether ``x`` is a finite number (a bool is not one), as a record's field must be
    to be judged."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_sampler(record):
    """The sampler's missed-tick share and achieved period."""
    st = record.get("sampler") or {}
    samples, missed = st.get("samples"), st.get("missed_ticks")
    if not is_finite_number(samples) or not is_finite_number(missed) or samples + missed <= 0:
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
                 if is_finite_number(entry.get(k))), (None, None))


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
        if is_finite_number(s.get("t_start")):
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
    at the run's t0 + its start, 2.7-3.0 s early). Each is named with its
    offset: how early, and its due time and start against the traffic's origin."""
    origin = record.get("traffic_start_s")
    origin = origin if is_finite_number(origin) else 0.0
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
    if not is_finite_number(base) or not is_finite_number(p50):
        return {}
    lo, hi = idle_rtt_limits(base)
    return {"idle_rtt": {
        "value": round(p50, 3), "limit": f"{lo:.2f} to {hi:.2f} ms (base {base:g} ms)",
        "ok": lo <= p50 <= hi, "base_rtt_ms": base, **{k: idle.get(k) for k in
                                                        ("min_ms", "p90_ms", "max_ms",
                                                         "samples")},
        "what": f"idle RTT p50 {p50:.2f} ms against a configured {base:g} ms"}}


def check_overrun(record, handshake_s=0.0, drain_s=0.0):
    """The traffic phase ended within MAX_OVERRUN_S of its scheduled end, beyond the
    longest time a flow took from its launch to iperf3's time zero (``handshake_s``: its
    control exchange behind the queue; each flow's -t counts from there) and the time
    the queue held at the scheduled end took to drain (``drain_s``), CLOSING_TRIPS
    times (the tools' closing exchange crosses it that often)."""
    over = record.get("traffic_overrun_s")
    if not is_finite_number(over):
        return {}
    excess = over - max(0.0, handshake_s or 0.0) - CLOSING_TRIPS * max(0.0, drain_s or 0.0)
    return {"traffic_overrun": {
        "value": round(excess, 3), "limit": f"<= {MAX_OVERRUN_S} s",
        "ok": excess <= MAX_OVERRUN_S, "overrun_s": round(over, 3),
        "handshake_s": round(handshake_s or 0.0, 3), "drain_s": round(drain_s or 0.0, 3),
        "what": f"the traffic ended {over:.1f} s after its scheduled end "
                f"({excess:.1f} s more than the flows' start-up and {CLOSING_TRIPS} "
                "drains of the queue that their closing exchange waits behind)"}}
