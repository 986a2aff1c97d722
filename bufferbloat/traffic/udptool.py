"""The paced UDP sender and the recording receiver of UDP streams ("video"), run as
processes in the hosts' namespaces (:mod:`bufferbloat.traffic.udpstream` drives them).
Standard library only, and outside the traffic package: a process started in a
namespace imports nothing else.

Command line (each runs inside one host's namespace)::

    python3 -m bufferbloat.traffic.udptool send --dst IP --port P --rate-kbit R --size BYTES --duration S [--start-at-stdin]
    python3 -m bufferbloat.traffic.udptool recv --port P --out FILE --duration S

The sender paces packets on an absolute CLOCK_MONOTONIC schedule: packet ``i`` is due at
``start + i * size * 8 / rate`` (no accumulated drift; a late packet is sent at once and
the schedule is not shifted). Each payload (``size`` bytes of UDP payload, >= 16) starts
with ``seq`` (uint64) and its send time (``time.monotonic_ns()``, uint64), big endian.
CLOCK_MONOTONIC is one clock for every network namespace of a machine, so the receiver's
``t_recv - t_sent`` is the one-way latency.

With ``--start-at-stdin`` the sender is launched before the run's clock starts: it
prints ``READY`` once its interpreter is up, then reads one line from stdin,
``START_AT <CLOCK_MONOTONIC s>``, and sends from then (end of input: it sends nothing).
Its interpreter's start-up (seconds under TCG) is then not in the stream's start.

The receiver writes one CSV row per packet received: ``seq,t_sent,t_recv,size`` (seconds
of CLOCK_MONOTONIC; size = UDP payload bytes). It prints ``READY`` once its socket is bound
and stops after ``--duration`` seconds or on SIGTERM (rows are flushed as they come).
"""

import argparse
import csv
import socket
import struct
import sys
import time

from bufferbloat.core.errors import ParameterError
from bufferbloat.core.params import MIN_RATE_MBIT, check_number, check_port
from bufferbloat.core.signals import stop_requests

HEADER = struct.Struct("!QQ")
SNDBUF_BYTES = 16 << 20
MIN_SIZE = HEADER.size
MAX_SIZE = 65507


def check_stream_params(rate_kbit, size_bytes, duration_s, port=None):
    """Validate and return (rate_kbit, size_bytes, duration_s, port)."""
    rate = check_number("rate_kbit", rate_kbit, MIN_RATE_MBIT * 1000, 10_000_000)
    size = check_number("size_bytes", size_bytes, MIN_SIZE, MAX_SIZE, int)
    dur = check_number("duration_s", duration_s, 1e-3, 86_400)
    if port is not None:
        port = check_port(port)
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
    port = check_port(port)
    duration_s = check_number("duration_s", duration_s, 1e-3, 86_400)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("0.0.0.0", port))
    stopping = stop_requests()
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


def read_start_at(stream):
    """The ``START_AT <s>`` line from ``stream`` -> s (CLOCK_MONOTONIC), or None at the
    end of input (the run ended before the stream's time)."""
    line = stream.readline()
    if not line:
        return None
    word, _, value = line.strip().partition(" ")
    if word != "START_AT":
        raise ParameterError("stdin", line.strip(), "'START_AT <seconds>'")
    return check_number("START_AT", value, 0, float("inf"))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bufferbloat.traffic.udptool",
                                 description="paced UDP sender / recording receiver")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--rate-kbit", type=float, required=True)
    s.add_argument("--size", type=int, default=1200)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--start-at-stdin", action="store_true",
                   help="print READY, then read 'START_AT <CLOCK_MONOTONIC s>' from stdin")
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--duration", type=float, required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "send":
            check_stream_params(args.rate_kbit, args.size, args.duration, args.port)
            stop = stop_requests()
            if args.start_at_stdin:
                print("READY", flush=True)
                start_at = read_start_at(sys.stdin)
                if start_at is None:
                    print("SENT 0", flush=True)
                    return 0
                time.sleep(max(0.0, start_at - time.monotonic()))
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

