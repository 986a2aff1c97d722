"""The compiled queue sampler (``bb-qdisc-sampler``) as the sampler process's child: started
on the process's tick grid for the qdisc devices (:func:`start_qdisc_helper`, or why the
Python loop reads the qdiscs instead), stopped by PID, and its stats merged into
``sampler.json`` (:func:`merge_helper_stats`)."""

import json
import os
import select
import subprocess

from bufferbloat.core.signals import stop_process
from bufferbloat.measure.compiled import (
    QDISC_SAMPLER_ENV,
    qdisc_helper_binary,
    qdisc_sampler_mode,
)


class QdiscHelper:
    """The compiled queue sampler as the sampler process's child (it ends with its
    parent too: PR_SET_PDEATHSIG): writes qdisc.csv and qdisc-sampler.json. Another
    compiled helper that says ``ready`` and writes its stats on SIGTERM subclasses it
    (its own ``NAME`` and ``__init__``: measure/linkloop.py)."""

    NAME = "bb-qdisc-sampler"

    def __init__(self, binary, spec, series):
        self.stats_path = os.path.join(series, "qdisc-sampler.json")
        self.log_path = os.path.join(series, "qdisc-sampler.log")
        args = [binary, "--t0", repr(float(spec["t0"])), "--period",
                repr(float(spec["period_s"])), "--flush", repr(float(spec["flush_s"])),
                "--rt", str(int(spec["rt_priority"] or 0)),
                "--out", os.path.join(series, "qdisc.csv"), "--stats", self.stats_path]
        args += [d["dev"] if d.get("pid") is None else f"{int(d['pid'])}/{d['dev']}"
                 for d in spec["qdisc_devs"]]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log,
                                     stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout_s=10.0):
        """None once the helper has opened its sockets and written the CSV header, else
        why it did not (it is then stopped)."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline().decode(errors="replace") if ready else ""
        if line.strip() == "ready":
            return None
        self.stop()
        return f"{self.NAME} did not start: {self.log_text()[-300:] or 'no output'}"

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout_s=10.0):
        """SIGTERM by PID, wait; return its stats (None if it wrote none)."""
        stop_process(self.proc, grace_s=timeout_s, group=False)
        self.proc.stdout.close()
        self._log.close()
        try:
            with open(self.stats_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def log_text(self):
        self._log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read().strip()


def start_qdisc_helper(spec, series):
    """(helper, None) or (None, why the Python loop reads the qdiscs)."""
    mode = qdisc_sampler_mode()
    if mode == "python":
        return None, f"{QDISC_SAMPLER_ENV}=python"
    ready = spec.get("qdisc_helper") or {}
    binary, why = ready.get("binary"), ready.get("why")
    if not ready:   # a spec from elsewhere: found, never built here (no race)
        binary, why = qdisc_helper_binary(build=False)
    helper = None
    if binary:
        try:
            helper = QdiscHelper(binary, spec, series)
            why = helper.wait_ready()
        except OSError as exc:  # e.g. a binary of another architecture
            why = f"bb-qdisc-sampler could not run: {exc}"
    if why and mode == "c":
        raise RuntimeError(f"{QDISC_SAMPLER_ENV}=c: {why}")
    return (None, why) if why else (helper, None)


def merge_helper_stats(stats, cst, t_stop, t0, period):
    """The queue sampler's ticks, misses and period are the run's (health_record.check_sampler
    reads them); the socket loop's own go under tcp_*."""
    for k in ("samples", "missed_ticks", "period_p50_ms", "period_p99_ms", "period_max_ms",
              "t_first", "t_last"):
        stats["tcp_" + k] = stats[k]
    py_cpu, py_total = stats["cpu_s"], stats["cpu_total_s"]
    stats["tcp_cpu_s"] = py_cpu
    if cst is None:  # it died without its stats: every tick of the run counts as missed
        start = stats["t_first"] if stats["t_first"] is not None else t_stop - t0
        stats.update(samples=0, missed_ticks=max(1, round((t_stop - t0 - start) / period)),
                     period_p50_ms=None, period_p99_ms=None, period_max_ms=None)
        stats["errors"]["qdisc_sampler"] = "bb-qdisc-sampler wrote no stats"
        return stats
    stats.update({k: cst.get(k) for k in ("samples", "missed_ticks", "period_p50_ms",
                                          "period_p99_ms", "period_max_ms", "t_first",
                                          "t_last")})
    stats["qdisc_cpu_s"] = cst.get("cpu_s")
    stats["cpu_s"] = round(py_cpu + (cst.get("cpu_s") or 0), 4)
    stats["cpu_total_s"] = round(py_total + (cst.get("cpu_total_s") or 0), 4)
    wall = (cst["t_last"] - cst["t_first"]) if cst.get("samples", 0) > 1 else 0
    stats["cpu_share"] = round(stats["cpu_s"] / wall, 4) if wall else None
    stats["qdisc_sampler_stats"] = cst
    stats["errors"].update(cst.get("errors") or {})
    return stats
