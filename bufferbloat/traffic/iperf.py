"""iperf3 flows: the tool (:class:`Iperf3Flow`), its JSON parsers, and the ``iperf``
traffic kind (long flows, staggered counts, on-off bursts, paced streams).

Each flow runs in a host's namespace as an argument list (never a shell string), is
owned by the :class:`~bufferbloat.net.network.Network` (ended by PID on teardown), and
parses ``iperf3 -J``.
"""

import json
import re
import subprocess
import tempfile
import threading
import time

from bufferbloat.core.errors import ParameterError
from bufferbloat.core.params import MIN_RATE_MBIT, Param, check_number, check_port
from bufferbloat.core.signals import stop_process
from bufferbloat.traffic.base import (
    Timed,
    TrafficPart,
    exit_problem,
    register,
    wait_listening,
)


class Iperf3Flow(Timed):
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
            self.client.wait(timeout=timeout_s or self.duration_s + self.omit_s + 30)
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
            self.server.wait(timeout=3)
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

    # ------------------------------------------------------------ results
    @property
    def goodput_mbit(self):
        """Receiver-side goodput over the flow (after ``omit_s``), Mbit/s."""
        return self.result["end"]["sum_received"]["bits_per_second"] / 1e6

    def flow_labels(self):
        """{(client host, client TCP source port): label} of every stream; with
        direction 'down' the sending socket is the server's, whose *destination* port is
        that client port."""
        return {(self.src, port): label
                for port, label in iperf3_stream_labels(self.result, self.name).items()}

    def stream_labels(self):
        """{client TCP source port: label} known before the flow runs: with ``cport``,
        iperf3 binds stream i to ``cport + i - 1`` and connects them in that order, which
        is the order :func:`iperf3_stream_labels` reads from its JSON afterwards; without
        ``cport``, {} (the ports are the kernel's choice)."""
        if self.cport is None:
            return {}
        if self.parallel == 1:
            return {self.cport: self.name}
        return {self.cport + i: f"{self.name}-{i + 1}" for i in range(self.parallel)}

    def sender_doc(self):
        """The JSON of the sending side: the client's ('up') or the server's ('down'),
        whose intervals carry cwnd, RTT and retransmits; None if unavailable."""
        if self.direction == "down" and self.server_result and \
                self.server_result.get("intervals"):
            return self.server_result
        return self.result

    def time_zero_mono(self):
        """Monotonic time of iperf3's interval time 0 (see the class docstring).

        A client ended by :meth:`stop` closes its last interval when the signal arrives:
        time zero = that moment - the last interval's end (exact to milliseconds).
        Otherwise the latest of: the JSON's whole-second start stamp, the client's
        launch, the moment all its connections were established (iperf3 starts its
        clock one round trip later: on an idle path microseconds, behind a full queue
        up to that queue's delay); never later than its exit - the last interval's end.
        """
        res = self.result or {}
        ts = (res.get("start", {}).get("timestamp") or {}).get("timesecs")
        lo = max(float(ts or 0), self.launched_real or 0) - self.rmm
        if self.established_mono is not None:
            lo = max(lo, self.established_mono)
        ends = [iv["sum"]["end"] for iv in res.get("intervals") or [] if "sum" in iv]
        if not ends:
            return lo
        if self.killed_mono is not None and (self.exit_mono is None
                                             or self.killed_mono <= self.exit_mono):
            return self.killed_mono - ends[-1]
        if self.exit_mono is not None:
            return min(lo, self.exit_mono - ends[-1])
        return lo

    def rows(self):
        """iperf.csv rows of the sending side (bytes sent per interval)."""
        doc = self.sender_doc()
        if not doc or self.launched_real is None:
            return []
        labels = iperf3_stream_labels(self.result, self.name)
        by_port = None
        if doc is not self.result:  # server JSON: its remote_port is the client's port
            by_port = "remote_port"
        return iperf3_rows(doc, self.name, labels, self.time_zero_mono() - self.t0,
                           port_key=by_port or "local_port")

    def raw_outputs(self):
        """{NAME.client.json, NAME.server.json}: iperf3's outputs as printed."""
        return {f"{self.name}.client.json": self.client_raw,
                f"{self.name}.server.json": self.server_raw}

    def summary(self):
        """Headline numbers: bytes sent and received, goodput (None if the receiver's
        total is missing, e.g. after :meth:`stop`), retransmits, CCAs used, ``error`` (a
        flow ended by :meth:`stop` reads 'interrupt - the client has terminated'),
        ``stopped``."""
        end = (self.result or {}).get("end", {})
        sent, recv = end.get("sum_sent", {}), end.get("sum_received", {})
        sender_end = (self.sender_doc() or {}).get("end") or {}  # the server's for 'down'
        t_zero = self.time_zero_mono() - self.t0 if self.launched_real else None
        return {"flow": self.name, "src": self.src, "dst": self.dst,
                "direction": self.direction, "sender": self.src if self.direction == "up"
                else self.dst, "port": self.port, "parallel": self.parallel,
                "cca_requested": self.cca, "sender_cca": (sender_end.get("sender_tcp_congestion")
                                                          or end.get("sender_tcp_congestion")),
                "receiver_cca": end.get("receiver_tcp_congestion"),
                "t_start": t_zero, "duration_s": self.duration_s,
                # when the client was launched (s since t0): iperf3's time zero comes a
                # few round trips later (its control exchange), behind a full queue
                # seconds later, which is physics, not lateness
                "t_launch": (self.run_time(self.launched_real)
                             if self.launched_real is not None else None),
                "bytes_sent": sent.get("bytes"), "bytes_received": recv.get("bytes"),
                # a client stopped early gets no receiver totals from the server
                "goodput_mbit": recv["bits_per_second"] / 1e6 if recv.get("bytes") else None,
                "retransmits": sent.get("retransmits"), "error": self.error,
                "stopped": self._stopped, "udp": self.udp,
                # a TCP flow without a rate cap means to send all the time (health's
                # sender check judges whether it did)
                "greedy": not self.udp and not self.rate_mbit,
                "udp_lost_pct": recv.get("lost_percent") if self.udp else None,
                "udp_jitter_ms": recv.get("jitter_ms") if self.udp else None,
                "streams": sorted(iperf3_stream_labels(self.result, self.name).values())}


