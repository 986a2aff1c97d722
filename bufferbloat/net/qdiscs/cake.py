"""CAKE, Common Applications Kept Enhanced (Høiland-Jørgensen, Täht, Morton 2018; Linux
sch_cake): per-flow queues with per-host isolation, COBALT (CoDel + BLUE) on each queue,
diffserv tins, and its own deficit-mode shaper.

Here CAKE is the bottleneck's leaf under the HTB shaper with ``unlimited`` bandwidth, as
every other qdisc of the suite is: the rate, its accounting (HTB counts the 1514-byte
frame) and the shaper's burst are then the same for every point of a qdisc sweep, so a
difference between CAKE and FQ-CoDel is the queue's, not the shaper's. CAKE's own shaper
would also need its overhead keywords to count the frame as HTB does, and would move the
queue to CAKE's deficit clock, which the other kinds do not have. With ``unlimited`` the
queue still forms in CAKE: HTB dequeues it only when it has tokens, and COBALT acts on
the sojourn time, which that waiting is part of.

Its delay target is ``rtt / 20`` (5 ms at the default rtt 100 ms: tc's q_cake sends
TCA_CAKE_TARGET = interval / 20, and with no rate of its own CAKE keeps that target for
every tin; sch_cake.c, cake_set_rate).

Statistics: TCA_STATS_APP is a nest of TCA_CAKE_STATS_* attributes, one of them
(TCA_CAKE_STATS_TIN_STATS) a nest of one nest per tin (type = tin index + 1) of
TCA_CAKE_TIN_STATS_* attributes (include/uapi/linux/pkt_sched.h; sch_cake.c,
cake_dump_stats). Integers are u32 or u64 by the attribute's length.
"""

import struct

from bufferbloat.net.qdiscs.base import Param, QdiscKind, flag, ms, nested_attrs

# include/uapi/linux/pkt_sched.h (5.x - 6.x)
TCA_CAKE_STATS_CAPACITY_ESTIMATE64, TCA_CAKE_STATS_MEMORY_LIMIT, \
    TCA_CAKE_STATS_MEMORY_USED = 2, 3, 4
TCA_CAKE_STATS_TIN_STATS = 10
TIN_FIELDS = {  # TCA_CAKE_TIN_STATS_* -> name
    2: "sent_packets", 3: "sent_bytes", 4: "dropped_packets", 5: "dropped_bytes",
    6: "acks_dropped_packets", 7: "acks_dropped_bytes", 8: "ecn_marked_packets",
    9: "ecn_marked_bytes", 10: "backlog_packets", 11: "backlog_bytes",
    12: "threshold_rate", 13: "target_us", 14: "interval_us", 15: "way_indirect_hits",
    16: "way_misses", 17: "way_collisions", 18: "peak_delay_us", 19: "avg_delay_us",
    20: "base_delay_us", 21: "sparse_flows", 22: "bulk_flows", 23: "unresponsive_flows",
    24: "max_skblen", 25: "flow_quantum"}
#: the kind of the per-tin rows in qdisc.csv (handle MAJOR:tin+1, parent the qdisc)
TIN_ROW = "cake_tin"

FLOW_MODES = ("triple-isolate", "dual-srchost", "dual-dsthost", "hosts", "srchost",
              "dsthost", "flows", "flowblind")
DIFFSERV = ("diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence")
ACK_FILTERS = ("no-ack-filter", "ack-filter", "ack-filter-aggressive")


def _uint(data, a, b):
    return struct.unpack_from("=Q" if b - a >= 8 else "=I", data, a)[0]


