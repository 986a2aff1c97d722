"""Shared pieces of the scenario catalogue (data only)."""

#: Family A's dumbbell: h1 -- s0 -- h2, 1000 Mbit/s host links, 1.5 Mbit/s bottleneck
#: s0 -> h2, 5 ms one-way per link (base RTT 20 ms), one cubic sender.
A_NET = dict(bottleneck_mbit=1.5, delay_ms=5, cca="cubic")

#: Family A's traffic: the long flow(s), pings every 0.1 s, a web fetch every 2 s (h1
#: downloads from h2 as EXPERIMENTS.md has it; web_server=h1 turns it round, as CS244 had it).
A_TRAFFIC = (
    {"kind": "iperf", "name": "long", "src": "h1", "dst": "h2", "parallel": "$flows"},
    {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
     "interval_s": "$ping_interval_s"},
) + tuple(
    {"kind": "web", "name": "web", "client": client, "server": server,
     "every_s": "$web_every_s", "size_bytes": "$web_size_bytes",
     "when": {"web_server": server}}
    for server, client in (("h2", "h1"), ("h1", "h2")))
A_KNOBS = dict(flows=1, ping_interval_s=0.1, web_every_s=2.0, web_size_bytes=100_000,
               web_server="h2")

#: The three set-ups of family A (parts 1-3), for the loss and video variants.
A_VARIANTS = {
    "fifo": dict(qdisc="fifo", buffer_pkts=100, flows=1),
    "pie": {"qdisc": "pie", "buffer_pkts": 1000, "qdisc.target_ms": 20, "flows": 1},
    "pie10": {"qdisc": "pie", "buffer_pkts": 1000, "qdisc.target_ms": 20, "flows": 10},
    # CAKE (sch_cake, an unlimited leaf under the HTB shaper) with its own defaults:
    # rtt 100 ms (target 5 ms), triple-isolate, its memory limit (no packet buffer)
    "cake": {"qdisc": "cake", "buffer_pkts": None, "flows": 1},
}

#: Family B as the study's testbed (/work/shared/EXPERIMENTS.md), its default: client --
#: router -- server on one LAN (0.25 ms a link one way: a 1 ms base RTT, ~2 ms measured
#: under TCG), client side 1 Gbit/s, the router's 100 Mbit/s port towards the server
#: shaped to its line rate with PIE its only AQM (the uploads' bottleneck), the server's
#: own NIC with its distribution's default qdisc (Debian's systemd: fq_codel) the
#: downloads' bottleneck; an RRUL-like load. Not 0 ms: with no delay stage on the
#: senders' egress, PIE stayed undropping (p ~ 0, a 50-100 ms standing queue, three of
#: four uploads at 4 packets in flight) in 4 of 12 quick runs in the TCG VM (4 of 8 with
#: its dequeue-rate estimator); with 0.25 ms it held its target in 16 of 16
#: (docs/design/testbed-b.md).
B_NET = dict(bottleneck_mbit=100, delay_ms=0.25, host_mbit=1000, qdisc="pie",
             buffer_pkts=1000, cca="cubic", reverse_qdisc="fq_codel")
#: ``--set variant=dumbbell``: B before it had its testbed (the suite's default until
#: 2026-11-27): a 20 ms base RTT, uploads and downloads both crossing the router's PIE
#: (aqm_both_ways); its latencies count two PIE queues and cannot be set beside the
#: study's table.
B_VARIANTS = {"testbed": {},
              "dumbbell": {"delay_ms": 5, "aqm_both_ways": True, "reverse_qdisc": None}}
B_TRAFFIC = (
    {"kind": "rrul", "name": "rrul", "a": "h1", "b": "h2"},
    # flent's RRUL measures latency with UDP probes (irtt) next to ICMP: one every 0.1 s,
    # as the load's pings, so the two kinds of probe sample the same queue alike
    {"kind": "irtt", "name": "irtt", "client": "h1", "server": "h2", "interval_s": 0.1},
    # B.3's extra traffic, chosen with --set extra=none|udp|tcp
    {"kind": "iperf", "name": "flood", "src": "h1", "dst": "h2", "protocol": "udp",
     "rate_mbit": "bottleneck", "when": {"extra": "udp"}},
    {"kind": "iperf", "name": "extra-tcp", "src": "h1", "dst": "h2",
     "when": {"extra": "tcp"}},
)

#: The studies the families reproduce (docs: /work/shared/EXPERIMENTS.md's families).
STUDIES = {
    "A": "Bufferbloat and PIE on a dumbbell (CS244-style coursework, extended)",
    "B": "PIE's parameters under realtime response under load (flent RRUL style)",
    "C": "RED against PI(E) at increasing load",
    "D": "Congestion control algorithms over different paths",
    "E": "AQMs with k flows: flow, link and network metrics (ns-3 ccperf style)",
    "F": "AQMs on a link whose capacity varies (a replayed capacity trace)",
}

