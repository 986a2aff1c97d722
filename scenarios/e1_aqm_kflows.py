"""Family E: k greedy flows (k = 1, 2, 5, 10 or 20; 15 ms RTT each) through an 80 Mbit/s
bottleneck with a 100-packet queue for 15 s, qdisc FIFO, RED, CoDel, FQ-CoDel, PIE or
CAKE (an unlimited leaf under the HTB shaper, its own memory limit: no packet buffer), the
study's default CCA NewReno (``reno``; ``--set cca=...`` or ``ccas=`` per sender);
per-flow, per-link and per-network metrics, the study's whole set (bufferbloat/
flowmetrics.py: in-flight, delivery and sending rate, estimated queueing delay,
inter-departure time, power, recovery time, RTOs, utilities, utilization of the bandwidth
and of the BDP, Jain's, entropy and product fairness...)."""
from bufferbloat.run.scenario import Scenario

SCENARIO = Scenario(
    name="e1_aqm_kflows", family="E",
    description="k=1..20 flows x {fifo, red, codel, fq_codel, pie, cake}, 80 Mbit/s, "
                "100 pkts",
    topology="kdumbbell",
    params=dict(k=5, rtt_ms="15", bottleneck_mbit=80, qdisc="fifo", buffer_pkts=100,
                cca="reno"),
    traffic=({"kind": "iperf", "name": "flow", "src": "senders", "dst": "receiver"},
             {"kind": "ping", "name": "ping", "src": "h1", "dst": "receiver",
              "interval_s": 0.1}),
    duration_s=15, quick_duration_s=10, warmup_s=3,
    # the same 100-packet buffer for every qdisc; RED counts bytes: 100 x 1514 B
    variants={"fifo": dict(qdisc="fifo"), "codel": dict(qdisc="codel"),
              "fq_codel": dict(qdisc="fq_codel"), "pie": dict(qdisc="pie"),
              "red": dict(qdisc="red", buffer_pkts=None, buffer_bytes=151_400),
              # CAKE's memlimit counts skb memory (truesize), not packet bytes: it keeps
              # its own limit rather than a 100-packet one it could not express
              "cake": dict(qdisc="cake", buffer_pkts=None)},
    sweep={"variant": ["fifo", "red", "codel", "fq_codel", "pie", "cake"],
           "k": [1, 2, 5, 10, 20]},
    quick_sweep={"variant": ["fifo", "red", "codel", "fq_codel", "pie", "cake"]},
    figures=("cwnd", "rtt", "queue", "fairness", "flows", "operating", "ecdf"),
    # srtt, cwnd and in-flight time series at 50 ms; the queue every 10 ms
    tcp_sample_ms=50,
    study="E: k = 1, 2, 5, 10 and 20 NewReno flows (5 in the quick profile), 15 ms RTT, "
          "80 Mbit/s, 100 packets, under FIFO, RED, CoDel, FQ-CoDel, PIE and CAKE",
    expect="Every qdisc keeps the link ~95 % used; FIFO fills its 100 packets (~15 ms "
           "of queue), the AQMs hold a few ms (CoDel/FQ-CoDel/CAKE ~5 ms, PIE ~15 ms); "
           "FQ-CoDel and CAKE share most equally (Jain ~1, entropy ~ln k).",
    headline=(
        {"metric": "network:all:aggregate_throughput_mbit", "label": "goodput",
         "theory": "goodput_ceiling_mbit", "expect": "~95 % of the link for every qdisc"},
        {"metric": "network:all:jain_fairness", "label": "Jain's index", "theory": "one",
         "expect": "FQ-CoDel and CAKE ~1; FIFO and RED lower"},
        {"metric": "link:qdelay_mean_ms", "label": "queueing delay, mean",
         "theory": "queue_delay_ms",
         "expect": "FIFO: most of its 100 packets (15 ms); AQMs near their target"},
        {"metric": "flow:srtt_mean_ms", "label": "TCP srtt, mean over flows",
         "theory": "base_rtt_ms", "expect": "the 15 ms base + the queue's delay"},
        {"metric": "link:drop_pct", "label": "drops", "expect": "a few %, highest for FIFO"},
    ),
    reproduce=(
        {"figure": "the qdiscs side by side: throughput, RTT, queueing delay, drops",
         "command": "bufferbloat sweep e1_aqm_kflows",
         "plot": "compare-qdiscs"},
        {"figure": "per run: in-flight, srtt and throughput over time, each flow's "
                   "operating point, eCDFs",
         "command": "bufferbloat run e1_aqm_kflows --set variant=QDISC",
         "files": "results/e1_aqm_kflows/STAMP/figures/{cwnd,flows,operating,ecdf}.png"},
    ),
)
