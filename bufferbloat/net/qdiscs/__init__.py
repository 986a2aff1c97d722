"""The queue disciplines a bottleneck can hold: one module per kind, and this registry.

==============  ===========================================================================
``base``        the rules all kinds share: :class:`QdiscKind` (each hook, what it is for,
                its default), :class:`QdiscSpec`, helpers
``template``    a short example kind, every hook named (copy it to add a kind)
``fifo`` ...    one module per kind: ``fifo``, ``pie``, ``red``, ``codel``, ``fq_codel``,
                ``pi``, ``cake``: its parameters with units and ranges, tc arguments,
                checks, kernel module, scaling, target, statistics decoder, colour
(here)          :data:`KINDS`, :func:`register`, :func:`make_qdisc`, :func:`with_buffer`,
                and the statistics entry points the sampler and nlstats call
==============  ===========================================================================

Division of labour: a kind's module is the only place that names it or knows its rules;
everything else (topology, capabilities, engine, results, scaling, plots) asks this
registry. :func:`make_qdisc` is the only way to build one; an unknown kind or parameter is
rejected with the list of what is accepted (as Mahimahi's queue factory does). Defaults
are the Linux kernel's own, so that a spec with no parameters behaves as ``tc qdisc add
... KIND`` would, except where the kernel has none (FIFO and RED limits). Imports: core
and netlink only (the sampler process imports this package).
"""

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import check_params
from bufferbloat.net.qdiscs import cake, codel, fifo, fq_codel, pi, pie, red
from bufferbloat.net.qdiscs.base import MTU_FRAME_BYTES, QdiscKind, QdiscSpec
from bufferbloat.netlink import nlstats

#: {name: QdiscKind}, in the order figures and help list them
KINDS = {}
#: {name the kernel reports (TCA_KIND, aliases): QdiscKind}
BY_TC_KIND = {}


def register(kind):
    """Add a :class:`QdiscKind` instance to the registry (one line per kind, below)."""
    if kind.name in KINDS:
        raise ValueError(f"qdisc kind {kind.name!r} registered twice")
    KINDS[kind.name] = kind
    for tc in (kind.tc_kind, kind.name, *kind.tc_aliases):
        BY_TC_KIND.setdefault(tc, kind)
    return kind


register(fifo.KIND)
register(pie.KIND)
register(red.KIND)
register(codel.KIND)
register(fq_codel.KIND)
register(pi.KIND)
register(cake.KIND)

#: the kind of a bottleneck that names none
DEFAULT_KIND = fifo.KIND.name
#: kinds the kernel knows but tc cannot parse: installed by bufferbloat.net.nlqdisc
NETLINK_KINDS = frozenset(k.name for k in KINDS.values() if k.netlink_options)


def defaults(kind):
    """A kind's parameters' defaults, {name: default}."""
    return {p.name: p.default for p in kind.params}


#: kinds whose parameters include a queueing-delay target
TARGET_KINDS = tuple(k.name for k in KINDS.values() if k.target_ms(defaults(k)) is not None)
#: kinds of the extra rows kinds add to qdisc.csv (not qdiscs: no leaf of their own)
ROW_KINDS = frozenset(r for k in KINDS.values() for r in k.row_kinds)


def kind_of(name):
    """The registry's :class:`QdiscKind` for a registry or tc name (``pfifo`` -> fifo),
    or None."""
    return BY_TC_KIND.get(str(name or "").lower())


def make_qdisc(kind, hz=None, **values):
    """Build a validated :class:`QdiscSpec`.

    kind: one of :data:`KINDS`. hz: the kernel tick rate (CONFIG_HZ) if known (PIE warns
    that its tupdate is rounded up to whole ticks). values: the kind's parameters; units
    are in their names (``_ms``, ``_pkts``, ``_bytes``).
    """
    if kind not in KINDS:
        raise UsageError(f"unknown qdisc {kind!r} (valid: {', '.join(sorted(KINDS))}); "
                         + "; ".join(f"{k}: {', '.join(p.name for p in v.params)}"
                                     for k, v in sorted(KINDS.items())))
    info = KINDS[kind]
    p = check_params(f"qdisc {kind}", info.params, values)
    warnings = info.check(p, values, hz)
    return QdiscSpec(kind, p, list(warnings), info=info)


