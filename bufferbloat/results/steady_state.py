"""Where a run's headline series settle, and the warm-up its metrics are judged after.

A run's controllers take time to settle (PIE's drop probability rises for tens of
seconds at a low rate), so a fixed warm-up can judge a transient. Each run applies the
MSER-5 truncation rule (:mod:`bufferbloat.core.steady`) to the series its headline rests
on, within the traffic's time:

- ``queue_delay``: the bottleneck leaf's backlog / rate, ms (the qdisc sampler's ticks);
- ``aqm_prob``: the leaf's drop/mark probability, for a kind that reports one;
- ``goodput``: the leaf's departure rate, its sent-bytes counter over 0.5 s bins.

The warm-up used is the larger of the study's and the latest point where a series
settles (never more than half the traffic's time: MSER's limit). A series whose cut
presses against that limit has not settled: the run is then "not at steady state",
which its health and report say, and its metrics are judged over the second half.
"""

import math

import numpy as np

from bufferbloat.core.steady import mser
from bufferbloat.results.metrics_queue import leaf_groups, link_rate_mbit, queue_delay_ms
from bufferbloat.results.rows import counter_window

#: Bin of the departure rate, s
GOODPUT_BIN_S = 0.5
SERIES = ("queue_delay", "aqm_prob", "goodput")


def _series(run, start_s, end_s):
    """{name: (times since start, values)} of the bottleneck leaf's headline series."""
    groups = leaf_groups(run)
    if not groups:
        return {}
    (dev, _, _), mask = next(iter(groups.items()))
    q = run.series("qdisc")
    t = q["t"][mask]
    keep = (t >= start_s) & (t <= end_s)
    out = {}
    rate = link_rate_mbit(run, dev)
    if rate and "backlog_bytes" in q:
        out["queue_delay"] = (t[keep] - start_s,
                              queue_delay_ms(q["backlog_bytes"][mask][keep], rate))
    if "prob" in q and np.isfinite(q["prob"][mask][keep]).any():
        out["aqm_prob"] = (t[keep] - start_s, q["prob"][mask][keep])
    if "sent_bytes" in q:
        tt, vv = counter_window(t[keep], q["sent_bytes"][mask][keep], start_s)
        if tt.size > 2:
            edges = np.arange(tt[0], tt[-1] + GOODPUT_BIN_S, GOODPUT_BIN_S)
            at = np.interp(edges, tt, vv)
            rates = np.diff(at) * 8 / GOODPUT_BIN_S / 1e6
            out["goodput"] = (edges[1:] - start_s, rates)
    return out


def steady_state(run, warmup_s, start_s, end_s):
    """{warmup_s, settled, series: {name: {from_s, settled, judged}}} of ``run`` whose
    traffic ran from ``start_s`` to ``end_s`` (s since t0) with the study's ``warmup_s``:
    ``warmup_s`` the warm-up its metrics are judged after (s of traffic)."""
    if not math.isfinite(end_s):
        end_s = math.inf
    out, used, settled = {}, float(warmup_s), True
    for name, (t, v) in _series(run, start_s, end_s).items():
        ok = np.isfinite(v)
        t, v = t[ok], v[ok]
        res = mser(v.tolist())
        from_s = float(t[res["cut"]]) if res["judged"] and len(t) > res["cut"] else 0.0
        out[name] = {"from_s": round(from_s, 3), "settled": bool(res["settled"]),
                     "judged": bool(res["judged"])}
        if res["judged"]:
            used = max(used, from_s)
            settled = settled and res["settled"]
    return {"warmup_s": round(used, 3), "settled": settled, "series": out,
            "rule": "MSER-5 (batch means of 5 samples; cut at most half the series)"}


def unsettled(record):
    """The names of the series a record's steady-state check found unsettled ([] for a
    run that settled, or that has no such check)."""
    steady = record.get("steady_state") if isinstance(record, dict) else None
    if not isinstance(steady, dict):
        return []
    return [name for name, s in (steady.get("series") or {}).items()
            if isinstance(s, dict) and s.get("judged") and not s.get("settled")]
