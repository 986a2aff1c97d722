"""RED, Random Early Detection (Floyd & Jacobson 1993; Linux sch_red)."""

import math
import struct

from bufferbloat.core.errors import ParameterError
from bufferbloat.net.qdiscs.base import MTU_FRAME_BYTES, Param, QdiscKind

_RED = struct.Struct("=IIII")  # struct tc_red_xstats: early, pdrop, other, marked


class Red(QdiscKind):
    name = tc_kind = "red"
    module, config = "sch_red", "CONFIG_NET_SCH_RED"
    doc = "Random Early Detection (Floyd & Jacobson 1993)"
    params = (
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
    )
    limit_unit = "bytes"
    color = "#d62728"        # red
    # the thresholds are an operating point in bytes: a rate f times lower keeps the
    # study's delays with f times smaller thresholds
    scaled_bytes = ("limit_bytes", "min_bytes", "max_bytes")

    def tc_args(self, p, rate_mbit):
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

    def check(self, p, given, hz=None):
        if not p["min_bytes"] < p["max_bytes"] <= p["limit_bytes"]:
            raise ParameterError("red.max_bytes", p["max_bytes"],
                                 f"min_bytes ({p['min_bytes']}) < max_bytes <= limit_bytes "
                                 f"({p['limit_bytes']})")
        if p["avpkt_bytes"] > p["min_bytes"]:
            raise ParameterError("red.avpkt_bytes", p["avpkt_bytes"],
                                 f"<= min_bytes ({p['min_bytes']})")
        return []

    def thresholds(self, p):
        if not p.get("min_bytes"):
            return []
        return [(p[k], "bytes", f"RED {k.split('_')[0]}_th {p[k] / 1000:g} kB",
                 f"red-{k.split('_')[0]}") for k in ("min_bytes", "max_bytes")]

    def decode_xstats(self, xs):
        if len(xs) < 16:
            return {}
        early, pdrop, other, marked = _RED.unpack_from(xs)
        return {"early_drops": early, "pdrop": pdrop, "other": other, "marks": marked}


KIND = Red()