def with_buffer(kind, buffer_pkts=None, buffer_bytes=None, **values):
    """Fill a kind's limit from a topology-level buffer size (packets or bytes).

    A drop-tail kind takes either unit; other kinds take only their own limit unit, and
    the other one is refused rather than silently converted.
    """
    if buffer_pkts is not None and buffer_bytes is not None:
        raise UsageError("give the bottleneck buffer in packets or in bytes, not both")
    info = KINDS.get(kind)
    if info is not None and info.drop_tail and buffer_bytes is not None:
        values.setdefault("limit_bytes", buffer_bytes)
    elif buffer_pkts is not None or buffer_bytes is not None:
        unit = info.limit_unit if info is not None else "packets"
        given = "packets" if buffer_pkts is not None else "bytes"
        if unit != given:
            raise UsageError(f"qdisc {kind} takes its buffer in {unit}, not {given}: "
                             f"set buffer_{'pkts' if unit == 'packets' else 'bytes'}")
        key = "limit_pkts" if unit == "packets" else "limit_bytes"
        values.setdefault(key, buffer_pkts if buffer_pkts is not None else buffer_bytes)
    return values


# ----------------------------------------------------------------- statistics
def decode_xstats(kind, xs):
    """Decode a qdisc's TCA_STATS_APP by its kernel kind name into the sampler's
    vocabulary (the kind module's ``decode_xstats``); {} for a kind the suite does not
    know or no xstats."""
    info = kind_of(kind)
    return info.decode_xstats(xs) if info is not None and xs else {}


def decode_class_xstats(kind, xs):
    """Decode a class's TCA_STATS_APP (fq_codel's flows): {} if not a flow."""
    info = kind_of(kind)
    return info.decode_class_xstats(xs) if info is not None and xs else {}


def finish_qdisc(q):
    """Fill the derived fields of a decoded qdisc (its kind's ``finish``)."""
    info = kind_of(q.get("kind"))
    return info.finish(q) if info is not None else q


def needs_classes(qdiscs):
    """Whether a device's decoded qdiscs need its class dump (RTM_GETTCLASS)."""
    return any(getattr(kind_of(q.get("kind")), "reads_classes", False) for q in qdiscs)


def merge_classes(qdiscs, classes):
    """Merge decoded classes into the qdiscs that read them (in place)."""
    for q in qdiscs:
        info = kind_of(q.get("kind"))
        if info is not None and info.reads_classes:
            info.merge_classes(q, classes)


def with_sub_rows(qdiscs):
    """The qdiscs with each one's extra rows (CAKE's tins) after it."""
    out = []
    for q in qdiscs:
        out.append(q)
        info = kind_of(q.get("kind"))
        if info is not None:
            out.extend(info.sub_rows(q))
    return out


def finish_qdiscs(qdiscs, classes=None):
    """A device's decoded qdiscs as the sampler writes them: derived fields, classes
    merged (when given), extra rows added."""
    for q in qdiscs:
        finish_qdisc(q)
    if classes is not None:
        merge_classes(qdiscs, classes)
    return with_sub_rows(qdiscs)


def parse_qdisc_dump(data, ifindex=None):
    """:func:`bufferbloat.netlink.nlstats.parse_qdisc_dump` with every kind's xstats
    decoded."""
    return nlstats.parse_qdisc_dump(data, ifindex, decode=decode_xstats)


def parse_class_dump(data, ifindex=None):
    """:func:`bufferbloat.netlink.nlstats.parse_class_dump` with flow classes decoded."""
    return nlstats.parse_class_dump(data, ifindex, decode=decode_class_xstats)


__all__ = ["KINDS", "BY_TC_KIND", "DEFAULT_KIND", "NETLINK_KINDS", "TARGET_KINDS",
           "ROW_KINDS", "MTU_FRAME_BYTES", "QdiscKind", "QdiscSpec", "register", "kind_of",
           "make_qdisc", "with_buffer", "decode_xstats", "decode_class_xstats",
           "finish_qdisc", "needs_classes", "merge_classes", "with_sub_rows",
           "finish_qdiscs", "parse_qdisc_dump", "parse_class_dump"]
