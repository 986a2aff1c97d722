"""An iperf3 flow's life (:class:`Iperf3Flow`): its server started and listening, its
client launched (at once or at its start time), watched until its connections are
established and it exits, stopped by PID, and its outputs read; and the helpers that do
so for many flows at once (:func:`watch_established`, :func:`prepare_servers`).

Each flow runs in a host's namespace as an argument list (never a shell string), is
owned by the :class:`~bufferbloat.net.network.Network` (ended by PID on teardown), and
parses ``iperf3 -J`` (its results: :class:`~bufferbloat.traffic.iperf.results.Iperf3Results`).
"""

import json
import subprocess
import tempfile
import threading
import time

from bufferbloat.core.errors import ParameterError
from bufferbloat.core.params import MIN_RATE_MBIT, check_number, check_port
from bufferbloat.core.signals import stop_process, wait_process
from bufferbloat.traffic.base import LISTEN_POLL_S, Timed, wait_listening
from bufferbloat.traffic.iperf.results import Iperf3Results


class Iperf3Flow(Iperf3Results, Timed):
    """One iperf3 TCP flow between client ``src`` and server ``dst``.

    duration_s: seconds of sending; cca: congestion control of the flow's sockets (``-C``;
    iperf3 applies it on both ends, the JSON reports what was used); port: server port
    (every flow needs its own); parallel: number of parallel streams (``-P``); omit_s:
    seconds at the start (slow start) left out of iperf3's totals (``-O``), sent in addition
    to duration_s.

    Keyword-only: ``name`` (label; default ``SRC-PORT``), ``direction`` 'up' (the client
    host ``src`` sends) or 'down' (``-R``: the server host ``dst`` sends to ``src``),
    ``start_s`` (start at t0 + start_s: :meth:`start` returns at once and a thread starts
    the server and client then), ``t0``, ``realtime_minus_monotonic``, ``mss_bytes``
    (``-M``), ``rate_mbit`` (``-b``, default unlimited; iperf3's default for UDP: 1 Mbit/s),
    ``udp`` (``-u``: an iperf3 UDP flow; its rows have no retransmits/cwnd/RTT, and it has
    no TCP socket for the sampler, though :meth:`flow_labels` still lists its ports),
    ``cport`` (``--cport``: the client's first TCP source port; stream i binds
    ``cport + i - 1``, so the streams' ports are known before the flow starts, see
    :meth:`stream_labels`).

    Labels: with one stream the flow's label is ``name``; with ``-P N`` the streams are
    ``name-1..name-N`` (in the order iperf3 connected them) and rows labelled ``name`` are
    their per-interval sum. :meth:`flow_labels` maps the client's TCP source ports to these
    labels as iperf3 reported them; :meth:`stream_labels` says the same before the run
    when ``cport`` is given.

    Timing: iperf3 3.12's JSON stamps the test start in whole seconds only
    (``start.timestamp.timesecs``); the flow's time zero is refined with our own clock
    (launch, connections established, exit or stop): see :meth:`time_zero_mono`.
    """

    def __init__(self, net, src, dst, duration_s, cca=None, port=5201, parallel=1, omit_s=0,
                 *, name=None, direction="up", start_s=0.0, t0=None,
                 realtime_minus_monotonic=None, mss_bytes=None, rate_mbit=None, udp=False,
                 cport=None):
        self.net, self.src, self.dst = net, src, dst
        self.duration_s = check_number("duration_s", duration_s, 0, 86_400, lo_open=True)
        self.cca = cca
        self.port = check_port(port)
        self.parallel = check_number("parallel", parallel, 1, 128, int)
        self.omit_s = check_number("omit_s", omit_s, 0, 86_400)
        if direction not in ("up", "down"):
            raise ParameterError("direction", direction, "'up' or 'down'")
        self.direction = direction
        self.start_s = check_number("start_s", start_s, 0, 86_400)
        self.mss_bytes = None if mss_bytes is None else check_number(
            "mss_bytes", mss_bytes, 88, 9000, int)
        self.rate_mbit = None if rate_mbit is None else check_number(
            "rate_mbit", rate_mbit, MIN_RATE_MBIT, 100_000)
        self.udp = bool(udp)
        if self.udp and self.mss_bytes:
            raise ParameterError("mss_bytes", mss_bytes, "only with TCP (udp=False)")
        self.cport = None if cport is None else check_port(cport, "cport")
        if self.cport is not None:
            check_port(self.cport + self.parallel - 1, "cport + parallel - 1")
            if self.udp:
                raise ParameterError("cport", cport, "only with TCP (udp=False)")
        self.name = name or f"{src}-{self.port}"
        self._init_clock(t0, realtime_minus_monotonic)
        self.server = self.client = None
        self.result = None
        self.server_result = None
        self.error = None
        self.client_raw = self.server_raw = ""
        self.launched_real = None
        self._thread = None
        self._done = False
        self._lock = threading.Lock()
        self._stopped = False
        self.established_mono = self.exit_mono = self.killed_mono = None
        self._watcher = None
        self._prepared = False

    # ------------------------------------------------------------ running
    def client_args(self):
        """The client's argument list (without the namespace prefix)."""
        args = ["iperf3", "-c", self.net.ip(self.dst), "-p", self.port, "-t",
                f"{self.duration_s:g}", "-J", "-i", "1", "-P", self.parallel]
        if self.omit_s:
            args += ["-O", f"{self.omit_s:g}"]
        if self.cca:
            args += ["-C", self.cca]
        if self.direction == "down":
            args.append("-R")
        if self.udp:
            args.append("-u")
        if self.mss_bytes:
            args += ["-M", self.mss_bytes]
        if self.rate_mbit:
            args += ["-b", f"{self.rate_mbit:g}M"]
        if self.cport is not None:
            args += ["--cport", self.cport]
        return args

    def start(self):
        """Start the server on dst, wait until it listens, then the client on src; with
        ``start_s`` > 0, a thread does so at t0 + start_s and this returns at once."""
        delay = self.t0 + self.start_s - time.monotonic()
        if self.start_s > 0 and delay > 0:
            self._thread = threading.Thread(target=self._delayed_start, args=(delay,),
                                            daemon=True, name=f"iperf3-{self.name}")
            self._thread.start()
        else:
            self._launch()
        return self

    def _delayed_start(self, delay):
        time.sleep(delay)
        with self._lock:
            if not self._stopped:
                try:
                    self._launch()
                except Exception as e:  # noqa: BLE001 (kept for wait/stop/summary)
                    self.error = f"start failed: {e}"

    def _launch(self):
        if not self._prepared:
            self._start_server()
            wait_listening(self.net, self.dst, self.port)
        self._start_client()

    def _start_server(self):
        # Output goes to files, not pipes: nobody reads a pipe while the tool runs, and a
        # full pipe would block the tool.
        self.server_out = tempfile.TemporaryFile(mode="w+")
        self.server = self.net.popen(self.dst, ["iperf3", "-s", "-1", "-p", self.port, "-J"],
                                     stdout=self.server_out, stderr=subprocess.STDOUT)

    def _start_client(self, poll_established=True):
        """Launch the client and its watcher; ``poll_established`` False: another thread
        notes when its connections are established (:func:`watch_established`)."""
        self.client_out = tempfile.TemporaryFile(mode="w+")
        self.client_err = tempfile.TemporaryFile(mode="w+")
        self.launched_real = time.time()
        self.client = self.net.popen(self.src, self.client_args(), stdout=self.client_out,
                                     stderr=self.client_err)
        self._watcher = threading.Thread(target=self._watch, args=(poll_established,),
                                         daemon=True, name=f"iperf3-watch-{self.name}")
        self._watcher.start()

    def established_count(self, lines):
        """(connections of this client established in ``lines`` of /proc/net/tcp, how
        many make it established)."""
        port_hex = f":{self.port:04X}"
        n = sum(1 for line in lines
                if (parts := line.split()) and parts[2].endswith(port_hex)
                and parts[3] == "01")
        return n, 1 if self.udp else self.parallel + 1

    def _watch(self, poll_established=True):
        """Note when every connection of the client is established and when it exits
        (monotonic): they bound iperf3's time zero (see :meth:`time_zero_mono`).

        Reads ``/proc/PID/net/tcp`` (the client's namespace, no fork) every 20 ms: 40 flows
        starting together under TCG must not spend the CPU their packets need
        (:func:`watch_established`, here for this client alone)."""
        if poll_established:
            watch_established([self])
        self.client.wait()
        self.exit_mono = time.monotonic()

    def wait(self, timeout_s=None):
        """Wait for the client to finish; parse and return its JSON result.

        Raises RuntimeError if iperf3 reported an error (the record is kept: rows(),
        summary() and raw_outputs() still work)."""
        if self._thread is not None:
            self._thread.join()
        if self.client is None:
            raise RuntimeError(f"iperf3 {self.name}: {self.error or 'not started'}")
        try:
            wait_process(self.client, timeout_s or self.duration_s + self.omit_s + 30)
        finally:
            self._finish()
        if self.error:
            raise RuntimeError(f"iperf3: {self.error}")
        return self.result

    @property
    def stopped(self):
        """True once the run stopped this flow itself (see :meth:`stop`)."""
        return self._stopped

    def stop(self):
        """End the flow now (by PID); iperf3 still reports the intervals it completed.
        Returns :meth:`summary`. Never raises for the tool's errors (see ``error``)."""
        with self._lock:
            self._stopped = True
        if self._thread is not None:
            self._thread.join()
        if self.client is not None:
            if self.client.poll() is None and self.killed_mono is None:
                self.killed_mono = time.monotonic()
            stop_process(self.client)
            self._finish()
        elif self.server is not None:      # prepared, never started: its server only
            stop_process(self.server)
        return self.summary()

    def _finish(self):
        if self._done:
            return
        self._done = True
        stop_process(self.client)
        if self._watcher is not None:
            self._watcher.join()
        # the server ends by itself after its one test (-1); give it a moment to report
        try:
            wait_process(self.server, 3)
        except subprocess.TimeoutExpired:
            stop_process(self.server)
        self.server_out.seek(0)
        self.server_raw = self.server_out.read()
        self.server_out.close()
        self.client_out.seek(0)
        self.client_raw = self.client_out.read()
        self.client_out.close()
        self.client_err.seek(0)
        err = self.client_err.read()
        self.client_err.close()
        try:
            self.result = json.loads(self.client_raw)
        except json.JSONDecodeError:
            self.result = None
            self.error = self.error or f"iperf3 client produced no JSON: {err.strip()[:500]}"
        else:
            if "error" in self.result:
                self.error = self.error or self.result["error"]
        try:
            self.server_result = json.loads(self.server_raw)
        except json.JSONDecodeError:
            self.server_result = None

    def stream_labels(self):
        """{client TCP source port: label} known before the flow runs: with ``cport``,
        iperf3 binds stream i to ``cport + i - 1`` and connects them in that order, which
        is the order :func:`~.output.iperf3_stream_labels` reads from its JSON
        afterwards; without ``cport``, {} (the ports are the kernel's choice)."""
        if self.cport is None:
            return {}
        if self.parallel == 1:
            return {self.cport: self.name}
        return {self.cport + i: f"{self.name}-{i + 1}" for i in range(self.parallel)}


