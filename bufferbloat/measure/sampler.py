"""The 10 ms sampler: bottleneck qdiscs and TCP flows, through raw netlink, in its own
process.

:class:`Sampler` (the parent side) writes a JSON spec and starts
``python3 -m bufferbloat.measure.sampler SPEC.json`` through the network (``net.popen``), so the
network owns and reaps it, its CPU cost is its own, and it can fail without taking the
run down. The process (:func:`run`) samples on an absolute grid t0 + k * period, skipping
(and counting) ticks it missed rather than drifting, and writes

* ``series/qdisc.csv``: one row per qdisc of each given device per tick,
* ``series/tcp.csv``: one row per TCP flow of interest per tick,

with the columns of :mod:`bufferbloat.core.series` (``t`` = CLOCK_MONOTONIC seconds since the run's t0),
flushing every ``flush_s`` so that an interrupted run keeps what was sampled, and on exit
``series/sampler.json``: ticks, missed ticks, achieved period p50/p99/max, CPU seconds.

The queue part is done by a compiled helper when it can be (``bufferbloat/measure/csampler``,
:func:`qdisc_helper_binary`; under TCG a Python tick costs ~10 times the host's): the
sampler process starts ``.build/bb-qdisc-sampler`` for the qdisc devices on the same grid,
owns it (stops it by PID) and itself samples only the TCP flows, every ``tcp_period_s``.
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
"""

import csv
import ctypes
import json
import math
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

from bufferbloat.core import paths
from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.paths import IMPORT_ROOT
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.core.signals import stop_process, stop_requests
from bufferbloat.core.stats import percentile
from bufferbloat.net import qdiscs
from bufferbloat.netlink import nlstats

MIN_PERIOD_S = 0.001
DEFAULTS = {"period_s": 0.01, "flush_s": 0.5, "min_bytes_acked": 64 * 1024, "hold_s": 2.0,
            "filter": "bytecode", "discover_s": 0.1, "duration_s": None, "rt_priority": 1,
            "tcp_every": 1}
_U64_MAX = (1 << 64) - 1
ROOT = str(IMPORT_ROOT)       # on the sampler process's PYTHONPATH
CSAMPLER_DIR = str(paths.CSAMPLER_DIR)
CSAMPLER_BIN = str(paths.BUILD_DIR / "bb-qdisc-sampler")
QDISC_SAMPLER_ENV = "BUFFERBLOAT_QDISC_SAMPLER"
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
        return os.path.join(self.out_dir, "series")

    def start(self, ready_timeout_s=READY_TIMEOUT_S):
        """Start the sampler process; return once it has opened its sockets and written
        the CSV headers (or raise saying why not: its exit status and output, or the
        wait that ran out). :meth:`launch` then :meth:`wait_ready`.

        The compiled queue sampler is made ready first (:func:`prepare_qdisc_helper`:
        built here when missing, e.g. on a fresh checkout in the project VM, ~10 s
        under TCG), before the process starts and outside its start-up timeout."""
        self.launch()
        return self.wait_ready(ready_timeout_s)

    def launch(self):
        """Start the sampler process and return at once: its start-up (the
        interpreter, its sockets, the compiled helper: ~2.2 s under TCG) goes on while
        the caller does other work; :meth:`wait_ready` waits for it."""
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
        self._log = open(os.path.join(self.series_dir, "sampler.log"), "w")
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"]
                                    if env.get("PYTHONPATH") else "")
        self.proc = self.net.popen(None, [sys.executable, "-m", "bufferbloat.measure.sampler",
                                          spec_path], stdout=self._log, stderr=self._log,
                                   env=env)
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


# ----------------------------------------------------------------- sampler process
class _Rows:
    """CSV rows of one file, buffered between flushes."""

    def __init__(self, path, columns):
        self.f = open(path, "w", newline="")
        self.w = csv.writer(self.f, lineterminator="\n")
        self.w.writerow(columns)
        self.f.flush()
        self.rows = []

    def flush(self, rows):
        self.w.writerows(rows)
        self.f.flush()

    def close(self):
        self.f.close()


