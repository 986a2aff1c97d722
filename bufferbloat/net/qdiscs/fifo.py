"""Drop-tail FIFO (pfifo / bfifo): the bufferbloat baseline, limit in packets or bytes."""

from bufferbloat.core.errors import UsageError
from bufferbloat.net.qdiscs.base import LIMIT_PKTS, MTU_FRAME_BYTES, Param, QdiscKind


class Fifo(QdiscKind):
    name = "fifo"
    tc_kind = "pfifo"
    tc_aliases = ("pfifo", "bfifo", "pfifo_fast")
    module, config = "sch_fifo", "CONFIG_NET_SCH_FIFO"
    doc = "drop-tail FIFO, limit in packets or bytes"
    params = (
        Param("limit_pkts", default=100, doc="buffer in packets (pfifo)", **LIMIT_PKTS),
        Param("limit_bytes", int, None, "buffer in bytes (bfifo); excludes limit_pkts",
              lo=MTU_FRAME_BYTES, hi=1_000_000_000),
    )
    drop_tail = True
    color = "#7f7f7f"       # grey: no AQM

    def tc_kind_of(self, p):
        return "bfifo" if p.get("limit_bytes") else "pfifo"

    def tc_args(self, p, rate_mbit):
        if p["limit_bytes"]:
            return ["bfifo", "limit", str(p["limit_bytes"])]
        return ["pfifo", "limit", str(p["limit_pkts"])]

    def check(self, p, given, hz=None):
        if p["limit_bytes"]:
            if "limit_pkts" in given:
                raise UsageError("qdisc fifo: give limit_pkts or limit_bytes, not both")
            p["limit_pkts"] = None
        return []


KIND = Fifo()
