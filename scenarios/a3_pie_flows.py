"""Family A.3: PIE (target 20 ms) with 10 parallel TCP flows (iperf3 -P 10): the cwnd
of every flow, the queue, and what 10 flows do to the web fetch time."""
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
    name="a3_pie_flows", family="A",
    description="PIE target 20 ms with 10 parallel flows, 1.5 Mbit/s",
    params=dict(A_NET, qdisc="pie", buffer_pkts=1000), qdisc_params=dict(target_ms=20),
    traffic=A_TRAFFIC, knobs=dict(A_KNOBS, flows=10),
    # quick: 40 s, not 20: PIE's probability at 1.5 Mbit/s settles 6-18 s in (MSER-5,
    # measured in the TCG VM), past the half of a 20 s run that MSER can cut
    duration_s=60, quick_duration_s=40, warmup_s=5,
    sweep={"flows": [1, 10]},
    figures=("cwnd", "rtt", "queue", "qdelay", "web"),
    study="A.3: PIE (target 20 ms) with 10 parallel TCP flows (iperf3 -P 10)",
    expect="PIE still holds the delay near its target with 10 flows; each flow's cwnd "
           "is a fraction of one flow's; the web fetch suffers lost SYNs (1 s timeouts) "
           "more than queueing.",
    headline=a_headline(A_PIE_RTT, A_PIE_QDELAY) + (
        {"metric": "network:all:jain_fairness", "label": "Jain's index over the flows",
         "theory": "one", "expect": "near 1: equal flows share equally"},),
    reproduce=(
        {"figure": "A.3's cwnd of every flow",
         "command": "bufferbloat run a3_pie_flows",
         "files": "results/a3_pie_flows/STAMP/figures/cwnd.png"},
        {"figure": "1 flow against 10: cwnd, RTT and queue over time",
         "command": "bufferbloat sweep a3_pie_flows",
         "plot": "timeseries"},
        {"figure": "web fetch times with 1 and 10 flows",
         "command": "bufferbloat sweep a3_pie_flows",
         "plot": "fetch"},
    ),
)
