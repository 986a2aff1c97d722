"""A NetPerfMeter measurement's life: the passive side started and listening, the active
processes launched (or pre-connected ahead of the run's origin), each watched for its
flows' sockets and its measurement's start, then stopped, the passive side's results
downloaded and the outputs read (:class:`NetPerfMeterRun`; its results:
:class:`~bufferbloat.traffic.netperfmeter.results.RunResults`)."""

import os
import re
import subprocess
import tempfile
import threading
import time

from bufferbloat.core.params import check_number
from bufferbloat.core.signals import stop_process
from bufferbloat.traffic.base import Timed, wait_listening
from bufferbloat.traffic.netperfmeter.flows import flow_groups, flows_per_process
from bufferbloat.traffic.netperfmeter.output import MEASUREMENT_STARTED, parse_connections
from bufferbloat.traffic.netperfmeter.results import RunResults

#: the longest the tool may take to connect its flows before the measurement starts
PRECONNECT_TIMEOUT_S = 180.0
#: grace after SIGINT for the active side to stop the measurement and download the
#: passive side's results (a 60 s bulk flow's messages, ~7 MB at 15 Mbit/s: ~4 s when it
#: went over the emulated path's reverse direction; over the control path now)
STOP_GRACE_S = 60.0


class _Active:
    """One active process of a :class:`NetPerfMeterRun`: its ``flows``, output ``stem``,
    process, output files, watcher, and when it launched, saw its measurement start and
    ended (monotonic)."""

    def __init__(self, flows, stem):
        self.flows, self.stem = flows, stem
        self.proc = self.aout = self.aerr = self.watcher = None
        self.launched_mono = self.seen_mono = self.exit_mono = None
        self.measuring = threading.Event()
        self.stdout = self.stderr = ""


