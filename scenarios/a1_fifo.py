"""Family A.1: "normal bufferbloat" on the h1 -- s0 -- h2 dumbbell with a FIFO router buffer.

One long-lived cubic flow h1 -> h2 and pings every 0.1 s through a 1.5 Mbit/s bottleneck,
base RTT 20 ms (5 ms per link, one way), maxq 100 packets. The ping RTT climbs to the
full-queue bound 20 + 807 ms; rerun with ``--set buffer_pkts=20`` for maxq 20 (181 ms).
"""

from bufferbloat.runner import Scenario

SCENARIO = Scenario(
    name="a1_fifo",
    description="FIFO bufferbloat: 1 flow, 1.5 Mbit/s, maxq 100, base RTT 20 ms",
    topology="dumbbell",
    params=dict(bottleneck_mbit=1.5, delay_ms=5, qdisc="fifo", buffer_pkts=100, cca="cubic"),
    duration_s=60,
    quick_duration_s=20,
)
