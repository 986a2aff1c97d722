"""UDP round-trip probes with irtt (isochronous, as flent measures its "UDP" latency):
the tool (:class:`IrttProbe`: ``irtt server`` on the far host, ``irtt client`` on the
near one), the parser of irtt's JSON (:func:`parse_irtt`), and the ``irtt`` traffic kind.

Each probe gives its round-trip time, its one-way delays (client -> server: "up",
server -> client: "down"; from the wall-clock stamps of both ends, which share one
clock here: every namespace of the machine reads the same CLOCK_REALTIME) and, when it
is lost, in which direction (irtt's server reports the last 64 requests it received
with each reply, so a lost *reply* is told from a lost *request*).
"""

import gzip
import json
import os
import subprocess
import tempfile
import time

from bufferbloat.core.params import Param, check_number, check_port
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.core.signals import stop_process
from bufferbloat.core.stats import loss_figures, percentile
from bufferbloat.traffic.base import Timed, TrafficPart, exit_problem, register
from bufferbloat.traffic.ping import rtt_stats

#: Columns of irtt.csv (docs/reference/results.md).
COLUMNS = tuple(SERIES_COLUMNS["irtt"])
#: irtt's ``lost`` values (strings in irtt 0.9's JSON) -> ours ('' = answered).
LOST = {"false": "", "true": "unknown", "true_up": "up", "true_down": "down"}
#: Largest packet that fits a 1500-byte MTU unfragmented (IPv4), bytes (irtt's advice).
MAX_LENGTH_BYTES = 1472


def duration_arg(seconds):
    """A Go duration in whole microseconds (``"200000us"``): irtt reads Go's syntax,
    which has no exponent notation, so a float is never printed as such."""
    return f"{max(1, round(seconds * 1e6))}us"


def client_args(server_ip, port, interval_s, duration_s, length_bytes=0, out="-"):
    """``irtt client`` argument list: JSON to ``out`` (``-o``; a name ending in .json.gz
    is gzipped by irtt; irtt 0.9 writes a file also when it is interrupted, stdout
    only when the test completes), nothing else printed (``-Q``), random payload
    (``--fill=rand``, as flent runs it), ``-d``/``-i`` in microseconds, ``-l`` only when
    a length is asked (0: irtt's smallest packet)."""
    args = ["irtt", "client", "-o", out, "-Q", "--fill=rand", "-d", duration_arg(duration_s),
            "-i", duration_arg(interval_s)]
    if length_bytes:
        args += ["-l", int(length_bytes)]
    return args + [f"{server_ip}:{int(port)}"]


def server_args(ip, port):
    """``irtt server`` argument list bound to ``ip``:``port``; ``-i 0`` lifts the server's
    default 10 ms floor on the clients' interval."""
    return ["irtt", "server", "-b", f"{ip}:{int(port)}", "-i", "0"]


def _ms(ns):
    return None if ns is None else ns / 1e6


def parse_irtt(doc):
    """irtt's JSON (a dict, or its text) -> [probe], one per round trip in seqno order.

    A probe is {seq, sent_wall_s (the client's send stamp), rtt_ms, owd_up_ms,
    owd_down_ms (None when lost or when the server gave no stamps), lost ('' answered,
    'up' request lost, 'down' reply lost, 'unknown' lost with no direction known)}.
    irtt's rtt already leaves out the server's processing time."""
    if isinstance(doc, (str, bytes)):
        doc = json.loads(doc)
    probes = []
    for rt in doc.get("round_trips") or []:
        lost = rt.get("lost", "false")
        lost = LOST.get(str(lost).lower(), "unknown")
        send = ((rt.get("timestamps") or {}).get("client") or {}).get("send") or {}
        delay = rt.get("delay") or {}
        answered = lost == ""
        probes.append({
            "seq": int(rt["seqno"]),
            "sent_wall_s": send["wall"] / 1e9 if "wall" in send else None,
            "rtt_ms": _ms(delay.get("rtt")) if answered else None,
            "owd_up_ms": _ms(delay.get("send")) if answered else None,
            "owd_down_ms": _ms(delay.get("receive")) if answered else None,
            "lost": lost})
    probes.sort(key=lambda p: p["seq"])
    return probes


