"""Family C: RED against the PI controller at increasing load, both marking with ECN.
10 Mbit/s, 40 ms two-way propagation delay, 50 kB buffer, 536-byte segments; 20/40/60/80
long-lived flows starting uniformly within the first minute of 2-minute runs; statistics
from the second minute; 5 repetitions averaged. RED: min 4 kB, max 12 kB, max_p 0.02,
ECN. PI (Hollot et al. 2001, the project's sch_pi module): q_ref 8 kB = 14 packets of
576 B, a = 0.001136, b = 0.001086 per packet at 160 Hz, ECN (the gains' derivation is in
bufferbloat/pi.py). PIE (its delay-based descendant, target 6.4 ms = 8 kB at 10 Mbit/s)
stays as a third variant, labelled PIE. The qdiscs mark, so every host negotiates ECN
(tcp_ecn=1, recorded with the run)."""
from bufferbloat.scenario import Scenario

SCENARIO = Scenario(
    name="c1_red_vs_pie", family="C",
    description="RED vs PI (and PIE) with ECN, 20-80 staggered flows, 10 Mbit/s, 50 kB buffer",
    params=dict(bottleneck_mbit=10, delay_ms=10, qdisc="red", buffer_bytes=50_000,
                cca="reno"),
    qdisc_params=dict(min_bytes=4000, max_bytes=12000, probability=0.02, avpkt_bytes=576,
                      ecn=True),
    traffic=({"kind": "iperf", "name": "flow", "src": "h1", "dst": "h2", "count": "$flows",
              "stagger_s": "$stagger_s", "mss_bytes": "$mss_bytes"},
             {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
              "interval_s": 0.1}),
    knobs=dict(flows=20, stagger_s=60, mss_bytes=536),
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
)
