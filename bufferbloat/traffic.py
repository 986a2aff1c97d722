"""Traffic generators: iperf3 long flows, ping probes, an RRUL-like load, each a
start/stop/result object.

Each runs in a host's namespace as an argument list (never a shell string), is owned by
the :class:`~bufferbloat.network.Network` (ended by PID on teardown), and parses its tool's
machine-readable output: ``iperf3 -J`` JSON, ``ping -D -O`` per-probe lines with timestamps.

Common interface of the traffic objects (here, :mod:`.web`, :mod:`.udpstream`):

* ``name``: the label written in the series files;
* ``t0``: the run's ``time.monotonic()`` (default: when the object was created); every
  ``t`` in ``rows()`` is seconds since t0 (docs/SERIES.md). Wall-clock tool stamps are
  converted with ``realtime_minus_monotonic`` (default: measured when the object is
  created; the runner passes the value it stores in result.json);
* ``start()`` (returns self), ``wait(timeout_s)`` (until it ends by itself), ``stop()``
  (end it now; what was measured is kept);
* ``rows()``: dicts with exactly the columns of the object's series file (:data:`COLUMNS`);
* ``raw_outputs()``: {filename: text}, every tool's raw output (for ``raw/``);
* ``summary()``: headline numbers.

:class:`Schedule` starts objects at offsets from t0 in a thread and stops them.
"""

import json
import math
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .errors import ParameterError
from .network import stop_process
from .stats import percentile

#: Columns of the series files written from these objects' ``rows()``.
COLUMNS = {
    "iperf": ("flow", "t_start", "t_end", "bytes", "bits_per_second", "retransmits",
              "snd_cwnd_bytes", "rtt_us"),
    "ping": ("probe", "t", "seq", "rtt_ms"),
}

PING_LINE = re.compile(r"^\[(?P<ts>[0-9.]+)\].*icmp_seq=(?P<seq>\d+).*time=(?P<rtt>[0-9.]+) ms")
PING_NO_ANSWER = re.compile(r"^\[(?P<ts>[0-9.]+)\] no answer yet for icmp_seq=(?P<seq>\d+)")


def realtime_minus_monotonic():
    """``time.time() - time.monotonic()`` now: adds to a monotonic time to give wall time."""
    return time.time() - time.monotonic()


_rmm_now = realtime_minus_monotonic


def check_number(name, value, lo, hi, conv=float, lo_open=False):
    """``conv(value)`` if within lo..hi (lo excluded when ``lo_open``), else ParameterError."""
    try:
        v = conv(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, f"a number in {lo}..{hi}") from None
    if (isinstance(v, float) and math.isnan(v)) or v > hi or v < lo or (lo_open and v == lo):
        raise ParameterError(name, value, f"{'>' if lo_open else '>='} {lo} and <= {hi}")
    return v


def check_port(port, name="port"):
    """A TCP/UDP port 1..65535."""
    return check_number(name, port, 1, 65535, int)


class _Timed:
    """The clock of a traffic object: t0 and the realtime offset."""

    def _init_clock(self, t0, rmm):
        self.t0 = time.monotonic() if t0 is None else float(t0)
        self.rmm = realtime_minus_monotonic() if rmm is None else float(rmm)

    def run_time(self, realtime_s):
        """Wall-clock seconds -> seconds since t0."""
        return realtime_s - self.rmm - self.t0


