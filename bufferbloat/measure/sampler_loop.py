"""The sampler process (``python3 -m bufferbloat.measure.sampler SPEC.json``,
:func:`run`): its readers and outputs opened (:class:`_Sources`), the loop on the
absolute grid t0 + k * tick that skips and counts the ticks it missed (:func:`_sample`),
then the outputs closed and ``series/sampler.json`` written (:func:`_stats`). The
spec, the outputs and the control-connection rule: :mod:`bufferbloat.measure.sampler`.
"""

import ctypes
import math
import os
import resource
import signal
import time

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.core.signals import stop_requests
from bufferbloat.core.stats import percentile
from bufferbloat.measure.qdisc_helper import merge_helper_stats, start_qdisc_helper
from bufferbloat.measure.sampler_flows import FlowGroup
from bufferbloat.measure.sampler_rows import RowWriter, qdisc_row
from bufferbloat.net import qdiscs
from bufferbloat.netlink import nlstats

DEFAULTS = {"period_s": 0.01, "flush_s": 0.5, "min_bytes_acked": 64 * 1024, "hold_s": 2.0,
            "filter": "bytecode", "discover_s": 0.1, "duration_s": None, "rt_priority": 1,
            "tcp_every": 1}
#: The sampler's (and its queue helper's) nice value when it is not real-time.
SAMPLER_NICE = -10


def _timely(rt_priority):
    """Wake up on time: a 1 us timer slack (default 50 us) and, if asked and allowed,
    SCHED_FIFO. Returns what was obtained, for sampler.json."""
    got = {}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        got["timer_slack_ns"] = 1000 if libc.prctl(29, 1000, 0, 0, 0) == 0 else None
    except OSError:
        got["timer_slack_ns"] = None  # PR_SET_TIMERSLACK = 29
    got["sched"] = "other"
    if not rt_priority:
        # no real-time (it would starve the softirq work that forwards the packets in a
        # CPU-bound TCG guest), but the fair scheduler's preference: a nice -10 task
        # that wakes every 10 ms runs first, and needs ~10 % of a vCPU
        try:
            os.setpriority(os.PRIO_PROCESS, 0, SAMPLER_NICE)
            got["sched"] = f"other, nice {SAMPLER_NICE}"
        except OSError as exc:
            got["sched"] = f"other (nice {SAMPLER_NICE} refused: {exc.strerror})"
    if rt_priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(rt_priority)))
            got["sched"] = f"fifo:{int(rt_priority)}"
        except OSError as exc:
            got["sched"] = f"other (SCHED_FIFO refused: {exc.strerror})"
    return got


def run(spec):
    """The sampler process's loop (until SIGTERM/SIGINT or ``duration_s``): its sources
    opened (:class:`_Sources`), the ticks sampled (:func:`_sample`), the outputs closed,
    the queue helper stopped and sampler.json written (:func:`_stats`); returns its
    stats."""
    spec = {**DEFAULTS, **spec}
    sched = _timely(spec["rt_priority"])
    period, t0 = float(spec["period_s"]), float(spec["t0"])
    tcp_every = max(1, int(spec["tcp_every"]))
    series = os.path.join(spec["out_dir"], "series")
    os.makedirs(series, exist_ok=True)
    stop = stop_requests((signal.SIGTERM, signal.SIGINT))
    src = _Sources(spec, series)

    tcp_period_ms = period * tcp_every * 1e3
    tick = period
    if src.helper:  # this loop only reads sockets: it ticks at the TCP period
        tick = period * tcp_every if src.groups else max(period * tcp_every, 0.1)
        tcp_every = 1
    cpu0 = time.process_time()
    ticks = _sample(spec, src, stop, tick, tcp_every)
    src.close()
    t_stop = time.monotonic()
    cst = src.helper.stop() if src.helper else None
    cpu = time.process_time() - cpu0
    stats = _stats(spec, src, ticks, cpu, tcp_period_ms, stop, sched)
    if src.helper:
        stats = merge_helper_stats(stats, cst, t_stop, t0, period)
    write_json_atomic(os.path.join(series, "sampler.json"), stats, allow_nan=True)
    return stats


class _Sources:
    """What the sampler process reads and writes: the compiled queue sampler (``helper``)
    or else a reader per qdisc device (``qreaders``), a :class:`FlowGroup` per sender
    namespace (``groups``), the CSV files (``qout``: None when the helper writes
    qdisc.csv; ``tout``), and what sampler.json says of the queue sampler
    (``qsampler``)."""

    def __init__(self, spec, series):
        self.helper, self.qsampler = None, "none (no qdisc devices)"
        if spec["qdisc_devs"]:
            self.helper, why = start_qdisc_helper(spec, series)
            self.qsampler = "c" if self.helper else f"python ({why})"
        self.qreaders = [] if self.helper else [
            (d["dev"], nlstats.QdiscReader(d["dev"], d.get("pid"), decoder=qdiscs))
            for d in spec["qdisc_devs"]]
        by_ns = {}
        for f in spec["flows"]:
            by_ns.setdefault((f["host"], f.get("pid")), []).append(f)
        self.groups = [FlowGroup(fs, spec["filter"], spec["min_bytes_acked"], spec["hold_s"],
                                 float(spec["discover_s"])) for fs in by_ns.values()]
        # the helper has written qdisc.csv's header already
        self.qout = None if self.helper else RowWriter(os.path.join(series, "qdisc.csv"),
                                                       SERIES_COLUMNS["qdisc"])
        # tcp.csv last: its existence tells the parent that every socket is open
        self.tout = RowWriter(os.path.join(series, "tcp.csv"), SERIES_COLUMNS["tcp"])

    def close(self):
        if self.qout:
            self.qout.close()
        self.tout.close()


