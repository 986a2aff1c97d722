"""The queue disciplines a bottleneck can hold: a registry with one validation point.

Each kind (``fifo``, ``pie``, ``red``, ``codel``, ``fq_codel``) declares its parameters
with units and ranges, the kernel module it needs and how it becomes ``tc`` arguments.
:func:`make_qdisc` is the only way to build one; an unknown kind or parameter is rejected
with the list of what is accepted (as Mahimahi's queue factory does).

Defaults are the Linux kernel's own, so that a spec with no parameters behaves as
``tc qdisc add ... KIND`` would, except where the kernel has none (FIFO and RED limits).
"""

import math
from dataclasses import dataclass, field

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.core.params import Param, check_params

MTU_FRAME_BYTES = 1514  # an Ethernet frame carrying a 1500-byte IP packet, as HTB counts it


def _ms(v):
    return f"{v:g}ms"


def _flag(on, yes, no):
    return [yes if on else no]


@dataclass(frozen=True)
class QdiscKind:
    """Description of one queue discipline kind."""

    name: str
    tc_kind: str
    module: str
    doc: str
    params: tuple
    limit_unit: str  # "packets" or "bytes": the unit of this kind's buffer limit

    def tc_args(self, p, rate_mbit):
        """The ``tc qdisc`` arguments after ``handle H:`` for validated params ``p``."""
        return _TC_ARGS[self.name](p, rate_mbit)


@dataclass
class QdiscSpec:
    """A validated qdisc: ``kind`` name and the full parameter dict (defaults filled)."""

    kind: str
    params: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    @property
    def info(self):
        """The :class:`QdiscKind` of this spec."""
        return KINDS[self.kind]

    @property
    def tc_kind(self):
        """The kind name ``tc`` reports for this qdisc (pfifo or bfifo for fifo)."""
        if self.kind == "fifo":
            return "bfifo" if self.params.get("limit_bytes") else "pfifo"
        return self.info.tc_kind

    @property
    def module(self):
        """The kernel config/module name this qdisc needs (e.g. sch_pie)."""
        return self.info.module

    def tc_args(self, rate_mbit):
        """tc arguments (kind and options) for a shaper of ``rate_mbit`` above it."""
        return self.info.tc_args(self.params, rate_mbit)

    def to_dict(self):
        """JSON-ready description (kind, params, warnings)."""
        return {"kind": self.kind, "params": dict(self.params), "warnings": list(self.warnings)}


def _fifo_args(p, _rate):
    if p["limit_bytes"]:
        return ["bfifo", "limit", str(p["limit_bytes"])]
    return ["pfifo", "limit", str(p["limit_pkts"])]


def _pie_args(p, _rate):
    return (["pie", "limit", str(p["limit_pkts"]), "target", _ms(p["target_ms"]),
             "tupdate", _ms(p["tupdate_ms"]), "alpha", str(p["alpha"]),
             "beta", str(p["beta"])]
            + _flag(p["ecn"], "ecn", "noecn")
            + _flag(p["bytemode"], "bytemode", "nobytemode")
            + _flag(p["dq_rate_estimator"], "dq_rate_estimator", "no_dq_rate_estimator"))


def _red_args(p, rate_mbit):
    burst = p["burst_pkts"] or math.ceil((2 * p["min_bytes"] + p["max_bytes"])
                                         / (3 * p["avpkt_bytes"]))
    args = ["red", "limit", str(p["limit_bytes"]), "min", str(p["min_bytes"]),
            "max", str(p["max_bytes"]), "avpkt", str(p["avpkt_bytes"]),
            "burst", str(burst), "probability", f"{p['probability']:g}",
            "bandwidth", f"{int(rate_mbit * 1e6)}bit"]
    if p["ecn"]:
        args.append("ecn")
    if p["adaptive"]:
        args.append("adaptive")
    return args


def _codel_args(p, _rate):
    return (["codel", "limit", str(p["limit_pkts"]), "target", _ms(p["target_ms"]),
             "interval", _ms(p["interval_ms"])] + _flag(p["ecn"], "ecn", "noecn"))


def _fq_codel_args(p, _rate):
    return (["fq_codel", "limit", str(p["limit_pkts"]), "flows", str(p["flows"]),
             "target", _ms(p["target_ms"]), "interval", _ms(p["interval_ms"]),
             "quantum", str(p["quantum_bytes"])] + _flag(p["ecn"], "ecn", "noecn"))