class IrttProbe(Timed):
    """irtt probes from ``client`` to ``server`` every ``interval_s`` for ``duration_s``
    (``length_bytes``: the UDP payload including irtt's headers; 0: irtt's smallest).

    :meth:`prepare` starts the server on ``server`` (UDP ``port``) and waits until it
    is bound; :meth:`start` starts the client, which sends for ``duration_s`` and then
    waits for late replies (irtt's default: 3 x the largest RTT seen) and exits;
    :meth:`wait` waits for it; :meth:`stop` ends both (SIGTERM: the client still writes
    its JSON, the probes in flight counted lost). The client writes its JSON, gzipped,
    to ``work_dir/NAME.irtt.json.gz`` (e.g. the run's raw/), or to a temporary file
    removed once read. Keyword-only: ``name``, ``t0``, ``realtime_minus_monotonic``,
    ``work_dir``.
    """

    def __init__(self, net, client, server, duration_s, interval_s=0.2, length_bytes=0,
                 port=2112, *, name=None, t0=None, realtime_minus_monotonic=None,
                 work_dir=None):
        self.net, self.client, self.server = net, client, server
        self.duration_s = check_number("duration_s", duration_s, 0, 86_400, lo_open=True)
        self.interval_s = check_number("interval_s", interval_s, 0.001, 3600)
        self.length_bytes = check_number("length_bytes", length_bytes, 0, MAX_LENGTH_BYTES,
                                         int)
        self.port = check_port(port)
        self.name = name or f"irtt-{client}-{server}"
        self.work_dir = work_dir
        self._init_clock(t0, realtime_minus_monotonic)
        self.server_proc = self.client_proc = None
        self.launched_mono = None
        self.raw_json = ""
        self.raw_gz = b""
        self._json_path = None
        self.client_err = self.server_log = ""
        self.probes = None
        self.stats = {}
        self.error = None
        self.stopped = False

    # ------------------------------------------------------------ running
    def prepare(self, timeout_s=10.0):
        """Start the server and return once its UDP socket is bound."""
        self._server_out = tempfile.TemporaryFile(mode="w+")
        self.server_proc = self.net.popen(self.server,
                                          server_args(self.net.ip(self.server), self.port),
                                          stdout=self._server_out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.server_proc.poll() is not None:
                break
            out = self.net.run(self.server, ["ss", "-Hlun", f"sport = :{self.port}"],
                               check=False)
            if out.strip():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"irtt server on {self.server}:{self.port} did not start: "
                           f"{self.server_log.strip()[-300:] or 'not bound in time'}")

    def start(self):
        """Start the client (the server must run: :meth:`prepare`)."""
        if self.server_proc is None:
            self.prepare()
        if self.work_dir:
            self._json_path = os.path.join(self.work_dir, f"{self.name}.irtt.json.gz")
        else:
            fd, self._json_path = tempfile.mkstemp(prefix="irtt-", suffix=".json.gz")
            os.close(fd)
        if os.path.exists(self._json_path):
            os.unlink(self._json_path)     # what irtt leaves is this run's
        self._client_err = tempfile.TemporaryFile(mode="w+")
        self.launched_mono = time.monotonic()
        self.client_proc = self.net.popen(
            self.client, client_args(self.net.ip(self.server), self.port, self.interval_s,
                                     self.duration_s, self.length_bytes, self._json_path),
            stdout=subprocess.DEVNULL, stderr=self._client_err)
        return self

    def wait(self, timeout_s=None):
        """Wait for the client to end by itself (its duration and the wait for late
        replies), then stop the server and parse."""
        if self.client_proc is not None:
            self.client_proc.wait(timeout=timeout_s or self.duration_s + 30)
        return self.stop()

    def stop(self):
        """End client and server (by PID) and parse what the client wrote
        (idempotent). Returns :meth:`summary`."""
        self.stopped = True
        if self.client_proc is not None and self.probes is None:
            stop_process(self.client_proc)
            try:
                with open(self._json_path, "rb") as f:
                    self.raw_gz = f.read()
                self.raw_json = gzip.decompress(self.raw_gz).decode("utf-8", "replace")
            except (OSError, EOFError, gzip.BadGzipFile):
                self.raw_json = ""
            if not self.work_dir and os.path.exists(self._json_path):
                os.unlink(self._json_path)
            self._client_err.seek(0)
            self.client_err = self._client_err.read()
            self._client_err.close()
            self._parse()
        if self.server_proc is not None and not self._server_out.closed:
            stop_process(self.server_proc)
            self._server_out.seek(0)
            self.server_log = self._server_out.read()
            self._server_out.close()
        return self.summary()

    def _parse(self):
        try:
            doc = json.loads(self.raw_json)
        except json.JSONDecodeError:
            self.probes = []
            rc = self.client_proc.returncode
            self.error = (f"irtt client wrote no JSON (exit {rc}): "
                          f"{self.client_err.strip()[-500:] or 'no output'}")
            return
        self.probes = parse_irtt(doc)
        self.stats = doc.get("stats") or {}

    # ------------------------------------------------------------ results
    def rows(self):
        """irtt.csv rows: probe, t (run time the probe was sent, s), seq, rtt_ms,
        owd_up_ms, owd_down_ms ('' when lost), lost ('', up, down, unknown)."""
        blank = lambda v: "" if v is None else v  # noqa: E731
        return [{"probe": self.name, "t": round(self.run_time(p["sent_wall_s"]), 6),
                 "seq": p["seq"], "rtt_ms": blank(p["rtt_ms"]),
                 "owd_up_ms": blank(p["owd_up_ms"]), "owd_down_ms": blank(p["owd_down_ms"]),
                 "lost": p["lost"]}
                for p in self.probes or () if p["sent_wall_s"] is not None]

    def raw_outputs(self):
        """{NAME.irtt.json.gz: the client's JSON as irtt wrote it (gzipped: ~1 kB per
        probe uncompressed)}, and the client's error output / the server's log when they
        said anything."""
        out = {}
        if self.raw_gz:
            out[f"{self.name}.irtt.json.gz"] = self.raw_gz
        if self.client_err.strip():
            out[f"{self.name}.client.txt"] = self.client_err
        if self.server_log.strip():
            out[f"{self.name}.server.txt"] = self.server_log
        return out

    def summary(self):
        """The configuration, loss per direction (:func:`loss_figures`), RTT statistics
        (ms: min/mean/p50/p95/p99/max), mean and p50/p95 one-way delays each way, and
        irtt's own counts (packets_sent, server_packets_received, packets_received)."""
        probes = self.probes or []
        out = {"probe": self.name, "client": self.client, "server": self.server,
               "port": self.port, "interval_s": self.interval_s,
               "length_bytes": self.length_bytes, "duration_s": self.duration_s,
               "t_launch": (None if self.launched_mono is None
                            else self.launched_mono - self.t0), "error": self.error}
        out.update(loss_figures(p["lost"] for p in probes))
        out.update(rtt_stats(sorted(p["rtt_ms"] for p in probes if p["rtt_ms"] is not None)))
        for way in ("up", "down"):
            vals = sorted(p[f"owd_{way}_ms"] for p in probes
                          if p[f"owd_{way}_ms"] is not None)
            out[f"owd_{way}_mean_ms"] = sum(vals) / len(vals) if vals else None
            for q in (50, 95):
                out[f"owd_{way}_p{q}_ms"] = percentile(vals, q) if vals else None
        for key in ("packets_sent", "server_packets_received", "packets_received"):
            out[f"irtt_{key}"] = self.stats.get(key)
        return out


