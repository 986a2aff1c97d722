"""Mininet topologies: the h1 -- s0 -- h2 dumbbell and the k-sender dumbbell.

A topology holds only a description: hosts, the switch, and for every link a
:class:`LinkSpec` (rate, one-way delay, jitter, loss per direction). Which qdiscs realise
it is decided by :mod:`bufferbloat.net.bottleneck`, and :class:`bufferbloat.net.network.Network`
builds it. The link parameters are kept out of Mininet's ``addLink`` options on purpose:
Mininet's TCLink would put them into a netem whose ``limit`` doubles as the router buffer.

Naming: senders ``h1..hk``, receiver ``h{k+1}`` (``h2`` in the plain dumbbell), switch
``s0``. "forward" is the direction data flows, sender -> receiver; "reverse" carries ACKs.

Nothing here imports Mininet: describing, validating and listing scenarios works with any
Python. :meth:`BaseDumbbell.to_mininet` makes Mininet's ``Topo`` when a network is built.
"""

import re
from dataclasses import asdict, dataclass

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.core.params import MIN_RATE_MBIT, Param, check_params
from bufferbloat.net import linktrace
from bufferbloat.net.qdiscs import DEFAULT_KIND, KINDS, make_qdisc, with_buffer

SWITCH = "s0"
CCA_CHOICES = ("reno", "cubic", "bbr", "vegas")


@dataclass(frozen=True)
class Impairment:
    """What one direction of a link does to packets besides rate: one-way ``delay_ms``,
    ``jitter_ms`` (uniform +/-, may reorder), random ``loss_pct`` (0-100)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0

    @property
    def active(self):
        """True if this direction needs a netem at all."""
        return bool(self.delay_ms or self.jitter_ms or self.loss_pct)


@dataclass(frozen=True)
class LinkSpec:
    """One emulated link ``a -- b``: ``rate_mbit`` in both directions, ``ab``/``ba`` the
    impairments of the a->b and b->a directions; ``bottleneck`` marks the s0 -> receiver
    link whose a->b egress holds the AQM."""

    a: str
    b: str
    rate_mbit: float
    ab: Impairment
    ba: Impairment
    bottleneck: bool = False

    def to_dict(self):
        """JSON-ready form."""
        return asdict(self)


_COMMON = (
    Param("bottleneck_mbit", float, 10.0, "bottleneck rate s0 -> receiver, Mbit/s",
          lo=MIN_RATE_MBIT, hi=10_000),
    Param("host_mbit", float, 1000.0, "rate of every sender's access link, Mbit/s",
          lo=MIN_RATE_MBIT, hi=100_000),
    Param("delay_ms", float, 0.0, "one-way propagation delay of every link, ms "
          "(base RTT of the dumbbell = 4 x delay_ms)", lo=0, hi=10_000),
    Param("bottleneck_delay_ms", float, None, "one-way delay of the bottleneck link, ms "
          "(default delay_ms)", lo=0, hi=10_000),
    Param("jitter_ms", float, 0.0, "delay variation (uniform +/-) of each direction of "
          "each sender's path, ms (<= every link's delay)",
          lo=0, hi=10_000),
    Param("loss_pct", float, 0.0, "random loss on loss_link in loss_dir, %", lo=0, hi=100),
    Param("loss_link", str, "access", "link that loses packets: 'access' (every "
          "sender's link), a sender name (h1..hk) or 'bottleneck'"),
    Param("loss_dir", str, "forward", "direction that loses packets",
          choices=("forward", "reverse", "both")),
    Param("qdisc", str, DEFAULT_KIND, "bottleneck queue discipline",
          choices=tuple(KINDS)),
    Param("buffer_pkts", int, None, "bottleneck buffer, packets (sets the qdisc limit)",
          lo=1, hi=1_000_000),
    Param("buffer_bytes", int, None, "bottleneck buffer, bytes (sets the qdisc limit)",
          lo=1514, hi=1_000_000_000),
    Param("cca", str, "cubic", "TCP congestion control of every sender",
          choices=CCA_CHOICES),
    Param("rcvbuf_bytes", int, 1 << 20, "initial TCP receive buffer of every host "
          "(the default of net.ipv4.tcp_rmem): large, so that the receive window never "
          "limits a flow before the bottleneck does", lo=4096, hi=1 << 30),
    Param("switch", str, "auto", "switch kind: OVS kernel datapath, Linux bridge, or "
          "auto (OVS where the kernel has it)", choices=("auto", "ovs", "bridge")),
    Param("reverse_mbit", float, None, "rate of the bottleneck link's reverse direction "
          "(receiver -> s0: ACKs, downloads), Mbit/s; default bottleneck_mbit (a symmetric "
          "link, as Mininet's TCLink makes it)", lo=MIN_RATE_MBIT, hi=100_000),
    Param("sndbuf_bytes", int, 0, "largest TCP send buffer of every host (the maximum of "
          "net.ipv4.tcp_wmem); 0: the kernel's autotuning (unlimited)", lo=0, hi=1 << 30),
    Param("slow_start_after_idle", int, None, "net.ipv4.tcp_slow_start_after_idle of "
          "every host: 1 restarts an idle connection's window from the initial window "
          "(RFC 2861), 0 keeps it; default: the kernel's (1)", lo=0, hi=1),
    Param("advmss_bytes", int, None, "the TCP maximum segment size every host advertises "
          "on its routes (ip route ... advmss): every TCP connection, whatever tool opened "
          "it, sends segments of at most this payload; default: from the MTU (1448 with "
          "timestamps)", lo=88, hi=9000),
    Param("aqm_both_ways", bool, False, "the bottleneck's reverse direction (receiver -> "
          "s0, e.g. RRUL downloads) queues in the same AQM too, instead of a plain FIFO"),
    Param("reverse_qdisc", str, None, "the leaf of the bottleneck's reverse direction (the "
          "receiver's egress: a server's own NIC), a qdisc kind with its defaults, e.g. "
          "fq_codel (Debian's net.core.default_qdisc); default: a plain FIFO (or the "
          "bottleneck's AQM with aqm_both_ways)", choices=tuple(KINDS)),
    Param("ecn", bool, None, "hosts negotiate ECN (net.ipv4.tcp_ecn=1); default: on when "
          "the bottleneck qdisc marks (its ecn parameter), else the kernel's default "
          "(2: answer ECN, never ask)"),
    Param("link_trace", str, None, "a capacity trace the bottleneck replays (s0 -> "
          "receiver): a file in mahimahi's format, one line per 1500-byte delivery "
          "opportunity (integer ms), wrapping; set on the HTB class every 10 ms, the AQM "
          "leaf untouched (docs/guide/varying-links.md)", pattern=r"[^\s,;]+"),
    Param("link_schedule", str, None, "the bottleneck's rate as repeating steps "
          "SECONDS:MBIT,... (e.g. 2:8,2:2: 8 Mbit/s for 2 s, then 2 for 2 s); 0 holds "
          "packets at 1 kbit/s", pattern=r"[0-9.]+:[0-9.]+(,[0-9.]+:[0-9.]+)*"),
    Param("link_trace_up", str, None, "a capacity trace (mahimahi format) the "
          "bottleneck's reverse direction replays (receiver -> s0: ACKs, uploads of "
          "the receiver), on its HTB class like link_trace", pattern=r"[^\s,;]+"),
)
DUMBBELL_PARAMS = _COMMON
KDUMBBELL_PARAMS = _COMMON + (
    Param("k", int, 2, "number of senders", lo=1, hi=200),
    Param("rtt_ms", str, None, "per-sender base RTT, ms, comma-separated (one value for "
          "all or one per sender); sets each access link's delay", pattern=r"[0-9.]+(,[0-9.]+)*"),
    Param("ccas", str, None, "per-sender congestion control, comma-separated "
          "(default: cca for all)", pattern=r"[a-z]+(,[a-z]+)*"),
)


def _natural(name):
    """Sort key putting h2 before h10 (as Mininet sorts node names)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


