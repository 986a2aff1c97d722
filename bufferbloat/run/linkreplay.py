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


def start(topo, net, run_dir, record, t0, rt_priority=0):
    """``(loop, None)``, ``(None, None)`` for a link that does not vary, or
    ``(None, why it could not start)``."""
    trace = getattr(topo, "link_trace", None)
    if trace is None:
        return None, None
    ns, dev = net.bottleneck_dev
    where = dev if ns is None else f"{net.net[ns].pid}/{dev}"
    factor = (getattr(topo, "scaling", None) or {}).get("factor") or 1.0
    record["link_trace"] = dict(trace.summary(factor), text=trace.text,
                                burst_ms=burst_ms())
    return start_loop(trace, where, os.path.join(run_dir, SERIES_DIR), t0, factor=factor,
                      burst_ms=burst_ms(), rt_priority=rt_priority)


def stop(loop, record):
    """End the loop by PID; its stats into the record."""
    if loop is not None:
        record.setdefault("link_trace", {})["loop"] = loop.stop()


def finish(run_dir, record):
    """``series/capacity.csv`` and the replay's metrics (a run whose link varied)."""
    if "link_trace" not in record:
        return None
    burst = max(1600, (record["link_trace"].get("burst_ms") or 0) / 1e3
                * (record["link_trace"].get("max_mbit") or 0) * 1e6 / 8)
    m = capacity.record(os.path.join(run_dir, SERIES_DIR), burst_bytes=min(burst, 65536))
    record["link_trace"]["metrics"] = m
    return m
