"""Family A.1: "normal bufferbloat" on the h1 -- s0 -- h2 dumbbell with a FIFO router buffer.

One long-lived cubic flow h1 -> h2, pings every 0.1 s and a 100 kB web fetch every 2 s
through a 1.5 Mbit/s bottleneck, base RTT 20 ms, maxq 100 packets (the sweep adds maxq
20). The ping RTT climbs to the full-queue bound 20 + 807 ms (maxq 20: 20 + 161 ms).
"""
from bufferbloat.scenario import Scenario

from ._common import A_KNOBS, A_NET, A_TRAFFIC

SCENARIO = Scenario(
    name="a1_fifo", family="A",
    description="FIFO bufferbloat: 1 flow, 1.5 Mbit/s, maxq 100 (sweep: 20, 100)",
    params=dict(A_NET, qdisc="fifo", buffer_pkts=100),
    traffic=A_TRAFFIC, knobs=A_KNOBS,
    duration_s=60, quick_duration_s=20, warmup_s=5,
    sweep={"buffer_pkts": [20, 100]},
    figures=("cwnd", "rtt", "queue", "web"),
)
