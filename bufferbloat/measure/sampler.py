"""The 10 ms sampler: bottleneck qdiscs and TCP flows, through raw netlink, in its own
process.

:class:`Sampler` (the parent side) writes a JSON spec and starts
``python3 -m bufferbloat.measure.sampler SPEC.json`` through the network (``net.popen``), so the
network owns and reaps it, its CPU cost is its own, and it can fail without taking the
run down. The process (:func:`~bufferbloat.measure.sampler_loop.run`) samples on an
absolute grid t0 + k * period, skipping (and counting) ticks it missed rather than
drifting, and writes

* ``series/qdisc.csv``: one row per qdisc of each given device per tick,
* ``series/tcp.csv``: one row per TCP flow of interest per tick,

with the columns of :mod:`bufferbloat.core.series` (``t`` = CLOCK_MONOTONIC seconds since the run's t0),
flushing every ``flush_s`` so that an interrupted run keeps what was sampled, and on exit
``series/sampler.json``: ticks, missed ticks, achieved period p50/p99/max, CPU seconds.

The queue part is done by a compiled helper when it can be (``bufferbloat/measure/csampler``,
:func:`~bufferbloat.measure.compiled.qdisc_helper_binary`; under TCG a Python tick costs
~10 times the host's): the sampler process starts ``.build/bb-qdisc-sampler`` for the
qdisc devices on the same grid, owns it (stops it by PID) and itself samples only the TCP flows, every ``tcp_period_s``.
``sampler.json`` then says ``qdisc_sampler: "c"`` and its samples / missed_ticks /
period figures are the queue sampler's (``tcp_samples`` etc. are the socket loop's);
without the helper it says ``"python (why)"`` and the Python loop reads the qdiscs too.
Env ``BUFFERBLOAT_QDISC_SAMPLER``: ``auto`` (default), ``c`` (the helper or fail),
``python`` (never the helper).

Flows of interest are given per sender host as destination ports (and/or source ports:
a server's sending sockets, e.g. iperf3 -R's, which are read in both address families
since a dual-stack listener's sockets are AF_INET6 with IPv4-mapped peers).
iperf3 opens a control connection to the same port as its data connections; it carries a
few hundred bytes. A socket whose source port is a stream's own client port (``labels``,
not a listening port of ``sports``: iperf3's ``--cport`` streams) is a data flow from its
first sample; another counts as one once its ``bytes_acked`` reaches ``min_bytes_acked``
(64 KiB); until then its rows are held back (at most ``hold_s``, 2 s), and written from
its first sample on once it qualifies. A socket that has not qualified within ``hold_s``
is taken for a control connection and left out (if it ever reaches the threshold later
it is written from then on). ``min_bytes_acked=0`` writes every matching
socket at once.

The modules: this one is the parent side (:class:`Sampler`) and the process's entry
(:func:`main`); :mod:`~bufferbloat.measure.sampler_loop` the process's loop,
:mod:`~bufferbloat.measure.sampler_flows` the flows of interest and their labels,
:mod:`~bufferbloat.measure.sampler_rows` the CSV rows, and
:mod:`~bufferbloat.measure.compiled` and :mod:`~bufferbloat.measure.qdisc_helper` the
compiled queue sampler.
"""

import contextlib
import json
import os
import subprocess
import sys
import time

from bufferbloat.core.paths import IMPORT_ROOT
from bufferbloat.core.signals import stop_process
from bufferbloat.measure.compiled import prepare_qdisc_helper
from bufferbloat.measure.sampler_loop import run

MIN_PERIOD_S = 0.001
ROOT = str(IMPORT_ROOT)       # on the sampler process's PYTHONPATH
#: how long the sampler process may take to open its sockets and write its headers
#: (Python's start-up under TCG takes seconds; building the compiled helper is not in it)
READY_TIMEOUT_S = 30.0


