"""Family C: RED against the PI controller at increasing load, both marking with ECN.
10 Mbit/s, 40 ms two-way propagation delay, 50 kB buffer, 536-byte segments; 20/40/60/80
long-lived flows starting uniformly within the first minute of 2-minute runs; statistics
from the second minute; 5 repetitions averaged. RED: min 4 kB, max 12 kB, max_p 0.02,
ECN. PI (Hollot et al. 2001, the project's sch_pi module): q_ref 8 kB = 14 packets of
576 B, a = 0.001136, b = 0.001086 per packet at 160 Hz, ECN (the gains' derivation is in
bufferbloat/net/qdiscs/pi.py). PIE (its delay-based descendant, target 6.4 ms = 8 kB at 10 Mbit/s)
stays as a third variant, labelled PIE. The qdiscs mark, so every host negotiates ECN
(tcp_ecn=1, recorded with the run). The flows come from NetPerfMeter (``tool``; iperf3
stays selectable), every host advertising a 536-byte MSS (``advmss_bytes``)."""
from bufferbloat.run.scenario import Scenario

SCENARIO = Scenario(
    name="c1_red_vs_pie", family="C",
    description="RED vs PI (and PIE) with ECN, 20-80 staggered flows, 10 Mbit/s, 50 kB buffer",
    # 536-byte segments whatever the tool: every host advertises that MSS (iperf3's -M
    # sets it on its sockets too)
    params=dict(bottleneck_mbit=10, delay_ms=10, qdisc="red", buffer_bytes=50_000,
                cca="reno", advmss_bytes=536),
    qdisc_params=dict(min_bytes=4000, max_bytes=12000, probability=0.02, avpkt_bytes=576,
                      ecn=True),
    traffic=({"kind": "iperf", "name": "flow", "src": "h1", "dst": "h2", "count": "$flows",
              "stagger_s": "$stagger_s", "mss_bytes": "$mss_bytes",
              "when": {"tool": "iperf"}},
             {"kind": "netperfmeter", "name": "flow", "src": "h1", "dst": "h2",
              "count": "$flows", "stagger_s": "$stagger_s",
              "when": {"tool": "netperfmeter"}},
             {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
              "interval_s": 0.1}),
    # NetPerfMeter: the flows in active processes of up to 10 (one passive side),
    # connected before the clock starts. With
    # iperf3 (a client and a server per flow) 40 flows launched up to 5.5 s late in the
    # TCG VM; with NetPerfMeter 40 and 80 flows started on time and kept the link
    # (docs/design/health.md)
    knobs=dict(flows=20, stagger_s=60, mss_bytes=536, tool="netperfmeter"),
    variants={"red": {"qdisc": "red", "qdisc.min_bytes": 4000, "qdisc.max_bytes": 12000,
                      "qdisc.probability": 0.02, "qdisc.avpkt_bytes": 576, "qdisc.ecn": True},
              # PI's queue and limit are in packets: 576 B each (536 + 40 B of headers)
              "pi": {"qdisc": "pi", "buffer_bytes": None, "buffer_pkts": 86,
                     "qdisc.q_ref_pkts": 14, "qdisc.a": 0.001136, "qdisc.b": 0.001086,
                     "qdisc.freq_hz": 160, "qdisc.ecn": True},
              # PIE's limit is in packets: 50 kB of 576-byte packets (536 + 40 B headers)
              "pie": {"qdisc": "pie", "buffer_bytes": None, "buffer_pkts": 86,
                      "qdisc.target_ms": 6.4, "qdisc.ecn": True}},
    duration_s=120, quick_duration_s=30, warmup_s=60, repeat=5,
    quick={"stagger_s": 10},
    quick_sweep={"variant": ["red", "pi"], "flows": [20, 40]},
    sweep={"variant": ["red", "pi", "pie"], "flows": [20, 40, 60, 80]},
    figures=("queue", "qdelay", "cwnd"),
    # the study samples the queue every 10 ms; 40-80 sockets every 100 ms (cwnd traces) keep the TCG VM's CPU for the packets
    tcp_sample_ms=100,
    study="C: RED against PI(E) at 20, 40, 60 and 80 flows, 5 repetitions",
    # PI holds q_ref only while the flows' windows can shrink to fit: a TCP window
    # does not go below 2 segments, and the pipe (10 Mbit/s x 40 ms in 576-byte
    # packets) holds 87, so N x 2 <= 87 + q_ref (14) up to ~50 flows. Beyond, p
    # saturates and the queue stays at what the floors leave: the full profile
    # measured at 60 and 80 flows mean queues of 19.6 and 41.7 packets, marks on
    # 86-92 % of packets, every flow's median cwnd 2 (80 flows), utilization 0.89-0.91.
    # RED's thresholds (7-21 packets) are small against the pipe: 20 flows' halvings
    # drain it now and then (utilization 0.91 at 20 flows, 0.97-1 at 40-80)
    expect="PIE keeps the 10 Mbit/s link busy (utilization ~1), RED nearly (0.9-1, its small "
           "thresholds drained by 20 flows' halvings); PI holds the queue "
           "near its 8 kB reference (6.4 ms) while the flows' windows can shrink to fit "
           "(up to ~50 flows: N x 2 segments within the 87-packet pipe + q_ref), and "
           "beyond that (60, 80 flows) its mark probability saturates near 1 with the "
           "queue above q_ref and the link below 1; RED's average queue grows with the "
           "number of flows (between its 4 and 12 kB thresholds, then beyond) and its "
           "mark/drop rate rises.",
    headline=(
        {"metric": "link:utilization", "label": "bottleneck utilization", "theory": "one",
         "expect": "~1 at every load (RED ~0.9 at 20 flows); PI below it past ~50 flows "
                   "(2-segment windows)"},
        {"metric": "link:backlog_mean_bytes", "label": "queue, mean",
         "expect": "PI: near 8 kB up to ~50 flows, above past it; RED: grows with the "
                   "flows (4-12 kB and more)"},
        {"metric": "link:qdelay_mean_ms", "label": "queueing delay, mean",
         "theory": "target_ms", "expect": "PI: ~6.4 ms; RED: rises with the load"},
        {"metric": "link:marks", "label": "ECN marks",
         "expect": "rise with the load (both mark rather than drop)"},
        {"metric": "link:mark_drop_pct", "label": "marks + drops, % of packets",
         "expect": "rises with the load, for both"},
        {"metric": "link:qlen_mean_pkts", "label": "queue, mean (packets)",
         "expect": "PI: near q_ref = 14 up to ~50 flows (N x 2 segments <= 87 + 14), "
                   "above past it; RED: grows with the flows"},
        {"metric": "network:all:jain_fairness", "label": "Jain's index", "theory": "one",
         "expect": "near 1 (equal flows)"},
    ),
    reproduce=(
        {"figure": "throughput/utilization, marks + drops, mean queue length and queueing "
                   "delay against the number of flows, RED and PI on one plot (mean over "
                   "5 repetitions, 95 % CI), PI's q_ref and RED's thresholds drawn",
         "command": "bufferbloat sweep c1_red_vs_pie",
         "plot": "red-vs-pi-load"},
        {"figure": "the instantaneous queue of RED and PI at 80 flows, overlaid (10 ms "
                   "samples), with PI's reference and RED's thresholds",
         "command": "bufferbloat sweep c1_red_vs_pie",
         "plot": "red-vs-pi-queue"},
    ),
)