def _pi_args(p, _rate):
    # not tc's syntax: tc has no parser for "pi"; these are bufferbloat.net.nlqdisc's option
    # words (bottleneck.shaped runs that command instead of tc for this leaf)
    return ["pi", "limit", str(p["limit_pkts"]), "q_ref", str(p["q_ref_pkts"]),
            "a", f"{p['a']:.9g}", "b", f"{p['b']:.9g}", "freq_hz", str(p["freq_hz"]),
            "ecn", str(int(p["ecn"])), "mean_pktsize", str(p["mean_pktsize_bytes"] or 0)]


_TC_ARGS = {"fifo": _fifo_args, "pie": _pie_args, "red": _red_args,
            "codel": _codel_args, "fq_codel": _fq_codel_args, "pi": _pi_args}
#: kinds the kernel knows but tc cannot parse: installed by bufferbloat.net.nlqdisc
NETLINK_KINDS = frozenset({"pi"})

_LIMIT_PKTS = dict(kind=int, lo=1, hi=1_000_000)
_TIME_MS = dict(kind=float, lo=0, lo_open=True, hi=10_000)

KINDS = {k.name: k for k in (
    QdiscKind("fifo", "pfifo", "sch_fifo", "drop-tail FIFO, limit in packets or bytes", (
        Param("limit_pkts", default=100, doc="buffer in packets (pfifo)", **_LIMIT_PKTS),
        Param("limit_bytes", int, None, "buffer in bytes (bfifo); excludes limit_pkts",
              lo=MTU_FRAME_BYTES, hi=1_000_000_000),
    ), "packets"),
    QdiscKind("pie", "pie", "sch_pie", "Proportional Integral controller Enhanced (RFC 8033)", (
        Param("limit_pkts", default=1000, doc="buffer in packets", **_LIMIT_PKTS),
        Param("target_ms", default=15.0, doc="target queueing delay, ms", **_TIME_MS),
        Param("tupdate_ms", default=15.0, doc="drop probability update interval, ms "
              "(rounded up to the kernel tick)", **_TIME_MS),
        Param("alpha", int, 2, "integral gain, in units of 1/8", lo=0, hi=32),
        Param("beta", int, 20, "proportional gain, in units of 1/8", lo=0, hi=32),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
        Param("bytemode", bool, False, "scale drop probability by packet size"),
        Param("dq_rate_estimator", bool, False, "estimate delay from the dequeue rate "
              "instead of timestamps"),
    ), "packets"),
    QdiscKind("red", "red", "sch_red", "Random Early Detection (Floyd & Jacobson 1993)", (
        Param("limit_bytes", int, 151400, "hard buffer limit, bytes",
              lo=MTU_FRAME_BYTES, hi=1_000_000_000),
        Param("min_bytes", int, 15140, "min threshold of the average queue, bytes",
              lo=1, hi=1_000_000_000),
        Param("max_bytes", int, 45420, "max threshold of the average queue, bytes",
              lo=1, hi=1_000_000_000),
        Param("probability", float, 0.1, "max_p, the drop/mark probability at max_bytes",
              lo=0, lo_open=True, hi=1),
        Param("avpkt_bytes", int, 1000, "average packet size, bytes", lo=1, hi=65535),
        Param("burst_pkts", int, None, "burst allowance, packets "
              "(default (2*min+max)/(3*avpkt))", lo=1, hi=1_000_000),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
        Param("adaptive", bool, False, "adapt max_p (Adaptive RED)"),
    ), "bytes"),
    QdiscKind("codel", "codel", "sch_codel", "Controlled Delay (RFC 8289)", (
        Param("limit_pkts", default=1000, doc="buffer in packets", **_LIMIT_PKTS),
        Param("target_ms", default=5.0, doc="target sojourn time, ms", **_TIME_MS),
        Param("interval_ms", default=100.0, doc="sliding window, ms", **_TIME_MS),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
    ), "packets"),
    QdiscKind("fq_codel", "fq_codel", "sch_fq_codel", "Flow-queue CoDel (RFC 8290)", (
        Param("limit_pkts", default=10240, doc="buffer in packets", **_LIMIT_PKTS),
        Param("flows", int, 1024, "number of flow queues", lo=1, hi=65536),
        Param("target_ms", default=5.0, doc="target sojourn time, ms", **_TIME_MS),
        Param("interval_ms", default=100.0, doc="sliding window, ms", **_TIME_MS),
        Param("quantum_bytes", int, MTU_FRAME_BYTES, "DRR quantum, bytes", lo=64, hi=1 << 20),
        Param("ecn", bool, True, "mark ECN-capable packets instead of dropping"),
    ), "packets"),
    QdiscKind("pi", "pi", "sch_pi", "PI controller of Hollot, Misra, Towsley and Gong "
              "(INFOCOM 2001): p += a (q - q_ref) - b (q_old - q_ref) at freq_hz, q in "
              "packets; the project's own module (vm/guest/sch_pi, bufferbloat/net/pi.py)", (
        Param("limit_pkts", default=1000, doc="buffer in packets (tail drop)", **_LIMIT_PKTS),
        Param("q_ref_pkts", int, 14, "reference queue, packets (8 kB of 536 B packets)",
              lo=0, hi=1_000_000),
        Param("a", float, 0.001136, "gain on the queue's error, per packet per update",
              lo=0, hi=4),
        Param("b", float, 0.001086, "gain on the previous error, per packet per update "
              "(a - b: the integral part)", lo=0, hi=4),
        Param("freq_hz", int, 160, "updates per second (hrtimer)", lo=1, hi=10_000),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
        Param("mean_pktsize_bytes", int, None, "count the queue as backlog / this many "
              "bytes instead of packets", lo=1, hi=65535),
    ), "packets"),
)}


