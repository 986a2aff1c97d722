"""NetPerfMeter flows (the tool study D generated its traffic with): many TCP flows (in
active processes of at most :data:`~.flows.FLOWS_PER_PROCESS`), on-off on one
connection, frame-rate x frame-size paced streams, per-flow start times, CCAs and socket
buffers; per-message one-way delay from its vector files.

The passive side (``netperfmeter PORT``) runs on the far host ``dst``, the active side on
the near host ``src`` with one ``-tcp FLOWSPEC`` per flow and ``-control-over-tcp`` (more
than :data:`~.flows.FLOWS_PER_PROCESS` flows: several active processes, their files
``NAME-pK-...``, K = 2, 3..., beside the first one's ``NAME-...``).
NetPerfMeter 1.9.4's passive side always opens an SCTP control socket too, so the kernel
must have SCTP (the project VM's has; this machine kind's host kernel has not:
``bufferbloat check`` says so). Its outputs (``-vector``/``-scalar``, plain text, both
nodes' results, which the active side downloads at the end) are written into the run's
raw/ directory as they are and parsed from there. The control connection (the passive
side's port + 1: the flows' set-up, then that download) goes over a control path beside
the emulated links (:mod:`bufferbloat.net.control`), as a testbed's control network
would carry it; the data connections go through the emulated path:

* ``NAME-active.vec`` / ``NAME-passive.vec``: per node, per interval (~1 s) and flow,
  cumulative and per-interval bytes, packets and frames ``Sent``, ``Received``,
  ``Lost``, stamped with the wall clock (gettimeofday, microseconds);
* ``NAME-<node>-<flow id, 8 hex>-<stream, 4 hex>.vec``: per flow, one line per message
  its receiver got, with the message's one-way delay (receive time minus the sender's
  timestamp in the message, both gettimeofday: Mininet hosts share one clock);
* ``NAME-<node>.sca``: per flow and node, first/last transmission and reception and
  byte, packet and frame counts.

Series: ``npm.csv`` (per flow, node and interval: bytes sent/received/lost, see
:data:`~.output.COLUMNS`), ``npm_msg.csv`` (per message received: flow, seq, t_sent,
t_recv, size_bytes, see :data:`~.output.MSG_COLUMNS`; one-way delay = t_recv - t_sent).
The TCP sockets are sampled like iperf3's (tcp.csv), each labelled with its flow's name:
the active side prints the socket descriptor of each flow's connection, and its 4-tuple
is read from /proc while the process runs.

The kind's modules: :mod:`.flows` (the flows and their ``-tcp`` specs, the cut into
active processes), :mod:`.run` (a measurement's processes, from the passive side's start
to the results' download), :mod:`.results` (its rows, summary and raw outputs) and
:mod:`.output` (the parsers of the tool's files); this one is the ``netperfmeter``
traffic kind (:class:`NetPerfMeterPart`).
"""

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import MIN_RATE_MBIT, Param
from bufferbloat.traffic.base import TrafficPart, due_s, exit_problem, register
from bufferbloat.traffic.netperfmeter.flows import (
    MAX_FRAME_BYTES,
    MIN_FRAME_BYTES,
    NpmFlow,
    flows_per_process,
    onoff_times,
)
from bufferbloat.traffic.netperfmeter.output import tool_error
from bufferbloat.traffic.netperfmeter.run import PRECONNECT_TIMEOUT_S, NetPerfMeterRun

#: the tool's own runtime beyond the part's stop (which ends it first)
RUNTIME_SLACK_S = 5.0
#: A part whose flows start with the traffic (its start 0) launches the tool before the
#: clock's origin (:meth:`NetPerfMeterPart.prepare`): it connects every flow and exchanges
#: its configuration over the control connection first, one flow after the other (~6
#: round trips per flow while the control connection crossed the emulated path: 40 flows
#: over C's 40 ms path took 10.5 s in the TCG VM; the data handshake's alone now, the
#: control path being beside the emulated links, bufferbloat/net/control.py; so
#: flows launched at the origin began 10.5 s late and the run lost a third of its
#: traffic). Its flows then wait this long after the measurement starts, and the run's
#: origin is set there (:attr:`NetPerfMeterPart.origin_at`): the sampler starts in
#: between (2.2-3 s in the TCG VM from a cold start).
PRECONNECT_LEAD_S = 4.0
#: The lead when the run's sampler process started ahead (PartContext.sampler_warm,
#: bufferbloat.measure.sampler.Prewarmed): what is left between the flows' connect and
#: the origin is the sampler's last step and the departure trace's start, 0.2 s and
#: 0.5-0.6 s in the TCG VM (D's quick points, 2026-11-29: the 4 s lead then left 3.2-3.3
#: s of waiting). A lead that passes first starts the other parts late by that much, and
#: the record says it (``origin_passed_s``).
PRECONNECT_LEAD_WARM_S = 2.0


