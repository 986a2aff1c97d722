"""Small, reusable measurement recipes on a running :class:`~bufferbloat.net.network.Network`.

They are what the fidelity tests and the benchmark share: one long TCP flow with ping
probes and the bottleneck's qdisc statistics, and idle pings.
"""

import statistics
import threading
import time
from dataclasses import dataclass, field

from bufferbloat.core.stats import percentile
from bufferbloat.net.bottleneck import CLASS
from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo
from bufferbloat.traffic.iperf.flow import Iperf3Flow
from bufferbloat.traffic.ping import PingProbe


class QdiscPoller:
    """Polls ``tc -s -j qdisc show`` of the bottleneck every ``period_s`` in a thread.

    A stop-gap for tests and the benchmark of the emulation core; it forks ``tc`` each
    tick, so keep the period >= 50 ms. Samples: [(monotonic_s, [qdisc dicts])] of the
    bottleneck; ``others`` {(ns, dev): samples} of any ``extra`` (ns, dev) polled too.
    """

    def __init__(self, net, period_s=0.1, extra=()):
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


@dataclass
class LongFlowResult:
    """What :func:`long_flow` measured."""

    goodput_mbit: float
    ping: object
    leaf_samples: list = field(default_factory=list)  # [(t_s, qdisc dict)] of the AQM leaf
    all_samples: list = field(default_factory=list)   # [(t_s, [qdisc dicts])]
    iperf: dict = field(default_factory=dict)
    others: dict = field(default_factory=dict)        # {(ns, dev): [(t_s, [qdiscs])]}

    def after(self, warmup_s):
        """Leaf samples later than ``warmup_s`` after the first one."""
        if not self.leaf_samples:
            return []
        t0 = self.leaf_samples[0][0]
        return [q for t, q in self.leaf_samples if t - t0 >= warmup_s]

    def max_rtt_ms(self):
        """Largest ping RTT, ms."""
        return max(self.ping.rtts)

    def median_rtt_ms(self, warmup_s=0.0):
        """Median ping RTT after ``warmup_s``, ms."""
        t0 = self.ping.probes[0][0] if self.ping.probes else 0
        return percentile([r for t, _, r in self.ping.probes if t - t0 >= warmup_s], 50)


def long_flow(net, duration_s, src=None, dst=None, ping_interval_s=0.1, poll_period_s=0.1,
              extra_polls=(), omit_s=0, ping_size_bytes=56):
    """One iperf3 flow src -> dst for ``duration_s`` with pings and qdisc polling
    (of the bottleneck, and of ``extra_polls`` [(ns, dev)], kept in ``result.others``).
    ``omit_s``: seconds of slow start sent first and left out of the goodput (note:
    iperf3 3.12 then divides the remaining bytes by the whole duration: leave it 0 when
    the goodput matters). ``ping_size_bytes``: ICMP payload of each probe."""
    src = src or net.topo.senders[0]
    dst = dst or net.topo.receiver
    ping = PingProbe(net, src, dst, ping_interval_s, size_bytes=ping_size_bytes).start()
    poll = QdiscPoller(net, poll_period_s, extra_polls).start()
    flow = Iperf3Flow(net, src, dst, duration_s, cca=net.topo.ccas.get(src),
                      omit_s=omit_s).start()
    try:
        flow.wait()
    finally:
        poll.stop()
        ping_result = ping.stop()
    return LongFlowResult(flow.goodput_mbit, ping_result, poll.series(parent=CLASS),
                          poll.samples, flow.result, poll.others)


def idle_ping(net, count, interval_s=0.1, src=None, dst=None):
    """``count`` pings on an idle network; returns a PingResult."""
    src = src or net.topo.senders[0]
    dst = dst or net.topo.receiver
    probe = PingProbe(net, src, dst, interval_s, count=count).start()
    return probe.wait(timeout_s=count * interval_s + 30)


def idle_rtt(count=50, interval_s=0.1, **params):
    """``count`` pings over an idle dumbbell of its own (``params``; 10 Mbit/s unless
    given), after 5 that warm ARP and caches: (median RTT in ms, the PingResult, the
    switch kind it was built with). None may be lost."""
    params.setdefault("bottleneck_mbit", 10)
    with Network(DumbbellTopo(**params)) as net:
        idle_ping(net, 5, 0.2)
        res = idle_ping(net, count, interval_s)
        switch = net.switch_kind
    assert res.loss_pct == 0, res.loss_pct
    return statistics.median(res.rtts), res, switch


def stop_iperf_clients(monkeypatch, at_s, for_s):
    """Every iperf3 client started from now on is stopped (SIGSTOP by its PID, as a
    sender starved of CPU) ``at_s`` after its launch for ``for_s``, then continued;
    returns the list the stop times are appended to (empty: no client was stopped)."""
    import os
    import signal
    original = Iperf3Flow._start_client
    stopped = []

    def throttled(self, *args, **kwargs):
        original(self, *args, **kwargs)
        proc = self.client

        def pause():
            time.sleep(at_s)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGSTOP)
                stopped.append(time.monotonic())
                time.sleep(for_s)
                os.kill(proc.pid, signal.SIGCONT)
        threading.Thread(target=pause, daemon=True).start()
    monkeypatch.setattr(Iperf3Flow, "_start_client", throttled)
    return stopped
