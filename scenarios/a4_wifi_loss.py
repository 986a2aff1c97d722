"""Family A.4: the "Wi-Fi" variant: random loss on h1's link (both ways of the sender's
access link, forward direction), swept over 0.5, 1, 2 and 4 %, for each of parts 1-3
(variant fifo, pie, pie10). More loss, less throughput (Mathis: MSS/RTT * C/sqrt(p))."""
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios._common import (
    A_KNOBS,
    A_NET,
    A_TRAFFIC,
    A_VARIANT_QDELAY,
    A_VARIANT_RTT,
    A_VARIANTS,
    a_headline,
)

SCENARIO = Scenario(
    name="a4_wifi_loss", family="A",
    description="A.1-A.3 with 0.5/1/2/4 % random loss on h1's link",
    params=dict(A_NET, qdisc="fifo", buffer_pkts=100, loss_pct=1.0, loss_link="access",
                loss_dir="forward"),
    traffic=A_TRAFFIC, knobs=A_KNOBS, variants=A_VARIANTS,
    # quick: 40 s, not 20: PIE's probability at 1.5 Mbit/s settles 6-18 s in (MSER-5,
    # measured in the TCG VM), past the half of a 20 s run that MSER can cut
    duration_s=60, quick_duration_s=40, warmup_s=5,
    sweep={"variant": ["fifo", "pie", "pie10"], "loss_pct": [0.5, 1, 2, 4]},
    quick_sweep={"variant": ["fifo", "pie", "pie10"], "loss_pct": [0.5, 4]},
    figures=("cwnd", "rtt", "queue", "web"),
    study="A.4: the Wi-Fi variant: parts 1-3 with 0.5, 1, 2 and 4 % random loss on h1's "
          "link",
    expect="More loss, less goodput, about as Mathis predicts (1/sqrt(p)); the FIFO's "
           "queue fills less as loss grows, so its RTT falls; PIE keeps its RTT low "
           "throughout; 10 flows keep the link fuller than one at high loss.",
    headline=(
        {"metric": "network:all:aggregate_throughput_mbit", "label": "goodput",
         "theory": "mathis_mbit",
         "expect": "falls as the loss grows, about as 1/sqrt(loss) (Mathis)"},
    ) + a_headline(A_VARIANT_RTT, A_VARIANT_QDELAY)[:2],
    reproduce=(
        {"figure": "goodput against loss, per part (FIFO, PIE, PIE + 10 flows), with Mathis",
         "command": "bufferbloat sweep a4_wifi_loss",
         "plot": "metric:throughput_mbit:loss_pct"},
        {"figure": "ping RTT against loss, per part",
         "command": "bufferbloat sweep a4_wifi_loss",
         "plot": "metric:rtt_mean_ms:loss_pct"},
    ),
)
