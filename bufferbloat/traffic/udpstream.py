"""UDP streams ("video"): :class:`UdpStream` drives a paced sender and a recording
receiver (:mod:`bufferbloat.traffic.udptool`) and parses what they recorded; the ``udp`` traffic
kind is one stream."""

import csv
import io
import os
import subprocess
import sys
import tempfile
import time

from bufferbloat.core.params import MIN_RATE_MBIT, Param, check_number
from bufferbloat.core.paths import IMPORT_ROOT
from bufferbloat.core.signals import stop_process
from bufferbloat.core.stats import percentile
from bufferbloat.traffic.base import TrafficPart, exit_problem, register
from bufferbloat.traffic.udptool import MAX_SIZE, MIN_SIZE, check_stream_params

REPO_ROOT = str(IMPORT_ROOT)   # a child's working directory: it imports bufferbloat


def parse_recv_csv(text):
    """Receiver output -> [(seq, t_sent, t_recv, size)] (monotonic seconds)."""
    rows = []
    for rec in csv.DictReader(io.StringIO(text)):
        rows.append((int(rec["seq"]), float(rec["t_sent"]), float(rec["t_recv"]),
                     int(rec["size"])))
    return rows


def stream_stats(packets, sent):
    """Summary of received ``packets`` [(seq, t_sent, t_recv, size)] of which ``sent``
    were sent.

    throughput_kbit: payload bits received / (last - first arrival) with the first packet's
    share excluded (n-1 packets over n-1 gaps); jitter_ms: RFC 3550 interarrival jitter
    (J += (|D| - J) / 16 over packets in arrival order); latency: one-way t_recv - t_sent.
    """
    received = len({p[0] for p in packets})
    out = {"sent": sent, "received": received,
           "loss_pct": 100.0 * (sent - received) / sent if sent else None,
           "throughput_kbit": None, "jitter_ms": None, "latency_mean_ms": None,
           "latency_p50_ms": None, "latency_p95_ms": None, "latency_p99_ms": None,
           "bytes_received": sum(p[3] for p in packets)}
    if not packets:
        return out
    by_arrival = sorted(packets, key=lambda p: p[2])
    if len(by_arrival) >= 2:
        span = by_arrival[-1][2] - by_arrival[0][2]
        if span > 0:
            out["throughput_kbit"] = sum(p[3] for p in by_arrival[1:]) * 8 / span / 1000
    jitter = 0.0
    for prev, cur in zip(by_arrival, by_arrival[1:]):
        d = (cur[2] - prev[2]) - (cur[1] - prev[1])
        jitter += (abs(d) - jitter) / 16.0
    out["jitter_ms"] = jitter * 1000
    lat = sorted((p[2] - p[1]) * 1000 for p in packets)
    out["latency_mean_ms"] = sum(lat) / len(lat)
    for p in (50, 95, 99):
        out[f"latency_p{p}_ms"] = percentile(lat, p)
    return out


