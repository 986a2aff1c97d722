"""The RRUL-like load (4 TCP flows each way and ping probes between two hosts) and the
``rrul`` traffic kind."""

import threading
import time

from bufferbloat.core.params import Param, check_number, check_port
from bufferbloat.traffic.base import TrafficPart, register
from bufferbloat.traffic.base import realtime_minus_monotonic as base_rmm
from bufferbloat.traffic.iperf import (
    flow_problem,
    flow_rows,
    reported_flow_error,
    sampled_flow,
)
from bufferbloat.traffic.iperf.flow import Iperf3Flow, prepare_servers, watch_established
from bufferbloat.traffic.ping import PingProbe


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
        self.rmm = (base_rmm() if realtime_minus_monotonic is None
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
        # one thread notes every client's connections (all run on ``a``): a poller per
        # client took the CPU the later launches needed
        self._established = threading.Thread(target=watch_established, args=(self.flows,),
                                             daemon=True, name=f"iperf3-watch-{self.name}")
        self._established.start()
        # launched from one thread each: a launch waits on fork/exec (the GIL free), and
        # one after the other the last of 8 clients came 1.8-2.3 s late under TCG
        errors = []

        def launch(flow):
            try:
                flow._start_client(poll_established=False)
            except Exception as exc:  # noqa: BLE001 - raised below, in the caller
                errors.append(exc)
        launchers = [threading.Thread(target=launch, args=(f,), daemon=True,
                                      name=f"iperf3-launch-{f.name}") for f in self.flows]
        for t in launchers:
            t.start()
        for t in launchers:
            t.join()
        if errors:
            raise errors[0]
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


@register("rrul")
class RrulPart(TrafficPart):
    """An RRUL-like load between ``a`` and ``b`` from the part's start for its length."""

    params = (Param("a", str, None, "the host that uploads and pings"),
              Param("b", str, None, "the other end"))

    def tools(self):
        spec, ctx = self.spec, self.ctx
        self.load = Rrul(ctx.net, spec["a"], spec["b"], self.stop_s - self.start_s,
                         cca=ctx.net.topo.ccas.get(spec["a"]), name=spec["name"],
                         base_port=ctx.ports("tcp", 8), **ctx.clock)
        return [(self.load, self.start_s, None)]

    def prepare(self):
        """The load's servers listen before the clock starts."""
        prepare_servers(self.load.flows)

    def problem(self):
        return super().problem() or next(filter(None, map(flow_problem, self.load.flows)),
                                         None)

    def reported_error(self):
        return next(filter(None, map(reported_flow_error, self.load.flows)), None)

    def rows(self):
        return {"iperf": [r for f in self.load.flows for r in flow_rows(f)],
                "ping": self.load.ping.rows()}

    def sampled_flows(self):
        return [s for s in map(sampled_flow, self.load.flows) if s]
