"""Family B.1: PIE target 20 ms, tupdate 1/15/30/60 ms under an RRUL-like load (4 TCP
uploads + 4 downloads + ICMP pings and irtt UDP probes) through a 100 Mbit/s
bottleneck; with no extra traffic, a UDP flood at the link rate, or an extra TCP flow
(--set extra=none|udp|tcp). tupdate 1 ms rounds up to one kernel tick (4 ms at HZ=250):
the run prints and records the warning."""
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios._common import B_NET, B_TRAFFIC, B_VARIANTS, b_study

SCENARIO = Scenario(
    name="b1_pie_tupdate", family="B",
    description="PIE tupdate 1/15/30/60 ms (target 20 ms) under RRUL, 100 Mbit/s",
    params=B_NET, variants=B_VARIANTS, qdisc_params=dict(target_ms=20, tupdate_ms=30),
    traffic=B_TRAFFIC, knobs=dict(extra="none"),
    duration_s=60, quick_duration_s=20, warmup_s=5,
    sweep={"qdisc.tupdate_ms": [1, 15, 30, 60], "extra": ["none", "udp", "tcp"]},
    quick_sweep={"qdisc.tupdate_ms": [1, 15, 30, 60]},
    figures=("totals", "ellipsis", "drops", "qdelay"),
    # B's figures are totals, drops and the queue; the sockets every 50 ms cost the TCG VM a fifth of the 10 ms rate (docs/design/health.md)
    tcp_sample_ms=50,
    study="B.1: PIE target 20 ms, tupdate 1, 15, 30, 60 ms under RRUL (B.3: with a UDP "
          "flood or an extra TCP flow)",
    **b_study("b1_pie_tupdate", "qdisc.tupdate_ms"),
)
