"""Family A.5: a UDP "video" stream (0.5 Mbit/s, 1200-byte packets) during the middle
third of the run, next to the long TCP flow, for FIFO, PIE and PIE + 10 flows. The
stream crosses the bottleneck (h1 -> h2, the direction of the s0 -> h2 bottleneck), so
it competes with TCP there: its jitter, loss and one-way latency are recorded, and the
TCP flow's cwnd, RTT and throughput show what happens while it is on."""
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios._common import (
    A_KNOBS,
    A_NET,
    A_TRAFFIC,
    A_VARIANT_RTT,
    A_VARIANTS,
)

SCENARIO = Scenario(
    name="a5_video", family="A",
    description="UDP video stream in the middle third next to TCP (fifo/pie/pie10)",
    params=dict(A_NET, qdisc="fifo", buffer_pkts=100),
    traffic=A_TRAFFIC + ({"kind": "udp", "name": "video", "src": "h1", "dst": "h2",
                          "rate_kbit": "$udp_rate_kbit", "size_bytes": "$udp_size_bytes",
                          "start": 1 / 3, "stop": 2 / 3},),
    knobs=dict(A_KNOBS, udp_rate_kbit=500, udp_size_bytes=1200), variants=A_VARIANTS,
    duration_s=60, quick_duration_s=30, warmup_s=5,
    sweep={"variant": ["fifo", "pie", "pie10"]},
    figures=("cwnd", "rtt", "queue", "udp"),
    study="A.5: a UDP video stream next to the TCP flow, for FIFO, PIE and PIE + 10 flows",
    expect="Behind a FIFO the stream's packets wait ~0.4-0.8 s (its one-way delay is the "
           "queue's) with high jitter; PIE cuts it to ~10-30 ms; the TCP flow's cwnd and "
           "RTT change little while the 0.5 Mbit/s stream is on, its goodput drops by "
           "about the stream's rate.",
    headline=(
        {"metric": "udp:owd_mean_ms", "label": "video one-way delay, mean",
         "theory": "queue_delay_ms",
         "expect": "the queue's delay + 5-10 ms of propagation: FIFO ~0.4-0.8 s, PIE "
                   "~10-30 ms"},
        {"metric": "udp:jitter_ms", "label": "video jitter (RFC 3550)",
         "expect": "tens of ms behind a FIFO, a few ms under PIE"},
        {"metric": "udp:loss_pct", "label": "video loss",
         "expect": "a few % behind a full FIFO or PIE's drops"},
        {"metric": "udp:throughput_mbit", "label": "video throughput",
         "theory": "udp_rate_mbit", "expect": "its sending rate, less its losses"},
        {"metric": "ping:rtt_mean_ms", "label": "ping RTT, mean", "theory": "rtt_ms",
         "expect": A_VARIANT_RTT},
        {"metric": "network:all:aggregate_throughput_mbit", "label": "TCP goodput",
         "theory": "goodput_ceiling_mbit",
         "expect": "the link less the stream's share while it is on"},
    ),
    reproduce=(
        {"figure": "the UDP stream's effect on the TCP flow over time (its throughput and "
                   "RTT, the stream's one-way delay, the stream's on period shaded), per "
                   "variant",
         "command": "bufferbloat sweep a5_video",
         "plot": "udp-effect"},
        {"figure": "the stream's jitter, loss and latency per variant (the headline table)",
         "command": "bufferbloat sweep a5_video",
         "files": "results/a5_video/sweep/figures/a5_video-headline.md"},
    ),
)