class BaseDumbbell:
    """Shared build of both dumbbells: ``k`` senders, switch s0, one receiver.

    After construction: ``params`` (validated, defaults filled), ``link_specs`` (list of
    :class:`LinkSpec`), ``senders``, ``receiver``, ``ccas`` {host: cca}, ``qdisc``
    (:class:`~bufferbloat.net.qdiscs.QdiscSpec`) and ``qdisc_params`` as given; ``hosts()``,
    ``switches()`` and ``links()`` as Mininet's ``Topo`` names them.
    """

    PARAMS = DUMBBELL_PARAMS

    def __init__(self, qdisc_params=None, hz=None, **params):
        self.params = check_params(type(self).__name__, self.PARAMS, params)
        self.qdisc_params = dict(qdisc_params or {})
        self.hz = hz
        self._nodes = {}     # name -> Mininet addHost/addSwitch options, in build order
        self._switches = set()
        self._links = []     # (a, b) in build order
        self.build()

    # the part of Mininet's Topo interface the build and the network use
    def addHost(self, name, **opts):  # noqa: N802 - Mininet's name
        """Add host ``name`` (Mininet's ``Topo.addHost``)."""
        self._nodes[name] = opts
        return name

    def addSwitch(self, name, **opts):  # noqa: N802
        """Add switch ``name`` (Mininet's ``Topo.addSwitch``)."""
        self._nodes[name] = opts
        self._switches.add(name)
        return name

    def addLink(self, a, b):  # noqa: N802
        """Add a link ``a -- b`` (its parameters live in :attr:`link_specs`)."""
        self._links.append((a, b))

    def hosts(self, sort=True):
        """Host names (naturally sorted, as Mininet's ``Topo.hosts``)."""
        names = [n for n in self._nodes if n not in self._switches]
        return sorted(names, key=_natural) if sort else names

    def switches(self, sort=True):
        """Switch names."""
        names = [n for n in self._nodes if n in self._switches]
        return sorted(names, key=_natural) if sort else names

    def links(self, sort=False):
        """(a, b) of every link, in the order they were added."""
        return sorted(self._links) if sort else list(self._links)

    def to_mininet(self):
        """Mininet's ``Topo`` of this description (nodes and links in the same order, so
        the interfaces get the same names). Imports Mininet: call only to build."""
        from mininet.topo import Topo  # noqa: PLC0415 - Mininet only where a network is built
        topo = Topo()
        for name, opts in self._nodes.items():
            (topo.addSwitch if name in self._switches else topo.addHost)(name, **opts)
        for a, b in self._links:
            topo.addLink(a, b)
        return topo

    def build(self):
        p = self.params
        k = p.get("k", 1)
        self.senders = [f"h{i}" for i in range(1, k + 1)]
        self.receiver = f"h{k + 1}"
        access_delay = self._access_delays(k)
        bn_delay = p["delay_ms"] if p["bottleneck_delay_ms"] is None else p["bottleneck_delay_ms"]
        self.ccas = self._ccas(k)
        valid_links = ["access", "bottleneck"] + self.senders
        if p["loss_link"] not in valid_links:
            raise ParameterError("loss_link", p["loss_link"], "one of " + ", ".join(valid_links))
        self.qdisc = make_qdisc(p["qdisc"], hz=self.hz, **with_buffer(
            p["qdisc"], p["buffer_pkts"], p["buffer_bytes"], **self.qdisc_params))
        if 0 < p["sndbuf_bytes"] < 4096:
            raise ParameterError("sndbuf_bytes", p["sndbuf_bytes"], "0 (unlimited) or "
                                 ">= 4096 bytes")
        self.reverse_qdisc = None
        if p["reverse_qdisc"] is not None:
            if p["aqm_both_ways"]:
                raise ParameterError("reverse_qdisc", p["reverse_qdisc"], "unset when "
                                     "aqm_both_ways puts the bottleneck's AQM there (a "
                                     "scenario that sets reverse_qdisc may have a variant "
                                     "without it: bufferbloat describe SCENARIO)")
            if p["loss_pct"] and p["loss_link"] == "bottleneck" \
                    and p["loss_dir"] in ("reverse", "both"):
                raise ParameterError("reverse_qdisc", p["reverse_qdisc"], "unset when the "
                                     "bottleneck's reverse direction is lossy (its leaf is "
                                     "then netem)")
            self.reverse_qdisc = make_qdisc(p["reverse_qdisc"], hz=self.hz)
        if p["aqm_both_ways"] and p["loss_pct"] and p["loss_link"] == "bottleneck" \
                and p["loss_dir"] in ("reverse", "both"):
            raise ParameterError("aqm_both_ways", True, "false when the bottleneck's "
                                 "reverse direction is lossy (its leaf is then netem)")

        #: the bottleneck's capacity plan (a LinkTrace) or None: read and checked here,
        #: before any network exists
        self.link_trace = linktrace.from_params(p)
        self.link_trace_up = (linktrace.load_trace(p["link_trace_up"], "link_trace_up")
                              if p["link_trace_up"] else None)

        self.addSwitch(SWITCH, dpid="0000000000000001")
        self.link_specs = []
        for host, delay in zip(self.senders, access_delay):
            self.addHost(host)
            lossy = p["loss_link"] in ("access", host)
            self.link_specs.append(self._spec(host, SWITCH, p["host_mbit"], delay, lossy))
        self.addHost(self.receiver)
        # The bottleneck link is described s0 -> receiver so that "a->b" is forward.
        self.link_specs.append(self._spec(SWITCH, self.receiver, p["bottleneck_mbit"], bn_delay,
                                     p["loss_link"] == "bottleneck", bottleneck=True))
        for spec in self.link_specs:
            self.addLink(spec.a, spec.b)

    def _access_delays(self, k):
        return [self.params["delay_ms"]] * k

    def _ccas(self, k):
        return {h: self.params["cca"] for h in (f"h{i}" for i in range(1, k + 1))}

    def _spec(self, a, b, rate, delay, lossy, bottleneck=False):
        p = self.params
        if p["jitter_ms"] > delay:
            raise ParameterError("jitter_ms", p["jitter_ms"],
                                 f"<= the link's one-way delay ({delay:g} ms)")
        loss = p["loss_pct"] if lossy else 0.0
        fwd = loss if p["loss_dir"] in ("forward", "both") else 0.0
        rev = loss if p["loss_dir"] in ("reverse", "both") else 0.0
        # a->b is forward for the bottleneck (s0 -> receiver) and for access links
        # (sender -> s0).
        return LinkSpec(a, b, rate, Impairment(delay, p["jitter_ms"], fwd),
                        Impairment(delay, p["jitter_ms"], rev), bottleneck)

    @property
    def bottleneck(self):
        """The bottleneck :class:`LinkSpec`."""
        return next(s for s in self.link_specs if s.bottleneck)

    def base_rtt_ms(self, sender="h1"):
        """Propagation RTT sender <-> receiver, ms (no queueing, no transmission time)."""
        acc = next(s for s in self.link_specs if s.a == sender)
        bn = self.bottleneck
        return acc.ab.delay_ms + acc.ba.delay_ms + bn.ab.delay_ms + bn.ba.delay_ms

    @property
    def ecn(self):
        """True when the hosts must ask for ECN: the topology says so, or (unset) the
        bottleneck qdisc marks."""
        if self.params.get("ecn") is not None:
            return bool(self.params["ecn"])
        return bool(self.qdisc.params.get("ecn"))

    def describe(self):
        """JSON-ready description recorded with every run."""
        return {"class": type(self).__name__, "params": dict(self.params),
                "qdisc": self.qdisc.to_dict(), "senders": self.senders,
                "receiver": self.receiver, "ccas": dict(self.ccas),
                "links": [s.to_dict() for s in self.link_specs],
                **({"link_trace": self.link_trace.summary()} if self.link_trace else {}),
                **({"link_trace_up": self.link_trace_up.summary()}
                   if self.link_trace_up else {})}


