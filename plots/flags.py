"""Warnings where a run's results contradict theory beyond a tolerance.

:func:`flags` returns human-readable sentences; an empty list means nothing looked
wrong. The checks and their tolerances:

- **FIFO full-queue RTT** (qdisc fifo, ping data, a buffer size): the largest ping RTT
  should reach the full-queue bound (:func:`plots.common.full_queue_rtt_ms`: base RTT +
  buffer / rate, with the probes' share of a packet-limited buffer). Flagged when it is
  more than :data:`FIFO_RTT_TOL` (30 %) below ("was the buffer filled?") or above
  ("more than a full buffer: another queue?") the bound.
- **AQM delay vs target** (pie/codel/fq_codel): the median queueing delay (the AQM's
  own ``aqm_delay_p50_ms`` when reported, else ``qdelay_p50_ms``) more than
  :data:`TARGET_FACTOR` (2x) the target and more than :data:`TARGET_SLACK_MS` (5 ms)
  above it. The warning says when one full frame's transmission time at the link rate
  exceeds the target (CoDel's 5 ms at 1.5 Mbit/s, where a frame takes 8 ms), or when the
  flows at their smallest window hold more than the target
  (:func:`bufferbloat.results.theory.min_window_floor_ms`: RRUL's 4 flows at 10 Mbit/s).
- **Utilization**: the bottleneck's utilization (link metric, after warm-up) below
  :data:`MIN_UTILIZATION` (0.8) while TCP was sending (not on a link whose rate varied:
  there the window lags each step up by physics, and the replay's health check judges
  the link while backlogged), or the aggregate TCP throughput
  above the link rate by more than :data:`OVER_RATE_TOL` (5 %) in either direction
  (RRUL loads both).
- **Fairness**: Jain's index below :data:`MIN_JAIN` (0.8) for two or more flows with the
  same CCA on the same path (a dumbbell, one sender).
- **Status**: a run whose status is not ``ok``.
- **Health** (bufferbloat/results/health.py): a run whose verdict is ``degraded`` gets one flag,
  "the emulator fell behind", with its figures; the symptom flags above (utilization,
  fairness, throughput, delays) are then not raised: they would blame the flows for what
  the emulator did.
"""

from bufferbloat.plots.common import (
    as_run,
    full_queue_rtt_ms,
    metric_value,
    metric_values,
    run_metrics,
    series,
)
from bufferbloat.plots.totals import DOWN, UP
from bufferbloat.results import theory

FIFO_RTT_TOL = 0.30
TARGET_FACTOR = 2.0
TARGET_SLACK_MS = 5.0
MIN_UTILIZATION = 0.80
OVER_RATE_TOL = 0.05
MIN_JAIN = 0.80
UP_DIR, DOWN_DIR = "up", "down"


def _equal_flows(run):
    """Whether the run's TCP flows share CCA and path (one sender on a dumbbell)."""
    tcp = series(run, "tcp")
    if tcp is None:
        return False
    ccas = set(tcp["cca"].tolist()) if "cca" in tcp else set()
    hosts = set(tcp["host"].tolist()) if "host" in tcp else set()
    return len(ccas) <= 1 and len(hosts) <= 1


def _flows_by_direction(run, rows):
    """{direction: [each flow's throughput, Mbit/s]}: each direction of the path has its
    own bottleneck. A flow's direction is ``down`` for RRUL's ``*-down-N`` labels or an
    iperf3 flow recorded with direction ``down``, else ``up``."""
    directions = {}
    for entry in run.traffic_results:
        if entry.get("direction"):
            for label in [entry.get("flow")] + list(entry.get("streams") or []):
                if label:
                    directions[label] = entry["direction"]
    out = {}
    for flow, mbit in metric_values(rows, "throughput_mbit", "flow").items():
        direction = "down" if DOWN.search(flow) else "up" if UP.search(flow) else \
            directions.get(flow, "up")
        out.setdefault(direction, []).append(mbit)
    return out


def _link_target(run, link, kind, target):
    """(kind, target ms) of the AQM on ``link`` (``DEV:KIND`` of the link metrics): the
    bottleneck's, or the way back's own (:func:`bufferbloat.results.theory.reverse_target_ms`:
    study B's receiver NIC runs fq_codel at its default 5 ms, whatever PIE's target)."""
    link_kind = link.rsplit(":", 1)[-1] if ":" in link else kind
    if link_kind == kind:
        return kind, target
    return link_kind, theory.reverse_target_ms(run)


def _floor_ms(run, rows):
    """(the smallest standing queue of the busier direction's TCP flows, ms, their
    number): :func:`bufferbloat.results.theory.min_window_floor_ms`."""
    flows = max(map(len, _flows_by_direction(run, rows).values()), default=0)
    if not flows or not run.bottleneck_mbit or run.base_rtt_ms is None:
        return 0.0, flows
    return theory.min_window_floor_ms(flows, run.bottleneck_mbit, run.base_rtt_ms), flows


