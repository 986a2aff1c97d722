"""A template for a new queue discipline: copy this module to ``NAME.py``, fill it in,
and add one line ``register(NAME.KIND)`` in ``__init__.py`` (pyroute2's
``sched_template.py`` does the same for its qdiscs). Nothing else in the suite names a
kind: the topology's choices, ``bufferbloat check``, the engine's headline, results'
target kinds, the rate scaling, the health checks and the figures' colours all ask the
registry. If the kind has xstats, add its decoder to the compiled sampler too
(bufferbloat/measure/csampler/bb_qdisc_sampler.c, ``decode_xstats``) and a captured
netlink answer under tests/fixtures/netlink/ (tests/unit/test_csampler.py checks that the
C and Python decoders agree on it). This module is not registered.
"""

import struct

from bufferbloat.net.qdiscs.base import (
    LIMIT_PKTS,
    TIME_MS,
    Param,
    QdiscKind,
    flag,
    ms,
    unpack_padded,
)

_XSTATS = struct.Struct("=II")   # the kernel's struct tc_NAME_xstats (pkt_sched.h)


class Template(QdiscKind):
    #: the registry's name (``--set qdisc=NAME``), and the kind name tc and the kernel use
    name = tc_kind = "template"
    #: other names the kernel or tc report for it (fifo: pfifo, bfifo)
    tc_aliases = ()
    #: the kernel module and config symbol ``bufferbloat check`` looks for
    module, config = "sch_template", "CONFIG_NET_SCH_TEMPLATE"
    #: where a module that is not the kernel's own is built (pi: vm/guest/sch_pi); None
    project_module = None
    doc = "one line: what it is (paper or RFC)"
    #: parameters, units in their names; defaults the kernel's own; ranges the kernel's
    params = (
        Param("limit_pkts", default=1000, doc="buffer in packets", **LIMIT_PKTS),
        Param("target_ms", default=5.0, doc="target queueing delay, ms", **TIME_MS),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
    )
    #: unit of its buffer limit, which a topology-level buffer_pkts/buffer_bytes fills
    limit_unit = "packets"
    #: True for drop-tail kinds: the FIFO theory (full-buffer delay) applies
    drop_tail = False
    #: its colour in every figure (keep it distinct from the others' in base palette)
    color = "#333333"
    #: tc cannot parse it: {option word: TCA_OPTIONS u32 attribute} for nlqdisc (pi)
    netlink_options = None
    netlink_gains = frozenset()
    #: the sampler dumps its classes (RTM_GETTCLASS) for per-flow state (fq_codel)
    reads_classes = False
    #: byte parameters that set an operating point, scaled with the rate (red)
    scaled_bytes = ()
    #: kinds of extra rows it adds to qdisc.csv (cake: per-tin rows)
    row_kinds = ()

    def tc_kind_of(self, p):
        """The kind tc reports for these params (fifo: pfifo or bfifo)."""
        return self.tc_kind

    def tc_args(self, p, rate_mbit):
        """The ``tc qdisc add ... handle H:`` arguments (kind first)."""
        return (["template", "limit", str(p["limit_pkts"]), "target", ms(p["target_ms"])]
                + flag(p["ecn"], "ecn", "noecn"))

    def check(self, p, given, hz=None):
        """Cross-parameter checks (raise ParameterError); warnings about what the kernel
        will change (pie: tupdate rounded to the tick)."""
        return []

    def target_ms(self, p):
        """The delay target (theory's reference line, headline, target kinds), or None
        (default: the ``target_ms`` parameter, where the kind has one)."""
        return super().target_ms(p)

    def buffer_pkts_scales(self):
        """Whether a topology-level buffer_pkts is scaled with the rate (default: the
        drop-tail kinds, whose buffer is their delay)."""
        return self.drop_tail

    def controller_freq_hz(self, p):
        """A timer-driven controller's update rate, checked by health (pi), or None."""
        return None

    def thresholds(self, p):
        """[(value, "packets"|"bytes", label, id)] drawn on queue figures (red, pi)."""
        return []

    def decode_xstats(self, xs):
        """TCA_STATS_APP in the sampler's vocabulary: marks, early_drops, prob, delay_us,
        maxq_pkts (whichever it has), plus its raw fields; a shorter (older) struct is
        decoded as far as it goes."""
        if len(xs) < 4:
            return {}
        early, marks = unpack_padded(_XSTATS, xs)
        return {"early_drops": early, "marks": marks}

    def decode_class_xstats(self, xs):
        """A class's xstats (reads_classes kinds)."""
        return {}

    def finish(self, q):
        """Derived fields of a decoded qdisc (codel: early_drops from drops)."""
        return q

    def merge_classes(self, q, classes):
        """Merge decoded classes into ``q`` (fq_codel: the largest flow delay)."""

    def sub_rows(self, q):
        """Extra qdisc.csv rows (cake: one per tin)."""
        return []


KIND = Template()
