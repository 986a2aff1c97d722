"""Family E: k greedy flows (k = 1, 2, 5, 10 or 20; 15 ms RTT each) through an 80 Mbit/s
bottleneck with a 100-packet queue for 15 s, qdisc FIFO, RED, CoDel, FQ-CoDel or PIE, the
study's default CCA NewReno (``reno``; ``--set cca=...`` or ``ccas=`` per sender);
per-flow, per-link and per-network metrics, the study's whole set (bufferbloat/
flowmetrics.py: in-flight, delivery and sending rate, estimated queueing delay,
inter-departure time, power, recovery time, RTOs, utilities, utilization of the bandwidth
and of the BDP, Jain's, entropy and product fairness...)."""
from bufferbloat.scenario import Scenario

SCENARIO = Scenario(
    name="e1_aqm_kflows", family="E",
    description="k=1..20 flows x {fifo, red, codel, fq_codel, pie}, 80 Mbit/s, 100 pkts",
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
              "red": dict(qdisc="red", buffer_pkts=None, buffer_bytes=151_400)},
    sweep={"variant": ["fifo", "red", "codel", "fq_codel", "pie"], "k": [1, 2, 5, 10, 20]},
    quick_sweep={"variant": ["fifo", "red", "codel", "fq_codel", "pie"]},
    figures=("cwnd", "rtt", "queue", "fairness", "flows", "operating", "ecdf"),
    # srtt, cwnd and in-flight time series at 50 ms; the queue every 10 ms
    tcp_sample_ms=50,
)