class NetPerfMeterRun(RunResults, Timed):
    """One NetPerfMeter measurement: the passive side on ``dst`` (:meth:`prepare`), the
    active side on ``src`` with ``flows`` (:class:`~.flows.NpmFlow`) for ``runtime_s``,
    in groups of at most ``per_process`` flows, one active process each, all served by
    the one passive side (:data:`~.flows.FLOWS_PER_PROCESS`: the tool sets its flows up
    one 250 ms tick at a time, per passive side and in parallel across active sides).

    ``out_dir``: where the tool writes its vector and scalar files (the run's raw/;
    default a temporary directory, removed by :meth:`cleanup`); ``stem``: their name
    stem (the first process's; the others' ``STEM-pK``, K = 2, 3...). :meth:`start`
    returns at once; :meth:`wait` waits for the measurement to end by itself;
    :meth:`stop` ends it early (SIGINT: the tool stops its flows and downloads the
    passive side's results) and every process. Its rows, summary and raw outputs:
    :class:`~.results.RunResults`."""

    def __init__(self, net, src, dst, port, flows, runtime_s, *, name, out_dir=None,
                 t0=None, realtime_minus_monotonic=None, per_process=None):
        self.net, self.src, self.dst, self.port = net, src, dst, int(port)
        #: every flow's instants come this much later than its own (a pre-connected
        #: start, :meth:`preconnect`); 0: the flows' instants as they are
        self.lead_s = 0.0
        #: monotonic time the last process's measurement was seen to start (by the
        #: watchers: set by :meth:`preconnect`, else once the processes end)
        self.measurement_seen_mono = None
        self.flows = list(flows)
        self.runtime_s = check_number("runtime_s", runtime_s, 0, 86_400, lo_open=True)
        self.name = name
        self._init_clock(t0, realtime_minus_monotonic)
        self._own_dir = out_dir is None
        # absolute: the tool runs with this directory as its cwd, and a run's raw/ is
        # often relative (the default --out results)
        self.out_dir = os.path.abspath(out_dir or tempfile.mkdtemp(prefix="npm-"))
        self.stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name) + "-npm"
        per = flows_per_process() if per_process is None else int(per_process)
        self.actives = [_Active(group, self.stem if k == 0 else f"{self.stem}-p{k + 1}")
                        for k, group in enumerate(flow_groups(self.flows, max(1, per)))]
        self.passive = None
        #: the run time the part's timeline started this tool at (TrafficPart.start);
        #: None while it has not (a run interrupted while the flows connect)
        self.scheduled_s = None
        self.launched_mono = None
        self.sockets = {}          # flow id -> (local port, remote port)
        self._sockets_lock = threading.Lock()
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._finished = False
        self.stdout = self.stderr = self.passive_out = ""
        self.control = None        # the control connection's path (prepare)

    @property
    def active(self):
        """The first active process (the only one of a run of at most
        :data:`~.flows.FLOWS_PER_PROCESS` flows)."""
        return self.actives[0].proc

    # ------------------------------------------------------------ running
    def active_args(self, group=0):
        """An active process's argument list (without the namespace prefix): the first
        one's, or ``group``'s (0, 1...)."""
        g = self.actives[group]
        base = os.path.join(self.out_dir, g.stem)
        args = ["netperfmeter", f"{self.net.ip(self.dst)}:{self.port}", "-control-over-tcp",
                f"-runtime={self.runtime_s:.6g}", f"-vector={base}.vec",
                f"-scalar={base}.sca", f"-config={base}.config",
                f"-activenodename={self.src}", f"-passivenodename={self.dst}"]
        for flow in g.flows:
            args += ["-tcp", flow.spec(self.lead_s)]
        return args

    def prepare(self):
        """Send the control connection (port + 1) over a control path beside the emulated
        links (:mod:`bufferbloat.net.control`: the flows' set-up and the results' upload
        are not what is measured), start the passive side on dst and wait until it
        listens."""
        self.control = self.net.control_path(self.src, self.dst, self.port + 1)
        self._pout = tempfile.TemporaryFile(mode="w+")
        # its cwd: the out dir (the passive side writes nothing the active side does not
        # download, but any file it makes stays with the run's)
        self.passive = self.net.popen(self.dst, ["netperfmeter", self.port],
                                      stdout=self._pout, stderr=subprocess.STDOUT,
                                      cwd=self.out_dir)
        wait_listening(self.net, self.dst, self.port)

    def preconnect(self, lead_s, timeout_s=PRECONNECT_TIMEOUT_S):
        """Start the active side now with every flow ``lead_s`` later than its own
        instants, and return once every process's measurement has started (its flows
        connected): the monotonic time from which the flows' own instants count (the
        last process's measurement start + ``lead_s``; the processes set their flows up
        in the same ticks of the passive side, a process now and then a tick late, and
        start within a tick or two of each other: 0.17 s measured at 40 flows, 0.27-0.49
        s at 60, recorded in :meth:`summary`; an earlier process's flows start that much
        before the origin, their lateness negative). RuntimeError when a process ends or they
        take longer than ``timeout_s`` to connect."""
        self.lead_s = float(lead_s)
        self.start()
        deadline = time.monotonic() + timeout_s
        # each watcher reads its process's output: it sets its event once the
        # measurement has started, and has mapped every flow's socket by then (the
        # sampler then labels each flow's rows from its first sample); every process is
        # watched on every round, so one that dies is seen at once
        while True:
            waiting = [g for g in self.actives if not g.measuring.is_set()]
            if not waiting:
                break
            for g in waiting:
                if g.proc is None or (g.proc.poll() is not None and not g.measuring.is_set()):
                    raise RuntimeError(f"netperfmeter {self.name}: the active side ended "
                                       f"before its measurement started (raw/{g.stem}"
                                       ".stdout.txt)")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"netperfmeter {self.name}: its {len(self.flows)} flows did not connect "
                    f"within {timeout_s:g} s (still connecting: "
                    + ", ".join(f"raw/{g.stem}.stdout.txt" for g in waiting) + ")")
            waiting[0].measuring.wait(0.05)
        self.measurement_seen_mono = max(g.seen_mono for g in self.actives)
        return self.measurement_seen_mono + self.lead_s

    def start(self):
        """Start the active side (its flows connect, then the measurement begins); a
        no-op once started (:meth:`preconnect`)."""
        if self.actives[0].proc is not None:
            return self
        if self.passive is None:
            self.prepare()
        for k, g in enumerate(self.actives):
            g.aout = open(os.path.join(self.out_dir, f"{g.stem}.stdout.txt"), "w+")
            g.aerr = tempfile.TemporaryFile(mode="w+")
            with self._lock:
                if self._stopped:
                    return self
                g.launched_mono = time.monotonic()
                if self.launched_mono is None:
                    self.launched_mono = g.launched_mono
                g.proc = self.net.popen(self.src, self.active_args(k), stdout=g.aout,
                                        stderr=g.aerr, cwd=self.out_dir)
            g.watcher = threading.Thread(target=self._watch, args=(g,), daemon=True,
                                         name=f"npm-watch-{g.stem}")
            g.watcher.start()
        return self

    def _watch(self, g):
        """Read one process's output while it runs: map each of its flows' socket
        descriptors (it prints them as the flows connect) to its TCP ports, from
        /proc/PID/fd and /proc/PID/net/tcp (the active side's namespace), and note when
        the measurement starts (``seen_mono``, the event :meth:`preconnect` waits on),
        set once the sockets are mapped (or given up on, after 10 s more)."""
        proc, want = g.proc, {f.flow_id for f in g.flows}
        deadline, seen, known = time.monotonic() + PRECONNECT_TIMEOUT_S, None, set()
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                read_at = time.monotonic()
                with open(g.aout.name) as f:
                    text = f.read()
                # when the text said so, not after the sockets below were mapped (under
                # TCG that took long enough to put the origin 1.4 s after the flows began)
                if seen is None and MEASUREMENT_STARTED.search(text):
                    seen = read_at
                with self._sockets_lock:    # one watcher per process updates it
                    known = set(self.sockets)
                if not want <= known:
                    found = socket_ports(proc.pid, parse_connections(text), known)
                    with self._sockets_lock:
                        self.sockets.update(found)
                        known = set(self.sockets)
            except OSError:
                pass
            if seen is not None and (want <= known or time.monotonic() > seen + 10.0):
                g.seen_mono = seen
                g.measuring.set()
                break
            time.sleep(0.02)
        proc.wait()
        g.exit_mono = time.monotonic()

    def wait(self, timeout_s=None):
        """Wait for the active side to end by itself (its runtime, then the download)."""
        if self.actives[0].proc is None:
            return
        try:
            deadline = time.monotonic() + (timeout_s or self.runtime_s + 60)
            for g in self.actives:
                if g.proc is not None:
                    g.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        finally:
            self.stop()

    def stop(self):
        """End the measurement (SIGINT to every active process, then by PID after
        STOP_GRACE_S) and the passive side; read the outputs. Idempotent, and safe from
        two threads (the part's schedule and the run's teardown)."""
        with self._stop_lock:
            self._stop()

    def _stop(self):
        with self._lock:
            self._stopped = True
        running = [g.proc for g in self.actives
                   if g.proc is not None and g.proc.poll() is None]
        for proc in running:        # all at once: each stops its flows and downloads
            try:
                os.kill(proc.pid, 2)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        errors = []
        try:
            for proc in running:      # each one ended, whatever ending another one does
                try:
                    try:
                        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                    stop_process(proc)
                except Exception as exc:  # noqa: BLE001 - raised once all are ended
                    errors.append(exc)
            if self.passive is not None and self.passive.poll() is None:
                try:
                    try:
                        os.kill(self.passive.pid, 2)
                        self.passive.wait(timeout=3)
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        pass
                    stop_process(self.passive)
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
        finally:
            self._finish()
        if errors:
            raise errors[0]

    def _finish(self):
        if self._finished:
            return
        self._finished = True
        for g in self.actives:
            if g.watcher is not None:
                g.watcher.join(timeout=5)
            for attr, out in (("aout", "stdout"), ("aerr", "stderr")):
                f = getattr(g, attr)
                if f is not None and not f.closed:
                    f.seek(0)
                    setattr(g, out, f.read())
                    f.close()
        self.stdout = "\n".join(g.stdout for g in self.actives)
        self.stderr = "\n".join(g.stderr for g in self.actives)
        if self.measurement_seen_mono is None and all(g.seen_mono for g in self.actives):
            # a part started at its own time (not pre-connected): its last process's
            self.measurement_seen_mono = max(g.seen_mono for g in self.actives)
        f = getattr(self, "_pout", None)
        if f is not None and not f.closed:
            f.seek(0)
            self.passive_out = f.read()
            f.close()

    def cleanup(self):
        """Remove the temporary output directory (only one this object made)."""
        if self._own_dir:
            for fname in os.listdir(self.out_dir):
                os.unlink(os.path.join(self.out_dir, fname))
            os.rmdir(self.out_dir)


def socket_ports(pid, fds, known=()):
    """{flow id: (local port, remote port)} of the TCP sockets behind descriptors ``fds``
    ({flow id: fd}) of process ``pid``, read from /proc (its namespace's net/tcp); flows
    in ``known`` are skipped."""
    links = {}
    for flow_id, fd in fds.items():
        if flow_id not in known:
            try:
                links[flow_id] = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                pass
    if not links:
        return {}
    tables = []
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                tables.append(f.read())
        except OSError:
            pass
    return match_sockets(links, tables)


def match_sockets(links, tables):
    """{flow id: (local port, remote port)} from the descriptors' links ({flow id:
    'socket:[INODE]'}) and /proc/net/tcp texts (the inode is the 10th column)."""
    inodes = {}
    for flow_id, link in links.items():
        m = re.fullmatch(r"socket:\[(\d+)\]", link)
        if m:
            inodes[m[1]] = flow_id
    out = {}
    for text in tables:
        for line in text.splitlines()[1:]:
            p = line.split()
            if len(p) > 9 and p[9] in inodes:
                out[inodes[p[9]]] = (int(p[1].rsplit(":", 1)[1], 16),
                                     int(p[2].rsplit(":", 1)[1], 16))
    return out