def qdisc_row(t, dev, q):
    """A qdisc.csv row from a decoded qdisc (see :func:`bufferbloat.net.qdiscs.parse_qdisc_dump`)."""
    prob = q.get("prob")
    return (t, dev, nlstats.tc_handle(q["handle"]), nlstats.tc_handle(q["parent"]),
            q["kind"], q.get("qlen"), q.get("backlog"), q.get("bytes"), q.get("packets"),
            q.get("drops"), q.get("overlimits"), q.get("requeues"), q.get("marks"),
            q.get("early_drops"), None if prob is None else round(prob, 9), q.get("delay_us"),
            q.get("maxq_pkts"), q.get("ctl_q_pkts"), q.get("ctl_q_old_pkts"),
            None if q.get("ctl_prob_prev") is None else round(q["ctl_prob_prev"], 9),
            q.get("ctl_updates"), q.get("peak_delay_us"), q.get("base_delay_us"))


def _min_rtt(info):
    """tcpi_min_rtt, us; None before the first RTT sample (the kernel reports ~0U)."""
    v = info.get("min_rtt")
    return None if not v or v >= 0xFFFFFFFF else v


def tcp_row(t, label, host, s):
    """A tcp.csv row from a decoded socket (see :func:`bufferbloat.netlink.nlstats.parse_diag_dump`)."""
    i = s["info"]
    ssth = i["snd_ssthresh"]
    pacing = i["pacing_rate"]
    dr = i["delivery_rate"]
    bw = s["bbr_bw_Bps"]
    # tcpi_rtt is 0 until the socket's first RTT sample (a connection still in its
    # handshake): "no sample yet" is an empty cell, not an RTT of 0
    no_rtt = not i["rtt"]
    return (t, label, host, s["src"], s["sport"], s["dst"], s["dport"], s["cca"], s["state"],
            i["snd_cwnd"], None if ssth is None or ssth >= nlstats.TCP_INFINITE_SSTHRESH
            else ssth, None if no_rtt else i["rtt"], None if no_rtt else i["rttvar"],
            i["snd_mss"], nlstats.in_flight_pkts(i),
            i["total_retrans"], i["bytes_acked"], None if dr is None else dr * 8,
            None if pacing is None or pacing >= _U64_MAX else pacing * 8,
            None if bw is None else bw * 8, s["bbr_min_rtt_us"], i.get("ca_state"),
            i.get("delivered_ce"), _min_rtt(i),
            i.get("data_segs_out"), i.get("bytes_sent"), i.get("busy_time"),
            i.get("rwnd_limited"), i.get("sndbuf_limited"),
            None if i.get("flags7") is None else i["flags7"] & 1,
            i.get("notsent_bytes"), i.get("bytes_retrans"))


class _FlowGroup:
    """The flows of one sender namespace: one sock_diag socket, one read per tick, and the
    control-connection rule (module docstring)."""

    def __init__(self, specs, filter, min_bytes_acked, hold_s, discover_s):
        self.host = specs[0]["host"]
        self.dports = {p for f in specs for p in f["dports"]}
        self.sports = {p for f in specs for p in f["sports"]}
        self.labels = {}
        # the label of a spec, by the port it matched sockets with
        self.by_dport, self.by_sport = {}, {}
        for f in specs:
            self.labels.update(f["labels"])
            if f.get("label"):
                self.by_dport.update(dict.fromkeys(f["dports"], f["label"]))
                self.by_sport.update(dict.fromkeys(f["sports"], f["label"]))
        # a server's sockets (flows given by source port: iperf3 -R's senders) belong to
        # its listener's family: iperf3 listens on a dual-stack IPv6 socket, so they are
        # AF_INET6 (an IPv4-mapped peer) and an IPv4-only dump never sees them
        families = (socket.AF_INET, socket.AF_INET6) if self.sports else (socket.AF_INET,)
        self.reader = nlstats.TcpReader(specs[0]["pid"], self.dports, self.sports, filter,
                                        families=families, discover_s=discover_s)
        self.min_bytes, self.hold_s = min_bytes_acked, hold_s
        # ports whose every socket is a data flow (no control connection shares them):
        # written from their first sample, however little they carried yet
        self.all_data = {("d", p) for f in specs if f.get("no_control") for p in f["dports"]}
        self.all_data |= {("s", p) for f in specs if f.get("no_control") for p in f["sports"]}
        self.data = set()      # cookies of sockets that are flows of interest
        self.ignored = set()   # cookies taken for control connections
        self.pending = {}      # cookie -> (first t, [rows]) of undecided sockets

    def sample(self, t, now, out):
        for s in self.reader.read(now):
            if s["info"] is None:
                continue
            c = s["cookie"]
            row = tcp_row(t, self.label(s["sport"], s["dport"]), self.host, s)
            if c in self.data:
                out.append(row)
            elif (s["info"]["bytes_acked"] is None  # kernel < 4.1 can't tell: keep it
                  or s["info"]["bytes_acked"] >= self.min_bytes
                  or self.stream_port(s["sport"])
                  or ("d", s["dport"]) in self.all_data or ("s", s["sport"]) in self.all_data):
                self.data.add(c)
                self.ignored.discard(c)
                held = self.pending.pop(c, None)
                if held:
                    out.extend(held[1])
                out.append(row)
            elif c not in self.ignored:
                held = self.pending.setdefault(c, (t, []))
                held[1].append(row)
        for c in [c for c, (t1, _) in self.pending.items() if t - t1 > self.hold_s]:
            self.ignored.add(c)
            del self.pending[c]

    def stream_port(self, sport):
        """Whether ``sport`` is a stream's own client port (iperf3 ``--cport``): its
        socket is a data flow, however little it carries (one of 10 behind PIE at
        1.5 Mbit/s once acked under 64 KiB in 30 s, and was left out of tcp.csv and the
        fairness). Not a listening port given in ``sports``: a server's control
        connection has that source port too."""
        return sport not in self.sports and str(sport) in self.labels

    def label(self, sport, dport):
        """The label of a socket's rows (see :class:`Sampler`)."""
        return (self.labels.get(str(sport)) or self.by_sport.get(sport)
                or self.by_dport.get(dport) or f"{self.host}:{sport}")

    def horizon(self):
        """Rows at or after this time may still be joined by held rows."""
        return min((t1 for t1, _ in self.pending.values()), default=math.inf)


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


