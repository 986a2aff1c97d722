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
The checks are :mod:`~bufferbloat.results.health_series`' (what the series answer: the
link's work conservation, departure timing and controller rate, the senders, goodput)
and :mod:`~bufferbloat.results.health_record`' (what the record alone answers: the
sampler's ticks, the parts' start times, the idle RTT, the overrun); their thresholds
are justified by measurements in docs/design/health.md. Here: the verdict and its one line.
"""

from bufferbloat.results import capacity
from bufferbloat.results.health_record import (
    IDLE_RTT_SLACK_MS,
    IDLE_RTT_SLACK_SHARE,
    MAX_MISSED_TICKS,
    MAX_OVERRUN_S,
    MAX_OWN_CLOCK_EARLY_S,
    MAX_START_EARLY_S,
    MAX_START_LATE_S,
    check_early_starts,
    check_flows,
    check_idle_rtt,
    check_overrun,
    check_sampler,
    is_finite_number,
)
from bufferbloat.results.health_series import (
    BACKLOG_BYTES,
    DEPARTURE_SLACK_MS,
    MAX_APP_LIMITED_SHARE,
    MAX_GOODPUT_SHARE,
    MIN_BACKLOGGED_S,
    MIN_CONTROLLER_RATE_SHARE,
    MIN_DEPARTURE_GAPS,
    MIN_WORK_CONSERVATION,
    check_controller_rate,
    check_departures,
    check_goodput,
    check_senders,
    check_work_conservation,
)
from bufferbloat.results.metrics_queue import drain_at_s
from bufferbloat.results.records import load_run
from bufferbloat.results.steady_state import unsettled

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


def _drain_at_end_s(run):
    """The queues' drain time at the traffic's scheduled end, s (0 if unknown)."""
    start, dur = run.record.get("traffic_start_s"), run.record.get("duration_s")
    if not is_finite_number(start) or not is_finite_number(dur):
        return 0.0
    return drain_at_s(run, start + dur)


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
        "time_zero_after_launch_max_s", 0.0), _drain_at_end_s(run)))
    checks.update(check_goodput(run, metrics_rows))
    checks.update(capacity.health_checks(rec, checks))
    failed = {name: f"{c['what']}: {c['value']} (required {c['limit']})"
              for name, c in checks.items() if c["ok"] is False}
    faults = [line for name, line in failed.items() if checks[name].get("fault")]
    problems = [line for name, line in failed.items() if not checks[name].get("fault")]
    judged = [c for c in checks.values() if c["ok"] is not None]
    verdict = ("faulty" if faults else "degraded" if problems
               else "healthy" if judged else "unknown")
    out = {"verdict": verdict, "faults": faults, "problems": problems, "checks": checks,
           "thresholds": THRESHOLDS, "network": network_of(rec)}
    moving = unsettled(rec)
    if moving:       # the experiment's, not the emulator's: said, not a verdict of its own
        out["not_steady"] = (f"not at steady state: {', '.join(moving)} still moving at "
                             "the run's end (judged over its second half; a longer run "
                             "would settle it)")
    return out


def network_of(record):
    """{"reused": bool, "why": text} of the run's network: kept from the point before
    (bufferbloat/net/reuse.py) or built for it; None for a record from before networks
    were kept (each built its own)."""
    net = record.get("network") if isinstance(record, dict) else None
    got = (net or {}).get("reuse") if isinstance(net, dict) else None
    if not isinstance(got, dict):
        return None
    return {"reused": bool(got.get("reused")), "why": got.get("why")}


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
    if (health.get("network") or {}).get("reused"):
        line += "; on the network kept from the point before"
    if health.get("faults"):
        line += ("\n  a fault of the run (its schedule, not the emulator):\n    "
                 + "\n    ".join(health["faults"]))
    if health.get("problems"):
        line += "\n  the emulator fell behind:\n    " + "\n    ".join(health["problems"])
    if health.get("not_steady"):
        line += f"\n  {health['not_steady']}"
    return line
