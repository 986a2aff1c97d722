"""ping probes: the tool (:class:`PingProbe`, ``ping -D -O``), its parsers, the idle RTT
probe of a run, and the ``ping`` traffic kind."""

import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from bufferbloat.core.machine import under_tcg
from bufferbloat.core.params import Param, check_number, env_number
from bufferbloat.core.signals import stop_process, wait_process
from bufferbloat.core.stats import percentile
from bufferbloat.traffic.base import Timed, TrafficPart, register

PING_LINE = re.compile(r"^\[(?P<ts>[0-9.]+)\].*icmp_seq=(?P<seq>\d+).*time=(?P<rtt>[0-9.]+) ms")
PING_NO_ANSWER = re.compile(r"^\[(?P<ts>[0-9.]+)\] no answer yet for icmp_seq=(?P<seq>\d+)")


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


class PingProbe(Timed):
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
        self.launched_mono = None   # when ping was launched (monotonic s)
        self.stopped_mono = None    # when stop() ended it (monotonic s), if it did
        self.result = None
        self.raw = ""

    def start(self):
        """Start pinging."""
        args = ["ping", "-D", "-O", "-n", "-i", f"{self.interval_s:g}", "-s", self.size_bytes]
        if self.count:
            args += ["-c", self.count]
        # a file, not a pipe: nobody reads while ping runs, and a full pipe would block it
        self.out = tempfile.TemporaryFile(mode="w+")
        self.launched_mono = time.monotonic()
        self.proc = self.net.popen(self.src, args + [self.net.ip(self.dst)],
                                   stdout=self.out, stderr=subprocess.STDOUT)
        return self

    def stop(self):
        """End the probe (by PID) and parse what it printed."""
        if self.proc is None or self.result is not None:
            return self.result
        self.stopped_mono = time.monotonic()
        stop_process(self.proc)
        return self._parse()

    def wait(self, timeout_s=None):
        """Wait for ``count`` probes to complete and parse."""
        wait_process(self.proc, timeout_s)
        return self._parse()

    def _parse(self):
        if self.result is not None:
            return self.result
        if not self.out.closed:     # (a signal may interrupt this; a second call goes on)
            self.out.seek(0)
            self.raw = self.out.read()
        self.result = parse_ping(self.raw)
        self.out.close()
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
        """sent, received, loss_pct and RTT statistics (ms) of answered probes; when
        ping was launched (``t_launch``, s since t0: health judges it against the time
        its schedule gave it) and when :meth:`stop` ended it (``t_stopped``, None when it
        ended by itself or was not stopped)."""
        probes = self.probes()
        rtts = sorted(r for _, _, r in probes if r is not None)
        out = {"probe": self.name, "src": self.src, "dst": self.dst,
               "t_launch": (None if self.launched_mono is None
                            else self.launched_mono - self.t0),
               "t_stopped": (None if self.stopped_mono is None
                             else self.stopped_mono - self.t0),
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


#: The idle probe before the traffic: this many pings this far apart (0.17 s in all, plus
#: one RTT). Under TCG (:data:`IDLE_PING_INTERVAL_TCG_S`: 1 s) the probe runs beside the
#: sampler's ~2 s start-up, which it then does not lengthen, and pings 10 ms apart would
#: time the start-up's CPU load rather than the path. 9 ms, not 10: iputils' ping
#: (20221126) keeps an interval below 10 ms to the microsecond but spaces pings asked 10
#: ms apart 16 ms apart (measured on the host, 20 pings over loopback: -i 0.009 8.95 ms,
#: -i 0.01 15.98 ms, -i 0.015 19.9 ms): 10 ms made the probe 0.33 s instead of 0.2.
IDLE_PINGS, IDLE_PING_INTERVAL_S, IDLE_PING_INTERVAL_TCG_S = 20, 0.009, 0.05


#: env: the idle probe's ping interval, s (a benchmark's side-by-side with the old 50 ms)
IDLE_PING_ENV = "BUFFERBLOAT_IDLE_PING_S"


def idle_ping_interval_s():
    """The idle probe's ping interval on this machine: env BUFFERBLOAT_IDLE_PING_S, else
    50 ms in the project VM under software emulation (BUFFERBLOAT_GUEST_ACCEL=tcg), else
    9 ms."""
    tcg = under_tcg()
    return env_number(IDLE_PING_ENV, IDLE_PING_INTERVAL_TCG_S if tcg else
                      IDLE_PING_INTERVAL_S, 0.002, 1.0, "0.002 to 1 s")


def idle_rtt(net, src, dst, count=IDLE_PINGS, interval_s=None):
    """RTT of the idle path before any traffic: {samples, lost, min_ms, p50_ms, p90_ms,
    max_ms, src, dst} (None values when no reply came). Shows the emulator's own timing
    against the configured delays (docs/design/health.md)."""
    interval_s = idle_ping_interval_s() if interval_s is None else interval_s
    proc = net.popen(src, ["ping", "-n", "-D", "-c", count, "-i", interval_s, "-W", 1,
                           net.ip(dst)])
    try:
        out, _ = proc.communicate(timeout=count * interval_s + 10)
    except Exception:  # noqa: BLE001 - the probe is informative; the run goes on
        stop_process(proc)
        out, _ = proc.communicate()
    rtts = sorted(r for _, _, r in parse_ping(out or "").probes)
    res = {"src": src, "dst": dst, "samples": len(rtts), "lost": count - len(rtts)}
    for key, q in (("min_ms", 0), ("p50_ms", 50), ("p90_ms", 90), ("max_ms", 100)):
        res[key] = round(percentile(rtts, q), 3) if rtts else None
    return res


@register("ping")
class PingPart(TrafficPart):
    """ping ``src`` -> ``dst`` every ``interval_s`` from the part's start to its stop."""

    params = (
        Param("src", str, None, "the pinging host"),
        Param("dst", str, None, "the pinged host"),
        Param("interval_s", float, 0.1, "ping period, s", lo=0.002, hi=3600),
    )
    probes_rtt = True

    def tools(self):
        spec = self.spec
        return [(PingProbe(self.ctx.net, spec["src"], spec["dst"],
                           spec.get("interval_s", 0.1), name=spec["name"],
                           **self.ctx.clock), self.start_s, self.stop_s)]

    def waited(self):
        return []           # runs until stopped

    def rows(self):
        return {"ping": [r for tool, _, _ in self.plan for r in tool.rows()]}