def iperf3_stream_labels(doc, name):
    """{client TCP source port: label} from a client's iperf3 JSON: ``name`` for a single
    stream, ``name-1..N`` in connection order for several."""
    conns = ((doc or {}).get("start") or {}).get("connected") or []
    if len(conns) == 1:
        return {conns[0]["local_port"]: name}
    return {c["local_port"]: f"{name}-{i}" for i, c in enumerate(conns, 1)}


def iperf3_rows(doc, name, labels, offset_s, port_key="local_port"):
    """iperf.csv rows from one side's iperf3 JSON ``doc``.

    labels: {client port: label} (:func:`iperf3_stream_labels`); port_key: the key of
    ``start.connected`` entries holding the client's port ('local_port' in the client's
    JSON, 'remote_port' in the server's); offset_s: run time of iperf3's time 0. One row
    per stream and interval; with several streams also a row labelled ``name`` per interval
    (their sum; cwnd and RTT empty). Omitted (``-O``) intervals are left out.
    """
    sock_label = {c["socket"]: labels.get(c[port_key])
                  for c in (doc.get("start") or {}).get("connected") or []}
    single = len(sock_label) == 1
    rows = []

    def row(label, rec):
        return {"flow": label, "t_start": round(offset_s + rec["start"], 6),
                "t_end": round(offset_s + rec["end"], 6), "bytes": rec["bytes"],
                "bits_per_second": rec["bits_per_second"],
                "retransmits": rec.get("retransmits", ""),
                "snd_cwnd_bytes": rec.get("snd_cwnd", ""), "rtt_us": rec.get("rtt", "")}

    for iv in doc.get("intervals") or []:
        if iv.get("sum", {}).get("omitted"):
            continue
        for st in iv.get("streams", []):
            label = sock_label.get(st["socket"]) or f"{name}-socket{st['socket']}"
            rows.append(row(label, st))
        if not single and "sum" in iv:
            rows.append(row(name, iv["sum"]))
    return rows



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
    (one ``ss`` per host and poll, not one per flow), so that each flow's start later
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
            out = flows[0].net.run(host, ["ss", "-Hltn"], check=False)
            listening = {int(m) for m in re.findall(r":(\d+)\s", out)}
            want[host] -= listening
            if not want[host]:
                del want[host]
        if not want:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"iperf3 servers did not start listening: {want}")
        time.sleep(0.05)
    for f in flows:
        f._prepared = True


def sampled_flow(flow):
    """The sampler's spec of ``flow``'s TCP socket(s), labelled as its iperf.csv rows are:
    from the sending host's namespace, by the server's port (up: the destination port;
    down: the source port). Every socket is labelled with the flow's name, except the
    streams of an upload with ``cport``, labelled by their source ports
    (:meth:`Iperf3Flow.stream_labels`)."""
    if flow.udp:
        return None
    if flow.direction == "up":
        spec = {"host": flow.src, "dports": [flow.port], "label": flow.name}
        if flow.stream_labels():
            spec["labels"] = flow.stream_labels()
        return spec
    return {"host": flow.dst, "sports": [flow.port], "label": flow.name}


def flow_problem(flow):
    """Why the run cannot go on because of ``flow``: an error it reported, or its server
    or client exited with an error (the server also when it ended before its client)."""
    if flow.error:
        return f"iperf3 flow {flow.name}: {flow.error}"
    client_running = flow.client is not None and flow.client.poll() is None
    return (exit_problem(f"iperf3 server of {flow.name} (port {flow.port})", flow.server,
                         expect_running=client_running)
            or exit_problem(f"iperf3 client of {flow.name} (raw/{flow.name}.client.json)",
                            flow.client))