def make_qdisc(kind, hz=None, **values):
    """Build a validated :class:`QdiscSpec`.

    kind: one of :data:`KINDS`. hz: the kernel tick rate (CONFIG_HZ) if known, used to warn
    that PIE's tupdate is rounded up to whole ticks. values: the kind's parameters; units
    are in their names (``_ms``, ``_pkts``, ``_bytes``).
    """
    if kind not in KINDS:
        raise UsageError(f"unknown qdisc {kind!r} (valid: {', '.join(sorted(KINDS))}); "
                         + "; ".join(f"{k}: {', '.join(p.name for p in v.params)}"
                                     for k, v in sorted(KINDS.items())))
    info = KINDS[kind]
    p = check_params(f"qdisc {kind}", info.params, values)
    warnings = []
    if kind == "fifo" and p["limit_bytes"]:
        if "limit_pkts" in values:
            raise UsageError("qdisc fifo: give limit_pkts or limit_bytes, not both")
        p["limit_pkts"] = None
    if kind == "red":
        if not p["min_bytes"] < p["max_bytes"] <= p["limit_bytes"]:
            raise ParameterError("red.max_bytes", p["max_bytes"],
                                 f"min_bytes ({p['min_bytes']}) < max_bytes <= limit_bytes "
                                 f"({p['limit_bytes']})")
        if p["avpkt_bytes"] > p["min_bytes"]:
            raise ParameterError("red.avpkt_bytes", p["avpkt_bytes"],
                                 f"<= min_bytes ({p['min_bytes']})")
    # sch_pie keeps tupdate in jiffies (usecs_to_jiffies: rounded up to a whole tick)
    # but target in psched time (64 ns units): only tupdate moves with CONFIG_HZ
    if kind == "pie" and hz:
        tick_ms = 1000.0 / hz
        ticks = math.ceil(p["tupdate_ms"] / tick_ms - 1e-9)
        effective = ticks * tick_ms
        if abs(effective - p["tupdate_ms"]) > 1e-6:
            warnings.append(f"pie tupdate {p['tupdate_ms']:g} ms becomes {effective:g} ms: "
                            f"the kernel counts it in ticks of {tick_ms:g} ms (HZ={hz})")
    return QdiscSpec(kind, p, warnings)


def with_buffer(kind, buffer_pkts=None, buffer_bytes=None, **values):
    """Fill a kind's limit from a topology-level buffer size (packets or bytes).

    FIFO takes either unit; other kinds take only their own limit unit, and the other one is
    refused rather than silently converted.
    """
    if buffer_pkts is not None and buffer_bytes is not None:
        raise UsageError("give the bottleneck buffer in packets or in bytes, not both")
    if kind == "fifo" and buffer_bytes is not None:
        values.setdefault("limit_bytes", buffer_bytes)
    elif buffer_pkts is not None or buffer_bytes is not None:
        unit = KINDS[kind].limit_unit if kind in KINDS else "packets"
        given = "packets" if buffer_pkts is not None else "bytes"
        if unit != given:
            raise UsageError(f"qdisc {kind} takes its buffer in {unit}, not {given}: "
                             f"set buffer_{'pkts' if unit == 'packets' else 'bytes'}")
        key = "limit_pkts" if unit == "packets" else "limit_bytes"
        values.setdefault(key, buffer_pkts if buffer_pkts is not None else buffer_bytes)
    return values
