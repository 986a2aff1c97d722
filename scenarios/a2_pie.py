"""Family A.2: the A.1 dumbbell with PIE (target 20 ms, limit 1000 packets) as the
bottleneck's AQM. The queueing delay PIE reports stays near its target while a FIFO's
grows to the full buffer."""
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios._common import (
    A_KNOBS,
    A_NET,
    A_PIE_QDELAY,
    A_PIE_RTT,
    A_TRAFFIC,
    a_headline,
)

SCENARIO = Scenario(
    name="a2_pie", family="A",
    description="PIE target 20 ms: 1 flow, 1.5 Mbit/s, limit 1000",
    params=dict(A_NET, qdisc="pie", buffer_pkts=1000), qdisc_params=dict(target_ms=20),
    traffic=A_TRAFFIC, knobs=A_KNOBS,
    duration_s=60, quick_duration_s=20, warmup_s=5,
    figures=("cwnd", "rtt", "queue", "qdelay", "web"),
    study="A.2: the A.1 dumbbell with PIE on the bottleneck (target 20 ms, limit 1000)",
    expect="PIE holds the queueing delay near its 20 ms target: the ping RTT stays around "
           "20 + 20 ms where a FIFO-100 adds ~750 ms, the cwnd stays small (a few "
           "packets), fetches finish in well under a second, goodput stays ~95 %.",
    headline=a_headline(A_PIE_RTT, A_PIE_QDELAY),
    reproduce=(
        {"figure": "A.2's cwnd, RTT, queue and PIE's delay over time",
         "command": "bufferbloat run a2_pie",
         "files": "results/a2_pie/STAMP/figures/{cwnd,rtt,queue,qdelay}.png"},
        {"figure": "A.1 against A.2: FIFO-100 against PIE, side by side",
         "command": "bufferbloat compare results/a1_fifo/STAMP results/a2_pie/STAMP "
                    "--html compare.html",
         "files": "compare.html"},
    ),
)