def flow_rows(flow):
    """iperf.csv rows of ``flow``; with ``-P N`` the N streams only (the per-interval
    sum row, labelled with the flow's name, would count twice)."""
    rows = flow.rows()
    if flow.parallel > 1:
        rows = [r for r in rows if r["flow"] != flow.name]
    return rows


def reported_flow_error(flow):
    """The error ``flow`` reported at its end, unless the run stopped it itself.

    A flow the run stopped (its scheduled stop, or the end of the run reached while a
    late-started flow still ran its ``-t``: under load, e.g. 40 staggered flows in the
    TCG VM, a client starts seconds late) reports "interrupt - the client has
    terminated": that is our doing, kept in its summary, not a failure."""
    if flow.error and not flow.stopped:
        return f"iperf3 flow {flow.name}: {flow.error}"
    return None


@register("iperf")
class IperfPart(TrafficPart):
    """iperf3 flows ``src`` -> ``dst``: ``count`` flows staggered over ``stagger_s``;
    with ``on_off_s`` = (on, off) each flow is a train of ``on``-second flows (a new
    connection each time, as an application that sends in bursts) every ``on + off``
    seconds, named NAME-on1, NAME-on2...; ``rate_mbit`` / ``rate_pct`` (of the bottleneck)
    pace them (``-b``)."""

    params = (
        Param("src", str, None, "the client host"),
        Param("dst", str, None, "the server host"),
        Param("parallel", int, 1, "parallel streams of each flow (-P)", lo=1, hi=128),
        Param("count", int, 1, "flows", lo=1, hi=1000),
        Param("stagger_s", float, 0.0, "the flows start uniformly within this many s",
              lo=0, hi=86_400),
        Param("cca", str, None, "congestion control (default: the sender's)"),
        Param("direction", str, "up", "up: src sends; down: dst sends (-R)",
              choices=("up", "down")),
        Param("mss_bytes", int, None, "TCP MSS (-M), bytes", lo=88, hi=9000),
        Param("rate_mbit", float, None, "pacing rate (-b), Mbit/s", lo=MIN_RATE_MBIT,
              hi=100_000),
        Param("rate_pct", float, None, "pacing rate, % of the bottleneck rate", lo=0,
              hi=1000, lo_open=True),
        Param("protocol", str, "tcp", "tcp or udp (-u)", choices=("tcp", "udp")),
        Param("on_off_s", tuple, None, "(on, off) seconds: bursts of new connections"),
    )

    def tools(self):
        spec, net = self.spec, self.ctx.net
        count, length, offsets = self.flow_starts()
        rate = spec.get("rate_mbit")
        if spec.get("rate_pct") is not None:
            rate = net.topo.bottleneck.rate_mbit * float(spec["rate_pct"]) / 100.0
        bursts = [(0.0, length, "")]
        if spec.get("on_off_s"):
            on, off = (float(x) for x in spec["on_off_s"])
            n = max(1, int((length + off) // (on + off)))
            bursts = [(k * (on + off), on, f"-on{k + 1}") for k in range(n)]
        out = []
        for i, offset in enumerate(offsets):
            base = spec["name"] if count == 1 else f"{spec['name']}{i + 1}"
            for at, dur, suffix in bursts:
                if offset + at >= length:
                    break
                parallel = int(spec.get("parallel", 1))
                udp = spec.get("protocol") == "udp"
                # an upload's streams bind known source ports, so that the sampler
                # labels their sockets as iperf3 will (one stream: its name suffices)
                cport = (self.ctx.ports("tcp_client", parallel)
                         if parallel > 1 and not udp and spec.get("direction", "up") == "up"
                         else None)
                flow = Iperf3Flow(net, spec["src"], spec["dst"],
                                  max(1.0, min(dur, length - offset - at)),
                                  cca=spec.get("cca") or net.topo.ccas.get(spec["src"]),
                                  port=self.ctx.ports("tcp"),
                                  parallel=parallel,
                                  name=base + suffix, direction=spec.get("direction", "up"),
                                  mss_bytes=spec.get("mss_bytes"), rate_mbit=rate,
                                  udp=udp, cport=cport, **self.ctx.clock)
                out.append((flow, self.start_s + offset + at, None))
        return out

    @property
    def flows(self):
        """The part's Iperf3Flow objects."""
        return [tool for tool, _, _ in self.plan]

    def prepare(self):
        """Every server listens before the clock starts: a flow's start is then its
        client's."""
        prepare_servers(self.flows)

    def tool_problem(self, tool):
        return flow_problem(tool)

    def reported_error(self):
        return next(filter(None, map(reported_flow_error, self.flows)), None)

    def rows(self):
        return {"iperf": [r for f in self.flows for r in flow_rows(f)]}

    def sampled_flows(self):
        return [s for s in map(sampled_flow, self.flows) if s]
