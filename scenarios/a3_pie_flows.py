"""Family A.3: PIE (target 20 ms) with 10 parallel TCP flows (iperf3 -P 10): the cwnd
of every flow, the queue, and what 10 flows do to the web fetch time."""
from bufferbloat.scenario import Scenario

from ._common import A_KNOBS, A_NET, A_TRAFFIC

SCENARIO = Scenario(
    name="a3_pie_flows", family="A",
    description="PIE target 20 ms with 10 parallel flows, 1.5 Mbit/s",
    params=dict(A_NET, qdisc="pie", buffer_pkts=1000), qdisc_params=dict(target_ms=20),
    traffic=A_TRAFFIC, knobs=dict(A_KNOBS, flows=10),
    duration_s=60, quick_duration_s=20, warmup_s=5,
    sweep={"flows": [1, 10]},
    figures=("cwnd", "rtt", "queue", "qdelay", "web"),
)
