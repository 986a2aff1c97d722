"""UDP streams ("video"): a paced sender, a recording receiver, and :class:`UdpStream`.

Command line (each runs inside one host's namespace)::

    python3 -m bufferbloat.udpstream send --dst IP --port P --rate-kbit R --size BYTES --duration S
    python3 -m bufferbloat.udpstream recv --port P --out FILE --duration S

The sender paces packets on an absolute CLOCK_MONOTONIC schedule: packet ``i`` is due at
``start + i * size * 8 / rate`` (no accumulated drift; a late packet is sent at once and
the schedule is not shifted). Each payload (``size`` bytes of UDP payload, >= 16) starts
with ``seq`` (uint64) and its send time (``time.monotonic_ns()``, uint64), big endian.
CLOCK_MONOTONIC is one clock for every network namespace of a machine, so the receiver's
``t_recv - t_sent`` is the one-way latency.

The receiver writes one CSV row per packet received: ``seq,t_sent,t_recv,size`` (seconds
of CLOCK_MONOTONIC; size = UDP payload bytes). It prints ``READY`` once its socket is bound
and stops after ``--duration`` seconds or on SIGTERM (rows are flushed as they come).
"""

import argparse
import csv
import io
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

from .errors import ParameterError
from .stats import percentile

HEADER = struct.Struct("!QQ")
SNDBUF_BYTES = 16 << 20
MIN_SIZE = HEADER.size
MAX_SIZE = 65507
COLUMNS = ("stream", "seq", "t_sent", "t_recv", "size_bytes")


def _check(name, value, lo, hi, conv=float):
    try:
        v = conv(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, f"a number in {lo}..{hi}") from None
    if not (lo <= v <= hi) or (isinstance(v, float) and math.isnan(v)):
        raise ParameterError(name, value, f"{lo}..{hi}")
    return v


def check_stream_params(rate_kbit, size_bytes, duration_s, port=None):
    """Validate and return (rate_kbit, size_bytes, duration_s, port)."""
    rate = _check("rate_kbit", rate_kbit, 1e-3, 10_000_000)
    size = _check("size_bytes", size_bytes, MIN_SIZE, MAX_SIZE, int)
    dur = _check("duration_s", duration_s, 1e-3, 86_400)
    if port is not None:
        port = _check("port", port, 1, 65535, int)
    return rate, size, dur, port


# ------------------------------------------------------------------ sender / receiver
def send(dst, port, rate_kbit, size, duration_s, clock=time.monotonic_ns,
         stopped=lambda: False):
    """Send ``size``-byte datagrams to dst:port at ``rate_kbit`` for ``duration_s`` (or
    until ``stopped()``). Returns (packets sent, sends that failed locally).

    Sequence numbers count every scheduled packet, so a failed send leaves a gap."""
    rate_kbit, size, duration_s, port = check_stream_params(rate_kbit, size, duration_s, port)
    gap_ns = size * 8 * 1e9 / (rate_kbit * 1000)
    n_total = max(1, int(duration_s * 1e9 / gap_ns))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # A datagram stays charged to the socket until the emulated path frees it (veth and
    # bridge keep skb->sk within the machine), so with the default 208 KiB send buffer a
    # stream faster than the bottleneck blocks in sendto() once ~90 packets wait in the
    # bottleneck queue: the sender would be paced by the bottleneck, as TCP is, and the
    # bottleneck would never drop. A real sender's socket never sees a remote router's
    # queue: the buffer is made larger than any queue (root may exceed wmem_max), and a
    # send that fails anyway is counted, not retried.
    for opt in (getattr(socket, "SO_SNDBUFFORCE", 32), socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SNDBUF_BYTES)
            break
        except OSError:
            continue
    sock.setblocking(False)
    pad = b"\0" * (size - HEADER.size)
    start = clock()
    sent = 0
    failed = 0
    for seq in range(n_total):
        if stopped():
            break
        due = start + int(seq * gap_ns)
        now = clock()
        if due > now:
            time.sleep((due - now) / 1e9)
        try:
            sock.sendto(HEADER.pack(seq, clock()) + pad, (dst, port))
            sent += 1
        except OSError:  # EAGAIN (buffer full), ENOBUFS...: counted as not sent
            failed += 1
    sock.close()
    return sent, failed


def recv(port, out, duration_s, ready=sys.stdout):
    """Receive on ``port`` for ``duration_s`` (or until SIGTERM), one CSV row per packet
    into the text file ``out``. Returns the number of packets received."""
    port = _check("port", port, 1, 65535, int)
    duration_s = _check("duration_s", duration_s, 1e-3, 86_400)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("0.0.0.0", port))
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    if ready:
        print("READY", port, flush=True, file=ready)
    deadline = time.monotonic() + duration_s
    n = 0
    w = csv.writer(out, lineterminator="\n")
    w.writerow(("seq", "t_sent", "t_recv", "size"))
    while not stopping:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(min(left, 0.2))
        try:
            data = sock.recv(65535)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        t_recv = time.monotonic_ns()
        if len(data) < HEADER.size:
            continue
        seq, t_sent = HEADER.unpack_from(data)
        w.writerow((seq, f"{t_sent / 1e9:.9f}", f"{t_recv / 1e9:.9f}", len(data)))
        n += 1
        if n % 64 == 0:
            out.flush()
    out.flush()
    sock.close()
    return n


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


