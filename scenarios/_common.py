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
}

#: Family B: client -- router -- server, 100 Mbit/s bottleneck, RRUL-like load.
#: Uploads and downloads both cross the router's AQM (aqm_both_ways).
B_NET = dict(bottleneck_mbit=100, delay_ms=5, qdisc="pie", buffer_pkts=1000, cca="cubic",
             aqm_both_ways=True)
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