#: Family A's headline: RTT, fetch time, goodput, the queue. The theories follow the
#: run's qdisc (a FIFO's full queue, an AQM's target), so one list serves every variant.
def a_headline(rtt, qdelay):
    """Family A's headline with the expected RTT and queueing delay in words."""
    return (
        {"metric": "ping:rtt_mean_ms", "label": "ping RTT, mean", "theory": "rtt_ms",
         "expect": rtt},
        {"metric": "web:all:total_mean_s", "spread": "web:all:total_std_s",
         "label": "web fetch time, mean ± std",
         "expect": "seconds behind a full FIFO (each round trip of the fetch waits in the "
                   "queue); well under a second under PIE"},
        {"metric": "network:all:aggregate_throughput_mbit", "label": "goodput",
         "theory": "goodput_ceiling_mbit",
         "expect": "the link stays full: ~95 % of 1.5 Mbit/s"},
        {"metric": "link:qdelay_mean_ms", "label": "queueing delay, mean",
         "theory": "queue_delay_ms", "expect": qdelay},
    )


A_FIFO_RTT = ("climbs towards the full-queue bound once the buffer fills (maxq 100: "
              "20 + ~750 ms; maxq 20: 20 + ~160 ms)")
A_FIFO_QDELAY = "most of the full buffer's drain time (maxq 100: 807 ms)"
A_PIE_RTT = "about the base RTT + the target (20 + 20 ms), not a FIFO's ~770 ms"
A_PIE_QDELAY = "hovers around PIE's 20 ms target"
A_VARIANT_RTT = "FIFO: near the full-queue bound (~770 ms); PIE and PIE + 10 flows: ~40 ms"
A_VARIANT_QDELAY = "FIFO: most of the buffer's 807 ms; PIE: around its 20 ms target"

#: Family B's headline (RRUL through PIE).
B_HEADLINE = (
    {"metric": "ping:rtt_mean_ms", "label": "latency under load, mean",
     "theory": "target_plus_base_ms",
     "expect": "grows with the target, roughly the targets crossed + base RTT (the study: "
               "target + base, PIE one way); tupdate barely matters"},
    {"metric": "link:aqm_delay_mean_ms", "label": "PIE's queueing delay, mean",
     "theory": "target_ms", "expect": "near the target"},
    {"metric": "network:all:goodput_up_mbit", "label": "upload goodput",
     "theory": "goodput_ceiling_mbit", "expect": "~91-95 % of the link"},
    {"metric": "flow:rrul-down-*:throughput_mbit", "agg": "sum",
     "label": "download throughput (iperf3, the 4 flows)", "theory": "goodput_ceiling_mbit",
     "expect": "~91-95 % of the link"},
    {"metric": "link:drop_pct", "label": "drops",
     "expect": "a few %: what PIE drops to hold the target"},
)


def b_study(name, param):
    """Family B's expected shape, headline and figures for scenario ``name`` sweeping
    ``param`` (a qdisc key)."""
    what = param.split(".")[-1].removesuffix("_ms")
    return dict(
        expect="Average latency grows with the target (roughly the targets the ping "
               "crosses + base RTT: PIE's target + the server NIC's fq_codel 5 ms, "
               "2 x target on the dumbbell variant); "
               "tupdate barely matters; aggregate throughput stays near ~91 % of the link "
               "each way; a UDP flood at the link rate takes the link and PIE drops to "
               "hold the target. Where the VM scales the link to 10 Mbit/s (quick profile "
               "under TCG), RRUL's 4 flows a way at their smallest window hold 8.7 ms "
               "(the 1 ms path holds the rest): a target below that cannot be held "
               "(flagged), and PIE's probability keeps rising near it.",
        headline=B_HEADLINE,
        reproduce=(
            {"figure": f"latency (and PIE's delay) against {what}, with the targets crossed + "
                       "base RTT",
             "command": f"bufferbloat sweep {name}",
             "plot": "latency"},
            {"figure": "per run: download/upload/latency totals, the latency-throughput "
                       "ellipsis, drops and queueing delay over time",
             "command": f"bufferbloat run {name} --set {param}=VALUE",
             "files": f"results/{name}/STAMP/figures/{{totals,ellipsis,drops,qdelay}}.png"},
            {"figure": "the table across runs: latency and throughput range and mean, "
                       "queue delay",
             "command": f"bufferbloat sweep {name}",
             "files": f"results/{name}/sweep/figures/{name}-table.md"},
        ))