@register("irtt")
class IrttPart(TrafficPart):
    """irtt UDP probes ``client`` -> ``server`` every ``interval_s`` from the part's start
    to its stop (then irtt waits for late replies, within the run's grace period)."""

    params = (
        Param("client", str, None, "the probing host (irtt client)"),
        Param("server", str, None, "the echoing host (irtt server)"),
        Param("interval_s", float, 0.2, "probe period, s (flent's default step: 0.2)",
              lo=0.001, hi=3600),
        Param("length_bytes", int, 0, "UDP payload per probe including irtt's headers, "
              "bytes (0: irtt's smallest)", lo=0, hi=MAX_LENGTH_BYTES),
    )
    probes_rtt = True
    needs = ("irtt",)

    def tools(self):
        spec = self.spec
        self.probe = IrttProbe(self.ctx.net, spec["client"], spec["server"],
                               self.stop_s - self.start_s, spec.get("interval_s", 0.2),
                               spec.get("length_bytes", 0), port=self.ctx.ports("udp"),
                               name=self.name, work_dir=self.ctx.raw_dir, **self.ctx.clock)
        return [(self.probe, self.start_s, None)]

    def prepare(self):
        """The server is bound before the clock starts."""
        self.probe.prepare()

    def tool_problem(self, tool):
        return (exit_problem(f"irtt server of {tool.name}", tool.server_proc,
                             expect_running=not tool.stopped)
                or exit_problem(f"irtt client of {tool.name} (raw/{tool.name}.client.txt)",
                                tool.client_proc))

    def reported_error(self):
        return self.probe.error and f"irtt {self.name}: {self.probe.error}"

    def rows(self):
        return {"irtt": self.probe.rows()}