def watch_established(flows, timeout_s=30.0):
    """Note each flow's ``established_mono`` (all its connections established), for
    flows whose clients run in ONE namespace, from one read of its /proc/net/tcp per
    20 ms: a watcher polling per client (8 for RRUL, launched together) spent the CPU
    the later launches needed under TCG (their last client launched 2.1-2.3 s late).
    Returns when every flow is established, or its client ended, or after
    ``timeout_s``; clients not launched yet are waited for."""
    pending = list(flows)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        live = [f for f in pending if f.client is not None and f.client.poll() is None]
        lines = None
        for f in live:
            try:
                with open(f"/proc/{f.client.pid}/net/tcp") as fh:
                    lines = fh.read().splitlines()[1:]
                break
            except OSError:
                continue
        now = time.monotonic()
        for f in list(pending):
            if f.client is None:
                continue
            if lines is not None:
                n, want = f.established_count(lines)
                if n >= want:
                    f.established_mono = now
                    pending.remove(f)
                    continue
            if f.client.poll() is not None:
                pending.remove(f)
        time.sleep(0.02)


def prepare_servers(flows, timeout_s=30.0):
    """Start the iperf3 server of every flow in ``flows`` now and wait until all listen
    (one look per host and poll, in this process: net.listening_ports), so that each
    flow's start later
    launches its client only: flows scheduled together start together, on time, instead
    of one after another behind each other's server start-up (seconds under TCG)."""
    for f in flows:
        f._start_server()
    want = {}
    for f in flows:
        want.setdefault(f.dst, set()).add(f.port)
    deadline = time.monotonic() + timeout_s
    while want:
        for host in list(want):
            want[host] -= flows[0].net.listening_ports(host)
            if not want[host]:
                del want[host]
        if not want:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"iperf3 servers did not start listening: {want}")
        time.sleep(LISTEN_POLL_S)
    for f in flows:
        f._prepared = True
