"""CoDel, Controlled Delay (RFC 8289; Linux sch_codel)."""

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

# struct tc_codel_xstats: maxpacket, count, lastcount, ldelay, drop_next, drop_overlimit,
# ecn_mark, dropping, ce_mark
_CODEL = struct.Struct("=IIIIiIIII")


def early_drops(q):
    """CoDel's own drops: those that were not tail drops (limit) or memory drops (the
    rule codel and fq_codel share)."""
    if "drops" in q:
        q["early_drops"] = max(0, q["drops"] - q.get("drop_overlimit", 0)
                               - q.get("drop_overmemory", 0))
    return q


class Codel(QdiscKind):
    name = tc_kind = "codel"
    module, config = "sch_codel", "CONFIG_NET_SCH_CODEL"
    doc = "Controlled Delay (RFC 8289)"
    params = (
        Param("limit_pkts", default=1000, doc="buffer in packets", **LIMIT_PKTS),
        Param("target_ms", default=5.0, doc="target sojourn time, ms", **TIME_MS),
        Param("interval_ms", default=100.0, doc="sliding window, ms", **TIME_MS),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
    )
    color = "#2ca02c"        # green

    def tc_args(self, p, rate_mbit):
        return (["codel", "limit", str(p["limit_pkts"]), "target", ms(p["target_ms"]),
                 "interval", ms(p["interval_ms"])] + flag(p["ecn"], "ecn", "noecn"))

    def decode_xstats(self, xs):
        if len(xs) < 28:
            return {}
        maxpacket, count, lastcount, ldelay, drop_next, overlimit, ecn, dropping, ce = \
            unpack_padded(_CODEL, xs)
        return {"maxpacket": maxpacket, "count": count, "lastcount": lastcount,
                "delay_us": ldelay, "drop_next": drop_next, "drop_overlimit": overlimit,
                "marks": ecn, "dropping": dropping, "ce_mark": ce}

    def finish(self, q):
        return early_drops(q)


KIND = Codel()
