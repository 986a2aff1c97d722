"""PIE, Proportional Integral controller Enhanced (RFC 8033; Linux sch_pie)."""

import math
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

# struct tc_pie_xstats: u64 prob, u32 delay, avg_dq_rate, dq_rate_estimating, packets_in,
# dropped, overlimit, maxq, ecn_mark
_PIE = struct.Struct("=QIIIIIIII")
PIE_PROB_MAX = float((1 << 64) - 1)  # tc_pie_xstats.prob: u64, 1.0 = U64_MAX (5.x+, 6.1)


class Pie(QdiscKind):
    name = tc_kind = "pie"
    module, config = "sch_pie", "CONFIG_NET_SCH_PIE"
    doc = "Proportional Integral controller Enhanced (RFC 8033)"
    params = (
        Param("limit_pkts", default=1000, doc="buffer in packets", **LIMIT_PKTS),
        Param("target_ms", default=15.0, doc="target queueing delay, ms", **TIME_MS),
        Param("tupdate_ms", default=15.0, doc="drop probability update interval, ms "
              "(rounded up to the kernel tick)", **TIME_MS),
        Param("alpha", int, 2, "integral gain, in units of 1/8", lo=0, hi=32),
        Param("beta", int, 20, "proportional gain, in units of 1/8", lo=0, hi=32),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
        Param("bytemode", bool, False, "scale drop probability by packet size"),
        Param("dq_rate_estimator", bool, False, "estimate delay from the dequeue rate "
              "instead of timestamps"),
    )
    color = "#1f77b4"        # blue

    def tc_args(self, p, rate_mbit):
        return (["pie", "limit", str(p["limit_pkts"]), "target", ms(p["target_ms"]),
                 "tupdate", ms(p["tupdate_ms"]), "alpha", str(p["alpha"]),
                 "beta", str(p["beta"])]
                + flag(p["ecn"], "ecn", "noecn")
                + flag(p["bytemode"], "bytemode", "nobytemode")
                + flag(p["dq_rate_estimator"], "dq_rate_estimator", "no_dq_rate_estimator"))

    def check(self, p, given, hz=None):
        # sch_pie keeps tupdate in jiffies (usecs_to_jiffies: rounded up to a whole tick)
        # but target in psched time (64 ns units): only tupdate moves with CONFIG_HZ
        if not hz:
            return []
        tick_ms = 1000.0 / hz
        effective = math.ceil(p["tupdate_ms"] / tick_ms - 1e-9) * tick_ms
        if abs(effective - p["tupdate_ms"]) > 1e-6:
            return [f"pie tupdate {p['tupdate_ms']:g} ms becomes {effective:g} ms: "
                    f"the kernel counts it in ticks of {tick_ms:g} ms (HZ={hz})"]
        return []

    def decode_xstats(self, xs):
        n = len(xs)
        if n < 16:
            return {}
        prob, delay, avg_dq, est, pkts_in, dropped, overlimit, maxq, ecn = \
            unpack_padded(_PIE, xs)
        d = {"prob": prob / PIE_PROB_MAX, "delay_us": delay, "avg_dq_rate": avg_dq,
             "dq_rate_estimating": est}
        if n >= 36:
            d.update(packets_in=pkts_in, early_drops=dropped, pie_overlimit=overlimit,
                     maxq_pkts=maxq)
        if n >= 40:
            d["marks"] = ecn
        return d


KIND = Pie()
