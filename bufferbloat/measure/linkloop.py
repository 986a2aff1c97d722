"""The capacity replay (``bb-link-trace``, csampler/bb_link_trace.c) as a child process:
started on the run's 10 ms grid for the bottleneck's HTB class (:class:`LinkLoop`),
ended by PID, its per-window counters (``link-trace.csv``) and stats
(``link-trace.json``: ticks, missed ticks, rate changes) left in the run's series.

The loop changes the class in place (an RTM_NEWTCLASS without NLM_F_CREATE/EXCL, as
``tc class change``): the AQM leaf under it is never deleted, re-added or reset."""

import os
import subprocess

from bufferbloat.core import paths
from bufferbloat.measure.compiled import compiled_helper
from bufferbloat.measure.qdisc_helper import QdiscHelper

LOOP_BIN = str(paths.BUILD_DIR / "bb-link-trace")
LOOP_CSV = "link-trace.csv"
LOOP_STATS = "link-trace.json"


def loop_binary(build=True):
    """``(path, None)`` or ``(None, why not)``: the compiled loop, built when stale."""
    return compiled_helper(LOOP_BIN, "bb_link_trace.c", build)


class LinkLoop(QdiscHelper):
    """``bb-link-trace`` replaying ``trace`` (a :class:`~bufferbloat.net.linktrace.
    LinkTrace`) on ``dev`` (``PID/DEV`` for a device in PID's namespace) from monotonic
    time ``t0``, its rates scaled by ``factor``; files under ``series``. Its
    ``wait_ready``, ``alive`` and ``stop`` (SIGTERM by PID, its stats) are the queue
    sampler's."""

    NAME = "bb-link-trace"

    def __init__(self, trace, dev, series, t0, factor=1.0, burst_ms=0.0, rt_priority=0,
                 binary=None, period_s=0.01, name="link-trace"):
        if binary is None:
            binary, why = loop_binary()
            if binary is None:
                raise RuntimeError(f"bb-link-trace: {why}")
        os.makedirs(series, exist_ok=True)
        self.rates_path = trace.write_rates(os.path.join(series, f"{name}.rates"), factor)
        self.csv_path = os.path.join(series, f"{name}.csv")
        self.stats_path = os.path.join(series, f"{name}.json")
        self.log_path = os.path.join(series, f"{name}.log")
        self.args = [binary, "--rates", self.rates_path, "--dev", dev, "--t0", repr(float(t0)),
                     "--period", repr(float(period_s)), "--burst-ms", repr(float(burst_ms)),
                     "--rt", str(int(rt_priority or 0)), "--out", self.csv_path,
                     "--stats", self.stats_path]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._log,
                                     stdin=subprocess.DEVNULL)


def start_loop(trace, dev, series, t0, **kw):
    """``(loop, None)`` started and ready, or ``(None, why not)``."""
    try:
        loop = LinkLoop(trace, dev, series, t0, **kw)
    except (OSError, RuntimeError) as exc:
        return None, str(exc)
    why = loop.wait_ready()
    return (None, why) if why else (loop, None)
