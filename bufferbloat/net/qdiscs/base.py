"""The rules every queue discipline shares (mahimahi's ``DroppingPacketQueue``): the
:class:`QdiscKind` base with its hooks and their defaults, :class:`QdiscSpec` (one
validated qdisc), and small helpers the kinds' modules use. A kind's own rules live in its
module; the registry is ``__init__``. What each attribute and hook of :class:`QdiscKind`
means is said here, once; ``template.py`` is a short example kind to copy.
"""

import struct
from dataclasses import dataclass, field

from bufferbloat.core.params import Param

MTU_FRAME_BYTES = 1514  # an Ethernet frame carrying a 1500-byte IP packet, as HTB counts it

LIMIT_PKTS = dict(kind=int, lo=1, hi=1_000_000)
TIME_MS = dict(kind=float, lo=0, lo_open=True, hi=10_000)


def ms(v):
    """A time in ms as tc reads it (``5ms``)."""
    return f"{v:g}ms"


def flag(on, yes, no):
    """[yes] or [no]: a tc on/off keyword pair."""
    return [yes if on else no]


def unpack_padded(layout, xs, offset=0):
    """``layout`` (a struct.Struct) unpacked from ``xs`` zero-padded to its size: an older
    kernel's shorter struct is decoded as far as it goes."""
    return layout.unpack_from(bytes(xs).ljust(offset + layout.size, b"\0"), offset)


def nested_attrs(data, off=0, end=None):
    """{type: (value offset, value end)} of the netlink attributes in data[off:end]."""
    end = len(data) if end is None else end
    out = {}
    while off + 4 <= end:
        alen, atype = struct.unpack_from("=HH", data, off)
        if alen < 4:
            break
        out[atype & 0x3FFF] = (off + 4, min(off + alen, end))
        off += (alen + 3) & ~3
    return out


class QdiscKind:
    """One queue discipline kind: subclass it in a module of this package and
    :func:`bufferbloat.net.qdiscs.register` an instance. Every hook has a default here
    (the shared rule); a kind overrides only what it does differently (template.py is a
    short example; the comments below name a kind that overrides each)."""

    #: the registry's name (``--set qdisc=NAME``); often the same as tc_kind
    name = ""
    #: the kind name the kernel reports (TCA_KIND) and tc takes
    tc_kind = ""
    #: other names tc / the kernel report for this kind (pfifo, bfifo for fifo)
    tc_aliases = ()
    #: the kernel module and its config symbol, which ``bufferbloat check`` looks for
    module = ""
    config = ""
    #: where a module that is not the kernel's own is built (None: the kernel's; pi's:
    #: vm/guest/sch_pi)
    project_module = None
    #: one line: what it is (its paper or RFC)
    doc = ""
    #: its parameters (bufferbloat.core.params.Param), units in their names; defaults and
    #: ranges the kernel's own
    params = ()
    #: "packets" or "bytes": the unit of its buffer limit, which a topology-level
    #: buffer_pkts or buffer_bytes fills (red, cake: bytes)
    limit_unit = "packets"
    #: drop-tail: the buffer alone sets the queueing delay (FIFO theory applies)
    drop_tail = False
    #: its colour in every figure, distinct from every other kind's
    color = "#333333"
    #: tc cannot parse it: installed by bufferbloat.net.nlqdisc with these TCA_OPTIONS
    #: attributes {option word: attribute type} (all u32)
    netlink_options = None
    #: option words given as real gains, sent in units of 1e-9 (netlink_options only)
    netlink_gains = frozenset()
    #: its classes carry per-flow state the sampler dumps (RTM_GETTCLASS; fq_codel)
    reads_classes = False
    #: qdisc parameters in bytes that set an operating point: scaled with the rate (red)
    scaled_bytes = ()
    #: kinds of the extra rows it adds to qdisc.csv (cake's per-tin rows): not leaves
    row_kinds = ()

    def tc_kind_of(self, p):
        """The kind tc reports for validated params ``p`` (fifo: pfifo or bfifo)."""
        return self.tc_kind

    def tc_args(self, p, rate_mbit):
        """The ``tc qdisc`` arguments after ``handle H:`` (its kind first) for validated
        params ``p`` under a shaper of ``rate_mbit``. Every kind has its own."""
        raise NotImplementedError(self.name)

    def check(self, p, given, hz=None):
        """Cross-parameter checks on validated ``p`` (``given``: what the user set);
        raise ParameterError/UsageError; return warnings (list of str) about what the
        kernel will change (pie: tupdate rounded up to whole ticks)."""
        return []

    def target_ms(self, p):
        """Its queueing-delay target in ms (theory's reference line, the headline, the
        registry's TARGET_KINDS), or None: its ``target_ms`` parameter, where it has one."""
        return p.get("target_ms")

    def controller_freq_hz(self, p):
        """The update rate of a timer-driven controller (health checks it; pi), or None."""
        return None

    def thresholds(self, p):
        """Queue thresholds drawn on queue figures: [(value, unit "packets"|"bytes",
        label, id)] (red, pi)."""
        return []

    def buffer_pkts_scales(self):
        """Whether a topology-level buffer in packets is scaled with the rate (default:
        the drop-tail kinds, whose buffer is their delay)."""
        return self.drop_tail

    def decode_xstats(self, xs):
        """Its TCA_STATS_APP (bytes) in the sampler's vocabulary: ``marks``,
        ``early_drops``, ``prob``, ``delay_us``, ``maxq_pkts``..., plus raw fields; a
        shorter struct (an older kernel's) decoded as far as it goes (unpack_padded)."""
        return {}

    def decode_class_xstats(self, xs):
        """A class's TCA_STATS_APP (reads_classes kinds): a dict, {} if not a flow."""
        return {}

    def finish(self, q):
        """Fill derived fields of a decoded qdisc ``q`` (in place; codel: early_drops
        from drops)."""
        return q

    def merge_classes(self, q, classes):
        """Merge the decoded classes of its device into qdisc ``q`` (in place; fq_codel:
        the largest flow delay)."""

    def sub_rows(self, q):
        """Extra qdisc.csv rows of decoded qdisc ``q`` (e.g. one per tin), as dicts."""
        return []


@dataclass
class QdiscSpec:
    """A validated qdisc: ``kind`` name and the full parameter dict (defaults filled).

    ``info`` is the :class:`QdiscKind` of ``kind``, which the registry's
    :func:`~bufferbloat.net.qdiscs.make_qdisc` hands over: the spec asks its kind, never
    the registry (which imports this module). It is not part of the spec's description,
    equality or repr."""

    kind: str
    params: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    info: QdiscKind = field(default=None, repr=False, compare=False)

    @property
    def tc_kind(self):
        """The kind name ``tc`` reports for this qdisc."""
        return self.info.tc_kind_of(self.params)

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


__all__ = ["Param", "QdiscKind", "QdiscSpec", "MTU_FRAME_BYTES", "LIMIT_PKTS", "TIME_MS",
           "ms", "flag", "unpack_padded", "nested_attrs"]
