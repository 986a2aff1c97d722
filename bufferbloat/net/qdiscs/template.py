"""A template for a new queue discipline: copy this module to ``NAME.py``, fill it in,
and add one line ``register(NAME.KIND)`` in ``__init__.py`` (pyroute2's
``sched_template.py`` does the same for its qdiscs). Nothing else in the suite names a
kind: the topology's choices, ``bufferbloat check``, the engine's headline, results'
target kinds, the rate scaling, the health checks and the figures' colours all ask the
registry. If the kind has xstats, add its decoder to the compiled sampler too
(bufferbloat/measure/csampler/bb_qdisc_sampler.c, ``decode_xstats``) and a captured
netlink answer under tests/fixtures/netlink/ (tests/unit/test_csampler.py checks that the
C and Python decoders agree on it). This module is not registered.

What each attribute and hook means, and its default, is said once, on
:class:`~bufferbloat.net.qdiscs.base.QdiscKind`; this is only an example of them.
"""

import struct

from bufferbloat.net.qdiscs import base
from bufferbloat.net.qdiscs.base import Param, QdiscKind

_XSTATS = struct.Struct("=II")   # the kernel's struct tc_NAME_xstats (pkt_sched.h)


class Template(QdiscKind):
    """An example kind: what every kind sets, and each other hook at base's default
    (delete the lines a new kind does not change)."""

    name = tc_kind = "template"
    module, config = "sch_template", "CONFIG_NET_SCH_TEMPLATE"
    doc = "one line: what it is (paper or RFC)"
    params = (
        Param("limit_pkts", default=1000, doc="buffer in packets", **base.LIMIT_PKTS),
        Param("target_ms", default=5.0, doc="target queueing delay, ms", **base.TIME_MS),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
    )
    color = "#333333"

    def tc_args(self, p, rate_mbit):
        return (["template", "limit", str(p["limit_pkts"]), "target",
                 base.ms(p["target_ms"])] + base.flag(p["ecn"], "ecn", "noecn"))

    def decode_xstats(self, xs):
        if len(xs) < 4:
            return {}
        early, marks = base.unpack_padded(_XSTATS, xs)
        return {"early_drops": early, "marks": marks}

    # At base's defaults; the kind named after each sets its own.
    tc_aliases, project_module = (), None                   # fifo; pi
    limit_unit, drop_tail = "packets", False                # red; fifo
    netlink_options, netlink_gains = None, frozenset()      # pi
    reads_classes, scaled_bytes, row_kinds = False, (), ()  # fq_codel; red; cake
    tc_kind_of = QdiscKind.tc_kind_of                       # fifo
    check = QdiscKind.check                                 # pie
    target_ms = QdiscKind.target_ms                         # cake
    buffer_pkts_scales = QdiscKind.buffer_pkts_scales
    controller_freq_hz = QdiscKind.controller_freq_hz       # pi
    thresholds = QdiscKind.thresholds                       # red
    decode_class_xstats = QdiscKind.decode_class_xstats     # fq_codel
    finish = QdiscKind.finish                               # codel
    merge_classes = QdiscKind.merge_classes                 # fq_codel
    sub_rows = QdiscKind.sub_rows                           # cake


KIND = Template()
