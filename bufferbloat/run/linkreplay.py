"""A run's varying bottleneck (``link_trace``/``link_schedule``): the capacity loop
(:mod:`bufferbloat.measure.linkloop`) started on the run's clock before the traffic,
stopped with it, and its record: ``result.json``'s ``link_trace`` (the plan's summary,
the loop's stats, the replay's metrics and health) and ``series/capacity.csv``
(:mod:`bufferbloat.results.capacity`)."""

import os

from bufferbloat.measure.linkloop import start_loop
from bufferbloat.net.bottleneck import HTB_BURST_ENV, HTB_BURST_MS, htb_burst_bytes
from bufferbloat.results import capacity
from bufferbloat.results.records_layout import SERIES_DIR


def burst_ms():
    """The HTB burst the loop keeps at every rate, ms (0: tc's one MTU), as the plan's
    class has it (:func:`bufferbloat.net.bottleneck.htb_burst_bytes`)."""
    if htb_burst_bytes(1.0) is None:
        return 0.0
    return float(os.environ.get(HTB_BURST_ENV, HTB_BURST_MS))


#: record key -> (the loop's file names, capacity series): each direction that varies
DIRECTIONS = {"link_trace": ("link-trace", capacity.CAPACITY_CSV),
              "link_trace_up": ("link-trace-up", "capacity-up.csv")}


def _devices(topo, net):
    """{record key: (namespace or None, device)}: the bottleneck's egress, and the
    reverse direction's (the receiver's egress)."""
    bnl = topo.bottleneck
    return {"link_trace": net.bottleneck_dev,
            "link_trace_up": (bnl.b, net.intfs[(bnl.a, bnl.b)][1])}


def start(topo, net, run_dir, record, t0, rt_priority=0):
    """``({record key: loop}, None)`` (empty for a link that does not vary), or
    ``(loops started so far, why the next could not start)``."""
    loops = {}
    varying = [k for k in DIRECTIONS if getattr(topo, k, None) is not None]
    if not varying:
        return loops, None
    factor = (getattr(topo, "scaling", None) or {}).get("factor") or 1.0
    devices = _devices(topo, net)
    for key in varying:
        trace, (ns, dev) = getattr(topo, key), devices[key]
        where = dev if ns is None else f"{net.net[ns].pid}/{dev}"
        record[key] = dict(trace.summary(factor), text=trace.text, burst_ms=burst_ms())
        loop, why = start_loop(trace, where, os.path.join(run_dir, SERIES_DIR), t0,
                               factor=factor, burst_ms=burst_ms(),
                               rt_priority=rt_priority, name=DIRECTIONS[key][0])
        if why:
            return loops, why
        loops[key] = loop
    return loops, None


def stop(loops, record):
    """End the loops by PID; their stats into the record."""
    for key, loop in (loops or {}).items():
        record.setdefault(key, {})["loop"] = loop.stop()


def finish(run_dir, record):
    """``series/capacity.csv`` (``capacity-up.csv``) and the replay's metrics, per
    direction that varied; the forward direction's metrics (None: it did not vary)."""
    for key, (name, out) in DIRECTIONS.items():
        lt = record.get(key)
        if not isinstance(lt, dict):
            continue
        burst = max(1600, (lt.get("burst_ms") or 0) / 1e3 * (lt.get("max_mbit") or 0)
                    * 1e6 / 8)
        lt["metrics"] = capacity.record(os.path.join(run_dir, SERIES_DIR),
                                        burst_bytes=min(burst, 65536), name=name, out=out)
    return (record.get("link_trace") or {}).get("metrics")