def prepare_qdisc_helper(log=None):
    """``{"binary": path or None, "why": None or why the Python loop reads the qdiscs}``
    for the sampler process's spec: the compiled queue sampler found, or built now
    (``log`` says so first: ~10 s under TCG) when a compiler is here. Called before the
    sampler process starts, so that a build never races its start-up timeout; the
    process itself never builds."""
    mode = qdisc_sampler_mode()
    if mode == "python":
        return {"binary": None, "why": f"{QDISC_SAMPLER_ENV}=python"}
    binary, why = qdisc_helper_binary(build=False)
    if binary is None and log is not None:
        log(f"  building the compiled queue sampler ({why})")
    if binary is None:
        binary, why = qdisc_helper_binary(build=True)
    if why and mode == "c":
        raise RuntimeError(f"{QDISC_SAMPLER_ENV}=c: {why}")
    return {"binary": binary, "why": why}


def qdisc_sampler_mode():
    """env BUFFERBLOAT_QDISC_SAMPLER: auto (default), c or python."""
    mode = os.environ.get(QDISC_SAMPLER_ENV, "auto").strip().lower() or "auto"
    if mode not in ("auto", "c", "python"):
        raise ValueError(f"{QDISC_SAMPLER_ENV}={mode!r}: must be auto, c or python")
    return mode


def qdisc_helper_binary(build=True):
    """The compiled queue sampler: ``(path, None)``, or ``(None, why not)``.

    Rebuilt with ``make -s -C bufferbloat/measure/csampler`` when it is missing or older than its
    source and a compiler is there (``build``). The host builds it before it boots the
    VM (run_tests.sh, run_all.sh, and ``run``/``sweep``/``run-all`` moving into it) and
    the static binary is used through the share; the guest (which has gcc too) builds
    it only when the host could not, before its sampler starts
    (:func:`prepare_qdisc_helper`)."""
    return compiled_helper(CSAMPLER_BIN, "bb_qdisc_sampler.c", build)