class Iperf3Flow(_Timed):
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
    no TCP socket for the sampler, though :meth:`flow_labels` still lists its ports).

    Labels: with one stream the flow's label is ``name``; with ``-P N`` the streams are
    ``name-1..name-N`` (in the order iperf3 connected them) and rows labelled ``name`` are
    their per-interval sum. :meth:`flow_labels` maps the client's TCP source ports to these
    labels.

    Timing: iperf3 3.12's JSON stamps the test start in whole seconds only
    (``start.timestamp.timesecs``); the flow's time zero is refined with our own clock
    (launch, connections established, exit or stop): see :meth:`time_zero_mono`.
    """

    def __init__(self, net, src, dst, duration_s, cca=None, port=5201, parallel=1, omit_s=0,
                 *, name=None, direction="up", start_s=0.0, t0=None,
                 realtime_minus_monotonic=None, mss_bytes=None, rate_mbit=None, udp=False):
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
            "rate_mbit", rate_mbit, 0, 100_000, lo_open=True)
        self.udp = bool(udp)
        if self.udp and self.mss_bytes:
            raise ParameterError("mss_bytes", mss_bytes, "only with TCP (udp=False)")
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
            _wait_listening(self.net, self.dst, self.port)
        self._start_client()

    def _start_server(self):
        # Output goes to files, not pipes: nobody reads a pipe while the tool runs, and a
        # full pipe would block the tool.
        self.server_out = tempfile.TemporaryFile(mode="w+")
        self.server = self.net.popen(self.dst, ["iperf3", "-s", "-1", "-p", self.port, "-J"],
                                     stdout=self.server_out, stderr=subprocess.STDOUT)

    def _start_client(self):
        self.client_out = tempfile.TemporaryFile(mode="w+")
        self.client_err = tempfile.TemporaryFile(mode="w+")
        self.launched_real = time.time()
        self.client = self.net.popen(self.src, self.client_args(), stdout=self.client_out,
                                     stderr=self.client_err)
        self._watcher = threading.Thread(target=self._watch, daemon=True,
                                         name=f"iperf3-watch-{self.name}")
        self._watcher.start()

    def _watch(self):
        """Note when every connection of the client is established and when it exits
        (monotonic): they bound iperf3's time zero (see :meth:`time_zero_mono`).

        Reads ``/proc/PID/net/tcp`` (the client's namespace, no fork) every 20 ms: 40 flows
        starting together under TCG must not spend the CPU their packets need."""
        proc, want = self.client, 1 if self.udp else self.parallel + 1
        port_hex = f":{self.port:04X}"
        path = f"/proc/{proc.pid}/net/tcp"
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with open(path) as f:
                    lines = f.read().splitlines()[1:]
            except OSError:
                break
            n = sum(1 for line in lines
                    if (parts := line.split()) and parts[2].endswith(port_hex)
                    and parts[3] == "01")
            if n >= want:
                self.established_mono = time.monotonic()
                break
            time.sleep(0.02)
        proc.wait()
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

    def interval_mbit(self):
        """Per-interval throughput series [(t_end_s, Mbit/s)] as the client saw it."""
        return [(iv["sum"]["end"], iv["sum"]["bits_per_second"] / 1e6)
                for iv in (self.result or {}).get("intervals", [])]

    def flow_labels(self):
        """{(client host, client TCP source port): label} of every stream; with
        direction 'down' the sending socket is the server's, whose *destination* port is
        that client port."""
        return {(self.src, port): label
                for port, label in iperf3_stream_labels(self.result, self.name).items()}

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


@dataclass
class PingResult:
    """Per-probe ping record: ``probes`` [(unix_ts, seq, rtt_ms)], ``sent`` count."""

    probes: list = field(default_factory=list)
    sent: int = 0

    @property
    def rtts(self):
        """RTTs of answered probes, ms."""
        return [p[2] for p in self.probes]

    @property
    def loss_pct(self):
        """Percentage of probes never answered."""
        return 100.0 * (self.sent - len(self.probes)) / self.sent if self.sent else 0.0


class PingProbe(_Timed):
    """ping from ``src`` to ``dst`` every ``interval_s`` (root allows < 0.2 s), ``count``
    probes (or until stopped).

    Runs ``ping -D -O``: every reply carries its wall-clock stamp and every unanswered
    probe is reported ("no answer yet"). Keyword-only: ``name`` (label, default
    ``ping-SRC-DST``), ``t0``, ``realtime_minus_monotonic``.
    """

    def __init__(self, net, src, dst, interval_s=0.1, count=None, size_bytes=56, *,
                 name=None, t0=None, realtime_minus_monotonic=None):
        self.net, self.src, self.dst = net, src, dst
        self.interval_s = check_number("interval_s", interval_s, 0.002, 3600)
        self.count = None if count is None else check_number("count", count, 1, 10**9, int)
        self.size_bytes = check_number("size_bytes", size_bytes, 0, 65507, int)
        self.name = name or f"ping-{src}-{dst}"
        self._init_clock(t0, realtime_minus_monotonic)
        self.proc = None
        self.result = None
        self.raw = ""

    def start(self):
        """Start pinging."""
        args = ["ping", "-D", "-O", "-n", "-i", f"{self.interval_s:g}", "-s", self.size_bytes]
        if self.count:
            args += ["-c", self.count]
        # a file, not a pipe: nobody reads while ping runs, and a full pipe would block it
        self.out = tempfile.TemporaryFile(mode="w+")
        self.proc = self.net.popen(self.src, args + [self.net.ip(self.dst)],
                                   stdout=self.out, stderr=subprocess.STDOUT)
        return self

    def stop(self):
        """End the probe (by PID) and parse what it printed."""
        if self.proc is None or self.result is not None:
            return self.result
        stop_process(self.proc)
        return self._parse()

    def wait(self, timeout_s=None):
        """Wait for ``count`` probes to complete and parse."""
        self.proc.wait(timeout=timeout_s)
        return self._parse()

    def _parse(self):
        if self.result is not None:
            return self.result
        self.out.seek(0)
        self.raw = self.out.read()
        self.out.close()
        self.result = parse_ping(self.raw)
        return self.result

    def probes(self):
        """[(seq, sent_realtime_s, rtt_ms or None)] (see :func:`parse_ping_probes`)."""
        return parse_ping_probes(self.raw, self.interval_s)

    def rows(self):
        """ping.csv rows: probe, t (run time the probe was sent), seq, rtt_ms ('' if
        lost)."""
        return [{"probe": self.name, "t": round(self.run_time(ts), 6), "seq": seq,
                 "rtt_ms": "" if rtt is None else rtt}
                for seq, ts, rtt in self.probes()]

    def raw_outputs(self):
        """{NAME.txt: ping's output}."""
        return {f"{self.name}.txt": self.raw}

    def summary(self):
        """sent, received, loss_pct and RTT statistics (ms) of answered probes."""
        probes = self.probes()
        rtts = sorted(r for _, _, r in probes if r is not None)
        out = {"probe": self.name, "src": self.src, "dst": self.dst,
               "interval_s": self.interval_s, "sent": len(probes), "received": len(rtts),
               "loss_pct": 100.0 * (len(probes) - len(rtts)) / len(probes) if probes
               else None}
        out.update(rtt_stats(rtts))
        return out


def rtt_stats(sorted_ms):
    """min/mean/p50/p95/p99/max (ms) of sorted values; None when empty."""
    keys = ("rtt_min_ms", "rtt_mean_ms", "rtt_p50_ms", "rtt_p95_ms", "rtt_p99_ms",
            "rtt_max_ms")
    if not sorted_ms:
        return dict.fromkeys(keys)
    return dict(zip(keys, (sorted_ms[0], sum(sorted_ms) / len(sorted_ms),
                           percentile(sorted_ms, 50), percentile(sorted_ms, 95),
                           percentile(sorted_ms, 99), sorted_ms[-1])))


def parse_ping_probes(text, interval_s):
    """Every probe of a ``ping -D -O`` output: [(seq, sent_realtime_s, rtt_ms or None)],
    by seq.

    The time is when the probe was *sent*: a reply's ``-D`` stamp (taken on receipt) minus
    its RTT; for an unanswered probe, the stamp of ping's "no answer yet" line (printed as
    the next probe goes out) minus ``interval_s``. A late reply after "no answer yet" counts
    as answered; duplicates are ignored. When ping's summary says more probes were
    transmitted than lines mention (the last ones, unanswered when it stopped), they are
    added as lost, one interval apart after the last one known. Sequence numbers are
    taken as printed (they wrap after 65535 probes: 1.8 h at 0.1 s).
    """
    answered, missing = {}, {}
    for line in text.splitlines():
        m = PING_LINE.match(line)
        if m:
            seq = int(m["seq"])
            if seq not in answered:
                rtt = float(m["rtt"])
                answered[seq] = (float(m["ts"]) - rtt / 1000.0, rtt)
            continue
        m = PING_NO_ANSWER.match(line)
        if m:
            missing.setdefault(int(m["seq"]), float(m["ts"]) - interval_s)
    probes = {seq: (ts, rtt) for seq, (ts, rtt) in answered.items()}
    for seq, ts in missing.items():
        probes.setdefault(seq, (ts, None))
    summary = re.search(r"(\d+) packets transmitted", text)
    if summary and probes:
        last = max(probes)
        for seq in range(last + 1, int(summary.group(1)) + 1):
            probes[seq] = (probes[last][0] + (seq - last) * interval_s, None)
    return [(seq, ts, rtt) for seq, (ts, rtt) in sorted(probes.items())]


def parse_ping(text):
    """Parse ``ping -D`` output into a :class:`PingResult` (stamps as printed: on receipt).

    ``sent`` comes from ping's summary line when present, else from the highest
    sequence number seen (a stopped ping may not print its summary).
    """
    res = PingResult()
    for line in text.splitlines():
        m = PING_LINE.match(line)
        if m:
            res.probes.append((float(m["ts"]), int(m["seq"]), float(m["rtt"])))
    summary = re.search(r"(\d+) packets transmitted", text)
    if summary:
        res.sent = int(summary.group(1))
    elif res.probes:
        res.sent = max(p[1] for p in res.probes)
    return res


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


def _wait_listening(net, host, port, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = net.run(host, ["ss", "-Hltn", f"sport = :{port}"], check=False)
        if out.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"iperf3 server on {host}:{port} did not start listening")


class QdiscPoller:
    """Polls ``tc -s -j qdisc show`` of the bottleneck every ``period_s`` in a thread.

    A stop-gap for tests and the benchmark of the emulation core; it forks ``tc`` each
    tick, so keep the period >= 50 ms. Samples: [(monotonic_s, [qdisc dicts])] of the
    bottleneck; ``others`` {(ns, dev): samples} of any ``extra`` (ns, dev) polled too.
    """

    def __init__(self, net, period_s=0.1, extra=()):
        import threading
        self.net, self.period_s = net, period_s
        self.samples = []
        self.extra = list(extra)
        self.others = {key: [] for key in self.extra}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        """Start polling."""
        self._thread.start()
        return self

    def stop(self):
        """Stop polling; return the samples."""
        self._stop.set()
        self._thread.join()
        return self.samples

    def _loop(self):
        ns, dev = self.net.bottleneck_dev
        nxt = time.monotonic()
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.net.qdisc_show(ns, dev)))
            for key in self.extra:
                self.others[key].append((time.monotonic(), self.net.qdisc_show(*key)))
            nxt += self.period_s
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def series(self, parent=None, kind=None):
        """[(t_s, qdisc dict)] for the qdisc at ``parent`` (e.g. '1:1') or of ``kind``."""
        out = []
        for t, qdiscs in self.samples:
            for q in qdiscs:
                if (parent and q.get("parent") == parent) or (kind and q.get("kind") == kind):
                    out.append((t, q))
                    break
        return out