@register("netperfmeter")
class NetPerfMeterPart(TrafficPart):
    """``count`` TCP flows of one NetPerfMeter measurement (active processes of at most
    :data:`~.flows.FLOWS_PER_PROCESS` flows on ``src``, one passive side on ``dst``):
    saturated (default), paced at ``rate_mbit`` (x ``rate_scale``) in frames of
    ``frame_bytes`` (frame rate = rate / frame size), or on-off on ONE connection
    (``on_off_s`` = (on, off) seconds); started uniformly within ``stagger_s``; with
    ``cca``, ``sndbuf_bytes``/``rcvbuf_bytes`` per socket (0: autotuning)."""

    needs = ("netperfmeter", "sctp", "policy_routing")
    #: the sampler labels each flow's rows from the sockets :meth:`prepare` connects
    flows_known_after_prepare = True
    params = (
        Param("src", str, None, "the active side (near host)"),
        Param("dst", str, None, "the passive side (far host)"),
        Param("count", int, 1, "flows (in active processes of at most 10 flows, one "
              "passive side)", lo=1, hi=200),
        Param("direction", str, "up", "up: src sends; down: dst sends",
              choices=("up", "down")),
        Param("cca", str, None, "congestion control (default: the sender's)"),
        Param("rate_mbit", float, None, "pacing rate of each flow (application payload), "
              "Mbit/s; none: saturated", lo=MIN_RATE_MBIT, hi=100_000),
        Param("rate_scale", float, None, "multiplies rate_mbit (a stream at a fraction of "
              "a reference rate); needs rate_mbit", lo=0, hi=100, lo_open=True),
        Param("frame_bytes", int, 1448, "frame size, bytes (cut into messages of at most "
              "16000 B)", lo=MIN_FRAME_BYTES, hi=MAX_FRAME_BYTES),
        Param("frame_rate_hz", float, None, "frames per second of a paced flow (its frame "
              "size then follows from the rate)", lo=0, hi=10_000, lo_open=True),
        Param("on_off_s", tuple, None, "(on, off) seconds: one connection that sends "
              "on, idles off, repeatedly"),
        Param("stagger_s", float, 0.0, "the flows start uniformly within this many s",
              lo=0, hi=86_400),
        Param("sndbuf_bytes", int, 0, "SO_SNDBUF of each socket, bytes (0: autotuning)",
              lo=0, hi=1 << 30),
        Param("rcvbuf_bytes", int, 0, "SO_RCVBUF of each socket, bytes (0: autotuning)",
              lo=0, hi=1 << 30),
    )

    @classmethod
    def check_spec(cls, spec, where="", resolved=True):
        """Also: ``rate_scale`` needs its reference ``rate_mbit`` (e.g. the matching bulk
        run's goodput): a missing reference is an error, never a guess."""
        super().check_spec(spec, where, resolved)
        flows_per_process()       # a bad BUFFERBLOAT_NPM_FLOWS_PER_PROCESS, before a network
        if resolved and spec.get("rate_scale") is not None and spec.get("rate_mbit") is None:
            raise UsageError(
                f"{where}traffic {spec.get('name', cls.kind)}: rate_scale "
                f"{spec['rate_scale']} needs a reference rate_mbit, which is not set (a "
                "stream at a fraction of the bulk run's goodput needs bulk_goodput_mbit: "
                "a sweep over the bulk load sets it from that run; or --set "
                "bulk_goodput_mbit=MBIT)")
        rate, scale = spec.get("rate_mbit"), spec.get("rate_scale")
        if resolved and rate is not None and scale is not None \
                and float(rate) * float(scale) < MIN_RATE_MBIT:
            raise UsageError(
                f"{where}traffic {spec.get('name', cls.kind)}: invalid value for "
                f"rate_mbit x rate_scale: {rate:g} x {scale:g} = "
                f"{float(rate) * float(scale):.3g} Mbit/s (allowed: >= {MIN_RATE_MBIT:g}"
                " Mbit/s, the floor of any rate)")
        if resolved and spec.get("direction", "up") == "down" and int(spec.get("count", 1)) > 1:
            # the sampler labels a sending socket by its source port, which all 'down'
            # flows share (the passive side's port)
            raise UsageError(f"{where}traffic {spec.get('name', cls.kind)}: direction "
                             "down takes one flow (count 1)")
        on_off = spec.get("on_off_s")
        pair = isinstance(on_off, (tuple, list)) and len(on_off) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in on_off)
        if resolved and on_off is not None and not pair:
            raise UsageError(f"{where}traffic {spec.get('name', cls.kind)}: on_off_s "
                             f"{on_off!r} (allowed: two positive numbers of seconds)")

    def tools(self):
        spec, net = self.spec, self.ctx.net
        count, length, offsets = self.flow_starts()
        rate = spec.get("rate_mbit")
        if rate is not None and spec.get("rate_scale") is not None:
            rate = float(rate) * float(spec["rate_scale"])
        direction = spec.get("direction", "up")
        sender = spec["src"] if direction == "up" else spec["dst"]
        cca = spec.get("cca") or net.topo.ccas.get(sender)
        frame = int(spec.get("frame_bytes", 1448))
        if rate is not None and spec.get("frame_rate_hz"):
            frame = max(MIN_FRAME_BYTES, min(MAX_FRAME_BYTES, round(
                rate * 1e6 / 8 / float(spec["frame_rate_hz"]))))
        flows = []
        for i, offset in enumerate(offsets):
            name = spec["name"] if count == 1 else f"{spec['name']}{i + 1}"
            onoff = None
            if spec.get("on_off_s"):
                on, off = (float(x) for x in spec["on_off_s"])
                onoff = onoff_times(length, on, off, offset)
            elif offset > 0:
                onoff = [offset]
            flows.append(NpmFlow(i + 1, name, direction, rate, frame, onoff, cca,
                                 spec.get("sndbuf_bytes", 0), spec.get("rcvbuf_bytes", 0)))
        # the part's stop ends the measurement (SIGINT: the tool stops its flows and
        # downloads the passive side's results); its own runtime is a backstop only
        self.run = NetPerfMeterRun(net, spec["src"], spec["dst"], self.ctx.ports("tcp", 2),
                                   flows, length + RUNTIME_SLACK_S, name=spec["name"],
                                   out_dir=self.ctx.raw_dir, **self.ctx.clock)
        return [(self.run, self.start_s, self.stop_s)]

    def prepare(self):
        """The passive side listens; a part whose flows start with the traffic (its
        start 0) also connects them now (:meth:`NetPerfMeterRun.preconnect`), so that
        they start on schedule however long connecting takes: the run's origin waits
        for them (:attr:`origin_at`)."""
        self.run.prepare()
        if self.start_s == 0:
            lead = PRECONNECT_LEAD_WARM_S if self.ctx.sampler_warm else PRECONNECT_LEAD_S
            # a backstop only (the part's stop ends the tool), from the tool's launch
            self.run.runtime_s += lead + PRECONNECT_TIMEOUT_S
            self.origin_at = self.run.preconnect(lead)

    def waited(self):
        """Nothing: the part's stop ends the measurement (its schedule sends SIGINT at the
        part's end), and the download of the passive side's results that follows is not
        traffic the run waits for (:meth:`stop` completes it)."""
        return []

    def stop(self):
        """The timeline's tools, and the measurement's processes whatever the timeline
        reached: a pre-connected part starts them in :meth:`prepare`, before its
        timeline exists, and a run that fails or is interrupted in between still stops
        them by PID, downloads what they measured and keeps their output."""
        super().stop()
        run = getattr(self, "run", None)
        if run is not None:
            run.stop()

    def tool_problem(self, tool):
        running = any(g.proc is not None and g.proc.poll() is None for g in tool.actives)
        return (exit_problem(f"netperfmeter passive side of {tool.name}", tool.passive,
                             expect_running=running)
                or next((p for g in tool.actives if (p := exit_problem(
                    f"netperfmeter active side of {tool.name} (raw/{g.stem}.stdout.txt)",
                    g.proc))), None))

    def reported_error(self):
        err = tool_error(self.run.stdout, self.run.stderr)
        return None if err is None else f"netperfmeter {self.name}: {err}"

    def rows(self):
        return self.run.rows()

    def summary(self):
        entry = {"name": self.name, "kind": "NetPerfMeterRun", **self.run.summary()}
        if self.run.scheduled_s is not None:
            # health: each flow was due at the part's start + its first "on"; the time
            # the process took to connect its flows before the measurement began counts
            # as lateness
            for flow, spec in zip(entry["flows"], self.run.flows):
                flow["scheduled_s"] = round(due_s(self.run.scheduled_s, spec.start_s), 6)
        return [entry]

    def sampled_flows(self):
        hosts = {"up": self.spec["src"], "down": self.spec["dst"]}
        direction = self.spec.get("direction", "up")
        # the data port carries data connections only (the control connection is on
        # port + 1): every socket is sampled from its first moment, a flow that starts
        # late or sends little included
        if direction == "up":
            # a pre-connected part's sockets are known before the sampler starts
            # (prepare): each flow's rows carry its name; otherwise host:port
            # (a part of one flow: its port's name, known before it connects)
            labels = {str(ports[0]): f.name for f in self.run.flows
                      if (ports := self.run.sockets.get(f.flow_id))}
            one = {"label": self.run.flows[0].name} if len(self.run.flows) == 1 else {}
            return [{"host": hosts["up"], "dports": [self.run.port], "no_control": True,
                     "labels": labels, **one}]
        return [{"host": hosts["down"], "sports": [self.run.port], "no_control": True,
                 "labels": {self.run.port: self.run.flows[0].name}}]

    def flow_labels(self):
        out = {}
        for f in self.run.flows:
            ports = self.run.sockets.get(f.flow_id)
            if ports:
                out[(self.run.src, ports[0])] = f.name
        return out