# ------------------------------------------------------------------ the object
class UdpStream:
    """A UDP stream ``src`` -> ``dst`` at ``rate_kbit`` in ``size_bytes`` datagrams
    (UDP payload), from ``start_s`` after ``t0`` for ``duration_s``.

    ``start()`` starts the receiver on dst (waits for its READY line) and the sender on
    src, and returns at once: no thread is needed, the sender process sleeps until
    ``t0 + start_s`` (``--start-at-monotonic``) itself. ``wait()`` waits for the sender to
    finish; ``stop()`` ends both (a stopped sender still reports what it sent) and
    parses. ``t0``: the run's ``time.monotonic()`` (default: when the object is created);
    ``rows()`` are udp.csv rows with t_sent/t_recv in run time (CLOCK_MONOTONIC needs no
    realtime conversion). ``rate_kbit`` counts UDP payload bits (a 1200-byte payload is a
    1242-byte Ethernet frame at the bottleneck). ``port``: the receiver's UDP port (one per
    stream).
    """

    def __init__(self, net, src, dst, rate_kbit, size_bytes=1200, start_s=0.0,
                 duration_s=10.0, t0=None, port=5600, name=None, work_dir=None):
        self.work_dir = work_dir   # the receiver's CSV goes there (e.g. the run's raw/)
        self.rate_kbit, self.size_bytes, self.duration_s, self.port = check_stream_params(
            rate_kbit, size_bytes, duration_s, port)
        self.start_s = _check("start_s", start_s, 0, 86_400)
        self.net, self.src, self.dst = net, src, dst
        self.t0 = time.monotonic() if t0 is None else t0
        self.name = name or f"udp-{src}-{dst}-{self.port}"
        self.sender = self.receiver = None
        self.packets = []
        self.sent = None
        self.raw = {}

    def start(self):
        """Start the receiver on dst (wait until bound), then the sender on src. The
        sender begins at t0 + start_s (it sleeps in its own process until then)."""
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
        now = time.monotonic()
        wait_s = max(0.0, self.t0 + self.start_s - now)
        recv_dur = wait_s + self.duration_s + 2.0  # ends by itself if stop() never comes
        self.receiver = self.net.popen(
            self.dst, [sys.executable, "-m", "bufferbloat.udpstream", "recv", "--port",
                       self.port, "--out", self._recv_path, "--duration", f"{recv_dur:.3f}"],
            stdout=subprocess.PIPE, stderr=self._recv_log, cwd=_repo_root())
        line = self.receiver.stdout.readline()
        if not line.startswith("READY"):
            self.receiver.wait(timeout=5)
            self._recv_log.seek(0)
            raise RuntimeError(f"UDP receiver on {self.dst}:{self.port} did not start: "
                               f"{self._recv_log.read().strip()[:500]}")
        self._send_out = tempfile.TemporaryFile(mode="w+")
        self.sender = self.net.popen(
            self.src, [sys.executable, "-m", "bufferbloat.udpstream", "send", "--dst",
                       self.net.ip(self.dst), "--port", self.port, "--rate-kbit",
                       f"{self.rate_kbit:g}", "--size", self.size_bytes, "--duration",
                       f"{self.duration_s:g}", "--start-at-monotonic",
                       f"{self.t0 + self.start_s:.6f}"],
            stdout=self._send_out, stderr=subprocess.STDOUT, cwd=_repo_root())
        return self

    def wait(self, timeout_s=None):
        """Wait for the sender to finish, give the last packets 0.5 s, then stop."""
        left = self.t0 + self.start_s + self.duration_s - time.monotonic()
        self.sender.wait(timeout=timeout_s or max(0, left) + 30)
        time.sleep(0.5)
        return self.stop()

    def stop(self):
        """End sender and receiver (by PID), parse; returns :meth:`summary`."""
        from .network import stop_process
        if self.sender is None:
            return self.summary()
        stop_process(self.sender)
        stop_process(self.receiver)
        self.receiver.stdout.close()
        self._send_out.seek(0)
        send_text = self._send_out.read()
        self._send_out.close()
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
        refused: not in ``sent``, not counted as loss), and the configuration."""
        out = stream_stats(self.packets, self.sent or 0)
        out.update({"send_failed": getattr(self, "send_failed", None), "stream": self.name,
                    "src": self.src, "dst": self.dst,
                    "rate_kbit": self.rate_kbit, "size_bytes": self.size_bytes,
                    "start_s": self.start_s, "duration_s": self.duration_s})
        return out


def parse_sent(text):
    """The sender's last line ``SENT n`` -> n (None if missing)."""
    return _report_value(text, "SENT")


def parse_failed(text):
    """The sender's ``FAILED n`` line (sends refused locally) -> n (None if missing)."""
    return _report_value(text, "FAILED")


def _report_value(text, key):
    for line in reversed(text.splitlines()):
        if line.startswith(key + " "):
            return int(line.split()[1])
    return None


def _repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bufferbloat.udpstream",
                                 description="paced UDP sender / recording receiver")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--rate-kbit", type=float, required=True)
    s.add_argument("--size", type=int, default=1200)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--start-at-monotonic", type=float, default=None,
                   help="sleep until this CLOCK_MONOTONIC time (s) before sending")
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--duration", type=float, required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "send":
            check_stream_params(args.rate_kbit, args.size, args.duration, args.port)
            stop = []
            signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
            if args.start_at_monotonic is not None:
                time.sleep(max(0.0, args.start_at_monotonic - time.monotonic()))
            t_start = time.monotonic()
            n, failed = send(args.dst, args.port, args.rate_kbit, args.size, args.duration,
                             stopped=lambda: bool(stop))
            print(f"START {t_start:.9f}\nEND {time.monotonic():.9f}\nFAILED {failed}\n"
                  f"SENT {n}", flush=True)
        else:
            with open(args.out, "w") as out:
                recv(args.port, out, args.duration)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