class _Ticks:
    """What the loop recorded: each tick's monotonic time (``stamps``), the ticks it
    missed (``missed``), and the last error of each reader that failed (``errors``)."""

    def __init__(self):
        self.stamps, self.missed, self.errors = [], 0, {}


def _sample(spec, src, stop, tick, tcp_every):
    """Sample on the grid t0 + k * ``tick`` (the TCP flows every ``tcp_every`` ticks)
    until ``stop`` or ``duration_s``, flushing every ``flush_s`` and once more at the
    end; returns the :class:`_Ticks`."""
    t0 = float(spec["t0"])
    qreaders, groups, qout, tout, helper = (src.qreaders, src.groups, src.qout, src.tout,
                                            src.helper)
    ticks = _Ticks()
    stamps, missed, errors = ticks.stamps, 0, ticks.errors
    qrows, trows = [], []
    now = time.monotonic()
    k = max(0, math.ceil((now - t0) / tick))
    next_flush = now + spec["flush_s"]
    end = None if spec["duration_s"] is None else now + float(spec["duration_s"])
    monotonic, sleep = time.monotonic, time.sleep

    def flush(final=False):
        if qrows:
            qout.flush(qrows)
            qrows.clear()
        horizon = math.inf if final else min((g.horizon() for g in groups),
                                             default=math.inf)
        if trows:
            trows.sort(key=lambda r: r[0])
            if horizon == math.inf:
                tout.flush(trows)
                trows.clear()
            else:
                cut = next((i for i, r in enumerate(trows) if r[0] >= horizon), len(trows))
                tout.flush(trows[:cut])
                del trows[:cut]

    while not stop:
        due = t0 + k * tick
        delay = due - monotonic()
        if delay > 0:
            sleep(delay)
            if stop:
                break
        ts = monotonic()
        t = round(ts - t0, 6)
        stamps.append(ts)
        for dev, r in qreaders:
            try:
                for q in r.read():
                    qrows.append(qdisc_row(t, dev, q))
            except OSError as exc:  # a device gone (teardown) must not end the sampler
                errors[f"qdisc {dev}"] = str(exc)
        for g in groups if k % tcp_every == 0 else ():
            try:
                g.sample(t, ts, trows)
            except OSError as exc:
                errors[f"tcp {g.host}"] = str(exc)
        now = monotonic()
        k += 1
        late = math.floor((now - t0) / tick) - k + 1
        if late > 0:  # ticks whose time has passed: skipped, counted
            missed += late
            k += late
        if now >= next_flush:
            flush()
            next_flush = now + spec["flush_s"]
            if helper and "qdisc_sampler" not in errors and not helper.alive():
                errors["qdisc_sampler"] = (f"bb-qdisc-sampler exited "
                                           f"({helper.proc.returncode}) during the run: "
                                           f"{helper.log_text()[-300:]}")
        if end is not None and now >= end:
            break

    flush(final=True)
    ticks.missed = missed
    return ticks


def _stats(spec, src, ticks, cpu, tcp_period_ms, stop, sched):
    """sampler.json's figures: the ticks and their period, the CPU spent, the sockets
    found, why the loop stopped and the errors met (the queue helper's are merged in
    afterwards: :func:`~bufferbloat.measure.qdisc_helper.merge_helper_stats`)."""
    period, t0 = float(spec["period_s"]), float(spec["t0"])
    stamps, groups = ticks.stamps, src.groups
    ru = resource.getrusage(resource.RUSAGE_SELF)
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    wall = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    ms = (lambda v: None if v is None else round(v * 1e3, 4))  # noqa: E731
    return {
        "period_ms": period * 1e3, "qdisc_sampler": src.qsampler,
        "samples": len(stamps), "missed_ticks": ticks.missed,
        "period_p50_ms": ms(percentile(gaps, 50, "nearest")),
        "period_p99_ms": ms(percentile(gaps, 99, "nearest")),
        "period_max_ms": ms(gaps[-1] if gaps else None),
        "t_first": round(stamps[0] - t0, 6) if stamps else None,
        "t_last": round(stamps[-1] - t0, 6) if stamps else None,
        "cpu_s": round(cpu, 4), "cpu_share": round(cpu / wall, 4) if wall else None,
        "cpu_total_s": round(ru.ru_utime + ru.ru_stime, 4),
        "filter": spec["filter"], "discover_s": spec["discover_s"],
        "tcp_period_ms": tcp_period_ms,
        "socket_dumps": sum(g.reader.dumps for g in groups),
        "socket_lookups": sum(g.reader.lookups for g in groups), "qdisc_devs": [d["dev"] for d in spec["qdisc_devs"]],
        "flow_sockets": sum(len(g.data) for g in groups),
        "control_sockets_ignored": sum(len(g.ignored) for g in groups),
        "stopped_by": stop[0] if stop else "duration", "errors": ticks.errors, **sched,
    }