class UdpStream:
    """A UDP stream ``src`` -> ``dst`` at ``rate_kbit`` in ``size_bytes`` datagrams
    (UDP payload), from ``start_s`` after ``t0`` for ``duration_s``.

    :meth:`prepare` starts the receiver on dst and the sender on src and returns once
    both are up (their interpreters take seconds under TCG): the sender then waits for
    its start time on stdin. :meth:`start` (which prepares first if that was not done)
    tells it the time and returns at once: ``t0 + start_s``, or, with ``send_on_start``,
    now (a schedule calls ``start()`` at the stream's time: a traffic part, whose
    times count from the traffic's origin, not from ``t0``). ``wait()`` waits for the
    sender to finish; ``stop()`` ends both (a stopped sender still reports what it sent)
    and parses. ``t0``: the run's ``time.monotonic()`` (default: when the object is
    created); ``rows()`` are udp.csv rows with t_sent/t_recv in run time
    (CLOCK_MONOTONIC needs no realtime conversion). ``rate_kbit`` counts UDP payload bits
    (a 1200-byte payload is a 1242-byte Ethernet frame at the bottleneck). ``port``: the
    receiver's UDP port (one per stream).
    """

    #: how long the receiver outlives the stream's planned end if stop() never comes (a
    #: prepared stream's start is not known yet: the traffic's origin comes after it)
    RECV_SPARE_S = 2.0
    PREPARED_SPARE_S = 120.0

    def __init__(self, net, src, dst, rate_kbit, size_bytes=1200, start_s=0.0,
                 duration_s=10.0, t0=None, port=5600, name=None, work_dir=None,
                 send_on_start=False):
        self.work_dir = work_dir   # the receiver's CSV goes there (e.g. the run's raw/)
        self.rate_kbit, self.size_bytes, self.duration_s, self.port = check_stream_params(
            rate_kbit, size_bytes, duration_s, port)
        self.start_s = check_number("start_s", start_s, 0, 86_400)
        self.net, self.src, self.dst = net, src, dst
        self.t0 = time.monotonic() if t0 is None else t0
        self.name = name or f"udp-{src}-{dst}-{self.port}"
        self.send_on_start = send_on_start
        # when it was due (s since t0); a schedule sets the run time of its offset
        self.scheduled_s = None if send_on_start else self.start_s
        self.start_at = None       # the CLOCK_MONOTONIC time the sender was told
        self.sender = self.receiver = None
        self.packets = []
        self.sent = self.t_first_send = None
        self.raw = {}

    def prepare(self):
        """Start the receiver on dst and the sender on src side by side; return once the
        receiver is bound and the sender's interpreter is up (it then waits for
        :meth:`start`)."""
        if self.sender is not None:
            return self
        if self.work_dir:
            # in the run directory: a run killed with SIGKILL keeps what was received
            # there, and no temporary file is left behind
            self._recv_path = os.path.join(self.work_dir, f"{self.name}.recv.csv")
            open(self._recv_path, "w").close()
        else:
            tmp = tempfile.NamedTemporaryFile(mode="w+", suffix=".csv", prefix="udprecv-",
                                              delete=False)
            tmp.close()
            self._recv_path = tmp.name
        os.chmod(self._recv_path, 0o666)
        self._recv_log = tempfile.TemporaryFile(mode="w+")
        wait_s = max(0.0, self.t0 + self.start_s - time.monotonic())
        spare = self.PREPARED_SPARE_S if self.send_on_start else self.RECV_SPARE_S
        recv_dur = wait_s + self.duration_s + spare   # ends by itself if stop() never comes
        self.receiver = self.net.popen(
            self.dst, [sys.executable, "-m", "bufferbloat.traffic.udptool", "recv", "--port",
                       self.port, "--out", self._recv_path, "--duration", f"{recv_dur:.3f}"],
            stdout=subprocess.PIPE, stderr=self._recv_log, cwd=REPO_ROOT)
        # both interpreters start side by side (1-2 s each under TCG); the sender sends
        # nothing before start(), by which time the receiver is bound
        self._send_log = tempfile.TemporaryFile(mode="w+")
        self.sender = self.net.popen(
            self.src, [sys.executable, "-m", "bufferbloat.traffic.udptool", "send", "--dst",
                       self.net.ip(self.dst), "--port", self.port, "--rate-kbit",
                       f"{self.rate_kbit:g}", "--size", self.size_bytes, "--duration",
                       f"{self.duration_s:g}", "--start-at-stdin"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._send_log,
            cwd=REPO_ROOT, text=True)
        try:
            self._await_ready(self.receiver, f"UDP receiver on {self.dst}:{self.port}",
                              self._recv_log)
            self._await_ready(self.sender, f"UDP sender on {self.src}", self._send_log)
        except RuntimeError:
            self.sender.stdin.close()
            stop_process(self.sender)
            stop_process(self.receiver)
            raise
        return self

    def _await_ready(self, proc, what, log):
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                stop_process(proc)
            log.seek(0)
            raise RuntimeError(f"{what} did not start: {log.read().strip()[:500]}")

    def start(self):
        """Tell the sender when to send (preparing first if needed); returns at once."""
        self.prepare()
        now = time.monotonic()
        self.start_at = now if self.send_on_start else max(now, self.t0 + self.start_s)
        self.sender.stdin.write(f"START_AT {self.start_at:.6f}\n")
        self.sender.stdin.close()
        return self

    def wait(self, timeout_s=None):
        """Wait for the sender to finish, give the last packets 0.5 s, then stop."""
        left = (self.start_at or time.monotonic()) + self.duration_s - time.monotonic()
        self.sender.wait(timeout=timeout_s or max(0, left) + 30)
        time.sleep(0.5)
        return self.stop()

    def stop(self):
        """End sender and receiver (by PID), parse; returns :meth:`summary`."""
        if self.sender is None:
            return self.summary()
        if not self.sender.stdin.closed:
            # never told when to send (the run ended first): end of input ends it
            self.sender.stdin.close()
        stop_process(self.sender)
        stop_process(self.receiver)
        self.receiver.stdout.close()
        send_text = self.sender.stdout.read()
        self.sender.stdout.close()
        self._send_log.seek(0)
        send_text += self._send_log.read()
        self._send_log.close()
        with open(self._recv_path) as f:
            recv_text = f.read()
        if not self.work_dir:
            os.unlink(self._recv_path)
        self._recv_log.seek(0)
        recv_log = self._recv_log.read()
        self._recv_log.close()
        self.raw = {f"{self.name}.send.txt": send_text, f"{self.name}.recv.csv": recv_text}
        if recv_log.strip():
            self.raw[f"{self.name}.recv.log"] = recv_log
        self.sent = parse_sent(send_text)
        self.send_failed = parse_failed(send_text)
        first = parse_start(send_text)
        self.t_first_send = None if first is None else first - self.t0
        self.packets = parse_recv_csv(recv_text)
        self.sender = None
        return self.summary()

    def rows(self):
        """udp.csv rows: stream, seq, t_sent, t_recv (run time, s), size_bytes."""
        return [{"stream": self.name, "seq": s, "t_sent": round(ts - self.t0, 6),
                 "t_recv": round(tr - self.t0, 6), "size_bytes": n}
                for s, ts, tr, n in self.packets]

    def raw_outputs(self):
        """{filename: text} of the sender's report and the receiver's per-packet CSV."""
        return dict(self.raw)

    def summary(self):
        """sent, received, loss_pct, throughput_kbit, jitter_ms, latency mean/p50/p95/p99
        (ms) (see :func:`stream_stats`), send_failed (sends the sender's own socket
        refused: not in ``sent``, not counted as loss), and the configuration; as a flow
        of the run's health check (``flow``, ``scheduled_s``, ``t_launch``: when it was
        due and when its sender began, s since t0)."""
        out = stream_stats(self.packets, self.sent or 0)
        out.update({"send_failed": getattr(self, "send_failed", None), "stream": self.name,
                    "flow": self.name, "udp": True, "t_launch": self.t_first_send,
                    "src": self.src, "dst": self.dst,
                    "rate_kbit": self.rate_kbit, "size_bytes": self.size_bytes,
                    "start_s": self.start_s, "duration_s": self.duration_s})
        if self.scheduled_s is not None:    # not before a schedule set it
            out["scheduled_s"] = self.scheduled_s
        return out


def parse_sent(text):
    """The sender's last line ``SENT n`` -> n (None if missing)."""
    return _report_value(text, "SENT")


def parse_start(text):
    """The sender's ``START <CLOCK_MONOTONIC s>`` line (its first send) -> s, or None."""
    return _report_value(text, "START", float)


def parse_failed(text):
    """The sender's ``FAILED n`` line (sends refused locally) -> n (None if missing)."""
    return _report_value(text, "FAILED")


def _report_value(text, key, conv=int):
    for line in reversed(text.splitlines()):
        if line.startswith(key + " "):
            return conv(line.split()[1])
    return None


@register("udp")
class UdpPart(TrafficPart):
    """A UDP stream ``src`` -> ``dst`` at ``rate_kbit`` in ``size_bytes`` datagrams from
    the part's start to its stop: sender and receiver start before the clock
    (:meth:`prepare`), the schedule tells the sender to send at the part's start."""

    params = (
        Param("src", str, None, "the sending host"),
        Param("dst", str, None, "the receiving host"),
        Param("rate_kbit", float, None, "rate, kbit/s of UDP payload",
              lo=MIN_RATE_MBIT * 1000, hi=10_000_000),
        Param("size_bytes", int, 1200, "UDP payload per packet, bytes", lo=MIN_SIZE,
              hi=MAX_SIZE),
    )

    def tools(self):
        spec = self.spec
        self.stream = UdpStream(self.ctx.net, spec["src"], spec["dst"], spec["rate_kbit"],
                                spec.get("size_bytes", 1200), start_s=self.start_s,
                                duration_s=self.stop_s - self.start_s, t0=self.ctx.t0,
                                port=self.ctx.ports("udp"), name=spec["name"],
                                work_dir=self.ctx.raw_dir, send_on_start=True)
        return [(self.stream, self.start_s, None)]

    def prepare(self):
        self.stream.prepare()

    def stop(self):
        super().stop()
        self.stream.stop()      # a stream the run ended before its time is ended too

    def tool_problem(self, tool):
        if tool.sender is None:
            return None
        sending = tool.sender.poll() is None
        return (exit_problem(f"UDP sender {tool.name}", tool.sender)
                or exit_problem(f"UDP receiver {tool.name}", tool.receiver,
                                expect_running=sending))

    def rows(self):
        return {"udp": self.stream.rows()}
