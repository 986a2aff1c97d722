"""FQ-CoDel, flow-queue CoDel (RFC 8290; Linux sch_fq_codel). Its qdisc-level xstats
carry no delay: the sampler dumps its per-flow classes (RTM_GETTCLASS) and takes the
largest last sojourn time of the active flows."""

import struct

from bufferbloat.net.qdiscs.base import (
    LIMIT_PKTS,
    MTU_FRAME_BYTES,
    TIME_MS,
    Param,
    QdiscKind,
    flag,
    ms,
    unpack_padded,
)
from bufferbloat.net.qdiscs.codel import early_drops

TCA_FQ_CODEL_XSTATS_QDISC, TCA_FQ_CODEL_XSTATS_CLASS = 0, 1
# after the u32 type: tc_fq_codel_qd_stats / tc_fq_codel_cl_stats
_FQC_QD = struct.Struct("=IIIIIIIII")
_FQC_CL = struct.Struct("=iIIIIi")
#: the kind a decoded per-flow class carries
FLOW_ROW = "fq_codel_flow"
_QD_NAMES = ("maxpacket", "drop_overlimit", "marks", "new_flow_count", "new_flows_len",
             "old_flows_len", "ce_mark", "memory_usage", "drop_overmemory")


class FqCodel(QdiscKind):
    name = tc_kind = "fq_codel"
    tc_aliases = ("fq-codel",)
    module, config = "sch_fq_codel", "CONFIG_NET_SCH_FQ_CODEL"
    doc = "Flow-queue CoDel (RFC 8290)"
    params = (
        Param("limit_pkts", default=10240, doc="buffer in packets", **LIMIT_PKTS),
        Param("flows", int, 1024, "number of flow queues", lo=1, hi=65536),
        Param("target_ms", default=5.0, doc="target sojourn time, ms", **TIME_MS),
        Param("interval_ms", default=100.0, doc="sliding window, ms", **TIME_MS),
        Param("quantum_bytes", int, MTU_FRAME_BYTES, "DRR quantum, bytes", lo=64, hi=1 << 20),
        Param("ecn", bool, True, "mark ECN-capable packets instead of dropping"),
    )
    color = "#9467bd"        # purple
    reads_classes = True

    def tc_args(self, p, rate_mbit):
        return (["fq_codel", "limit", str(p["limit_pkts"]), "flows", str(p["flows"]),
                 "target", ms(p["target_ms"]), "interval", ms(p["interval_ms"]),
                 "quantum", str(p["quantum_bytes"])] + flag(p["ecn"], "ecn", "noecn"))

    def decode_xstats(self, xs):
        if len(xs) < 16 or struct.unpack_from("=I", xs)[0] != TCA_FQ_CODEL_XSTATS_QDISC:
            return {}
        return dict(zip(_QD_NAMES, unpack_padded(_FQC_QD, xs, 4)))

    def decode_class_xstats(self, xs):
        if (len(xs) < 4 + _FQC_CL.size
                or struct.unpack_from("=I", xs)[0] != TCA_FQ_CODEL_XSTATS_CLASS):
            return {}
        names = ("deficit", "ldelay_us", "count", "lastcount", "dropping", "drop_next")
        return {**dict(zip(names, _FQC_CL.unpack_from(xs, 4))), "kind": FLOW_ROW}

    def finish(self, q):
        return early_drops(q)

    def merge_classes(self, q, classes):
        """``delay_us``: the largest ldelay of its active flow classes; ``active_flows``."""
        flows = [c for c in classes if c.get("kind") == FLOW_ROW
                 and c["handle"] >> 16 == q["handle"] >> 16]
        q["active_flows"] = len(flows)
        q["delay_us"] = max((c["ldelay_us"] for c in flows), default=0)


KIND = FqCodel()
