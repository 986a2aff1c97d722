"""Family A.2: the A.1 dumbbell with PIE (target 20 ms, limit 1000 packets) as the
bottleneck's AQM. The queueing delay PIE reports stays near its target while a FIFO's
grows to the full buffer."""
from bufferbloat.scenario import Scenario

from ._common import A_KNOBS, A_NET, A_TRAFFIC

SCENARIO = Scenario(
    name="a2_pie", family="A",
    description="PIE target 20 ms: 1 flow, 1.5 Mbit/s, limit 1000",
    params=dict(A_NET, qdisc="pie", buffer_pkts=1000), qdisc_params=dict(target_ms=20),
    traffic=A_TRAFFIC, knobs=A_KNOBS,
    duration_s=60, quick_duration_s=20, warmup_s=5,
    figures=("cwnd", "rtt", "queue", "qdelay", "web"),
)