class Schedule:
    """Starts traffic objects at offsets from ``t0`` in one thread, and stops them.

    ``add(obj, at_s=0, stop_at_s=None)``: ``obj.start()`` at t0 + at_s, ``obj.stop()`` at
    t0 + stop_at_s (None: left running until :meth:`stop`). :meth:`start` returns at once;
    :meth:`stop` ends the timeline (objects not yet started are never started) and calls
    ``stop()`` of every started object not stopped yet, in reverse order. Errors raised by
    an object's start are kept in ``errors`` [(obj, exception)], not raised in the thread.
    """

    def __init__(self, t0=None):
        self.t0 = time.monotonic() if t0 is None else t0
        self.events = []      # (t_s, seq, action, obj)
        self.started, self.stopped, self.errors = [], [], []
        self._halt = threading.Event()
        self._thread = None
        self._lock = threading.Lock()

    def add(self, obj, at_s=0.0, stop_at_s=None):
        """Schedule ``obj``; returns it."""
        at_s = check_number("at_s", at_s, 0, 86_400)
        self.events.append((at_s, len(self.events), "start", obj))
        if stop_at_s is not None:
            stop_at_s = check_number("stop_at_s", stop_at_s, at_s, 86_400)
            self.events.append((stop_at_s, len(self.events), "stop", obj))
        return obj

    def start(self):
        """Run the timeline in a thread."""
        self._thread = threading.Thread(target=self._run, daemon=True, name="schedule")
        self._thread.start()
        return self

    def _run(self):
        for t_s, _, action, obj in sorted(self.events, key=lambda e: (e[0], e[1])):
            if self._halt.wait(max(0.0, self.t0 + t_s - time.monotonic())):
                return
            with self._lock:
                if self._halt.is_set():
                    return
                try:
                    if action == "start":
                        obj.start()
                        self.started.append(obj)
                    elif obj in self.started and obj not in self.stopped:
                        self.stopped.append(obj)
                        obj.stop()
                except Exception as e:  # noqa: BLE001 (reported through errors)
                    self.errors.append((obj, e))

    def wait(self, timeout_s=None):
        """Wait until every scheduled event has happened."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stop(self):
        """Halt the timeline and stop every running object."""
        self._halt.set()
        with self._lock:
            pending = [o for o in self.started if o not in self.stopped]
            self.stopped.extend(pending)
        if self._thread is not None:
            self._thread.join()
        for obj in reversed(pending):
            try:
                obj.stop()
            except Exception as e:  # noqa: BLE001
                self.errors.append((obj, e))
        return self


class Rrul:
    """An RRUL-like load between hosts ``a`` and ``b``: 4 TCP uploads (a sends), 4 TCP
    downloads (iperf3 ``-R``: b sends to a), each its own iperf3 flow and port
    (``base_port``..+7), and ping probes a -> b, for ``duration_s`` from ``start()``.

    Labels: ``NAME-up-1..4``, ``NAME-down-1..4``, ``NAME-ping`` (name default 'rrul').
    ``rows()`` gives {'iperf': [...], 'ping': [...]}: the rows of every part per series.
    """

    def __init__(self, net, a, b, duration_s, t0=None, cca=None, *, name="rrul",
                 base_port=5301, ping_interval_s=0.1, realtime_minus_monotonic=None,
                 flows_each_way=4):
        self.name, self.a, self.b = name, a, b
        self.duration_s = check_number("duration_s", duration_s, 0, 86_400, lo_open=True)
        n = check_number("flows_each_way", flows_each_way, 1, 64, int)
        check_port(base_port, "base_port")
        check_port(base_port + 2 * n - 1, "base_port + flows - 1")
        self.t0 = time.monotonic() if t0 is None else t0
        self.rmm = (_rmm_now() if realtime_minus_monotonic is None
                    else realtime_minus_monotonic)
        clock = dict(t0=self.t0, realtime_minus_monotonic=self.rmm)
        self.flows = []
        for i in range(n):
            for j, direction in enumerate(("up", "down")):
                self.flows.append(Iperf3Flow(
                    net, a, b, duration_s, cca=cca, port=base_port + 2 * i + j,
                    name=f"{name}-{direction}-{i + 1}", direction=direction, **clock))
        self.flows.sort(key=lambda f: (f.direction != "up", f.name))
        self.ping = PingProbe(net, a, b, ping_interval_s, name=f"{name}-ping", **clock)

    @property
    def parts(self):
        """Every traffic object of the load."""
        return self.flows + [self.ping]

    def start(self):
        """Start the pings, every flow's server, and once all listen, every client."""
        self.ping.start()
        waiting = [f for f in self.flows if not f._prepared]
        if waiting:
            prepare_servers(waiting)
        for f in self.flows:
            f._start_client()
        return self

    def wait(self, timeout_s=None):
        """Wait for the flows to end, then stop the pings. Flow errors are kept in the
        flows' ``error`` (see :meth:`summary`), not raised."""
        for f in self.flows:
            try:
                f.wait(timeout_s)
            except RuntimeError:
                pass
        self.ping.stop()
        return self.summary()

    def stop(self):
        """End everything now."""
        for f in self.flows:
            f.stop()
        self.ping.stop()
        return self.summary()

    def flow_labels(self):
        """{(host, client port): label} of every flow."""
        out = {}
        for f in self.flows:
            out.update(f.flow_labels())
        return out

    def rows(self):
        """{'iperf': rows of every flow, 'ping': rows of the probe}."""
        return {"iperf": [r for f in self.flows for r in f.rows()], "ping": self.ping.rows()}

    def raw_outputs(self):
        """Every part's raw outputs."""
        out = {}
        for part in self.parts:
            out.update(part.raw_outputs())
        return out

    def summary(self):
        """Sum of upload and download goodput, per-flow summaries, ping statistics."""
        flows = [f.summary() for f in self.flows]

        def total(direction):
            vals = [s["goodput_mbit"] for s in flows if s["direction"] == direction]
            return sum(vals) if vals and None not in vals else None
        return {"name": self.name, "up_mbit": total("up"), "down_mbit": total("down"),
                "flows": flows, "ping": self.ping.summary() if self.ping.result else None,
                "errors": [s["error"] for s in flows if s["error"]]}
