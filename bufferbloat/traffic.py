"""Traffic generators: iperf3 long flows and ping probes, each a start/stop/result object.

Each runs in a host's namespace as an argument list (never a shell string), is owned by
the :class:`~bufferbloat.network.Network` (ended by PID on teardown), and parses its tool's
machine-readable output: ``iperf3 -J`` JSON, ``ping -D`` per-probe lines with timestamps.
"""

import json
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from .network import stop_process

PING_LINE = re.compile(r"^\[(?P<ts>[0-9.]+)\].*icmp_seq=(?P<seq>\d+).*time=(?P<rtt>[0-9.]+) ms")


class Iperf3Flow:
    """One iperf3 TCP flow from ``src`` to ``dst``.

    duration_s: seconds of sending; cca: congestion control of the socket (``-C``);
    port: server port; parallel: number of parallel streams (``-P``); omit_s: seconds at
    the start (slow start) left out of iperf3's totals (``-O``), sent in addition to
    duration_s.
    """

    def __init__(self, net, src, dst, duration_s, cca=None, port=5201, parallel=1, omit_s=0):
        self.net, self.src, self.dst = net, src, dst
        self.duration_s, self.cca, self.port, self.parallel = duration_s, cca, port, parallel
        self.omit_s = omit_s
        self.server = self.client = None
        self.result = None

    def start(self):
        """Start the server on dst, wait until it listens, then the client on src."""
        # Output goes to files, not pipes: nobody reads a pipe while the tool runs, and a
        # full pipe would block the tool.
        self.server_out = tempfile.TemporaryFile(mode="w+")
        self.server = self.net.popen(self.dst, ["iperf3", "-s", "-1", "-p", self.port, "-J"],
                                     stdout=self.server_out, stderr=subprocess.STDOUT)
        _wait_listening(self.net, self.dst, self.port)
        args = ["iperf3", "-c", self.net.ip(self.dst), "-p", self.port, "-t",
                f"{self.duration_s:g}", "-J", "-i", "1", "-P", self.parallel]
        if self.omit_s:
            args += ["-O", f"{self.omit_s:g}"]
        if self.cca:
            args += ["-C", self.cca]
        self.client = self.net.popen(self.src, args)
        return self

    def wait(self, timeout_s=None):
        """Wait for the client to finish; parse and return its JSON result."""
        out, err = self.client.communicate(
            timeout=timeout_s or self.duration_s + self.omit_s + 30)
        stop_process(self.server)
        self.server_out.seek(0)
        self.server_raw = self.server_out.read()
        self.server_out.close()
        try:
            self.result = json.loads(out)
        except json.JSONDecodeError:
            raise RuntimeError(f"iperf3 client produced no JSON: {err.strip()[:500]}") from None
        if "error" in self.result:
            raise RuntimeError(f"iperf3: {self.result['error']}")
        return self.result

    @property
    def goodput_mbit(self):
        """Receiver-side goodput over the flow (after ``omit_s``), Mbit/s."""
        return self.result["end"]["sum_received"]["bits_per_second"] / 1e6

    def interval_mbit(self):
        """Per-interval sender throughput series [(t_end_s, Mbit/s)]."""
        return [(iv["sum"]["end"], iv["sum"]["bits_per_second"] / 1e6)
                for iv in self.result.get("intervals", [])]


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


class PingProbe:
    """ping from ``src`` to ``dst`` every ``interval_s`` (root allows < 0.2 s), ``count``
    probes (or until stopped)."""

    def __init__(self, net, src, dst, interval_s=0.1, count=None, size_bytes=56):
        self.net, self.src, self.dst = net, src, dst
        self.interval_s, self.count, self.size_bytes = interval_s, count, size_bytes
        self.proc = None
        self.result = None

    def start(self):
        """Start pinging."""
        args = ["ping", "-D", "-n", "-i", f"{self.interval_s:g}", "-s", self.size_bytes]
        if self.count:
            args += ["-c", self.count]
        # a file, not a pipe: nobody reads while ping runs, and a full pipe would block it
        self.out = tempfile.TemporaryFile(mode="w+")
        self.proc = self.net.popen(self.src, args + [self.net.ip(self.dst)],
                                   stdout=self.out, stderr=subprocess.STDOUT)
        return self

    def stop(self):
        """End the probe (by PID) and parse what it printed."""
        stop_process(self.proc)
        return self._parse()

    def wait(self, timeout_s=None):
        """Wait for ``count`` probes to complete and parse."""
        self.proc.wait(timeout=timeout_s)
        return self._parse()

    def _parse(self):
        self.out.seek(0)
        self.raw = self.out.read()
        self.out.close()
        self.result = parse_ping(self.raw)
        return self.result


def parse_ping(text):
    """Parse ``ping -D`` output into a :class:`PingResult`.

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
