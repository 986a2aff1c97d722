"""Rate scaling: a study's rates brought down to what this machine sustains, with every
delay kept.

Under TCG the project VM cannot forward the studies' bottleneck rates at full
utilization (docs/design/platform.md, docs/design/health.md): :func:`rate_cap_mbit` says how fast this
machine's bottleneck may go (env ``BUFFERBLOAT_MAX_MBIT`` overrides), and
:func:`scale_to_rate` scales a study's rates and buffers by one factor, so that every
delay (a buffer's drain time, an AQM target, the propagation delay) stays the study's;
:func:`scale_traffic_rates` scales the traffic's own rates by the same factor.
``Scenario.build`` applies it; the run records it (``scaling`` in result.json, part of
the run's identity).
"""

import math
import os

from bufferbloat.core.errors import UsageError
from bufferbloat.core.machine import under_tcg
from bufferbloat.core.params import MIN_RATE_MBIT, env_number
from bufferbloat.net.qdiscs import DEFAULT_KIND, KINDS
from bufferbloat.net.qdiscs import defaults as param_defaults

#: Under TCG the project VM forwards ~57 Mbit/s at most with nothing else running
#: (docs/design/platform.md); with flows, pings and the 10 ms sampler sharing its 2 vCPUs, 20 Mbit/s
#: is what it sustains at full utilization. Env BUFFERBLOAT_MAX_MBIT overrides (0: none).
TCG_MAX_MBIT = 20.0
MAX_MBIT_ENV = "BUFFERBLOAT_MAX_MBIT"


def rate_cap_mbit(scn=None):
    """The highest bottleneck rate this machine sustains, or None (no scaling). Under
    TCG a scenario whose bottleneck is loaded both ways (:func:`loaded_both_ways`: B's RRUL)
    gets half the cap per direction: 20 Mbit/s each way measured work conservation
    0.86 and 11 % sampler misses, 10 Mbit/s each way 0.998 (docs/design/health.md)."""
    cap = _machine_cap_mbit()
    if cap and scn is not None and os.environ.get(MAX_MBIT_ENV) is None:
        return per_direction_cap(scn, cap)
    return cap


def per_direction_cap(scn, cap=TCG_MAX_MBIT):
    """The bottleneck cap of ``scn`` from a machine's ``cap`` (default the TCG VM's):
    half of it for a bottleneck loaded both ways (:func:`loaded_both_ways`)."""
    return cap / 2 if loaded_both_ways(scn) else cap


def loaded_both_ways(scn):
    """Whether a scenario loads its bottleneck in both directions: its AQM both ways, a
    queue of the receiver's own (``reverse_qdisc``), or an RRUL load."""
    p = scn.params
    return bool(p.get("aqm_both_ways") or p.get("reverse_qdisc")
                or two_way_traffic(scn.traffic))


def two_way_traffic(traffic):
    """Whether traffic specs load the bottleneck in both directions (an RRUL load)."""
    return any(isinstance(t, dict) and t.get("kind") == "rrul" for t in traffic or ())


def _machine_cap_mbit():
    what = f"a rate in Mbit/s, at least {MIN_RATE_MBIT:g}, or 0 for no cap"
    cap = env_number(MAX_MBIT_ENV, None, 0, math.inf, what)
    if cap and cap < MIN_RATE_MBIT:     # scaled to it, the bottleneck could not be set
        raise UsageError(f"invalid value for {MAX_MBIT_ENV}: "
                         f"{os.environ.get(MAX_MBIT_ENV)!r} (allowed: {what})")
    if cap is not None:
        return cap or None
    if under_tcg():
        return TCG_MAX_MBIT
    return None


def scale_to_rate(params, qparams, knobs, max_rate_mbit):
    """Scale a study's rates and buffers by f = max_rate_mbit / bottleneck rate so that
    every *delay* stays the study's: a buffer of B bytes at rate R drains in 8B/R, so B
    scales with R (packet buffers too, at least 2 packets); a kind's operating point in bytes (its ``scaled_bytes``: RED's thresholds) too;
    AQM delay targets, propagation delays and loss stay; UDP/iperf rates scale. Returns
    (params, qparams, knobs, record of what changed)."""
    rate = float(params.get("bottleneck_mbit", 10.0))
    f = max_rate_mbit / rate
    params, qparams, knobs = dict(params), dict(qparams), dict(knobs)
    changed = {"bottleneck_mbit": (rate, max_rate_mbit)}
    params["bottleneck_mbit"] = max_rate_mbit
    info = KINDS[params.get("qdisc", DEFAULT_KIND)]
    if params.get("buffer_pkts") is not None and info.buffer_pkts_scales():
        new = max(2, round(params["buffer_pkts"] * f))
        changed["buffer_pkts"] = (params["buffer_pkts"], new)
        params["buffer_pkts"] = new
    if params.get("buffer_bytes") is not None:
        new = max(3028, round(params["buffer_bytes"] * f))
        changed["buffer_bytes"] = (params["buffer_bytes"], new)
        params["buffer_bytes"] = new
    if info.scaled_bytes:
        defaults = param_defaults(info)
        for key in info.scaled_bytes:
            if key == "limit_bytes" and params.get("buffer_bytes") is not None:
                continue
            old = qparams.get(key, defaults.get(key))
            if old is not None:
                qparams[key] = max(1514, round(float(old) * f))
                changed[f"qdisc.{key}"] = (old, qparams[key])
    return params, qparams, knobs, {"factor": f, "max_rate_mbit": max_rate_mbit,
                                    "changed": changed}