def compiled_helper(binary, source, build=True):
    """A helper built from ``csampler/SOURCE`` into ``binary``: ``(path, None)`` when it
    is at least as new as its source and the Makefile, else built now with make (which
    builds every helper) when ``build`` and a compiler are here, else ``(None, why)``."""
    srcs = [os.path.join(CSAMPLER_DIR, n) for n in (source, "Makefile")]
    try:
        newest = max(os.path.getmtime(p) for p in srcs)
    except OSError:
        return None, f"no source in {CSAMPLER_DIR}"

    def fresh():
        try:
            return os.path.getmtime(binary) >= newest
        except OSError:
            return False

    if fresh():
        return binary, None
    stale = "older than its source" if os.path.exists(binary) else "not built"
    if not build:
        return None, f"{binary} {stale}"
    if not (shutil.which("make") and (shutil.which("cc") or shutil.which("gcc"))):
        return None, f"{binary} {stale} and no make/gcc here to build it " \
                     f"(make -C bufferbloat/measure/csampler on the host)"
    try:
        r = subprocess.run(["make", "-s", "-C", CSAMPLER_DIR,
                            f"OUT={os.path.dirname(binary)}"], capture_output=True,
                           text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"make -C {CSAMPLER_DIR} failed: {exc}"
    if r.returncode != 0 or not fresh():
        return None, f"make -C {CSAMPLER_DIR} failed (exit {r.returncode}): " \
                     f"{(r.stderr or r.stdout).strip()[-300:]}"
    return binary, None


class _QdiscHelper:
    """The compiled queue sampler as the sampler process's child (it ends with its
    parent too: PR_SET_PDEATHSIG): writes qdisc.csv and qdisc-sampler.json."""

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
        return f"bb-qdisc-sampler did not start: {self.log_text()[-300:] or 'no output'}"

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


def _start_qdisc_helper(spec, series):
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
            helper = _QdiscHelper(binary, spec, series)
            why = helper.wait_ready()
        except OSError as exc:  # e.g. a binary of another architecture
            why = f"bb-qdisc-sampler could not run: {exc}"
    if why and mode == "c":
        raise RuntimeError(f"{QDISC_SAMPLER_ENV}=c: {why}")
    return (None, why) if why else (helper, None)


def _merge_helper_stats(stats, cst, t_stop, t0, period):
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


def run(spec):
    """The sampler process's loop (until SIGTERM/SIGINT or ``duration_s``)."""
    spec = {**DEFAULTS, **spec}
    sched = _timely(spec["rt_priority"])
    period, t0 = float(spec["period_s"]), float(spec["t0"])
    tcp_every = max(1, int(spec["tcp_every"]))
    series = os.path.join(spec["out_dir"], "series")
    os.makedirs(series, exist_ok=True)
    stop = stop_requests((signal.SIGTERM, signal.SIGINT))

    helper, qsampler = None, "none (no qdisc devices)"
    if spec["qdisc_devs"]:
        helper, why = _start_qdisc_helper(spec, series)
        qsampler = "c" if helper else f"python ({why})"
    qreaders = [] if helper else [(d["dev"], nlstats.QdiscReader(d["dev"], d.get("pid"),
                                                                    decoder=qdiscs))
                                  for d in spec["qdisc_devs"]]
    by_ns = {}
    for f in spec["flows"]:
        by_ns.setdefault((f["host"], f.get("pid")), []).append(f)
    groups = [_FlowGroup(fs, spec["filter"], spec["min_bytes_acked"], spec["hold_s"],
                         float(spec["discover_s"])) for fs in by_ns.values()]
    # the helper has written qdisc.csv's header already
    qout = None if helper else _Rows(os.path.join(series, "qdisc.csv"),
                                     SERIES_COLUMNS["qdisc"])
    # tcp.csv last: its existence tells the parent that every socket is open
    tout = _Rows(os.path.join(series, "tcp.csv"), SERIES_COLUMNS["tcp"])

    tcp_period_ms = period * tcp_every * 1e3
    tick = period
    if helper:  # this loop only reads sockets: it ticks at the TCP period
        tick = period * tcp_every if groups else max(period * tcp_every, 0.1)
        tcp_every = 1
    cpu0 = time.process_time()
    stamps = []
    missed = 0
    errors = {}
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
    if qout:
        qout.close()
    tout.close()
    t_stop = monotonic()
    cst = helper.stop() if helper else None
    cpu = time.process_time() - cpu0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    wall = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    ms = (lambda v: None if v is None else round(v * 1e3, 4))  # noqa: E731
    stats = {
        "period_ms": period * 1e3, "qdisc_sampler": qsampler,
        "samples": len(stamps), "missed_ticks": missed,
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
        "stopped_by": stop[0] if stop else "duration", "errors": errors, **sched,
    }
    if helper:
        stats = _merge_helper_stats(stats, cst, t_stop, t0, period)
    write_json_atomic(os.path.join(series, "sampler.json"), stats, allow_nan=True)
    return stats


def main(argv=None):
    """``python3 -m bufferbloat.measure.sampler SPEC.json``"""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m bufferbloat.measure.sampler SPEC.json", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        spec = json.load(f)
    run(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
