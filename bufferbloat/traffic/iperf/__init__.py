"""The ``iperf`` traffic kind (long flows, staggered counts, on-off bursts, paced
streams) and what the kinds built on iperf3 flows share: a flow's sampled sockets, its
problems and errors, its rows.

The tool: :mod:`.flow` (:class:`~bufferbloat.traffic.iperf.flow.Iperf3Flow`, a flow's
life), :mod:`.results` (what it yields) and :mod:`.output` (the parsers of its JSON).
"""

from bufferbloat.core.params import MIN_RATE_MBIT, Param
from bufferbloat.traffic.base import TrafficPart, exit_problem, register
from bufferbloat.traffic.iperf.flow import Iperf3Flow, prepare_servers


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