def flags(run, rows=None):
    """Human-readable warnings for ``run`` (a Run or a run directory), computed from its
    metrics (``rows``: metric rows; default: :func:`plots.common.run_metrics`). See the
    module docstring for the checks and tolerances."""
    run = as_run(run)
    rows = run_metrics(run) if rows is None else rows
    out = []
    if run.status != "ok":
        out.append(f"run status {run.status!r}"
                   + (f": {run.error}" if run.error else ""))
    health = run.health
    if run.verdict == "faulty":
        out.append("a part started before its due time (health: faulty), a fault of the "
                   "run, not the emulator: " + "; ".join(health.get("faults", [])))
        return out
    if run.verdict == "degraded":
        out.append("the emulator fell behind (health: degraded), so this run measured the "
                   "emulator, not the network: " + "; ".join(health.get("problems", [])))
        return out
    kind, _ = run.qdisc

    # on a link whose rate varied a full buffer's drain time spans the trace's rates:
    # filled is judged at the highest rate, "more than a full buffer" at the lowest
    span = theory.varying_rate_range_mbit(run)
    low_bound = full_queue_rtt_ms(run, span[1] if span else None)
    high_bound = full_queue_rtt_ms(run, span[0] if span else None)
    rtt_max = max(metric_values(rows, "rtt_max_ms", "ping").values(), default=None)
    at = (f" at {span[1]:g}" if span else "", f" at {span[0]:g} Mbit/s" if span else "")
    if low_bound and high_bound and rtt_max is not None:
        below = (low_bound - rtt_max) / low_bound
        above = (rtt_max - high_bound) / high_bound
        if below > FIFO_RTT_TOL:
            out.append(f"FIFO RTT {below * 100:.0f} % below the full-queue bound{at[0]} "
                       f"(max ping RTT {rtt_max:.0f} ms vs {low_bound:.0f} ms): was the "
                       "buffer filled?")
        elif above > FIFO_RTT_TOL:
            out.append(f"FIFO RTT {above * 100:.0f} % above the full-queue bound{at[1]} "
                       f"(max ping RTT {rtt_max:.0f} ms vs {high_bound:.0f} ms): another "
                       "queue on the path?")

    target = run.aqm_target_ms
    rate = run.bottleneck_mbit
    frame_ms = theory.queue_delay_ms(1, rate) if rate else None
    if target is not None:
        delays = metric_values(rows, "aqm_delay_p50_ms", "link") or \
            metric_values(rows, "qdelay_p50_ms", "link")
        floor = _floor_ms(run, rows) if delays else (0.0, 0)
        for link, p50 in delays.items():
            link_kind, link_target = _link_target(run, link, kind, target)
            if link_target is None or link_target <= 0:
                continue
            if p50 > TARGET_FACTOR * link_target and p50 - link_target > TARGET_SLACK_MS:
                note = ""
                if frame_ms and frame_ms > link_target:
                    note = (f"; one full frame takes {frame_ms:.1f} ms at {rate:g} Mbit/s, "
                            f"more than the target")
                elif floor[0] > link_target:
                    note = (f"; {floor[1]} flows at their smallest window hold "
                            f"{floor[0]:.1f} ms at {rate:g} Mbit/s over a "
                            f"{run.base_rtt_ms:g} ms path: the target is below what any "
                            "AQM can hold")
                out.append(f"{link_kind.upper()} queueing delay p50 {p50 / link_target:.1f}x "
                           f"its target ({p50:.1f} ms vs {link_target:g} ms at {link}{note})")

    util = metric_values(rows, "utilization", "link")
    sending = metric_value(rows, "aggregate_throughput_mbit", "network")
    # on a varying link an AQM's window lags each step up of the rate (Cubic regrows
    # it at ~0.5 packet per RTT): its share of the mean is physics; what the link did
    # while backlogged is the replay's health check (link_replay), not a flag
    varying = theory.varying_rate_range_mbit(run) is not None
    for link, u in util.items():
        if u < MIN_UTILIZATION and sending and not varying:
            out.append(f"utilization {u * 100:.0f} %: the flow did not fill the link ({link})")
    delivered = {d: metric_value(rows, f"goodput_{d}_mbit", "network") for d in (UP_DIR,
                                                                                DOWN_DIR)}
    delivered = {d: v for d, v in delivered.items() if v is not None}
    per_flow = {d: sum(v) for d, v in _flows_by_direction(run, rows).items()}
    for direction, total in (delivered or per_flow).items():
        if rate and total > rate * (1 + OVER_RATE_TOL):
            out.append(f"{direction} throughput {total:.3g} Mbit/s above the link rate "
                       f"{rate:g} Mbit/s: is the shaper in place?")

    jain = metric_value(rows, "jain_fairness", "network")
    nflows = metric_value(rows, "flows", "network") or 0
    if jain is not None and nflows >= 2 and jain < MIN_JAIN and _equal_flows(run):
        out.append(f"Jain's index {jain:.2f} with {int(nflows)} equal flows (ideal 1)")
    return out
