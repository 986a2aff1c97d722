"""Rate scaling: a study's rates brought down to what this machine sustains, with every
delay kept.

Under TCG the project VM cannot forward the studies' bottleneck rates at full
utilization (docs/PLATFORM.md, docs/HEALTH.md): :func:`rate_cap_mbit` says how fast this
machine's bottleneck may go (env ``BUFFERBLOAT_MAX_MBIT`` overrides), and
:func:`scale_to_rate` scales a study's rates and buffers by one factor, so that every
delay (a buffer's drain time, an AQM target, the propagation delay) stays the study's;
:func:`scale_traffic_rates` scales the traffic's own rates by the same factor.
``Scenario.build`` applies it; the run records it (``scaling`` in result.json, part of
the run's identity).
"""

import math
import os

from .params import env_number

#: Under TCG the project VM forwards ~57 Mbit/s at most with nothing else running
#: (docs/PLATFORM.md); with flows, pings and the 10 ms sampler sharing its 2 vCPUs, 20 Mbit/s
#: is what it sustains at full utilization. Env BUFFERBLOAT_MAX_MBIT overrides (0: none).
TCG_MAX_MBIT = 20.0
MAX_MBIT_ENV = "BUFFERBLOAT_MAX_MBIT"


def rate_cap_mbit(scn=None):
    """The highest bottleneck rate this machine sustains, or None (no scaling). Under
    TCG a scenario whose bottleneck is loaded both ways (``aqm_both_ways``: B's RRUL)
    gets half the cap per direction: 20 Mbit/s each way measured work conservation
    0.86 and 11 % sampler misses, 10 Mbit/s each way 0.998 (docs/HEALTH.md)."""
    cap = _machine_cap_mbit()
    if cap and scn is not None and scn.params.get("aqm_both_ways") \
            and os.environ.get(MAX_MBIT_ENV) is None:
        return cap / 2
    return cap


def _machine_cap_mbit():
    cap = env_number(MAX_MBIT_ENV, None, 0, math.inf, "a rate in Mbit/s, or 0 for no cap")
    if cap is not None:
        return cap or None
    if os.environ.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg":
        return TCG_MAX_MBIT
    return None


#: bytes-valued qdisc parameters that set an operating point (scaled with the rate)
_SCALED_QDISC_BYTES = ("limit_bytes", "min_bytes", "max_bytes")


def scale_to_rate(params, qparams, knobs, max_rate_mbit):
    """Scale a study's rates and buffers by f = max_rate_mbit / bottleneck rate so that
    every *delay* stays the study's: a buffer of B bytes at rate R drains in 8B/R, so B
    scales with R (packet buffers too, at least 2 packets); RED's thresholds (bytes) too;
    AQM delay targets, propagation delays and loss stay; UDP/iperf rates scale. Returns
    (params, qparams, knobs, record of what changed)."""
    from .qdisc import KINDS
    rate = float(params.get("bottleneck_mbit", 10.0))
    f = max_rate_mbit / rate
    params, qparams, knobs = dict(params), dict(qparams), dict(knobs)
    changed = {"bottleneck_mbit": (rate, max_rate_mbit)}
    params["bottleneck_mbit"] = max_rate_mbit
    kind = params.get("qdisc", "fifo")
    if params.get("buffer_pkts") is not None and kind == "fifo":
        new = max(2, round(params["buffer_pkts"] * f))
        changed["buffer_pkts"] = (params["buffer_pkts"], new)
        params["buffer_pkts"] = new
    if params.get("buffer_bytes") is not None:
        new = max(3028, round(params["buffer_bytes"] * f))
        changed["buffer_bytes"] = (params["buffer_bytes"], new)
        params["buffer_bytes"] = new
    if kind == "red":
        defaults = {p.name: p.default for p in KINDS["red"].params}
        for key in _SCALED_QDISC_BYTES:
            if key == "limit_bytes" and params.get("buffer_bytes") is not None:
                continue
            old = qparams.get(key, defaults.get(key))
            if old is not None:
                qparams[key] = max(1514, round(float(old) * f))
                changed[f"qdisc.{key}"] = (old, qparams[key])
    return params, qparams, knobs, {"factor": f, "max_rate_mbit": max_rate_mbit,
                                    "changed": changed}


#: traffic spec fields that are rates (scaled with the bottleneck)
TRAFFIC_RATE_FIELDS = ("rate_mbit", "rate_kbit")


def scale_traffic_rates(spec, factor):
    """Scale the numeric rates of a traffic ``spec`` (in place) by ``factor``; a rate
    given as ``"bottleneck"`` follows the (scaled) link by itself."""
    for key in TRAFFIC_RATE_FIELDS:
        if isinstance(spec.get(key), (int, float)):
            spec[key] = spec[key] * factor
    return spec
