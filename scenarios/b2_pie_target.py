"""Family B.2: PIE tupdate 30 ms, target 5/10/15/20 ms under the RRUL-like load of B.1
(ICMP and irtt UDP probes); average latency grows with the target (about target + base
RTT)."""
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios._common import B_NET, B_TRAFFIC, B_VARIANTS, b_study

SCENARIO = Scenario(
    name="b2_pie_target", family="B",
    description="PIE target 5/10/15/20 ms (tupdate 30 ms) under RRUL, 100 Mbit/s",
    params=B_NET, variants=B_VARIANTS, qdisc_params=dict(target_ms=20, tupdate_ms=30),
    traffic=B_TRAFFIC, knobs=dict(extra="none"),
    duration_s=60, quick_duration_s=20, warmup_s=5,
    sweep={"qdisc.target_ms": [5, 10, 15, 20], "extra": ["none", "udp", "tcp"]},
    quick_sweep={"qdisc.target_ms": [5, 10, 15, 20]},
    figures=("totals", "ellipsis", "drops", "qdelay"),
    # as b1: the sockets every 50 ms, the queue every 10 ms
    tcp_sample_ms=50,
    study="B.2: PIE tupdate 30 ms, target 5, 10, 15, 20 ms under RRUL (B.3: with a UDP "
          "flood or an extra TCP flow)",
    **b_study("b2_pie_target", "qdisc.target_ms"),
)