#: traffic spec fields that are rates (scaled with the bottleneck), with their floor
#: (bufferbloat/core/params.py: MIN_RATE_MBIT) in the field's own unit
TRAFFIC_RATE_FIELDS = ("rate_mbit", "rate_kbit")
_RATE_FLOORS = {"rate_mbit": (MIN_RATE_MBIT, "Mbit/s"),
                "rate_kbit": (MIN_RATE_MBIT * 1000, "kbit/s")}


def scale_traffic_rates(spec, factor, names=None):
    """Scale the numeric rates of a traffic ``spec`` (in place) by ``factor``; a rate
    given as ``"bottleneck"`` follows the (scaled) link by itself. A rate that the
    scaling (or the spec's ``rate_scale``, a fraction of it) would bring below the floor
    every rate has is refused: UsageError naming ``names[field]``, the knob it came from,
    else the field."""
    for key in TRAFFIC_RATE_FIELDS:
        value = spec.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            floor, unit = _RATE_FLOORS[key]
            share = spec.get("rate_scale")
            share = share if isinstance(share, (int, float)) and share > 0 else 1
            if value >= floor > value * factor * share:
                why = ([f"x{share:g} (rate_scale)"] if share != 1 else []) + (
                    [f"x{factor:.4g} (rate scaling: the bottleneck brought down to this "
                     f"machine's rate, {MAX_MBIT_ENV})"] if factor != 1 else [])
                raise UsageError(
                    f"invalid value for {(names or {}).get(key, key)}: {value:g} (allowed "
                    f"here: >= {floor / factor / share:.4g} {unit}: {' and '.join(why)} "
                    f"make(s) it {value * factor * share:.3g} {unit}, below the floor of "
                    f"any rate, {floor:g} {unit})")
            spec[key] = value * factor
    return spec


# ----------------------------------------------------------------------------- evidence
#: Where the evidence is that a scaled run is the study's run:
#: bench/bench_scaling.py ran each scaled scenario's quick points at three caps in the
#: TCG VM, and this file holds its tables.
EVIDENCE = "docs/design/scaling.md"
#: What a rate scaling keeps, per family, as measured there (three caps, healthy runs):
#: these of a scaled run's numbers hold at the study's rate.
HOLDS = {
    "E": ("utilization and goodput as a share of the link (within 0.04 at 10-20 Mbit/s; "
          "FIFO lost 0.13 at 5)", "queueing delay in ms under FIFO, RED, PIE and CAKE "
          "(within 3.5 ms)", "Jain's index (within 0.05)"),
    "B": ("utilization and goodput as a share of the link (within 0.03 at 5-10 Mbit/s "
          "each way; measured on B's dumbbell variant, PIE both ways, the default until "
          "2026-11-27: the testbed's caps are not yet measured)",
          "Jain's index (within 0.01)", "latency's order by PIE's target "
          "(it rises with the target at every cap)"),
}
#: What it does not keep, per family, and why (physics; the measured spread in EVIDENCE).
DOES_NOT_HOLD = {
    "E": (("drop %", "falls as the rate rises, FIFO 11.8/6.2/2.6 % at 5/10/20 Mbit/s: a "
                     "flow's window in packets grows with the rate and TCP's loss rate "
                     "falls as its window grows; at 80 Mbit/s it is lower still"),
          ("CoDel's and FQ-CoDel's queueing delay", "rises as the rate falls (FQ-CoDel "
                                                    "11.8/16.9/23.3 ms at 20/10/5): one "
                                                    "packet lasts longer against their "
                                                    "5 ms target")),
    "B": (("PIE's delay and the latency under load", "above the target by more the lower "
           "the rate (target 5 ms: 31/16/11 ms at 2.5/5/10 Mbit/s each way): a few "
           "packets per flow at these rates; at the study's 100 Mbit/s expect it nearer "
           "the target"),
          ("drop %", "falls as the rate rises (target 10 ms: 5.3/2.6/0.5 %)")),
}
#: what no rate scaling keeps, for every family
NEVER_HOLDS = (("packets in the queue", "a delay held fixed is rate x delay"),)


def evidence_lines(scaling, family=None):
    """What a run's ``scaling`` record (None: not scaled) of a study ``family`` means for
    its numbers: which hold at the study's rate and which do not, with the evidence's
    path; [] when the run was not scaled."""
    if not scaling or not scaling.get("changed"):
        return []
    rate = scaling["changed"].get("bottleneck_mbit")
    what = (f"{rate[0]:g} -> {rate[1]:g} Mbit/s" if rate else
            f"to {scaling.get('max_rate_mbit')} Mbit/s")
    holds = HOLDS.get(family)
    not_held = DOES_NOT_HOLD.get(family, ()) + NEVER_HOLDS
    return [f"rate-scaled x{scaling.get('factor', 0):.3g} ({what}; every delay kept): "
            + (f"these hold at the study's rate: {'; '.join(holds)}" if holds else
               "not measured for this family at several rates"),
            "  these do not: " + "; ".join(f"{w} ({why})" for w, why in not_held),
            f"  measured at three rates: {EVIDENCE} (bench/bench_scaling.py)"]