# ----------------------------------------------------------------- parent side
class Sampler:
    """Samples the qdiscs of ``qdisc_devs`` and the TCP flows ``flows`` every ``period_s``
    (default 10 ms, >= 1 ms) in a process of its own, into ``out_dir/series/``.

    net: a running :class:`~bufferbloat.net.network.Network`. t0: the run's
    ``time.monotonic()`` origin. qdisc_devs: [(ns, dev)] with ns a host name or None (root
    namespace: the switch ports; ``net.bottleneck_dev`` is such a pair); default the
    bottleneck. flows: [{"host": "h1", "dports": [5201], "sports": [...] (optional),
    "label": label (optional), "labels": {sport: label} (optional)}]: a socket's rows are
    labelled with its source port's entry of ``labels``, else the ``label`` of the spec
    it matched, else ``host:sport``; "no_control": True (optional: every socket on these
    ports is a data flow, written from its first sample). filter: 'bytecode' | 'python' (where the port filter of the socket dump
    runs). discover_s: how often the sockets are found by dump (a new flow's first row
    comes at most this late; between dumps the known sockets are read by exact lookup,
    see :class:`~bufferbloat.netlink.nlstats.TcpReader`); 0: dump every tick. min_bytes_acked,
    hold_s: the control-connection rule (module docstring). flush_s: CSV flush interval
    (s). duration_s: stop by itself after this long (default: at :meth:`stop`).
    rt_priority: SCHED_FIFO priority of the sampler process (default 1, the lowest
    real-time one: it wakes on time even when iperf3 and the emulation keep both cores
    busy, and it runs ~0.1 ms per tick); None or 0 keeps the normal scheduler.
    tcp_period_s: sample the TCP flows only this often (a multiple of ``period_s``; default
    every tick): the sockets cost far more per tick than the queue under TCG, and a study
    that needs the queue at 10 ms (C) needs cwnd traces less often.
    """

    def __init__(self, net, out_dir, t0, period_s=0.01, qdisc_devs=None, flows=(),
                 flush_s=0.5, min_bytes_acked=64 * 1024, hold_s=2.0, filter="bytecode",
                 discover_s=0.1, duration_s=None, rt_priority=1, tcp_period_s=None):
        if not MIN_PERIOD_S <= period_s <= 10:
            raise ValueError(f"period_s={period_s!r}: must be between {MIN_PERIOD_S} and 10 s")
        if tcp_period_s is not None and not period_s <= tcp_period_s <= 60:
            raise ValueError(f"tcp_period_s={tcp_period_s!r}: must be between period_s "
                             f"({period_s}) and 60 s")
        tcp_every = 1 if tcp_period_s is None else max(1, round(tcp_period_s / period_s))
        if filter not in ("bytecode", "python"):
            raise ValueError(f"filter={filter!r}: must be 'bytecode' or 'python'")
        self.net, self.out_dir, self.t0 = net, out_dir, t0
        devs = qdisc_devs if qdisc_devs is not None else [net.bottleneck_dev]
        self.spec = {
            "t0": t0, "out_dir": os.path.abspath(out_dir), "period_s": period_s,
            "flush_s": flush_s, "min_bytes_acked": min_bytes_acked, "hold_s": hold_s,
            "filter": filter, "discover_s": discover_s, "duration_s": duration_s,
            "rt_priority": rt_priority, "tcp_every": tcp_every,
            "qdisc_devs": [{"ns": ns, "pid": self._pid(ns), "dev": dev} for ns, dev in devs],
            "flows": [self._flow(f) for f in flows],
        }
        self.proc = None
        self.prewarmed = False     # whether launch() used a Prewarmed process

    def _pid(self, ns):
        return None if ns is None else self.net.net[ns].pid

    def _flow(self, f):
        unknown = set(f) - {"host", "dports", "sports", "label", "labels", "no_control"}
        if unknown or "host" not in f or not (f.get("dports") or f.get("sports")):
            raise ValueError(f"flow {f!r}: needs 'host' and 'dports' and/or 'sports' "
                             f"(optional 'label', 'labels', 'no_control'); unknown keys "
                             f"{sorted(unknown)}")
        return {"host": f["host"], "pid": self._pid(f["host"]),
                "dports": [int(p) for p in f.get("dports", ())],
                "sports": [int(p) for p in f.get("sports", ())],
                "label": f.get("label"),
                "labels": {str(k): v for k, v in (f.get("labels") or {}).items()},
                "no_control": bool(f.get("no_control"))}

    @property
    def series_dir(self):
        """Where the CSVs and sampler.json go."""
        return _series_dir(self.out_dir)

    def start(self, ready_timeout_s=READY_TIMEOUT_S):
        """Start the sampler process; return once it has opened its sockets and written
        the CSV headers (or raise saying why not: its exit status and output, or the
        wait that ran out). :meth:`launch` then :meth:`wait_ready`.

        The compiled queue sampler is made ready first (:func:`prepare_qdisc_helper`:
        built here when missing, e.g. on a fresh checkout in the project VM, ~10 s
        under TCG), before the process starts and outside its start-up timeout."""
        self.launch()
        return self.wait_ready(ready_timeout_s)

    def launch(self, prewarmed=None):
        """Start the sampler process and return at once: its start-up (the
        interpreter, its sockets, the compiled helper: ~2.2 s under TCG) goes on while
        the caller does other work; :meth:`wait_ready` waits for it. ``prewarmed``: a
        :class:`Prewarmed` process started earlier for this run, its interpreter and
        imports done: it gets the spec and goes on from there (a cold start when it is
        None or has ended)."""
        if self.spec["qdisc_devs"] and "qdisc_helper" not in self.spec:
            self.spec["qdisc_helper"] = prepare_qdisc_helper()
        os.makedirs(self.series_dir, exist_ok=True)
        spec_path = os.path.join(self.series_dir, "sampler-spec.json")
        with open(spec_path, "w") as f:
            json.dump(self.spec, f, indent=1)
        for name in ("qdisc.csv", "tcp.csv", "sampler.json", "qdisc-sampler.json"):
            path = os.path.join(self.series_dir, name)
            if os.path.exists(path):
                os.unlink(path)
        if prewarmed is not None and prewarmed.series_dir == self.series_dir \
                and prewarmed.hand(spec_path):
            self.proc, self._log, self.prewarmed = prewarmed.proc, prewarmed.log, True
        else:
            if prewarmed is not None:
                prewarmed.end()
            self._log = open(os.path.join(self.series_dir, "sampler.log"), "w")
            self.proc = self.net.popen(None, [sys.executable, "-m",
                                              "bufferbloat.measure.sampler", spec_path],
                                       stdout=self._log, stderr=self._log, env=_env())
            self.prewarmed = False
        self._launched = time.monotonic()
        return self

    def wait_ready(self, ready_timeout_s=READY_TIMEOUT_S):
        """Return once the launched process has opened its sockets and written the CSV
        headers (``ready_timeout_s`` from its launch), or stop it and raise saying why
        not: its exit status and output, or the wait that ran out."""
        deadline = self._launched + ready_timeout_s
        ready = os.path.join(self.series_dir, "tcp.csv")
        while not os.path.exists(ready):
            rc = self.proc.poll()
            if rc is not None or time.monotonic() > deadline:
                if rc is None:
                    self.stop()
                    how = (f"no ready signal within {ready_timeout_s:g} s (its process, "
                           f"pid {self.proc.pid}, was stopped)")
                else:
                    self.stop()
                    how = f"its process exited with status {rc}"
                out = self.log_text().strip()
                raise RuntimeError(f"sampler did not start: {how}; its output: "
                                   f"{out[-2000:] if out else '(none)'}")
            time.sleep(0.02)
        return self

    def alive(self):
        """True while the sampler process runs."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s=10.0):
        """SIGTERM to the sampler's PID, wait for it to write its last rows and stats;
        return the stats (sampler.json) or None if it wrote none."""
        if self.proc is None:
            return None
        # the process alone: it stops its queue helper itself, and merges its stats
        stop_process(self.proc, grace_s=timeout_s, group=False)
        self._log.close()
        return self.stats()

    def stats(self):
        """The sampler's final stats (series/sampler.json), or None."""
        path = os.path.join(self.series_dir, "sampler.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def log_text(self):
        """What the sampler process printed (errors)."""
        path = os.path.join(self.series_dir, "sampler.log")
        with open(path) as f:
            return f.read()



def _series_dir(out_dir):
    """The series directory of the run directory ``out_dir``."""
    return os.path.join(out_dir, "series")


def _env():
    """The sampler process's environment: this one, the package on its PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"]
                                if env.get("PYTHONPATH") else "")
    return env


class Prewarmed:
    """A sampler process started before its run knows what to sample: the interpreter
    and the sampler's modules load (most of its ~2.2 s start-up under TCG) while the
    run reads its network back and starts its parts, in the other CPU. It waits for one
    line on its input, the path of its spec (:meth:`Sampler.launch`), and exits at once
    when its input closes without one (:meth:`end`: the run ended before it sampled).
    The network's process: it ends with the network at the latest."""

    def __init__(self, net, out_dir):
        self.series_dir = series_dir = _series_dir(out_dir)
        os.makedirs(series_dir, exist_ok=True)
        self.log = open(os.path.join(series_dir, "sampler.log"), "w")
        self.proc = net.popen(None, [sys.executable, "-m", "bufferbloat.measure.sampler",
                                     AWAIT], stdin=subprocess.PIPE, stdout=self.log,
                              stderr=self.log, env=_env())
        self.used = False

    def alive(self):
        """True while the process runs (waiting for its spec, or sampling)."""
        return self.proc.poll() is None

    def hand(self, spec_path):
        """Give the process its spec; False (and it ended) when it is no longer alive
        to take it."""
        if self.used or not self.alive():
            self.end()
            return False
        try:
            self.proc.stdin.write(spec_path + "\n")
            self.proc.stdin.close()
        except OSError:              # it ended between the poll and the write
            self.end()
            return False
        self.used = True
        return True

    def end(self, timeout_s=10.0):
        """End the process if no spec was handed to it (idempotent): its input closed,
        it exits by itself; stopped by PID if it does not within ``timeout_s``."""
        if self.used:
            return
        self.used = True
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_process(self.proc, grace_s=2.0, group=False)
        self.log.close()


#: the argument of a :class:`Prewarmed` process: its spec's path comes on its input
AWAIT = "--await-spec"


def main(argv=None):
    """``python3 -m bufferbloat.measure.sampler SPEC.json`` (or ``--await-spec``: the
    path on the first line of the input; none: exit 0)"""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m bufferbloat.measure.sampler SPEC.json|--await-spec",
              file=sys.stderr)
        return 2
    path = argv[0]
    if path == AWAIT:
        path = sys.stdin.readline().strip()
        if not path:
            return 0
    with open(path) as f:
        spec = json.load(f)
    run(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
