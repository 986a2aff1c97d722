"""Family A.2: the A.1 dumbbell with PIE (target 20 ms, limit 1000 packets) as the
bottleneck's AQM. The queueing delay PIE reports stays near its target while a FIFO's
grows to the full buffer."""

from bufferbloat.runner import Scenario

SCENARIO = Scenario(
    name="a2_pie",
    description="PIE target 20 ms: 1 flow, 1.5 Mbit/s, limit 1000, base RTT 20 ms",
    topology="dumbbell",
    params=dict(bottleneck_mbit=1.5, delay_ms=5, qdisc="pie", buffer_pkts=1000, cca="cubic"),
    qdisc_params=dict(target_ms=20),
    duration_s=60,
    quick_duration_s=20,
)
