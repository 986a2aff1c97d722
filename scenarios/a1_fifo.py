"""Family A.1: "normal bufferbloat" on the h1 -- s0 -- h2 dumbbell with a FIFO router buffer.

One long-lived cubic flow h1 -> h2, pings every 0.1 s and a 100 kB web fetch every 2 s
through a 1.5 Mbit/s bottleneck, base RTT 20 ms, maxq 100 packets (the sweep adds maxq
20). The ping RTT climbs to the full-queue bound 20 + 807 ms (maxq 20: 20 + 161 ms).
"""
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios._common import (
    A_FIFO_QDELAY,
    A_FIFO_RTT,
    A_KNOBS,
    A_NET,
    A_TRAFFIC,
    a_headline,
)

SCENARIO = Scenario(
    name="a1_fifo", family="A",
    description="FIFO bufferbloat: 1 flow, 1.5 Mbit/s, maxq 100 (sweep: 20, 100)",
    params=dict(A_NET, qdisc="fifo", buffer_pkts=100),
    traffic=A_TRAFFIC, knobs=A_KNOBS,
    duration_s=60, quick_duration_s=20, warmup_s=5,
    sweep={"buffer_pkts": [20, 100]},
    figures=("cwnd", "rtt", "queue", "web"),
    study='A.1: FIFO ("normal bufferbloat") with maxq 20 and 100',
    expect="The FIFO fills: the cwnd saws up to the BDP + the buffer, the ping RTT climbs "
           "to 20 + ~750 ms at maxq 100 (20 + ~160 ms at maxq 20), the queue sits near "
           "full, web fetches take seconds; goodput ~95 % of the link either way.",
    headline=a_headline(A_FIFO_RTT, A_FIFO_QDELAY),
    reproduce=(
        {"figure": "A.1's cwnd, RTT and queue over time, maxq 20 against maxq 100",
         "command": "bufferbloat sweep a1_fifo",
         "plot": "timeseries"},
        {"figure": "A.1's web fetch times (mean ± std) per maxq",
         "command": "bufferbloat sweep a1_fifo",
         "plot": "fetch"},
    ),
)
