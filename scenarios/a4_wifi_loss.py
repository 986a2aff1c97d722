"""Family A.4: the "Wi-Fi" variant: random loss on h1's link (both ways of the sender's
access link, forward direction), swept over 0.5, 1, 2 and 4 %, for each of parts 1-3
(variant fifo, pie, pie10). More loss, less throughput (Mathis: MSS/RTT * C/sqrt(p))."""
from bufferbloat.scenario import Scenario

from ._common import A_KNOBS, A_NET, A_TRAFFIC, A_VARIANTS

SCENARIO = Scenario(
    name="a4_wifi_loss", family="A",
    description="A.1-A.3 with 0.5/1/2/4 % random loss on h1's link",
    params=dict(A_NET, qdisc="fifo", buffer_pkts=100, loss_pct=1.0, loss_link="access",
                loss_dir="forward"),
    traffic=A_TRAFFIC, knobs=A_KNOBS, variants=A_VARIANTS,
    duration_s=60, quick_duration_s=20, warmup_s=5,
    sweep={"variant": ["fifo", "pie", "pie10"], "loss_pct": [0.5, 1, 2, 4]},
    quick_sweep={"variant": ["fifo", "pie", "pie10"], "loss_pct": [0.5, 4]},
    figures=("cwnd", "rtt", "queue", "web"),
)