class DumbbellTopo(BaseDumbbell):
    """h1 -- s0 -- h2: one sender, one receiver, bottleneck s0 -> h2.

    Parameters (all optional; see :data:`DUMBBELL_PARAMS` for units and ranges):
    bottleneck_mbit, host_mbit, delay_ms (per link, one way), bottleneck_delay_ms,
    jitter_ms, loss_pct with loss_link/loss_dir, qdisc with buffer_pkts or buffer_bytes,
    cca, switch. ``qdisc_params``: the qdisc's own parameters (e.g. target_ms for pie).
    """

    PARAMS = DUMBBELL_PARAMS


class KDumbbellTopo(BaseDumbbell):
    """h1..hk -- s0 -- h{k+1}: k senders sharing the bottleneck s0 -> receiver.

    Adds to :class:`DumbbellTopo`'s parameters: ``k``; ``rtt_ms`` (per-sender base RTT,
    realised on each access link as delay = rtt/2 - bottleneck delay); ``ccas`` (per-sender
    congestion control).
    """

    PARAMS = KDUMBBELL_PARAMS

    def _access_delays(self, k):
        p = self.params
        if not p["rtt_ms"]:
            return [p["delay_ms"]] * k
        rtts = _per_sender("rtt_ms", p["rtt_ms"], k, float)
        bn = p["delay_ms"] if p["bottleneck_delay_ms"] is None else p["bottleneck_delay_ms"]
        out = []
        for i, rtt in enumerate(rtts, 1):
            access = rtt / 2 - bn
            if access < 0:
                raise ParameterError("rtt_ms", rtt, f">= 2 x the bottleneck delay "
                                     f"({2 * bn:g} ms) for sender h{i}")
            out.append(access)
        return out

    def _ccas(self, k):
        p = self.params
        if not p["ccas"]:
            return super()._ccas(k)
        names = _per_sender("ccas", p["ccas"], k, str)
        for n in names:
            if n not in CCA_CHOICES:
                raise ParameterError("ccas", n, "one of " + ", ".join(CCA_CHOICES))
        return {f"h{i}": n for i, n in enumerate(names, 1)}


def _per_sender(name, text, k, conv):
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if len(items) == 1:
        items = items * k
    if len(items) != k:
        raise ParameterError(name, text, f"one value or exactly k={k} comma-separated values")
    try:
        vals = [conv(x) for x in items]
    except ValueError:
        raise ParameterError(name, text, "comma-separated numbers") from None
    if conv is float and any(v < 0 or v > 20_000 for v in vals):
        raise ParameterError(name, text, "values between 0 and 20000")
    return vals


TOPOLOGIES = {"dumbbell": DumbbellTopo, "kdumbbell": KDumbbellTopo}


def make_topo(name, qdisc_params=None, hz=None, **params):
    """Build a topology by name ('dumbbell' or 'kdumbbell')."""
    if name not in TOPOLOGIES:
        raise UsageError(f"unknown topology {name!r} (valid: {', '.join(TOPOLOGIES)})")
    return TOPOLOGIES[name](qdisc_params=qdisc_params, hz=hz, **params)