class Cake(QdiscKind):
    name = tc_kind = "cake"
    module, config = "sch_cake", "CONFIG_NET_SCH_CAKE"
    doc = ("Common Applications Kept Enhanced (sch_cake): per-host and per-flow "
           "isolation, COBALT AQM, diffserv tins; a leaf under the HTB shaper (unlimited)")
    params = (
        Param("rtt_ms", float, 100.0, "the path RTT CAKE tunes for, ms (its interval; "
              "target = rtt/20)", lo=0, lo_open=True, hi=10_000),
        Param("flow_mode", str, "triple-isolate", "flow isolation: which hosts and flows "
              "get equal shares", choices=FLOW_MODES),
        Param("diffserv", str, "diffserv3", "tin layout (DSCP classes)", choices=DIFFSERV),
        Param("nat", bool, False, "look up flows through conntrack's NAT"),
        Param("wash", bool, False, "clear DSCP after classifying"),
        Param("ack_filter", str, "no-ack-filter", "drop redundant TCP ACKs",
              choices=ACK_FILTERS),
        Param("split_gso", bool, True, "split GSO super-packets"),
        Param("limit_bytes", int, None, "memory limit, bytes (memlimit; default CAKE's "
              "own, 4 MB when unlimited)", lo=3028, hi=1_000_000_000),
    )
    limit_unit = "bytes"
    color = "#a6761d"        # ochre
    row_kinds = (TIN_ROW,)

    def tc_args(self, p, rate_mbit):
        args = (["cake", "unlimited", "rtt", ms(p["rtt_ms"]), p["diffserv"],
                 p["flow_mode"]] + flag(p["nat"], "nat", "nonat")
                + flag(p["wash"], "wash", "nowash") + [p["ack_filter"]]
                + flag(p["split_gso"], "split-gso", "no-split-gso"))
        if p["limit_bytes"]:
            args += ["memlimit", str(p["limit_bytes"])]
        return args

    def target_ms(self, p):
        return p["rtt_ms"] / 20.0 if p.get("rtt_ms") else None

    def decode_xstats(self, xs):
        """The qdisc's totals (``marks``, ``early_drops``: CAKE's own drops, COBALT's
        and overload's; ``delay_us``/``peak_delay_us``/``base_delay_us``: the largest
        of the tins that have sent) and ``tins``: one dict per tin (:data:`TIN_FIELDS`)."""
        xs = bytes(xs)
        top = nested_attrs(xs)
        if TCA_CAKE_STATS_TIN_STATS not in top:
            return {}
        d = {}
        for attr, name in ((TCA_CAKE_STATS_CAPACITY_ESTIMATE64, "capacity_estimate"),
                           (TCA_CAKE_STATS_MEMORY_LIMIT, "memory_limit"),
                           (TCA_CAKE_STATS_MEMORY_USED, "memory_used")):
            if attr in top:
                d[name] = _uint(xs, *top[attr])
        tins = []
        for idx, (a, b) in sorted(nested_attrs(xs, *top[TCA_CAKE_STATS_TIN_STATS]).items()):
            tin = {"tin": idx - 1}
            for t, (ta, tb) in nested_attrs(xs, a, b).items():
                if t in TIN_FIELDS and tb - ta >= 4:
                    tin[TIN_FIELDS[t]] = _uint(xs, ta, tb)
            tins.append(tin)
        used = [t for t in tins if t.get("sent_packets")]
        d.update(tins=tins, marks=sum(t.get("ecn_marked_packets", 0) for t in tins),
                 early_drops=sum(t.get("dropped_packets", 0) for t in tins),
                 delay_us=max((t.get("avg_delay_us", 0) for t in used), default=0),
                 peak_delay_us=max((t.get("peak_delay_us", 0) for t in used), default=0),
                 base_delay_us=max((t.get("base_delay_us", 0) for t in used), default=0))
        return d

    def sub_rows(self, q):
        """One qdisc.csv row per tin: handle MAJOR:tin+1, parent the qdisc's handle."""
        rows = []
        for t in q.get("tins") or ():
            rows.append({
                "ifindex": q.get("ifindex"), "kind": TIN_ROW, "parent": q["handle"],
                "handle": (q["handle"] & 0xFFFF0000) | (t["tin"] + 1),
                "qlen": t.get("backlog_packets"), "backlog": t.get("backlog_bytes"),
                "bytes": t.get("sent_bytes"), "packets": t.get("sent_packets"),
                "drops": t.get("dropped_packets"), "marks": t.get("ecn_marked_packets"),
                "early_drops": t.get("dropped_packets"), "delay_us": t.get("avg_delay_us"),
                "peak_delay_us": t.get("peak_delay_us"),
                "base_delay_us": t.get("base_delay_us")})
        return rows


KIND = Cake()
